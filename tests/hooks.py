"""A webhook receiver for alert tests: a local HTTP server that records every POST."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer


class Hook:
    """A webhook receiver on 127.0.0.1 that records every POSTed JSON body."""

    def __init__(self, status: int = 200) -> None:
        self.posts: list[dict] = []
        self.bodies: list[bytes] = []  # as sent, to search for what must never be in them
        self.status = status
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.bodies.append(body)
                hook.posts.append(json.loads(body))
                self.send_response(hook.status)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/T000/SECRET-TOKEN-123"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class SilentHook:
    """A webhook URL whose server accepts the connection and never answers."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(8)
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}/hooks/T000/SECRET-TOKEN-123"

    def close(self) -> None:
        self.server.close()
