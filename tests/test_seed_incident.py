"""The incident driftwatch exists for, replayed on the test host over SSH.

A stand-in `python -m sglang.launch_server` (a sleeping module in the test venv) runs with
SGLANG_*, NCCL_* and a token in its environment and an --api-key on its command line,
next to its log. The good run auto-detected mem_fraction_static 0.88; the server is then
relaunched with --mem-fraction-static 0.55 next to the log of the failing run. The diff
must explain it in its first lines, with both values and the KV budget arithmetic, and no
secret may reach the store.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from driftwatch.cli import main
from tests.seed import StandinServer, seed_log
from tests.sshd import Sshd
from tests.venvs import make_gpu_venv, sglang_checkout

H100 = Path(__file__).parent / "fixtures" / "nvidia-smi" / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt"
HF_TOKEN = "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNm123456"
API_KEY = "sk-" + "seedincident0123456789abcdef"


class Server(StandinServer):
    def __init__(self, python: Path, model: str, logs: Path) -> None:
        super().__init__(python, model)
        self.logs = logs

    def start(self, *flags: str, log: str) -> None:
        self.stop()
        path = self.logs / f"server-{time.time_ns()}.log"
        path.write_text(log)
        env = {"SGLANG_ENABLE_JIT_DEEPGEMM": "0", "NCCL_DEBUG": "INFO", "HF_TOKEN": HF_TOKEN}
        self.launch(["--tp-size", "8", "--api-key", API_KEY, "--port", "30000", *flags], env)


@pytest.fixture
def server(sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    sshd.fake_env(FAKE_NVIDIA_SMI_CAPTURE=str(H100))
    python = make_gpu_venv(tmp_path / "venv")
    package = sglang_checkout(tmp_path / "venv") / "python" / "sglang"
    (package / "launch_server.py").write_text("import time\nwhile True:\n    time.sleep(1)\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    model = f"/models/DeepSeek-V3-{uuid.uuid4().hex[:8]}"  # no other process on this machine matches
    (tmp_path / "driftwatch.toml").write_text(
        f'timeout = 30\nssh_config = "{sshd.ssh_config_path}"\nknown_hosts = "{sshd.known_hosts_path}"\n[watch]\n'
        f'python = ["{python}"]\nprocesses = ["sglang.launch_server --model-path {model}"]\nlogs = ["{logs}/*.log"]\n'
    )
    monkeypatch.chdir(tmp_path)
    running = Server(python, model, logs)
    yield running
    running.stop()


def test_override_is_explained_first_with_the_kv_budget(server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    server.start(log=seed_log(0.88, fails=False))
    assert main(["snapshot", "testhost", "--label", "good"]) == 0
    server.start("--mem-fraction-static", "0.55", log=seed_log(0.55, fails=True))
    assert main(["snapshot", "testhost"]) == 0
    capsys.readouterr()

    assert main(["diff", "testhost@good", "testhost@latest", "--json"]) == 2
    changes = json.loads(capsys.readouterr().out)["changes"]
    top = changes[:3]
    [override] = [c for c in top if c["category"] == "launch-arg"]
    assert override["item"] == "mem_fraction_static" and override["severity"] == "critical"
    assert (override["old"], override["new"]) == (0.88, 0.55)  # numbers on both sides
    why = override["explanation"]
    assert "set explicitly to 0.55; the good run auto-detected 0.88" in why
    # H100 80GB: 79.6 GiB total; 21.7 GB free after weights (the log).
    assert "21.7 − 79.6 × 0.12 = 12.1 GiB" in why and "21.7 − 79.6 × 0.45 = -14.1 GiB" in why
    assert "the KV budget would be -14.1 GiB: SGLang cannot start with this" in why
    assert "the new log shows it failed: RuntimeError: Not enough memory" in why and "predicted" not in why
    assert any(c["category"] == "log" and "Not enough memory" in c["explanation"] and "(8×)" in c["explanation"] for c in top)

    assert main(["diff", "testhost@good", "testhost@latest"]) == 2
    first_lines = capsys.readouterr().out.splitlines()[:6]
    assert "mem-fraction-static" in first_lines[0]


def test_no_secret_reaches_the_store(server: Server) -> None:
    logged_args = f"api_key='{API_KEY}', hf_token='{HF_TOKEN}', mem_fraction_static="
    log = seed_log(0.88, fails=False).replace("mem_fraction_static=", logged_args, 1)
    server.start(log=log + f"[2026-02-19 10:03:00] CUDA out of memory with HF_TOKEN={HF_TOKEN}\n")
    assert main(["snapshot", "testhost"]) == 0
    stored = "".join(p.read_text() for p in Path("snapshots").rglob("*.json"))
    assert "NCCL_DEBUG" in stored and "<redacted>" in stored
    assert HF_TOKEN not in stored and API_KEY not in stored
