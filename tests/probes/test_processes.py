"""The processes probe against real stand-in server processes on this machine.

The stand-in is a package ``sglang/launch_server.py`` that only sleeps, started as
``python -m sglang.launch_server …`` like the real thing. Each test watches a pattern
holding a model path unique to it, so servers of concurrent test runs are never seen.
"""

from __future__ import annotations

import _ctypes
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from driftwatch.collect import run_probe
from driftwatch.model import ProbeRecord, ProbeStatus
from driftwatch.probes.base import ProbeContext, load_script
from driftwatch.probes.processes import (
    LIB_MARKERS,
    ProcessesProbe,
    redaction_rules,
    server_keys,
)
from driftwatch.settings import WatchSettings
from driftwatch.transport.local import LocalTransport
from tests.transport import kill_all, pids_matching, sleep_marker, wait_gone
from tests.venvs import old_pythons

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

SCRIPTS = Path(__file__).resolve().parents[2] / "driftwatch" / "probes" / "scripts"
HF = "hf_abcdefghijklmnopqrstuvwxyz123456"
API = "sk-abcdefabcdefabcdefabcdef"
STANDIN = """
import ctypes, os, subprocess, sys, time
for lib in filter(None, os.environ.get("STANDIN_LOAD", "").split(os.pathsep)):  # as a server maps libnccl
    ctypes.CDLL(lib)
if os.environ.pop("STANDIN_CHILD", None):  # a forked worker: same command line, our child
    subprocess.Popen([sys.executable, "-m", "sglang.launch_server"] + sys.argv[1:])
open(os.path.join(os.environ["STANDIN_READY"], str(os.getpid())), "w").close()
time.sleep(600)
"""


class Servers:
    """Starts stand-in servers in their own sessions; ``stop`` kills each whole group."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.model = f"/models/dw-{uuid.uuid4().hex[:12]}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.started = 0
        (root / "pkg" / "sglang").mkdir(parents=True)
        (root / "pkg" / "sglang" / "__init__.py").write_text("")
        (root / "pkg" / "sglang" / "launch_server.py").write_text(STANDIN)
        (root / "work").mkdir()

    @property
    def pattern(self) -> str:
        return f"sglang.launch_server --model-path {self.model}"

    def start(self, *args: str, env: dict[str, str] | None = None, child: bool = False,
              model: str = "") -> subprocess.Popen[bytes]:
        ready = self.root / f"ready{self.started}"
        self.started += 1
        ready.mkdir()
        full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(self.root / "pkg"),
                    "STANDIN_READY": str(ready), **(env or {})}
        if child:
            full_env["STANDIN_CHILD"] = "1"
        argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", self.model + model, *args]
        proc = subprocess.Popen(argv, env=full_env, cwd=self.root / "work", start_new_session=True)
        self.procs.append(proc)
        deadline = time.monotonic() + 20
        while len(list(ready.iterdir())) < (2 if child else 1):
            assert proc.poll() is None and time.monotonic() < deadline, "stand-in server did not start"
            time.sleep(0.02)
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    started = Servers(tmp_path)
    try:
        yield started
    finally:
        started.stop()


def record(servers: Servers, probe: ProcessesProbe | None = None, timeout: float = 30.0, **watch: Any) -> ProbeRecord:
    settings = WatchSettings(python=[sys.executable], processes=[servers.pattern], **watch)
    ctx = ProbeContext(transport=LocalTransport(), watch=settings, timeout=timeout)
    result = run_probe(probe or ProcessesProbe(), ctx)
    assert result.status is ProbeStatus.ok, result.error
    return result


def load_collector() -> ModuleType:
    spec = importlib.util.spec_from_file_location("processes_collect", SCRIPTS / "processes_collect.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # main() only runs as __main__
    return module


def walk_request(servers: Servers, **extra: Any) -> dict[str, Any]:
    return {"patterns": [servers.pattern], "env": ["NCCL_*", "SGLANG_*"], "always_env": ["CUDA_VISIBLE_DEVICES"],
            "lib_markers": LIB_MARKERS, "max_processes": 64, "max_bytes": 1 << 20, **redaction_rules(), **extra}


SECRET_ENV = {"SGLANG_FOO": "1", "NCCL_DEBUG": "INFO", "HF_TOKEN": HF, "UNRELATED": "x", "CUDA_VISIBLE_DEVICES": "0,1",
              "NCCL_NOTE": f"see {HF} here", "WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567"}


def test_server_found_with_normalised_args_filtered_env_and_no_secret(servers: Servers) -> None:
    proc = servers.start("--mem-fraction-static", "0.55", "--api-key", API, "--port", "30001",
                         "--tp-size", "2", "--cuda-graph-bs", "1", "2", "4", "--enable-metrics", env=SECRET_ENV)
    result = record(servers)
    assert list(result.facts["servers"]) == ["sglang.launch_server"]
    server = result.facts["servers"]["sglang.launch_server"]
    assert server["kind"] == "sglang" and server["entry"] == "sglang.launch_server" and server["model"] == servers.model
    assert server["args"] == {"model_path": servers.model, "mem_fraction_static": "0.55", "api_key": "<redacted>",
                              "port": "30001", "tp_size": "2", "cuda_graph_bs": ["1", "2", "4"], "enable_metrics": True}
    assert server["argv"][1:4] == ["-m", "sglang.launch_server", "--model-path"]
    assert server["env"] == {"SGLANG_FOO": "1", "NCCL_DEBUG": "INFO", "CUDA_VISIBLE_DEVICES": "0,1",
                             "NCCL_NOTE": "see <redacted> here", "HF_TOKEN": "<redacted>"}
    assert server["cwd"] == os.path.realpath(servers.root / "work")
    assert server["exe"] == os.path.realpath(sys.executable)
    assert server["volatile"]["pid"] == proc.pid and server["volatile"]["ppid"] == os.getpid()
    assert abs(server["volatile"]["start_time"] - time.time()) < 120
    dumped = result.model_dump_json()
    assert HF not in dumped and API not in dumped and "<redacted>" in dumped


def test_default_env_covers_loader_hub_thread_and_rendezvous_variables(servers: Servers) -> None:
    env = {"LD_PRELOAD": "/opt/libfoo.so", "LD_LIBRARY_PATH": "/usr/local/nccl/lib", "VLLM_USE_V1": "1",
           "HF_HOME": "/data/hf", "HF_TOKEN": HF, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_NUM_THREADS": "8", "NVSHMEM_IB_ENABLE_IBGDA": "1", "UCX_NET_DEVICES": "mlx5_0:1",
           "GLOO_SOCKET_IFNAME": "eth0", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "UNRELATED": "x",
           # Not matched by any glob, but it moves a compile cache: always recorded.
           "TRITON_CACHE_DIR": "/data/triton", "TORCHINDUCTOR_CACHE_DIR": "/data/inductor"}
    servers.start(env=env)
    server = record(servers).facts["servers"]["sglang.launch_server"]
    assert server["env"] == {**{k: v for k, v in env.items() if k != "UNRELATED"}, "HF_TOKEN": "<redacted>"}
    assert HF not in json.dumps(server)
    narrow = record(servers, env=["NCCL_*"]).facts["servers"]["sglang.launch_server"]["env"]
    assert narrow == {"TRITON_CACHE_DIR": "/data/triton", "TORCHINDUCTOR_CACHE_DIR": "/data/inductor",
                      "HF_HOME": "/data/hf"}


def test_secret_variables_matched_by_a_glob_are_redacted_on_both_sides(servers: Servers) -> None:
    servers.start("--api-key=" + API, env=SECRET_ENV)
    server = record(servers, env=["HF_*", "WANDB_*"]).facts["servers"]["sglang.launch_server"]
    assert server["env"] == {"HF_TOKEN": "<redacted>", "WANDB_API_KEY": "<redacted>", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert server["args"]["api_key"] == "<redacted>"
    # The target-side script already redacts: the secrets never cross the wire.
    request = walk_request(servers, env=["HF_*", "WANDB_*", "NCCL_*"])
    out = subprocess.run([sys.executable, "-c", load_script("processes_collect.py")], input=json.dumps(request).encode(),
                         capture_output=True, check=True).stdout.decode()
    assert servers.model in out and HF not in out and API not in out and SECRET_ENV["WANDB_API_KEY"] not in out


WEBHOOK_ENV = {"SGLANG_WEBHOOK_URL": "https://hooks.slack.com/services/T000/B000/SEKRIT1",
               "SGLANG_ALERT_DSN": "https://SEKRIT2@o1.ingest.sentry.io/7",
               "SGLANG_INDEX_URL": "https://ci:SEKRIT3@pypi.example.com/simple"}


def test_webhook_urls_keep_only_their_host_on_both_sides(servers: Servers) -> None:
    servers.start("--webhook-url", "https://discord.com/api/webhooks/1/SEKRIT4", "--webhook=https://chat.example.com/hooks/SEKRIT5",
                  env=WEBHOOK_ENV)
    server = record(servers).facts["servers"]["sglang.launch_server"]
    assert server["env"] == {"SGLANG_WEBHOOK_URL": "https://hooks.slack.com/<redacted>",
                             "SGLANG_ALERT_DSN": "https://o1.ingest.sentry.io/<redacted>",
                             "SGLANG_INDEX_URL": "https://ci:<redacted>@pypi.example.com/simple"}
    assert server["args"]["webhook_url"] == "https://discord.com/<redacted>"
    assert server["args"]["webhook"] == "https://chat.example.com/<redacted>"
    # The target-side script keeps the host of a webhook-named value too, and its secret off the wire.
    request = walk_request(servers)
    out = subprocess.run([sys.executable, "-c", load_script("processes_collect.py")], input=json.dumps(request).encode(),
                         capture_output=True, check=True).stdout.decode()
    report = json.loads(out)["processes"][0]
    assert report["env"]["SGLANG_WEBHOOK_URL"] == "https://hooks.slack.com/<redacted>"
    assert "https://discord.com/<redacted>" in report["argv"] and "SEKRIT1" not in out and "SEKRIT4" not in out


def test_forked_worker_with_the_same_command_line_is_not_recorded(servers: Servers) -> None:
    proc = servers.start("--port", "30001", child=True)
    facts = record(servers).facts
    assert [s["volatile"]["pid"] for s in facts["servers"].values()] == [proc.pid]


def test_the_servers_workers_are_recorded_by_pid(servers: Servers) -> None:
    # A rank nvidia-smi lists is the server's when it is its descendant, whatever it is called.
    proc = servers.start("--port", "30001", child=True)
    [server] = record(servers).facts["servers"].values()
    workers = [int(p) for p in subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()]
    assert workers and server["volatile"]["descendants"] == sorted(workers)
    alone = servers.start("--port", "30002")
    keyed = record(servers).facts["servers"]
    assert [s["volatile"]["descendants"] for s in keyed.values() if s["volatile"]["pid"] == alone.pid] == [[]]


def test_second_server_on_another_port_gets_another_key(servers: Servers) -> None:
    first = servers.start("--port", "30001")
    second = servers.start("--port=30002")
    keyed = record(servers).facts["servers"]
    assert {key: s["volatile"]["pid"] for key, s in keyed.items()} == {
        "sglang.launch_server:30001": first.pid, "sglang.launch_server:30002": second.pid}


def test_two_servers_keep_their_keys_across_a_restart_in_the_other_order(servers: Servers) -> None:
    """Same entry point, no port: keyed by the model each serves, not by pid order (a
    restart that starts them the other way round used to swap their keys and compare each
    with the other's baseline)."""
    servers.start(model="-a", env={"SGLANG_TAG": "a"})
    servers.start(model="-b", env={"SGLANG_TAG": "b"})
    before = {key: s["env"]["SGLANG_TAG"] for key, s in record(servers).facts["servers"].items()}
    servers.stop()
    servers.procs.clear()
    servers.start(model="-b", env={"SGLANG_TAG": "b"})
    servers.start(model="-a", env={"SGLANG_TAG": "a"})
    after = {key: s["env"]["SGLANG_TAG"] for key, s in record(servers).facts["servers"].items()}
    assert before == after == {f"sglang.launch_server:{servers.model}-a": "a", f"sglang.launch_server:{servers.model}-b": "b"}


def test_keys_fall_back_to_pid_order_without_distinct_ports() -> None:
    def server(entry: str | None, port: str | None = None) -> dict[str, Any]:
        return {"entry": entry, "pattern": "train.py", "args": {"port": port} if port else {}}

    servers = [server("vllm serve", "8000"), server("vllm serve", "8000"), server("vllm serve"),
               server("sglang.launch_server", "30000"), server(None)]
    assert server_keys(servers) == ["vllm serve#1", "vllm serve#2", "vllm serve#3", "sglang.launch_server", "train.py"]


def test_no_server_running_is_a_fact(servers: Servers) -> None:
    facts = record(servers).facts
    assert facts["servers"] == {} and facts["truncated"] is False


def test_at_most_max_processes_are_described(servers: Servers) -> None:
    for port in ("1", "2", "3"):
        servers.start("--port", port)
    facts = record(servers, probe=ProcessesProbe(max_processes=2)).facts
    assert len(facts["servers"]) == 2 and facts["truncated"] is True


def test_process_exiting_mid_walk_or_unreadable_is_skipped_quietly(servers: Servers, monkeypatch: pytest.MonkeyPatch) -> None:
    collector = load_collector()
    request = walk_request(servers)
    proc = servers.start("--port", "1")
    found = collector.matching(request, set())
    assert list(found) == [proc.pid]
    red = collector.Redactor(request)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()  # reaped: /proc/PID is gone between the cmdline read and the rest
    assert collector.describe(proc.pid, servers.pattern, found[proc.pid][0], request, 0.0, red) is None
    # A process whose environ and maps cannot be read (another user's) keeps its other facts.
    alive = servers.start("--port", "2")
    real = collector.read_bounded
    monkeypatch.setattr(collector, "read_bounded", lambda path, limit: None if path.endswith(("environ", "maps")) else real(path, limit))
    entry = collector.describe(alive.pid, servers.pattern, ["python"], request, 0.0, red)
    assert entry["env"] is None and entry["libraries"] is None and entry["ppid"] == os.getpid()


def test_servers_coming_and_going_never_fail_the_probe(servers: Servers) -> None:
    for port in range(6):
        servers.start("--port", str(port))
    pids = [str(p.pid) for p in servers.procs]
    code = "import os, signal, sys, time\nfor pid in sys.argv[1:]:\n    time.sleep(0.1); os.killpg(int(pid), signal.SIGKILL)"
    killer = subprocess.Popen([sys.executable, "-c", code, *pids])
    try:
        runs = 0
        while killer.poll() is None or runs < 3:
            assert len(record(servers).facts["servers"]) <= 6
            runs += 1
    finally:
        killer.wait()


def test_mapped_gpu_libraries_are_listed(servers: Servers) -> None:
    lib = servers.root / "site-packages" / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    lib.parent.mkdir(parents=True)
    shutil.copy(_ctypes.__file__, lib)  # any loadable shared object will do
    servers.start(env={"STANDIN_LOAD": str(lib)})
    assert record(servers).facts["servers"]["sglang.launch_server"]["libraries"] == [str(lib)]


def write_profile(home: Path, text: str) -> None:
    home.mkdir()
    (home / ".profile").write_text(text)
    (home / ".zprofile").write_text(". ~/.profile\n")  # for a user whose login shell is zsh


def test_login_env_picks_up_the_profile_and_not_the_callers_environment(servers: Servers, monkeypatch: pytest.MonkeyPatch) -> None:
    home = servers.root / "home"
    write_profile(
        home,
        f'echo "welcome {{"\nexport NCCL_IB_HCA=mlx5\nexport NCCL_TOKEN={HF}\nexport UNRELATED=1\n'
        "export NCCL_SOCKET_IFNAME='eth0=a\nb'\n",  # '=' and a newline in a value survive
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("NCCL_FROM_CALLER", "1")
    facts = record(servers).facts
    assert facts["login_env_error"] is None and facts["login_shell"]
    login_env = facts["login_env"]
    assert login_env["NCCL_IB_HCA"] == "mlx5" and login_env["NCCL_TOKEN"] == "<redacted>"
    assert login_env["NCCL_SOCKET_IFNAME"] == "eth0=a\nb"
    # /etc/profile.d may add CUDA_* on a GPU host; the caller's own variables never appear.
    assert "NCCL_FROM_CALLER" not in login_env and "UNRELATED" not in login_env and HF not in str(facts)


def test_login_env_webhook_keeps_its_host(servers: Servers, monkeypatch: pytest.MonkeyPatch) -> None:
    home = servers.root / "home"
    write_profile(home, "export NCCL_WEBHOOK=https://hooks.slack.com/services/T/B/SEKRIT\n")
    monkeypatch.setenv("HOME", str(home))
    facts = record(servers).facts
    assert facts["login_env"]["NCCL_WEBHOOK"] == "https://hooks.slack.com/<redacted>"
    assert "SEKRIT" not in json.dumps(facts)


def test_hung_profile_is_recorded_and_bounded(servers: Servers, monkeypatch: pytest.MonkeyPatch) -> None:
    home = servers.root / "home"
    write_profile(home, "sleep 60\n")
    monkeypatch.setenv("HOME", str(home))
    servers.start("--port", "1")
    result = record(servers, timeout=3.0)
    assert result.duration_s < 6
    assert result.facts["login_env"] is None and "timed out" in result.facts["login_env_error"]
    assert list(result.facts["servers"]) == ["sglang.launch_server"]


@pytest.mark.parametrize("python", old_pythons() or [pytest.param(None, marks=pytest.mark.skip("no python3.8/3.9 here"))])
def test_collectors_run_on_old_pythons(servers: Servers, python: str) -> None:
    servers.start("--port", "1", env={"NCCL_DEBUG": "WARN"})
    settings = WatchSettings(python=[python], processes=[servers.pattern])
    # A generous deadline: the login shell (bash -l with pyenv here) is slow on a busy machine.
    result = run_probe(ProcessesProbe(), ProbeContext(transport=LocalTransport(), watch=settings, timeout=30))
    assert result.status is ProbeStatus.ok, result.error
    assert result.facts["servers"]["sglang.launch_server"]["env"] == {"NCCL_DEBUG": "WARN"}
    assert result.facts["login_env_error"] is None


class _Recording(LocalTransport):
    """The real local transport, keeping the scripts it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[str] = []

    def run(self, script: str, **kwargs: Any) -> Any:
        self.scripts.append(script)
        return super().run(script, **kwargs)


def test_no_patterns_means_no_walk_of_proc_but_the_login_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    write_profile(home, "export NCCL_IB_HCA=mlx5\n")
    monkeypatch.setenv("HOME", str(home))
    transport = _Recording()
    ctx = ProbeContext(transport=transport, watch=WatchSettings(processes=[]), timeout=30)
    result = run_probe(ProcessesProbe(), ctx)
    assert result.status is ProbeStatus.ok, result.error
    assert result.facts["servers"] == {} and result.facts["truncated"] is False
    assert result.facts["login_env"]["NCCL_IB_HCA"] == "mlx5"
    walker = load_script("processes_collect.py").splitlines()[1]
    assert len(transport.scripts) == 1 and walker not in transport.scripts[0]


def test_a_hung_login_profile_is_stopped_politely_and_leaves_no_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pyenv's rehash takes a lock file and removes it in an EXIT trap; a login shell
    # SIGKILLed at its deadline left the lock, and every later login waited 60 s for it.
    home = tmp_path / "home"
    lock = home / ".tool.lock"
    write_profile(home, f'trap \'rm -f "{lock}"\' EXIT\necho > "{lock}"\nsleep 30\n')
    monkeypatch.setenv("HOME", str(home))
    ctx = ProbeContext(transport=LocalTransport(), watch=WatchSettings(processes=[]), timeout=2.5)
    facts = ProcessesProbe().collect(ctx)
    assert facts["login_env"] is None and "timed out" in (facts["login_env_error"] or "")
    assert not lock.exists(), "the profile's EXIT trap never ran: it was killed, not terminated"


def test_a_collector_stopped_from_outside_stops_its_login_shell_too(tmp_path: Path) -> None:
    # The login shell has a session of its own; when the command around the collector is
    # stopped first (a --deadline left it less than the shell's own budget), the TERM the
    # collector gets must reach the shell's profile too.
    marker = sleep_marker()
    home = tmp_path / "home"
    write_profile(home, f"{marker}\n")
    collector = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", load_script("login_env_collect.py")],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env={**os.environ, "HOME": str(home)},
    )
    try:
        assert collector.stdin is not None
        collector.stdin.write(json.dumps({"timeout": 60, "env": [], "always_env": []}).encode())
        collector.stdin.close()
        deadline = time.monotonic() + 20
        while not pids_matching(marker):
            assert time.monotonic() < deadline and collector.poll() is None, "the profile never ran"
            time.sleep(0.1)
        collector.terminate()
        collector.wait(timeout=10)
        assert wait_gone(marker, within=3.0) == [], "the login shell outlived its stopped collector"
    finally:
        collector.kill()
        kill_all(pids_matching(marker))
