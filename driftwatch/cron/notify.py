"""Send an alert to a webhook (``https://…``) or a program (``cmd:PATH``), bounded and retried.

The payload is one JSON object with a human ``text`` field, so Slack- and Mattermost-style
incoming webhooks take it as it is, plus the structured changes. Host text in ``text`` is
escaped for those services (``&``, ``<``, ``>``); the structured fields stay raw data, and
the JSON is ASCII, so no control character from a host travels raw. A failed notification
is a warning, never a changed exit code. A webhook URL is a secret: messages show only its
scheme and host.
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from driftwatch.report.safe import chat_text, clean

ATTEMPTS = 3
TIMEOUT_S = 10.0
BACKOFF_S = 1.0


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


def _post(url: str, body: bytes) -> None:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310 - user-given URL
        if response.status >= 300:
            raise OSError(f"HTTP {response.status}")


def _run(program: str, body: bytes) -> None:
    result = subprocess.run([program], input=body, capture_output=True, timeout=TIMEOUT_S)
    if result.returncode != 0:
        detail = result.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        raise OSError(f"exit {result.returncode} {detail[0]}".strip())


def send(dest: str, payload: dict[str, Any], *, attempts: int = ATTEMPTS) -> str | None:
    """Deliver ``payload``; None on success, else a warning that is safe to print."""
    body = payload_body(payload)
    error = ""
    for attempt in range(attempts):
        try:
            if dest.startswith("cmd:"):
                _run(dest[4:], body)
            else:
                _post(dest, body)
            return None
        except urllib.error.HTTPError as exc:
            error = f"HTTP {exc.code}"
            if 400 <= exc.code < 500 and exc.code != 429:
                break  # the hook refuses this payload; retrying will not change its mind
        except (OSError, subprocess.SubprocessError, ValueError, http.client.HTTPException) as exc:
            error = _safe_reason(exc, dest)
        if attempt + 1 < attempts:
            time.sleep(BACKOFF_S * (attempt + 1))
    return f"notification to {describe_destination(dest)} failed: {error}"


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
