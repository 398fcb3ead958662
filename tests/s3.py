"""A real S3 HTTP endpoint for the tests: moto's standalone server on 127.0.0.1.

It is started once per session as a subprocess (``moto.server``), with IAM checks on:
the tests' credentials are a real access key made through its IAM API, so a wrong key
or secret is refused as AWS refuses it. ``ThrottlingServer`` stands in for an S3 that
answers every request with one error (503 SlowDown, 500), counting the requests.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.sshd import free_port

REGION = "us-east-1"
_ALLOW_ALL = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


@dataclass
class S3Server:
    endpoint: str
    key: str
    secret: str
    process: subprocess.Popen[bytes]
    _names: itertools.count = field(default_factory=itertools.count)

    def use(self, monkeypatch: pytest.MonkeyPatch, *, endpoint_env: str = "AWS_ENDPOINT_URL_S3") -> None:
        """Point the standard AWS variables at this server (as a node's environment would)."""
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", self.key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", self.secret)
        monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
        monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")  # never this machine's ~/.aws
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        if endpoint_env:
            monkeypatch.setenv(endpoint_env, self.endpoint)

    def bucket(self) -> str:
        """A new, empty bucket."""
        import boto3

        name = f"dw-{next(self._names)}-{time.monotonic_ns() % 10**9}"
        client = boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=REGION,
            aws_access_key_id=self.key, aws_secret_access_key=self.secret,
        )
        client.create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_moto(log: Path) -> S3Server:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2).read()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"moto did not start; its log: {log.read_text()[-2000:]}") from None
            time.sleep(0.2)
    import boto3

    iam = boto3.client("iam", endpoint_url=endpoint, region_name=REGION, aws_access_key_id="setup",
                       aws_secret_access_key="setup")
    iam.create_user(UserName="driftwatch")
    iam.put_user_policy(UserName="driftwatch", PolicyName="all", PolicyDocument=json.dumps(_ALLOW_ALL))
    key = iam.create_access_key(UserName="driftwatch")["AccessKey"]
    # From here on every request must be signed with a key moto knows, as on AWS.
    request = urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=b"0", method="POST",
                                     headers={"Content-Type": "text/plain"})
    urllib.request.urlopen(request, timeout=10).read()
    return S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"], process)


class ThrottlingServer:
    """Answers every request with ``status`` and an S3 error ``code``; counts the requests."""

    def __init__(self, status: int, code: str, message: str) -> None:
        body = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{message}</Message></Error>"
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                outer.requests += 1
                if self.headers.get("Expect") != "100-continue":  # else the body is never sent
                    self.rfile.read(int(self.headers.get("Content-Length") or 0))
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
