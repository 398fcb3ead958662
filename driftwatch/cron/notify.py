"""Send an alert to a webhook (``https://…``) or a program (``cmd:PATH``), bounded and retried.

The payload is one JSON object with a human ``text`` field, so Slack- and Mattermost-style
incoming webhooks take it as it is, plus the structured changes. Host text in ``text`` is
escaped for those services (``&``, ``<``, ``>``); the structured fields stay raw data, and
the JSON is ASCII, so no control character from a host travels raw. A failed notification
is a warning, never a changed exit code. A webhook URL is a secret: messages show only its
scheme and host.

A ``cmd:`` program runs as the agent runs a probe's command (transport/local.py): in a
session of its own, ended as a whole at its deadline (SIGTERM, then SIGKILL), so neither
a hung hook nor what it started is left behind, and what it prints is read up to a bound.
Under ``check --deadline`` every try gets at most what is left before a given moment.
"""

from __future__ import annotations

import http.client
import json
import re
import shlex
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from driftwatch import interrupt
from driftwatch.report.safe import chat_text, clean
from driftwatch.transport.base import KILL_AFTER
from driftwatch.transport.local import LocalTransport

ATTEMPTS = 3
TIMEOUT_S = 10.0
BACKOFF_S = 1.0
# What a cmd: program's output is read up to: its last line of stderr is all a warning
# shows, and a hook printing 150 MB must not hold it in memory.
HOOK_OUTPUT = 64 * 1024
MIN_TRY_S = 0.5  # less than this left before ``until``: no try is started
# A try of a cmd: program ends this much after its timeout at most: SIGTERM, the wait for
# SIGKILL, and the reaping.
_STOP_S = KILL_AFTER + 0.5


# scheme://host of a URL, read without urlsplit (which raises on "https://[::1/x").
_URL_HEAD = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?:[^/?#]*@)?(?P<host>\[[^\]/?#]*\]?|[^:/?#]*)")


def describe_destination(dest: str) -> str:
    """``https://hooks.slack.com/…`` for a URL; the program path for ``cmd:``; never more."""
    if dest.startswith("cmd:"):
        return clean(dest)
    head = _URL_HEAD.match(dest)
    return f"{head['scheme']}://{clean(head['host']) or '?'}/…" if head else "a destination that is not a URL"


def validate_destination(dest: str) -> str | None:
    """Why ``dest`` cannot be used, or None. The reason shows scheme and host at most."""
    if dest.startswith("cmd:"):
        return None if dest[4:] else "cmd: needs a program path"
    shown = describe_destination(dest)
    if not dest.isascii() or not dest.isprintable() or any(c.isspace() for c in dest):
        return f"{shown}: a URL cannot hold spaces, control or non-ASCII characters (percent-encode them)"
    try:
        parts = urlsplit(dest)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        return f"{shown}: not a valid URL (its host or port cannot be read)"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"not an http(s) URL or cmd:PATH: {shown}"
    return None


def payload_body(payload: dict[str, Any]) -> bytes:
    """The JSON sent: ``text`` escaped for chat services, the rest raw data, all ASCII."""
    if isinstance(payload.get("text"), str):
        payload = {**payload, "text": chat_text(payload["text"])}
    return json.dumps(payload, default=str, ensure_ascii=True).encode()


def _post(url: str, body: bytes, timeout: float) -> None:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - user-given URL
        if response.status >= 300:
            raise OSError(f"HTTP {response.status}")


def _run(program: str, body: bytes, timeout: float) -> None:
    transport = LocalTransport()
    try:
        interrupt.register(transport)  # Ctrl-C ends the hook and what it started
        result = transport.run(f"exec {shlex.quote(program)}", timeout=timeout, stdin=body, max_output=HOOK_OUTPUT)
    finally:
        interrupt.unregister(transport)
        transport.close()
    if result.timed_out:
        left = "; still alive after SIGKILL: " + ", ".join(map(str, result.survivors)) if result.survivors else ""
        raise TimeoutError(f"timed out after {timeout:g}s{left}")
    if result.exit_code != 0:
        detail = result.error_text.splitlines()[-1:] or [""]
        shown = detail[0] if len(detail[0]) <= 200 else detail[0][:199] + "…"
        raise OSError(f"exit {result.exit_code} {shown}".strip())


def send(dest: str, payload: dict[str, Any], *, attempts: int = ATTEMPTS, until: float | None = None) -> str | None:
    """Deliver ``payload``; None on success, else a warning that is safe to print. With
    ``until`` (a time.monotonic() moment), every try and pause ends before it."""
    body = payload_body(payload)
    error = ""
    for attempt in range(attempts):
        timeout = _try_timeout(dest, until)
        if timeout is None:
            error = error or "no time left before the --deadline"
            break
        try:
            if dest.startswith("cmd:"):
                _run(dest[4:], body, timeout)
            else:
                _post(dest, body, timeout)
            return None
        except urllib.error.HTTPError as exc:
            error = f"HTTP {exc.code}"
            if 400 <= exc.code < 500 and exc.code != 429:
                break  # the hook refuses this payload; retrying will not change its mind
        except (OSError, ValueError, http.client.HTTPException) as exc:
            error = _safe_reason(exc, dest)
        pause = BACKOFF_S * (attempt + 1)
        if attempt + 1 < attempts and (until is None or time.monotonic() + pause + MIN_TRY_S < until):
            time.sleep(pause)
        elif until is not None:
            break  # no room for another try before the deadline
    return f"notification to {describe_destination(dest)} failed: {error}"


def _try_timeout(dest: str, until: float | None) -> float | None:
    """One try's timeout: TIMEOUT_S, less where ``until`` is nearer; None: no time for a try."""
    if until is None:
        return TIMEOUT_S
    left = until - time.monotonic() - (_STOP_S if dest.startswith("cmd:") else 0.0)
    return min(TIMEOUT_S, left) if left >= MIN_TRY_S else None


def _safe_reason(exc: BaseException, dest: str) -> str:
    """The error without the URL's secret parts (user-info, path, query), whole or quoted."""
    reason = str(getattr(exc, "reason", None) or exc)
    rest = dest.partition("://")[2]
    authority, slash, tail = rest.partition("/")
    secrets = [dest, slash + tail, authority.rpartition("@")[0]]
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) > 1:
            reason = reason.replace(secret, "…")
    return clean(reason)
