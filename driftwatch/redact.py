"""Keep secrets out of snapshots: credential-looking names, token formats, secret flags.

Pure functions over strings. Everything a probe reads from a server's environment, its
command line or its logs passes through here before a fact is built, so a stored snapshot
(or a report printed from one) never holds an API key.

Choices, so false positives and misses are deliberate:

* Names are matched per ``_``/``-``/``.`` component, not as raw substrings, because ML hosts
  are full of harmless ``TOKEN``/``KEY`` look-alikes: ``TOKENIZERS_PARALLELISM``,
  ``SGLANG_MAX_TOKENS``, ``NCCL_IB_PKEY`` (an InfiniBand partition key, not a secret),
  ``GIT_AUTHOR_NAME``. A component that *is* or *ends in* TOKEN counts (``HF_TOKEN``,
  ``GH_AUTHTOKEN``); ``TOKENS``/``TOKENIZER`` do not.
* ``SECRET``, ``PASSWORD``, ``PASSWD``, ``PASSPHRASE``, ``CREDENTIAL`` count anywhere in
  the name: nothing harmless contains them.
* A bare ``KEY``/``KEYS`` component counts (``OPENAI_KEY``, ``SSL_KEY``, ``AWS_ACCESS_KEY_ID``)
  as do glued forms (``APIKEY``); ``KEYFILE`` (a path) and ``PKEY`` do not.
* ``AUTH`` counts only as a whole component (``BASIC_AUTH``) or ``AUTHORIZATION``, never
  inside ``AUTHOR``. ``SSH_AUTH_SOCK`` is a socket path and is allow-listed.
* In free text, a ``key=value`` whose value is a plain number is kept: SGLang logs print
  ``#token: 1234`` per batch and the logs probe needs those numbers.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"

_ANYWHERE = r"SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL"
_COMPONENT = (
    r"[A-Z0-9]*TOKEN|KEYS?|[A-Z0-9]*(?:API|ACCESS|SECRET|PRIVATE|AUTH|MASTER|SIGNING|ENCRYPTION)KEY"
    r"|AUTH|AUTHORIZATION|PASS|PWD|COOKIE|DSN"
)
# One regex (over the upper-cased name) so the target-side collector can apply the same rule.
SECRET_NAME_RE = re.compile(rf"{_ANYWHERE}|(?:^|[^A-Z0-9])(?:{_COMPONENT})(?:$|[^A-Z0-9])")
# Names that match the rule but are known to hold no secret. PWD/OLDPWD are the shell's cwd.
NOT_SECRET = frozenset({"SSH_AUTH_SOCK", "PWD", "OLDPWD"})

# Known token formats, found anywhere inside a value. The look-behind keeps ``task-…``
# from reading as an OpenAI ``sk-…`` key.
TOKEN_RE = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"hf_[A-Za-z0-9]{20,}"  # Hugging Face
    r"|sk-[A-Za-z0-9_-]{20,}"  # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-)
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}"  # GitHub
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])"  # AWS access key ids
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|AIza[A-Za-z0-9_-]{35}"  # Google API keys
    r"|npm_[A-Za-z0-9]{36}|pypi-AgE[A-Za-z0-9_-]{50,}"  # package registries
    r"|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*"  # JWT
    r")"
)
# user:password@ inside URLs (PIP_INDEX_URL, proxies): the password goes, the rest stays.
_URL_PASSWORD_RE = re.compile(r"(://[^/\s:@]*:)[^/\s@]+(@)")
_BEARER_RE = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{8,}")
_PAIR_RE = re.compile(
    r"(?<![A-Za-z0-9_.-])(?P<key>[\"']?[A-Za-z_][A-Za-z0-9_.-]*[\"']?)(?P<sep>\s*[=:]\s*)"
    # The value is looked at, not consumed, so "args: api_key=x" still finds api_key.
    r"(?=(?P<val>'[^'\n]*'|\"[^\"\n]*\"|\[[^\]\n]*\]|[^\s,;)}\]'\"]+))"
)
_FLAG_SPACE_RE = re.compile(r"(?<![A-Za-z0-9_-])(?P<flag>--?[A-Za-z][A-Za-z0-9_-]*)(?P<sep>\s+)(?P<val>[^\s-]\S*)")
_QUOTED_RE = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
# Values that say "not set" are kept: redacting them would hide that no key was given.
_UNSET = frozenset({"", "none", "null", "false", "true", "''", '""', "bearer", "basic"})


def is_secret_name(name: str) -> bool:
    """True for an environment variable or option name that looks like it holds a credential."""
    upper = name.strip().upper()
    if upper in NOT_SECRET:
        return False
    return SECRET_NAME_RE.search(upper) is not None


def is_secret_flag(flag: str) -> bool:
    """``--api-key``, ``--hf_token``, ``-password``: the option name, dashes and all."""
    name = flag.lstrip("-").split("=", 1)[0].replace("-", "_")
    return bool(name) and is_secret_name(name)


def looks_like_token(value: str) -> bool:
    """True when a known token format appears anywhere in ``value``."""
    return TOKEN_RE.search(value) is not None


def redact_value(value: str) -> str:
    """Replace token-looking parts and URL passwords of ``value``; keep everything else."""
    value = TOKEN_RE.sub(REDACTED, value)
    return _URL_PASSWORD_RE.sub(rf"\1{REDACTED}\2", value)


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """Secret-named variables lose their whole value; others lose token-looking parts."""
    return {name: REDACTED if is_secret_name(name) else redact_value(value) for name, value in env.items()}


def redact_argv(argv: list[str]) -> list[str]:
    """Redact values of secret flags (``--api-key X``, ``--api-key=X``), ``NAME=value``
    words with a secret name (``env HF_TOKEN=… python …``) and any token-looking value.

    After a secret flag the next word is taken as its value unless it starts with ``--``:
    a password may well start with a single dash, and a wrong guess costs one word.
    """
    out: list[str] = []
    take_next = False
    for arg in argv:
        if take_next and not arg.startswith("--"):
            out.append(REDACTED)
            take_next = False
            continue
        take_next = False
        head, eq, _ = arg.partition("=")
        if arg.startswith("-") and len(arg) > 1 and not _NUMBER_RE.fullmatch(arg):
            if is_secret_flag(head):
                out.append(f"{head}={REDACTED}" if eq else arg)
                take_next = not eq
                continue
        elif eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", head) and is_secret_name(head):
            out.append(f"{head}={REDACTED}")
            continue
        out.append(redact_value(arg))
    return out


def _pair_value(match: re.Match[str]) -> str | None:
    """The redacted value of a ``key=value`` match, or None to keep it."""
    key, val = match.group("key"), match.group("val")
    bare = val.strip("'\"")
    if not is_secret_name(key.strip("'\"")) or val.lower() in _UNSET or bare.lower() in _UNSET:
        return None
    if _NUMBER_RE.fullmatch(bare):
        return None
    if val.startswith("["):  # vLLM prints api_key as a list: redact each item, keep the shape
        items = _QUOTED_RE.sub(lambda m: f"{m.group(0)[0]}{REDACTED}{m.group(0)[0]}", val)
        return items if items != val or val == "[]" else f"[{REDACTED}]"
    quote = val[0] if val[0] in "'\"" and len(val) > 1 and val[-1] == val[0] else ""
    return f"{quote}{REDACTED}{quote}"


def _redact_pairs(text: str) -> str:
    out: list[str] = []
    pos = 0
    for match in _PAIR_RE.finditer(text):
        new = None if match.start() < pos else _pair_value(match)
        if new is not None:
            start, end = match.span("val")
            out += [text[pos:start], new]
            pos = end
    return "".join(out) + text[pos:]


def _redact_flag(match: re.Match[str]) -> str:
    if not is_secret_flag(match.group("flag")):
        return match.group(0)
    return f"{match.group('flag')}{match.group('sep')}{REDACTED}"


def redact_text(text: str) -> str:
    """Redact a log line or any free text: token formats, ``Bearer …``, URL passwords,
    ``KEY=value`` / ``'key': 'value'`` pairs and ``--flag value`` with a secret name."""
    text = redact_value(text)
    text = _BEARER_RE.sub(rf"\1\2{REDACTED}", text)
    text = _redact_pairs(text)
    return _FLAG_SPACE_RE.sub(_redact_flag, text)


def redact_facts(value: Any, key: str = "") -> Any:
    """Redact a parsed structure (e.g. a server's logged ServerArgs): values under a secret
    name are replaced whole, every other string loses its token-looking parts."""
    if isinstance(value, dict):
        return {k: redact_facts(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_facts(v, key) for v in value]
    if isinstance(value, str):
        if key and is_secret_name(key) and value not in ("", "None"):
            return REDACTED
        return redact_text(value)
    return value
