"""driftwatch against the tools people reach for today: Ansible facts and torch's collect_env.

One loopback OpenSSH sshd (the test fixture, see bench/_loopback.py) plays a GPU host: a
replaying fake ``nvidia-smi`` (a one-GPU H200 capture), a GPU venv (sglang editable from a git
checkout, sgl-kernel, torch dist-info, NCCL, cuDNN, flashinfer), a venv with the real
torch 2.13.0 CPU build, and 50 watched source files. Timed side by side, alternating
(the order rotates every round) so machine noise hits every case alike:

  ssh true        the OpenSSH client running ``true``: connection + session, the floor
  driftwatch      ``python -m driftwatch snapshot testhost`` as a fresh process: interpreter
                  start, imports, connect, every probe (both venvs, git, files, gpu...), store
  ansible         ``ansible testhost -m setup`` (ansible-core, default settings: ControlPersist
                  on, pipelining off), a fresh control socket every run so no run reuses a
                  connection left by the previous one
  ansible+pipe    the same with ANSIBLE_PIPELINING=1 (fewer sessions; Ansible's fast mode)
  collect_env     ``ssh testhost <torch venv>/bin/python -m torch.utils.collect_env``

Then one more untimed run of each with its full output kept, and a table of which
GPU-relevant facts each output really holds (checked against the text, not assumed).

Needs, once (the script installs them when missing, or run the one-liner yourself):

  python3 -m venv bench/.venv-anchors/ansible && bench/.venv-anchors/ansible/bin/pip install ansible-core
  python3 -m venv bench/.venv-anchors/torch && bench/.venv-anchors/torch/bin/pip install torch==2.13.0

Run:  python bench/bench_anchors.py [--repeat N] [--rc-sleep S] [--save DIR]
Prints medians (seconds), ratios against Ansible and collect_env, the collector-side CPU
time of each, and the facts table. Exits 0 whatever the figures are.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from _loopback import ROOT, Sshd, Timing, precompile, start_bench_sshd, timed

from tests.venvs import make_gpu_venv, sglang_checkout

ANCHORS = ROOT / "bench" / ".venv-anchors"
TORCH_VERSION = "2.13.0"


# --------------------------------------------------------------------------- set-up


def ensure_venv(path: Path, requirement: str, probe: str) -> Path:
    """``path``/bin/python with ``requirement`` installed (installed here when missing)."""
    python = path / "bin" / "python"
    if python.exists() and subprocess.run([python, "-c", probe], check=False, capture_output=True).returncode == 0:
        return python
    print(f"installing {requirement} into {path} ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", requirement], check=True)
    return python


class Bench:
    def __init__(self, work: Path, anchors: Path, rc_sleep: float) -> None:
        self.work = work
        self.ansible_python = ensure_venv(anchors / "ansible", "ansible-core", "import ansible")
        self.ansible = self.ansible_python.parent / "ansible"
        self.torch_python = ensure_venv(
            anchors / "torch",
            f"torch=={TORCH_VERSION}",
            f"import torch; assert torch.__version__.startswith('{TORCH_VERSION}')",
        )
        self.server: Sshd = start_bench_sshd(work / "sshd", rc_sleep=rc_sleep)
        self.gpu_python = make_gpu_venv(work / "venv")
        src = work / "src"
        src.mkdir()
        for i in range(50):
            (src / f"module_{i}.py").write_text(f"x = {i}\n" * 200)
        self.config = work / "driftwatch.toml"
        self.config.write_text(
            f'store = "{work / "snapshots"}"\n'
            f'ssh_config = "{self.server.ssh_config_path}"\n'
            f'known_hosts = "{self.server.known_hosts_path}"\n'
            "[watch]\n"
            f'python = ["{self.gpu_python}", "{self.torch_python}"]\n'
            f'repos = ["{sglang_checkout(work / "venv")}"]\n'
            f'files = ["{src}/*.py"]\n'
        )
        self.inventory = work / "inventory.ini"
        self.inventory.write_text(f"testhost ansible_python_interpreter={self.gpu_python}\n")
        (work / "ansible.cfg").write_text("")
        self.control = work / "control"

    @property
    def ssh(self) -> list[str]:
        return ["ssh", "-F", self.server.ssh_config_path]

    # ----------------------------------------------------------------- the cases

    def ssh_true(self) -> Timing:
        return timed([*self.ssh, "testhost", "true"], server=self.server)

    def driftwatch(self, *extra: str) -> Timing:
        argv = [sys.executable, "-m", "driftwatch", "snapshot", "testhost", "--config", str(self.config), *extra]
        return timed(argv, cwd=self.work, ok=(0, 3), server=self.server)

    def ansible_setup(self, pipelining: bool = False) -> Timing:
        shutil.rmtree(self.control, ignore_errors=True)
        self.control.mkdir()
        env = {
            **os.environ,
            "ANSIBLE_CONFIG": str(self.work / "ansible.cfg"),  # no stray ansible.cfg
            "ANSIBLE_SSH_ARGS": f"-F {self.server.ssh_config_path} -o ControlMaster=auto -o ControlPersist=60s",
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(self.control),
            "ANSIBLE_HOST_KEY_CHECKING": "False",
            "ANSIBLE_PIPELINING": "True" if pipelining else "False",
            "ANSIBLE_LOCAL_TEMP": str(self.work / "ansible-local"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_DEPRECATION_WARNINGS": "False",
        }
        try:
            return timed(
                [str(self.ansible), "testhost", "-i", str(self.inventory), "-m", "setup"],
                env=env,
                cwd=self.work,
                server=self.server,
                after_exit=self._close_masters,
            )
        finally:
            self._close_masters()

    def _close_masters(self) -> None:
        """End the ControlPersist master this run left, so the next run connects afresh."""
        for sock in self.control.glob("*"):
            subprocess.run(
                [*self.ssh, "-o", f"ControlPath={sock}", "-O", "exit", "testhost"], check=False, capture_output=True
            )

    def collect_env(self) -> Timing:
        return timed([*self.ssh, "testhost", f"{self.torch_python} -m torch.utils.collect_env"], server=self.server)

    # ------------------------------------------- where driftwatch's own time goes

    def python_start(self) -> Timing:
        return timed([sys.executable, "-c", "pass"])

    def imports(self) -> Timing:
        """Interpreter start + what `snapshot` of an SSH host imports (the CLI, pydantic,
        rich, paramiko); the breakdown subtracts the bare start."""
        return timed([sys.executable, "-c", IMPORTS], cwd=self.work)

    def connect(self) -> Timing:
        """TCP + SSH handshake + auth with driftwatch's transport, timed inside the process."""
        code = CONNECT.format(cfg=self.server.ssh_config_path, kh=self.server.known_hosts_path)
        result = timed([sys.executable, "-c", code], cwd=self.work)
        result.wall = float(result.stdout.decode().split()[-1])
        return result

    def last_probe_phase(self) -> dict[str, float]:
        """duration_s of the newest stored snapshot (all probes, connect excluded) under
        "all", and each probe's own duration."""
        newest = max((self.work / "snapshots" / "testhost").glob("*.json"))
        snap = json.loads(newest.read_text())
        return {"all": float(snap["duration_s"]), **{k: float(v["duration_s"]) for k, v in snap["probes"].items()}}


IMPORTS = "import driftwatch.cli, driftwatch.commands.snapshot, driftwatch.transport.ssh"
CONNECT = """\
import time
from driftwatch.transport.ssh import SshTransport
start = time.perf_counter()
transport = SshTransport.connect("testhost", ssh_config_path={cfg!r}, known_hosts_path={kh!r}, connect_timeout=10)
elapsed = time.perf_counter() - start
transport.close()
print(elapsed)
"""


CASES: dict[str, Callable[[Bench], Timing]] = {
    "ssh true": Bench.ssh_true,
    "driftwatch": Bench.driftwatch,
    "ansible": Bench.ansible_setup,
    "ansible+pipe": lambda b: b.ansible_setup(pipelining=True),
    "collect_env": Bench.collect_env,
}
BREAKDOWN: dict[str, Callable[[Bench], Timing]] = {
    "python start": Bench.python_start,
    "imports": Bench.imports,
    "connect": Bench.connect,
}


# --------------------------------------------------------------------------- facts


def _ansible_facts(text: str) -> dict:
    return json.loads(text.split("=>", 1)[1])["ansible_facts"]


def _collect_env_value(text: str, key: str) -> str:
    match = re.search(rf"^{re.escape(key)}:[ \t]*(.*)$", text, re.MULTILINE)
    value = match.group(1).strip() if match else ""
    return "" if value in ("", "Could not collect", "N/A", "None") else value


def _collect_env_block(text: str, key: str) -> str:
    """The lines after ``key:`` up to the next blank line (multi-line fields)."""
    match = re.search(rf"^{re.escape(key)}:[ \t]*(.*?)(?:\n\n|\Z)", text, re.MULTILINE | re.DOTALL)
    value = match.group(1).strip() if match else ""
    return "" if value in ("", "Could not collect", "N/A", "None") else value


def _dw_probe(snap: dict, name: str) -> dict:
    return (snap["probes"].get(name) or {}).get("facts") or {}


def _dw_dists(snap: dict) -> list[dict]:
    out = []
    for interp in (_dw_probe(snap, "python").get("interpreters") or {}).values():
        out.extend((interp.get("distributions") or {}).values())
    return out


def _dw_gpus(snap: dict) -> list[dict]:
    return list((_dw_probe(snap, "gpu").get("gpus") or {}).values())


def _has(value: object) -> bool:
    return value not in (None, "", [], {}, "Could not collect")


def _deep_has(obj: object, pred: Callable[[str, object], bool]) -> bool:
    if isinstance(obj, dict):
        return any(pred(k, v) or _deep_has(v, pred) for k, v in obj.items())
    if isinstance(obj, list):
        return any(_deep_has(v, pred) for v in obj)
    return False


def _dw_key(snap: dict, *words: str) -> bool:
    """Some probe fact whose key mentions every word has a value."""
    return _deep_has(snap["probes"], lambda k, v: all(w in str(k).lower() for w in words) and _has(v))


# (fact, driftwatch check, ansible check, collect_env check), each over the real output
FACTS: list[tuple[str, Callable[[dict], bool], Callable[[dict], bool], Callable[[str], bool]]] = [
    (
        "NVIDIA driver version",
        lambda s: _has(_dw_probe(s, "gpu").get("driver_version")),
        lambda a: _deep_has(a, lambda k, v: "nvidia" in str(k).lower() or "590.48" in str(v)),
        lambda t: _has(_collect_env_value(t, "Nvidia driver version")),
    ),
    (
        "CUDA version the driver supports",
        lambda s: _has(_dw_probe(s, "gpu").get("cuda_version")),
        lambda a: False,
        lambda t: False,
    ),  # collect_env prints the toolkit's and torch's CUDA, not the driver's
    (
        "GPU model per GPU",
        lambda s: bool(_dw_gpus(s)) and all(_has(g.get("name")) for g in _dw_gpus(s)),
        lambda a: _deep_has(a, lambda k, v: "H200" in str(v)),
        lambda t: "H200" in _collect_env_block(t, "GPU models and configuration"),
    ),
    (
        "GPU UUID / bus id per GPU",
        lambda s: bool(_dw_gpus(s)) and all(_has(g.get("bus_id")) for g in _dw_gpus(s)),
        lambda a: _deep_has(a, lambda k, v: "GPU-" in str(v)),
        lambda t: "GPU-" in _collect_env_block(t, "GPU models and configuration"),
    ),
    (
        "memory total/used/free per GPU",
        lambda s: (
            bool(_dw_gpus(s))
            and all(_has(g.get("memory_used_mib")) or g.get("memory_used_mib") == 0 for g in _dw_gpus(s))
        ),
        lambda a: False,
        lambda t: False,
    ),  # prints no GPU memory at all
    (
        "ECC / MIG / persistence / PCIe link per GPU",
        lambda s: bool(_dw_gpus(s)) and all("mig_mode" in g and "pcie_gen" in g for g in _dw_gpus(s)),
        lambda a: False,
        lambda t: False,
    ),
    (
        "GPU compute processes (pid, memory)",
        lambda s: "processes" in _dw_probe(s, "gpu"),
        lambda a: False,
        lambda t: False,
    ),
    (
        "GPU interconnect topology (topo -m)",
        lambda s: _has(_dw_probe(s, "gpu").get("topology")),
        lambda a: False,
        lambda t: False,
    ),
    (
        "NCCL version installed",
        lambda s: any(d.get("name", "").startswith("nvidia-nccl") for d in _dw_dists(s)) or _dw_key(s, "nccl"),
        lambda a: _deep_has(a, lambda k, v: "nccl" in str(k).lower() or "nccl" in str(v).lower()),
        lambda t: "nccl" in _collect_env_block(t, "Versions of relevant libraries").lower(),
    ),
    (
        "torch version",
        lambda s: any(d.get("name") == "torch" for d in _dw_dists(s)),
        lambda a: False,
        lambda t: _has(_collect_env_value(t, "PyTorch version")),
    ),
    (
        "CUDA torch was built with",
        lambda s: _dw_key(s, "torch") and _deep_has(_dw_probe(s, "cuda"), lambda k, v: "cuda" in str(k).lower()),
        lambda a: False,
        lambda t: bool(re.search(r"^CUDA used to build PyTorch:", t, re.MULTILINE)),
    ),
    (
        "cuDNN version",
        lambda s: any("cudnn" in d.get("name", "") for d in _dw_dists(s)) or _dw_key(s, "cudnn"),
        lambda a: False,
        lambda t: _has(_collect_env_value(t, "cuDNN version")),
    ),
    (
        "CUDA toolkit (nvcc)",
        lambda s: _dw_key(s, "nvcc") or _dw_key(s, "toolkit"),
        lambda a: False,
        lambda t: _has(_collect_env_value(t, "CUDA runtime version")),
    ),
    (
        "every Python package + version",
        lambda s: len(_dw_dists(s)) >= 10,
        lambda a: False,
        lambda t: False,
    ),  # collect_env lists only names matching torch/numpy/nvidia patterns
    (
        "focus packages (torch, triton, nccl, ...) + version",
        lambda s: len(_dw_dists(s)) > 0,
        lambda a: False,
        lambda t: _has(_collect_env_block(t, "Versions of relevant libraries")),
    ),
    (
        "install time + RECORD digest (same-version reinstall)",
        lambda s: any(_has(d.get("record_sha256")) and _has(d.get("installed_at")) for d in _dw_dists(s)),
        lambda a: False,
        lambda t: False,
    ),
    (
        "editable install's source commit (sglang)",
        lambda s: any(_has(d.get("source_commit")) for d in _dw_dists(s)),
        lambda a: False,
        lambda t: False,
    ),
    (
        "git HEAD / dirty files / diff digest",
        lambda s: any(_has(r.get("head")) for r in (_dw_probe(s, "git").get("repos") or {}).values()),
        lambda a: False,
        lambda t: False,
    ),
    (
        "sha256 of watched source files",
        lambda s: len(_dw_probe(s, "files").get("files") or {}) >= 50,
        lambda a: False,
        lambda t: False,
    ),
    (
        "kernel / OS release",
        lambda s: _has(_dw_probe(s, "system").get("kernel")),
        lambda a: _has(a.get("ansible_kernel")),
        lambda t: _has(_collect_env_value(t, "OS")),
    ),
    (
        "boot id (a reboot is a change)",
        lambda s: _dw_key(s, "boot_id"),
        lambda a: _deep_has(a, lambda k, v: "boot_id" in str(k).lower()),
        lambda t: False,
    ),
    (
        "NVIDIA kernel modules loaded",
        lambda s: "nvidia_modules" in json.dumps(_dw_probe(s, "system")) or _dw_key(s, "module"),
        lambda a: False,
        lambda t: False,
    ),
    (
        "memlock ulimit, /dev/shm size",
        lambda s: _dw_key(s, "memlock") and _dw_key(s, "shm"),
        lambda a: _deep_has(a, lambda k, v: "/dev/shm" in str(v)),
        lambda t: False,
    ),
    (
        "NCCL_* / CUDA_* environment of a login shell",
        lambda s: "login_env" in json.dumps(s["probes"]) or _dw_key(s, "env"),
        lambda a: _has(a.get("ansible_env")),
        lambda t: False,
    ),
]


def facts_table(snap: dict, ansible_text: str, collect_env_text: str) -> list[str]:
    facts = _ansible_facts(ansible_text)
    rows = ["| GPU-relevant fact | driftwatch | ansible -m setup | collect_env |", "|---|:-:|:-:|:-:|"]
    totals = [0, 0, 0]
    for name, dw, an, ce in FACTS:
        marks = [dw(snap), an(facts), ce(collect_env_text)]
        totals = [t + int(m) for t, m in zip(totals, marks, strict=True)]
        rows.append(f"| {name} | " + " | ".join("yes" if m else "–" for m in marks) + " |")
    rows.append(f"| **total (of {len(FACTS)})** | **{totals[0]}** | **{totals[1]}** | **{totals[2]}** |")
    return rows


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7, help="rounds (each runs every case once)")
    parser.add_argument(
        "--rc-sleep",
        type=float,
        default=0.0,
        help="seconds the remote user's .bashrc sleeps (a slow conda/pyenv start-up); default 0",
    )
    parser.add_argument("--anchors", type=Path, default=ANCHORS, help="where the ansible and torch venvs live")
    parser.add_argument("--save", type=Path, help="keep each tool's full output in this folder")
    args = parser.parse_args()
    precompile()

    every = {**CASES, **BREAKDOWN}
    runs: dict[str, list[Timing]] = {name: [] for name in every}
    probe_phase: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="dw-anchors-") as tmp:
        bench = Bench(Path(tmp), args.anchors, args.rc_sleep)
        try:
            for fn in every.values():  # warm-up: page cache, .pyc files, ~/.ansible
                fn(bench)
            names = list(every)
            for round_ in range(args.repeat):
                shift = round_ % len(names)
                for name in names[shift:] + names[:shift]:
                    runs[name].append(every[name](bench))
                    if name == "driftwatch":
                        probe_phase.append(bench.last_probe_phase())
                print(
                    f"round {round_ + 1}/{args.repeat}: " + "  ".join(f"{n} {runs[n][-1].wall:.2f}" for n in CASES),
                    file=sys.stderr,
                )
            snap_json = json.loads(bench.driftwatch("--json").stdout)[0]["snapshot"]
            ansible_text = bench.ansible_setup().stdout.decode(errors="replace")
            collect_env_text = bench.collect_env().stdout.decode(errors="replace")
        finally:
            bench.server.stop()

    med = {name: statistics.median(t.wall for t in ts) for name, ts in runs.items()}
    cpu = {name: statistics.median(t.cpu for t in ts) for name, ts in runs.items()}
    rcpu = {name: statistics.median(t.remote_cpu for t in ts) for name, ts in runs.items()}
    print(f"\n{args.repeat} rounds, {os.cpu_count()} cores, remote .bashrc sleeps {args.rc_sleep:g} s")
    print("cpu s: the tool's own processes on the collector side; host cpu s: what the loopback host ran for it")
    print(
        f"{'case':<13} {'median s':>9} {'cpu s':>6} {'host cpu s':>10} {'× ssh true':>11} {'× ansible':>10} {'× collect_env':>14}"
    )
    for name in CASES:
        print(
            f"{name:<13} {med[name]:>9.3f} {cpu[name]:>6.3f} {rcpu[name]:>10.3f} {med[name] / med['ssh true']:>10.2f}× "
            f"{med[name] / med['ansible']:>9.2f}× {med[name] / med['collect_env']:>13.2f}×"
        )
    dw = med["driftwatch"]
    print(
        f"\ndriftwatch / ansible      = {dw / med['ansible']:.2f}× (target ≤ 0.5×)"
        f"   / ansible+pipelining = {dw / med['ansible+pipe']:.2f}×"
    )
    print(f"driftwatch / collect_env  = {dw / med['collect_env']:.2f}× (target ≤ 0.3×)")
    start, imports, connect = med["python start"], med["imports"] - med["python start"], med["connect"]
    probes = statistics.median(p["all"] for p in probe_phase)
    rest = dw - start - imports - connect - probes
    print(f"\nwhere driftwatch's {dw:.3f} s go (medians of separate runs, so approximate):")
    for label, value in (
        ("interpreter start (python -c pass)", start),
        ("imports (CLI, pydantic, rich, paramiko)", imports),
        ("SSH connect (TCP, kex, auth)", connect),
        ("probes, all concurrent (snapshot duration_s)", probes),
        ("the rest: config, store, print, exit", rest),
    ):
        print(f"  {label:<46} {value:6.3f} s  {value / dw:5.1%}")
    each = {k: statistics.median(p.get(k, 0.0) for p in probe_phase) for k in probe_phase[0] if k != "all"}
    print(
        "  each probe (median s): " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(each.items(), key=lambda kv: -kv[1]))
    )
    print()
    print("\n".join(facts_table(snap_json, ansible_text, collect_env_text)))
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
        (args.save / "driftwatch.json").write_text(json.dumps(snap_json, indent=1))
        (args.save / "ansible-setup.txt").write_text(ansible_text)
        (args.save / "collect_env.txt").write_text(collect_env_text)
        print(f"\noutputs kept in {args.save}")


if __name__ == "__main__":
    main()
