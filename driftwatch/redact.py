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
* URLs keep their scheme and host, so a change of destination stays visible as drift,
  and lose what authenticates: the password of ``user:password@`` (the user stays); a
  user-info with no password over http(s), where it is a token (``https://TOKEN@github.com``,
  a Sentry DSN key; over ssh ``git@`` is a login name and stays); the whole path of webhook
  URLs, where the path is the secret (Slack, Discord, Teams/Office, PagerDuty, IFTTT, any
  ``/hooks/`` or ``/webhook(s)/`` path: Mattermost, Rocket.Chat, Zapier); the whole query
  of a URL with a signature or credential parameter (presigned S3/GCS/Azure URLs:
  ``X-Amz-Signature``, ``X-Amz-Credential``, ``Signature``, ``sig``, ``token``, ``key``).
* ``WEBHOOK``, ``HOOK`` and ``DSN`` names hold a URL that is a secret as a whole: their
  values keep only ``scheme://host/`` (``https://hooks.slack.com/<redacted>``), or become
  ``<redacted>`` when they are not URLs.
"""

from __future__ import annotations

import re
from typing import Any

from driftwatch.text import valid_text

REDACTED = "<redacted>"

_ANYWHERE = r"SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|WEBHOOK"
_COMPONENT = (
    r"[A-Z0-9]*TOKEN|KEYS?|[A-Z0-9]*(?:API|ACCESS|SECRET|PRIVATE|AUTH|MASTER|SIGNING|ENCRYPTION)KEY"
    r"|AUTH|AUTHORIZATION|PASS|PWD|COOKIE|DSN|HOOK"
)
# One regex (over the upper-cased name) so the target-side collector can apply the same rule.
SECRET_NAME_RE = re.compile(rf"{_ANYWHERE}|(?:^|[^A-Z0-9])(?:{_COMPONENT})(?:$|[^A-Z0-9])")
# The secret names whose value is a URL that is secret as a whole: only its host is kept.
URL_SECRET_NAME_RE = re.compile(r"WEBHOOK|(?:^|[^A-Z0-9])(?:HOOK|DSN)(?:$|[^A-Z0-9])")
# scheme://host[:port] at the start of such a value (a user-info is dropped with the rest).
URL_HEAD_RE = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?:[^\s/?#]*@)?(?P<host>[^\s/?#@<>'\"]+)")
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
# A URL inside any text. Quotes, angle brackets and whitespace end it; a ``<redacted>``
# left by an earlier pass is part of it, so redacting twice changes nothing.
_URL_RE = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://(?:<redacted>|[^\s'\"<>])+")
_URL_END_PUNCTUATION = ".,;:!?)]}"  # "(see https://…)." : the sentence's, not the URL's
_HTTP_SCHEME_RE = re.compile(r"(?i)(?:.*\+)?(?:https?|wss?)")
# Hosts whose URL path is the secret (the service's token lives in it).
_HOOK_HOST_RE = re.compile(
    r"(?i)hooks\.slack\.com|[a-z0-9-]+\.webhook\.office\.com|events(?:\.eu)?\.pagerduty\.com|maker\.ifttt\.com"
)
_HOOK_PATH_RE = re.compile(r"(?i)/(?:hooks?|webhooks?|webhookb2)/[^/?#]")
# Query (or fragment) parameters that authenticate the URL: one of them and the whole
# query goes, since presigned URLs spread their signature over several parameters.
_SECRET_PARAM_RE = re.compile(
    r"(?i)(?:^|[?&#;])(?:[a-z0-9_.-]*(?:token|secret|passw(?:or)?d|signature|credential|key)|sig|auth)="
)
_BEARER_RE = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{8,}")
_PAIR_RE = re.compile(
    r"(?<![A-Za-z0-9_.-])(?P<key>[\"']?[A-Za-z_][A-Za-z0-9_.-]*[\"']?)(?P<sep>\s*[=:]\s*)"
    # The value is looked at, not consumed, so "args: api_key=x" still finds api_key.
    r"(?=(?P<val>'[^'\n]*'|\"[^\"\n]*\"|\[[^\]\n]*\]|[^\s,;)}\]'\"]+))"
)
_FLAG_SPACE_RE = re.compile(r"(?<![A-Za-z0-9_-])(?P<flag>--?[A-Za-z][A-Za-z0-9_-]*)(?P<sep>\s+)(?P<val>[^\s-]\S*)")
_QUOTED_RE = re.compile(r"'[^']*'|\"[^\"]*\"")
_HEX_DIGITS = "0123456789abcdef"
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


def is_url_secret_name(name: str) -> bool:
    """``SGLANG_WEBHOOK_URL``, ``SENTRY_DSN``, ``--webhook-url``: a name whose value is a
    secret URL, redacted down to its host."""
    return URL_SECRET_NAME_RE.search(name.strip().lstrip("-").replace("-", "_").upper()) is not None


def url_host_only(value: str) -> str:
    """``https://hooks.slack.com/<redacted>`` for a URL, ``<redacted>`` for anything else."""
    match = URL_HEAD_RE.match(value.strip())
    return f"{match['scheme']}{match['host']}/{REDACTED}" if match else REDACTED


def secret_value(name: str, value: str) -> str:
    """What is kept of the value of a secret-named variable, flag or key."""
    return url_host_only(value) if is_url_secret_name(name) else REDACTED


def redact_url(url: str) -> str:
    """One URL without its credentials, secret path or signed query; scheme and host stay."""
    core = url.rstrip(_URL_END_PUNCTUATION)
    scheme, _, rest = core.partition("://")
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    userinfo, at, host = authority.rpartition("@")
    if at:
        user, colon, _ = userinfo.partition(":")
        if colon:
            userinfo = f"{user}:{REDACTED}"
        elif _HTTP_SCHEME_RE.fullmatch(scheme):
            userinfo = REDACTED
    hostname = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    if tail not in ("", "/") and (_HOOK_HOST_RE.fullmatch(hostname) or _HOOK_PATH_RE.search(tail)):
        tail = f"/{REDACTED}"
    else:
        query = min((i for i in (tail.find(c) for c in "?#") if i >= 0), default=-1)
        if query >= 0 and _SECRET_PARAM_RE.search(tail[query:]):
            tail = f"{tail[:query]}?{REDACTED}"
    return f"{scheme}://{userinfo}{at}{host}{tail}{url[len(core):]}"


def redact_value(value: str) -> str:
    """Replace token-looking parts and URL credentials of ``value``; keep everything else."""
    if not value.strip(_HEX_DIGITS):  # a digest or a number: the most common strings in facts
        return value
    value = TOKEN_RE.sub(REDACTED, value)
    if "://" not in value:
        return value
    return _URL_RE.sub(lambda match: redact_url(match.group()), value)


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """Secret-named variables lose their whole value (a webhook URL keeps its host); others
    lose token-looking parts and URL credentials."""
    return {
        name: secret_value(name, value) if is_secret_name(name) else redact_value(value)
        for name, value in env.items()
    }


def redact_argv(argv: list[str]) -> list[str]:
    """Redact values of secret flags (``--api-key X``, ``--api-key=X``), ``NAME=value``
    words with a secret name (``env HF_TOKEN=… python …``) and any token-looking value.

    After a secret flag the next word is taken as its value unless it starts with ``--``:
    a password may well start with a single dash, and a wrong guess costs one word.
    """
    out: list[str] = []
    secret_flag = ""  # the secret flag whose value the next word is
    for arg in argv:
        if secret_flag and not arg.startswith("--"):
            out.append(secret_value(secret_flag, arg))
            secret_flag = ""
            continue
        secret_flag = ""
        head, eq, value = arg.partition("=")
        if arg.startswith("-") and len(arg) > 1 and not _NUMBER_RE.fullmatch(arg):
            if is_secret_flag(head):
                out.append(f"{head}={secret_value(head, value)}" if eq else arg)
                secret_flag = "" if eq else head
                continue
        elif eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", head) and is_secret_name(head):
            out.append(f"{head}={secret_value(head, value)}")
            continue
        out.append(redact_value(arg))
    return out


def _pair_value(match: re.Match[str]) -> str | None:
    """The redacted value of a ``key=value`` match, or None to keep it."""
    key, val = match.group("key").strip("'\""), match.group("val")
    bare = val.strip("'\"")
    if not is_secret_name(key) or val.lower() in _UNSET or bare.lower() in _UNSET:
        return None
    if _NUMBER_RE.fullmatch(bare):
        return None
    if val.startswith("["):  # vLLM prints api_key as a list: redact each item, keep the shape
        items = _QUOTED_RE.sub(lambda m: f"{m.group(0)[0]}{REDACTED}{m.group(0)[0]}", val)
        return items if items != val or val == "[]" else f"[{REDACTED}]"
    quote = val[0] if val[0] in "'\"" and len(val) > 1 and val[-1] == val[0] else ""
    return f"{quote}{secret_value(key, val[len(quote):len(val) - len(quote)])}{quote}"


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
    flag = match.group("flag")
    return f"{flag}{match.group('sep')}{secret_value(flag, match.group('val'))}"


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
            return secret_value(key, value)
        return redact_text(value)
    return value


def redact_strings(value: Any) -> Any:
    """Every string inside a structure without token-looking parts and URL credentials, and
    every string and key valid UTF-8 (driftwatch.text); everything else (numbers, hashes,
    names) unchanged. The last pass over a snapshot's facts, behind the probes' own
    name-aware redaction."""
    if isinstance(value, str):
        return redact_value(valid_text(value))
    # Numbers, booleans and None are most of the leaves: skipped without a call.
    if isinstance(value, dict):
        out = {valid_text(k) if isinstance(k, str) else k: v if type(v) in _PLAIN else redact_strings(v)
               for k, v in value.items()}
        return out if len(out) == len(value) else _distinct(value)
    if isinstance(value, list):
        return [v if type(v) in _PLAIN else redact_strings(v) for v in value]
    return value


_PLAIN = frozenset({int, float, bool, type(None)})
NOT_UTF8 = " (name not UTF-8)"


def _distinct(value: dict[Any, Any]) -> dict[Any, Any]:
    """``value`` with its keys made valid text, where two of them read as one: a name with a
    byte that is not UTF-8 (``bad\\xff.py`` once escaped) beside one spelled that way
    literally. The escaped one says so, and neither is lost."""
    out: dict[Any, Any] = {}
    for k, v in value.items():
        key = valid_text(k) if isinstance(k, str) else k
        if key != k and (key in value or key in out):
            key += NOT_UTF8
        out[key] = v if type(v) in _PLAIN else redact_strings(v)
    return out


def redact_stored_probe(probe: str, facts: dict[str, Any]) -> dict[str, Any]:
    """A probe's facts from a snapshot stored before these rules, passed through the same
    redaction a new snapshot gets (so an old baseline never prints, diffs or alerts a
    secret it kept verbatim, and compares with new snapshots like for like)."""
    if probe == "processes":
        facts = dict(facts)
        servers = facts.get("servers")
        if isinstance(servers, dict):
            facts["servers"] = {key: _stored_server(server) for key, server in servers.items()}
        if isinstance(facts.get("login_env"), dict):
            facts["login_env"] = redact_env({str(k): str(v) for k, v in facts["login_env"].items()})
    elif probe == "logs":
        facts = redact_facts(facts)
    elif probe == "python":
        # Hundreds of distributions: only the fields that can carry a URL are read, so an
        # old store stays as fast to read as a new one.
        return _stored_python(facts)
    elif probe in ("files", "gpu", "system"):
        return facts  # paths, hashes, numbers and names: nothing of theirs was ever a secret
    return redact_strings(facts)


def _stored_python(facts: dict[str, Any]) -> dict[str, Any]:
    interpreters = facts.get("interpreters")
    if not isinstance(interpreters, dict):
        return redact_strings(facts)
    out = dict(facts, interpreters={})
    for key, entry in interpreters.items():
        if isinstance(entry, dict) and isinstance(entry.get("distributions"), dict):
            dists = {name: _stored_dist(dist) for name, dist in entry["distributions"].items()}
            entry = dict(entry, distributions=dists)
        out["interpreters"][key] = entry
    return out


def _stored_dist(dist: Any) -> Any:
    if not isinstance(dist, dict):
        return dist
    fields = {k: redact_strings(dist[k]) for k in ("direct_url", "requires") if dist.get(k)}
    return {**dist, **fields} if fields else dist


def _stored_server(server: Any) -> Any:
    if not isinstance(server, dict):
        return server
    server = dict(server)
    if isinstance(server.get("argv"), list):
        server["argv"] = redact_argv([str(word) for word in server["argv"]])
    if isinstance(server.get("args"), dict):
        server["args"] = redact_facts(server["args"])
    if isinstance(server.get("env"), dict):
        server["env"] = redact_env({str(k): str(v) for k, v in server["env"].items()})
    return server
