"""The second round of incident classes (issue 20), each made on a real host over SSH in a
good and a bad state with innocent changes beside it: `diff` must name the cause first,
with its mechanism, and `doctor` must find it where one snapshot shows it.

Each test gets its own sshd whose sessions have a private HOME. GPU states are real
nvidia-smi captures replayed by the fake nvidia-smi, with the one setting the incident
changes as the driver would then report it (tests/captures.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from driftwatch.cli import main
from tests import test_stack_ssh as stack_ssh
from tests.captures import H200, derive_capture
from tests.hfcache import model_files, write_revision
from tests.sshd import sshd_with_home
from tests.venvs import make_gpu_venv, site_packages, write_dist_info


@dataclass
class Host(stack_ssh.Host):
    watched: Path = Path()

    def configure(self, watch: str = "", processes: str = "[]", caches: str = "[]") -> None:
        super().configure(f'files = ["{self.watched.parent}/*.py"]\ncaches = {caches}\nprocesses = {processes}\n{watch}')

    def capture(self, path: Path) -> None:
        self.sshd.fake_env(FAKE_NVIDIA_SMI_CAPTURE=str(path))

    def diff(self, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
        capsys.readouterr()
        assert main(["diff", "testhost@good", "testhost@latest", "--json"]) == 2
        changes: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["changes"]
        return changes

    def doctor(self, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
        capsys.readouterr()
        assert main(["doctor", "testhost@latest", "--json"]) == 2
        out = json.loads(capsys.readouterr().out)
        reports = out if isinstance(out, list) else [out]
        return [f for report in reports for f in report["findings"]]

    def innocent_changes(self) -> None:
        """What also happens on a host between two snapshots and explains nothing: a package
        nothing imports is installed, a watched source file is touched with its content kept."""
        write_dist_info(site_packages(self.root / "venv"), "tabulate", "tabulate", "0.9.0", [],
                        {"tabulate/__init__.py": ""})
        os.utime(self.watched, (self.watched.stat().st_atime, self.watched.stat().st_mtime + 60))


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Host]:
    watched = tmp_path / "src" / "server_args.py"
    watched.parent.mkdir()
    watched.write_text("mem_fraction_static = None\n")
    with sshd_with_home(tmp_path) as (server, home):
        h = Host(tmp_path, home, server, make_gpu_venv(tmp_path / "venv"), watched)
        h.capture(H200)
        h.configure()
        monkeypatch.chdir(tmp_path)
        yield h


def by_rule(findings: list[dict[str, Any]], rule: str) -> dict[str, Any]:
    return next(f for f in findings if f["rule"] == rule)


# --- 8. GPU power and clocks ---------------------------------------------------------------


def test_power_limit_lowered_under_an_unchanged_stack(host: Host, capsys: pytest.CaptureFixture[str]) -> None:
    host.snapshot("good")
    # nvidia-smi -pl 450 (or a DCGM power policy): the requested and enforced limits move.
    host.capture(derive_capture(host.root / "capped.txt", {"power.limit": "450.00 W",
                                                            "enforced.power.limit": "450.00 W"}))
    host.innocent_changes()
    host.snapshot()
    first = host.diff(capsys)[0]
    assert (first["category"], first["severity"]) == ("gpu", "high")
    assert first["explanation"].startswith(
        "GPU 0 (H200, 00000000:83:00.0) power limit 700 W → 450 W (default 700 W, max 700 W): a lower cap "
        "(nvidia-smi -pl, or a DCGM/datacenter power policy): under load the GPU lowers its clocks")
    assert "known-bad state (predicted)" in first["explanation"]
    finding = by_rule(host.doctor(capsys), "power-limit-below-default")
    assert finding["severity"] == "medium" and finding["fix"].startswith("nvidia-smi -i 0 -pl 700")


def test_power_brake_asserted_while_idle(host: Host, capsys: pytest.CaptureFixture[str]) -> None:
    host.snapshot("good")
    # The chassis asserts the external power-brake signal: NVML reports HW power brake
    # slowdown (0x80) and HW slowdown (0x08) on an idle GPU.
    braked = {"clocks_event_reasons.active": "0x0000000000000088", "clocks_event_reasons.gpu_idle": "Not Active",
              "clocks_event_reasons.hw_slowdown": "Active", "clocks_event_reasons.hw_power_brake_slowdown": "Active"}
    host.capture(derive_capture(host.root / "braked.txt", braked, phases=("idle",)))
    host.innocent_changes()
    host.snapshot()
    first = host.diff(capsys)[0]
    assert (first["category"], first["severity"]) == ("gpu", "high")
    assert first["explanation"].startswith(
        "known-bad state (observed): GPU 0 (H200, 00000000:83:00.0) reports hw_power_brake_slowdown while idle "
        "(0% busy, ")
    assert "the external power-brake signal is asserted" in first["explanation"]
    finding = by_rule(host.doctor(capsys), "clocks-held-while-idle")
    assert finding["severity"] == "high" and finding["evidence"] == "observed"


# --- 4. engine settings that stopped meaning anything --------------------------------------

# vllm/envs.py as vLLM 0.10 ships it (the entry reads the variable), and 0.21's without it.
ENVS_0_10 = ('import os\nenvironment_variables = {\n    "VLLM_ATTENTION_BACKEND":\n'
             '    lambda: os.getenv("VLLM_ATTENTION_BACKEND", None),\n'
             '    "VLLM_LOGGING_LEVEL": lambda: os.getenv("VLLM_LOGGING_LEVEL", "INFO").upper(),\n}\n')
ENVS_0_21 = ('import os\nenvironment_variables = {\n'
             '    "VLLM_LOGGING_LEVEL": lambda: os.getenv("VLLM_LOGGING_LEVEL", "INFO").upper(),\n}\n')
# The lines vLLM prints at start-up (formats of vllm-project/vllm#46169 and #50292).
LOG = ("(APIServer pid={pid}) INFO 07-29 10:00:00 [api_server.py:1839] vLLM API server version {version}\n"
       "(APIServer pid={pid}) INFO 07-29 10:00:00 [utils.py:233] non-default args: {{'model': 'Qwen/Qwen3-8B'}}\n"
       "(EngineCore_DP0 pid={pid}) INFO 07-29 10:00:05 [cuda.py:280] Using {backend} backend.\n")


@dataclass
class VllmServer:
    host: Host
    log: Path
    name: str
    process: subprocess.Popen[bytes] | None = None

    def install(self, version: str, envs: str) -> None:
        site = site_packages(self.host.root / "venv")
        for old in site.glob("vllm-*.dist-info"):
            shutil.rmtree(old)
        shutil.rmtree(site / "vllm", ignore_errors=True)
        server = "import time\nwhile True:\n    time.sleep(1)\n"
        write_dist_info(site, "vllm", "vllm", version, ["torch"], {
            "vllm/__init__.py": "", "vllm/envs.py": envs, "vllm/entrypoints/__init__.py": "",
            "vllm/entrypoints/openai/__init__.py": "", "vllm/entrypoints/openai/api_server.py": server})

    def start(self, version: str, backend: str, *, shm: str | None = None, log: str = "", **more_env: str) -> None:
        """Starts the server; ``shm``: in its own mount namespace with a /dev/shm of that size
        (``mount -t tmpfs -o size=…``: what ``docker run --shm-size`` gives a container)."""
        self.stop()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "VLLM_ATTENTION_BACKEND": "FLASHINFER",
               "HF_HOME": str(self.host.root / "hf"), "HOME": str(self.host.home), **more_env}
        argv = [str(self.host.python), "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen3-8B",
                "--served-model-name", self.name]
        if shm is not None:
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    f'mount -t tmpfs -o size={shm} tmpfs /dev/shm && exec "$@"', "sh", *argv]
        self.process = subprocess.Popen(argv, env=env, cwd=self.host.root, start_new_session=True)
        self.log.write_text(LOG.format(pid=self.process.pid, version=version, backend=backend) + log)
        time.sleep(0.3)  # let it exec, so /proc shows its argv

    def stop(self) -> None:
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.process = None


@pytest.fixture
def vllm_server(host: Host) -> Iterator[VllmServer]:
    server = VllmServer(host, host.root / "vllm.log", f"dw-{uuid.uuid4().hex[:12]}")
    host.configure(f'logs = ["{server.log}"]\n', processes=f'["vllm.entrypoints.openai.api_server --model '
                   f'Qwen/Qwen3-8B --served-model-name {server.name}"]', caches='["~/.cache/vllm"]')
    try:
        yield server
    finally:
        server.stop()


def test_attention_backend_variable_no_longer_read_after_a_vllm_upgrade(
    vllm_server: VllmServer, capsys: pytest.CaptureFixture[str]
) -> None:
    host = vllm_server.host
    vllm_server.install("0.10.1", ENVS_0_10)
    vllm_server.start("0.10.1", "FlashInfer")
    host.snapshot("good")
    vllm_server.install("0.21.0", ENVS_0_21)  # pip install -U vllm; the unit file still sets the variable
    vllm_server.start("0.21.0", "AttentionBackendEnum.FLASH_ATTN")
    host.innocent_changes()
    host.snapshot()
    first = host.diff(capsys)[0]
    assert (first["category"], first["item"], first["severity"]) == ("env", "VLLM_ATTENTION_BACKEND", "high")
    assert first["explanation"].startswith(
        "VLLM_ATTENTION_BACKEND=FLASHINFER is still set but vLLM 0.21.0 no longer reads it (its source never names "
        "it): the default attention backend now runs; its log shows the AttentionBackendEnum.FLASH_ATTN backend "
        "(was FlashInfer) (use --attention-backend (or --attention-config.backend))")
    assert "known-bad state (observed)" in first["explanation"]
    finding = by_rule(host.doctor(capsys), "engine-setting-ignored")
    assert finding["fix"].startswith("use --attention-backend") and finding["evidence"] == "observed"


# --- 5. defaults that moved under an unchanged command -------------------------------------


def test_vllm_0_8_applies_the_models_generation_config_by_default(
    vllm_server: VllmServer, capsys: pytest.CaptureFixture[str]
) -> None:
    host = vllm_server.host
    write_revision(host.root / "hf" / "hub", "Qwen/Qwen3-8B", model_files())  # temperature 0.6, top_p 0.95
    vllm_server.install("0.7.3", ENVS_0_10)
    vllm_server.start("0.7.3", "FlashInfer")
    host.snapshot("good")
    vllm_server.install("0.8.4", ENVS_0_10)  # the same command, the same model files
    vllm_server.start("0.8.4", "FlashInfer")
    host.innocent_changes()
    host.snapshot()
    first = host.diff(capsys)[0]
    assert (first["category"], first["item"]) == ("package", "vllm")
    assert first["explanation"].startswith("vllm 0.7.3 → 0.8.4")
    assert ("known-bad state (predicted): vLLM 0.8.4 applies the served model's generation_config.json as its "
            "default sampling parameters (--generation-config auto)") in first["explanation"]
    assert "Qwen/Qwen3-8B's generation_config.json sets temperature 0.6, top_p 0.95" in first["explanation"]
    finding = by_rule(host.doctor(capsys), "moved-default")
    assert finding["fix"].startswith("start with --generation-config vllm")


# --- 6. compile caches reused under other settings ------------------------------------------


def write_compile_cache(home: Path, env: dict[str, str]) -> Path:
    """One torch.compile cache entry as vLLM writes it: its key factors beside the artifacts
    (vllm/compilation/backends.py writes cache_key_factors.json once, when the entry is new)."""
    entry = home / ".cache" / "vllm" / "torch_compile_cache" / "3fbdd5227b" / "rank_0_0" / "backbone"
    entry.mkdir(parents=True)
    factors = {"env": env, "config_hash": "84b7dc96bd", "code_hash": "1ae177648b", "compiler_hash": "a92dbc9a80"}
    (entry / "cache_key_factors.json").write_text(json.dumps(factors, indent=2, sort_keys=True))
    (entry / "computation_graph.py").write_text("# graph\n")
    (entry / "vllm_compile_cache.py").write_text("# artifacts\n")
    return entry


def reuse_compile_cache_under_a_new_partition(vllm_server: VllmServer, capsys: pytest.CaptureFixture[str]
                                              ) -> list[dict[str, Any]]:
    host = vllm_server.host
    envs = ENVS_0_10.replace("}\n", '    "VLLM_PP_LAYER_PARTITION": lambda: os.getenv("VLLM_PP_LAYER_PARTITION", None),\n}\n')
    vllm_server.install("0.8.1", envs)
    # The key factors of vLLM before PR #14953: the pipeline partition is not among them.
    write_compile_cache(host.home, {"VLLM_ATTENTION_BACKEND": "FLASHINFER", "VLLM_USE_V1": "True"})
    vllm_server.start("0.8.1", "FlashInfer")
    host.snapshot("good")
    vllm_server.start("0.8.1", "FlashInfer", VLLM_PP_LAYER_PARTITION="12,20")  # a new partition, same cache
    host.innocent_changes()
    host.snapshot()
    return host.diff(capsys)


def test_compile_cache_reused_after_a_variable_its_key_does_not_cover_changed(
    vllm_server: VllmServer, capsys: pytest.CaptureFixture[str]
) -> None:
    changes = reuse_compile_cache_under_a_new_partition(vllm_server, capsys)
    cache = next(c for c in changes if c["item"] == "~/.cache/vllm/torch_compile_cache")
    assert cache["severity"] == "medium"
    assert cache["explanation"].startswith(
        "~/.cache/vllm/torch_compile_cache was reused as it was (torch_compile_cache/3fbdd5227b/rank_0_0, no new "
        "compile key) while the server's VLLM_PP_LAYER_PARTITION (none) → 12,20: its recorded key factors "
        "(cache_key_factors.json) do not include VLLM_PP_LAYER_PARTITION, so where that shapes the compiled graph "
        "the server runs the graph built for the old value")


def test_compile_cache_reused_under_a_new_partition_ranks_first(
    vllm_server: VllmServer, capsys: pytest.CaptureFixture[str]
) -> None:
    changes = reuse_compile_cache_under_a_new_partition(vllm_server, capsys)
    assert changes[0]["item"] == "~/.cache/vllm/torch_compile_cache"


# --- 7 and 10. the limits the server runs under, and NCCL's own words -------------------------

# What NCCL prints when its shared-memory transport cannot create a segment (NVIDIA/nccl #342,
# #525): the call that failed, then the segment under /dev/shm it was creating.
NCCL_SHM = ("(VllmWorker rank=0 pid=52) a1b2c3d4e5f6:52:52 [0] include/shm.h:28 NCCL WARN Call to "
            "posix_fallocate failed : No space left on device\n"
            "(VllmWorker rank=0 pid=52) a1b2c3d4e5f6:52:52 [0] include/shm.h:48 NCCL WARN Error while creating "
            "shared memory segment /dev/shm/nccl-Ll2Iso (size 9637888)\n")


def test_nccl_cannot_create_its_segments_after_the_server_got_a_smaller_dev_shm(
    vllm_server: VllmServer, capsys: pytest.CaptureFixture[str]
) -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("SKIPPED LOUDLY: needs root and unshare to give the server its own /dev/shm")
    host = vllm_server.host
    vllm_server.install("0.10.1", ENVS_0_10)
    vllm_server.start("0.10.1", "FlashInfer", shm="16g")
    host.snapshot("good")
    # Restarted by a unit file that lost its --shm-size: 1 GiB, too small for 8 ranks' segments.
    vllm_server.start("0.10.1", "FlashInfer", shm="1g", log=NCCL_SHM)
    host.innocent_changes()
    host.snapshot()
    changes = host.diff(capsys)
    symptom = next(c for c in changes if c["role"] == "symptom")
    assert symptom["explanation"].endswith("NCCL WARN Call to posix_fallocate failed : No space left on device")
    causes = [c for c in changes if c["role"] != "symptom"]
    top = causes[0]
    assert top["item"].endswith(" /dev/shm"), [c["explanation"] for c in causes[:3]]
    assert "/dev/shm 16.0 GiB → 1.0 GiB" in top["explanation"]
    assert top["explanation"].endswith("— the new error names /dev/shm")
