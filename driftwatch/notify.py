"""Send an alert to a webhook (``https://…``) or a program (``cmd:PATH``), bounded and retried.

The payload is one JSON object with a human ``text`` field, so Slack- and Mattermost-style
incoming webhooks take it as it is, plus the structured changes. A failed notification is
a warning, never a changed exit code. A webhook URL is a secret: messages show only its
scheme and host.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

ATTEMPTS = 3
TIMEOUT_S = 10.0
BACKOFF_S = 1.0


def describe_destination(dest: str) -> str:
    """``https://hooks.slack.com/…`` for a URL; the program path for ``cmd:``."""
    if dest.startswith("cmd:"):
        return dest
    parts = urlsplit(dest)
    return f"{parts.scheme}://{parts.hostname or '?'}/…"


def validate_destination(dest: str) -> str | None:
    """Why ``dest`` cannot be used, or None."""
    if dest.startswith("cmd:"):
        return None if dest[4:] else "cmd: needs a program path"
    parts = urlsplit(dest)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"not an http(s) URL or cmd:PATH: {describe_destination(dest) if parts.scheme else dest[:20]}"
    return None


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
    body = json.dumps(payload, default=str).encode()
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
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            error = _safe_reason(exc, dest)
        if attempt + 1 < attempts:
            time.sleep(BACKOFF_S * (attempt + 1))
    return f"notification to {describe_destination(dest)} failed: {error}"


def _safe_reason(exc: BaseException, dest: str) -> str:
    reason = getattr(exc, "reason", None) or exc
    return str(reason).replace(dest, describe_destination(dest))
