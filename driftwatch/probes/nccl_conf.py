"""The ``nccl_conf`` probe: NCCL's configuration files, read as NCCL reads them.

At its first call NCCL loads ``$NCCL_CONF_FILE`` (or, when that is unset, ``~/.nccl.conf``)
and then ``/etc/nccl.conf``, and ``setenv``s every ``KEY=value`` line without overwriting:
a variable already in the environment wins, then the user's file, then ``/etc``. A key set
there is a setting, wherever it comes from; an ``NCCL_IB_USE_INLINE=1`` baked into an
image's ``/etc/nccl.conf`` froze warm-up while every environment was clean.

The files are ``[watch] nccl_conf`` plus each file ``NCCL_CONF_FILE`` names in the login
environment or a running server's. ``scripts/nccl_conf_collect.py`` reads at most
``MAX_BYTES`` of each; :func:`parse_nccl_conf` does what NCCL's ``setEnvFile``
(``src/misc/param.cc``) does with them.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from driftwatch.probes.base import Facts, ProbeContext, ProbeError, ProbeSkipped, collect_json
from driftwatch.probes.locations import NCCL_CONF_ENV
from driftwatch.probes.processes import environments, observed
from driftwatch.redact import redact_env

MAX_BYTES = 64 * 1024
NCCL_NAME_MAX = 1023  # NCCL copies at most 1023 bytes of a name and of a value


def parse_nccl_conf(text: str) -> dict[str, str]:
    """``KEY=value`` pairs as NCCL's ``setEnvFile`` sets them.

    A line is cut at its newline (and one carriage return before it); a line starting with
    ``#`` is a comment (NCCL >= 2.26; older versions set a harmless ``#KEY`` instead); the
    name is everything before the first ``=`` and the value everything after it, spaces
    included (``NCCL_DEBUG = INFO`` sets a variable named ``NCCL_DEBUG `` that NCCL never
    reads); a line without ``=`` or with an empty name sets nothing. The first setting of
    a name wins, as ``setenv(..., 0)`` does not overwrite.
    """
    settings: dict[str, str] = {}
    for line in text.split("\n"):
        line = line.removesuffix("\r")
        if line.startswith("#") or "=" not in line:
            continue
        name, _, value = line.partition("=")
        name, value = name[:NCCL_NAME_MAX], value[:NCCL_NAME_MAX]
        if name and name not in settings:
            settings[name] = value
    return settings


def named_files(ctx: ProbeContext) -> tuple[dict[str, list[str]], str | None]:
    """The files NCCL_CONF_FILE names in the login or a server's environment → where it is
    set; and why those environments could not be read."""
    named: dict[str, list[str]] = {}
    try:
        sources = environments(observed(ctx))
    except (ProbeError, ProbeSkipped) as exc:
        return named, f"environments not read: {exc}"
    for where, env in sources:
        path = (env.get(NCCL_CONF_ENV) or "").strip()
        if path:
            named.setdefault(path, []).append(f"{NCCL_CONF_ENV} ({where})")
    return named, None


def file_facts(raw: dict[str, Any], via: list[str]) -> dict[str, Any]:
    text = raw.get("text")
    return {
        "path": raw.get("path"),
        "via": via,
        "exists": bool(raw.get("exists")),
        "error": raw.get("error"),
        "settings": None if text is None else redact_env(parse_nccl_conf(text)),
        "sha256": raw.get("sha256"),
        "truncated": bool(raw.get("truncated")),
        "volatile": {"mtime": raw.get("mtime")},
    }


class NcclConfProbe:
    name = "nccl_conf"

    def collect(self, ctx: ProbeContext) -> Facts:
        configured = list(dict.fromkeys(ctx.watch.nccl_conf))
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="nccl_conf") as pool:
            # The configured files do not wait for the environments that may name another.
            first = pool.submit(_read, ctx, configured) if configured else None
            named, env_error = named_files(ctx)
            report = first.result() if first else {}
        extra = [path for path in named if path not in configured]
        if not configured and not extra:
            raise ProbeSkipped("no NCCL configuration files configured ([watch] nccl_conf)")
        # NCCL opens NCCL_CONF_FILE as given: a relative one from a working directory that
        # is not ours to guess (and NCCL does not expand "~").
        if any(path.startswith("/") for path in extra):
            report.update(_read(ctx, [path for path in extra if path.startswith("/")]))
        for path in extra:
            if not path.startswith("/"):
                report[path] = {"path": path, "error": "relative path: read from the process's working directory"}
        return {
            "files": {path: file_facts(report[path], named.get(path, [])) for path in [*configured, *extra]},
            "conf_file_error": env_error,
        }


def _read(ctx: ProbeContext, paths: list[str]) -> dict[str, Any]:
    request = {"files": [{"key": path, "path": path} for path in paths], "max_bytes": MAX_BYTES}
    report: dict[str, Any] = collect_json(
        ctx, "nccl_conf_collect.py", request, what="nccl_conf", keys=("files",)
    )["files"]
    return report
