"""Local HTTP servers that answer like a broken or foreign inference server, for canary tests.

``FakeServer(mode)`` on 127.0.0.1: ``replay`` serves captured real SGLang/vLLM answers
(tests/fixtures/canary) by path; the other modes are the bad inputs a canary meets: ``slow``,
``500``, ``html``, ``huge`` (a 100 MB body), ``badjson``, ``auth`` (401 without the right
Bearer key), ``loading`` (503 like a server still loading), ``hangup`` (accepts, then closes
without answering). ``closed_port()`` is a port nothing listens on. Every request is kept in
``requests`` (path, headers, body) so a test can see what was, and was not, sent.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures" / "canary"
LLAMA_LOADING = b'{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}'
HUGE = 100 * 1024 * 1024


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class FakeServer:
    def __init__(self, mode: str, *, engine: str = "vllm", api_key: str = "", delay: float = 30.0,
                 chat: dict[str, Any] | None = None) -> None:
        self.mode, self.engine, self.api_key, self.delay = mode, engine, api_key, delay
        self.chat = chat  # a chat answer to serve instead of the engine's captured one
        self.requests: list[dict[str, Any]] = []
        self.stop_event = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                fake.handle(self, None)

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                fake.handle(self, json.loads(self.rfile.read(length) or b"null"))

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_port)
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def prompts_sent(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == "POST"]

    def handle(self, handler: BaseHTTPRequestHandler, body: Any) -> None:
        path = handler.path
        self.requests.append({"method": handler.command, "path": path, "headers": dict(handler.headers), "body": body})
        mode = self.mode
        if mode == "hangup":
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        if mode == "auth" and handler.headers.get("Authorization") != f"Bearer {self.api_key}":
            return self.send(handler, 401, b'{"error":"Unauthorized"}')
        if mode == "loading":
            return self.send(handler, 503, b"" if path == "/health" else LLAMA_LOADING)
        if path == "/health":
            return self.send(handler, 200, b"")
        if path == "/v1/models":
            return self.send(handler, 200, self.fixture("models.json"))
        if handler.command == "GET":
            if self.engine == "sglang" and path == "/get_server_info":
                return self.send(handler, 200, self.fixture("get_server_info.json"))
            return self.send(handler, 404, b'{"detail":"Not Found"}')
        if mode == "slow":
            self.stop_event.wait(self.delay)
        if mode == "500":
            return self.send(handler, 500, (FIXTURES / "vllm" / "error_500.json").read_bytes())
        if mode == "html":
            return self.send(handler, 200, b"<html><body><h1>Welcome to nginx!</h1></body></html>", "text/html")
        if mode == "badjson":
            return self.send(handler, 200, b'{"choices": [{"text": "cut')
        if mode == "huge":
            return self.send_huge(handler)
        answer = json.dumps(self.chat).encode() if self.chat is not None else self.fixture("chat_completion.json")
        return self.send(handler, 200, answer)

    def fixture(self, name: str) -> bytes:
        return (FIXTURES / self.engine / name).read_bytes()

    def send(self, handler: BaseHTTPRequestHandler, status: int, body: bytes, kind: str = "application/json") -> None:
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", kind)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
        except OSError:
            pass  # the canary gave up on us: that is what the test is about

    def send_huge(self, handler: BaseHTTPRequestHandler) -> None:
        chunk = b'{"pad": "' + b"x" * (1024 * 1024 - 20) + b'",'
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(HUGE))
            handler.end_headers()
            sent = 0
            while sent < HUGE and not self.stop_event.is_set():
                handler.wfile.write(chunk)
                sent += len(chunk)
        except OSError:
            self.huge_cut_at = sent if "sent" in locals() else 0

    def close(self) -> None:
        self.stop_event.set()
        self.server.shutdown()
        self.server.server_close()
        time.sleep(0)
