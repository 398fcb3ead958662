"""No secret leaves a host: its snapshot, diff, alert and .prom, over the real sshd.

A stand-in `python -m sglang.launch_server` runs with every kind of secret issue 11 names
in its environment and on its command line: Slack, Discord, Teams and PagerDuty webhooks,
presigned S3 and GCS URLs, a Sentry DSN, a database URL with a password, tokens. Its venv
holds a distribution pip installed from a URL with credentials, its log quotes a webhook,
and a watched repo's last commit subject pastes one. Every secret holds the marker
SEKRIT; every stored and printed artifact is searched for it, and for the hosts, which
must stay visible.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from driftwatch.cli import main
from tests.seed import StandinServer
from tests.sshd import Sshd
from tests.test_cli_check import Hook
from tests.venvs import git, make_gpu_venv, sglang_checkout, site_packages, write_dist_info

MARK = "SEKRIT"


def secrets(n: int) -> tuple[dict[str, str], list[str]]:
    """The server's environment and extra argv, run ``n`` (different tokens every run)."""
    env = {
        "SGLANG_WEBHOOK_URL": f"https://hooks.slack.com/services/T000/B000/{MARK}slack{n}",
        "SGLANG_ALERT_HOOK": f"https://discord.com/api/webhooks/1234/{MARK}discord{n}",
        "SGLANG_TEAMS": f"https://acme.webhook.office.com/webhookb2/a@b/IncomingWebhook/{MARK}teams{n}/c",
        "SGLANG_PAGER": f"https://events.pagerduty.com/integration/{MARK}pager{n}/enqueue",
        "SGLANG_WEIGHTS": (f"https://w.s3.amazonaws.com/m.bin?X-Amz-Credential={MARK}cred{n}"
                           f"&X-Amz-Signature={MARK}sig{n}"),
        "SGLANG_CONFIG": f"https://storage.googleapis.com/b/c.json?GoogleAccessId=a&Signature={MARK}gcs{n}",
        "SENTRY_DSN": f"https://{MARK}dsn{n}@o1.ingest.sentry.io/42",
        "DATABASE_URL": f"postgres://app:{MARK}db{n}@db.internal/jobs",
        "HF_TOKEN": f"hf_{MARK}abcdefghijklmnopqrstu{n}",
    }
    argv = ["--webhook-url", f"https://hooks.slack.com/services/T1/B1/{MARK}argv{n}",
            f"--callback=https://chat.example.com/hooks/{MARK}mattermost{n}", "--api-key", f"{MARK}key{n}",
            "--mem-fraction-static", f"0.{80 + n}"]
    return env, argv


class Server(StandinServer):
    def start(self, n: int) -> None:
        env, flags = secrets(n)
        self.launch(flags, env)


@pytest.fixture
def server(sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    sshd.fake_env()
    venv = tmp_path / "venv"
    python = make_gpu_venv(venv)
    (sglang_checkout(venv) / "python" / "sglang" / "launch_server.py").write_text("import time\ntime.sleep(600)\n")
    write_dist_info(site_packages(venv), "sglang_router", "sglang-router", "0.2.1",
                    [f"kernels @ git+https://ci:{MARK}req@git.example.com/kernels.git"], {},
                    direct_url={"url": f"https://builduser:{MARK}pw@git.example.com/org/router.git",
                                "vcs_info": {"vcs": "git", "commit_id": "9f1c" + "0" * 36}})
    repo = tmp_path / "deploy"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", f"alerts to https://hooks.slack.com/services/T/B/{MARK}commit")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "server.log").write_text(
        f"[2026-02-19 10:00:00] server_args=ServerArgs(model_path='/m', webhook_url='https://hooks.slack.com/services/"
        f"T/B/{MARK}log', api_key='{MARK}logkey', tp_size=8)\n"
        f"[2026-02-19 10:00:01] POST https://discord.com/api/webhooks/1/{MARK}logpost failed\n"
    )
    model = f"/models/dw-{uuid.uuid4().hex[:12]}"  # no other process on this machine matches
    (tmp_path / "driftwatch.toml").write_text(
        f'timeout = 30\nssh_config = "{sshd.ssh_config_path}"\nknown_hosts = "{sshd.known_hosts_path}"\n[watch]\n'
        f'python = ["{python}"]\nrepos = ["{repo}"]\nlogs = ["{logs}/*.log"]\n'
        f'processes = ["sglang.launch_server --model-path {model}"]\n'
        'env = ["SGLANG_*", "SENTRY_*", "DATABASE_*", "HF_*", "CUDA_*"]\n'
    )
    monkeypatch.chdir(tmp_path)
    running = Server(python, model)
    yield running
    running.stop()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    main(list(argv))
    captured = capsys.readouterr()
    return captured.out + captured.err


def test_snapshot_diff_alert_and_prom_hold_no_secret(server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hook = Hook()
    try:
        server.start(1)
        assert main(["snapshot", "testhost", "--label", "good"]) == 0
        server.start(2)
        program = tmp_path / "alert.sh"
        program.write_text(f"#!/bin/sh\ncat > {tmp_path / 'alert.json'}\n")
        program.chmod(0o755)
        notify = ["--notify", hook.url, "--notify", f"cmd:{program}"]
        printed = run(capsys, "check", "testhost", *notify, "--textfile", "prom", "--json")
        printed += run(capsys, "diff", "testhost@good", "testhost@latest")
        printed += run(capsys, "diff", "testhost@good", "testhost@latest", "--markdown")
        printed += run(capsys, "diff", "testhost@good", "testhost@latest", "--json", "--all")
        printed += run(capsys, "show", "testhost@latest") + run(capsys, "show", "testhost@latest", "--json")
    finally:
        hook.close()
    stored = {p: p.read_text() for p in (tmp_path / "snapshots").rglob("*") if p.is_file()}
    proms = {p: p.read_text() for p in (tmp_path / "prom").iterdir()}
    assert len(hook.posts) == 1 and proms
    alerts = [("webhook", hook.bodies[0].decode()), ("cmd:", (tmp_path / "alert.json").read_text())]
    for where, text in [("printed", printed), *stored.items(), *proms.items(), *alerts]:
        assert MARK not in text, f"a secret in {where}"
    snapshot = json.loads(max((p for p in stored if p.suffix == ".json"), key=lambda p: p.name).read_text())
    facts = json.dumps(snapshot)
    for kept in ("https://hooks.slack.com/<redacted>", "https://discord.com/<redacted>",
                 "https://acme.webhook.office.com/<redacted>", "https://events.pagerduty.com/<redacted>",
                 "https://w.s3.amazonaws.com/m.bin?<redacted>", "https://o1.ingest.sentry.io/<redacted>",
                 "postgres://app:<redacted>@db.internal/jobs", "https://builduser:<redacted>@git.example.com",
                 "https://chat.example.com/<redacted>", "--api-key"):
        assert kept in facts, kept
    alert = hook.posts[0]
    assert alert["status"] == "drift" and any(c["category"] == "launch-arg" for c in alert["changes"])
