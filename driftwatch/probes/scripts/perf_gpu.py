# driftwatch perf, the GPU section's driver. Runs ON THE TARGET under any python3 >= 3.6,
# stdlib only (-I -S), only after the preflight found every GPU idle. It never imports
# torch itself: it finds the configured interpreter that has torch, asks it what the stack
# is (perf_gpu_worker.py context), then starts one worker per GPU under it, pinned to the
# GPU's NUMA node, and samples clocks, power, throttle reasons and the PCIe link with
# nvidia-smi meanwhile. It changes no setting of any GPU.
#
# Request (JSON on stdin): {"seconds": bound, "pythons": [...], "worker": code,
#   "gpus": [{"uuid", "index", "bus_id"}], "sample_ms": ms, "sample_fields": [[fields], ...],
#   "run": the workers' request (gemm, hbm, link, allreduce, batches), "floors": {uuid: {...}},
#   "all_reduce_floor": value}
# Output: JSON lines, each as soon as it is known, so that what finished survives a kill at
# the deadline: {"kind": "python"|"context"|"placement"|"figure"|"all_reduce"|"sample"|
# "section"|"worker"|"done", ...}; figures carry "gpu" (the UUID).
#
# Bounds: everything this starts is a child in its own process group (never its own
# session: the agent that runs this stops the whole session at its deadline) and is killed
# here at ``seconds``; a worker that hangs (an NCCL deadlock, a GPU off the bus) is killed
# with the others, and what it had not reported is said to be cut short.
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

FIND_TORCH = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('torch') else 3)"
MAX_SAMPLES = 20000
_lock = threading.Lock()


def emit(message):
    with _lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


class Deadline:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self, margin=0.0):
        return max(self.end - margin - time.monotonic(), 0.0)


def new_group():
    os.setpgid(0, 0)


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def run_bounded(argv, seconds, stdin=None, env=None):
    """(rc, stdout, stderr) of a child killed with its group after ``seconds``; rc None: killed."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=new_group, env=env)
    try:
        out, err = proc.communicate(stdin, timeout=max(seconds, 0.1))
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        kill_group(proc)
        try:  # a grandchild in a group of its own may hold the pipes: do not wait on it
            out, err = proc.communicate(timeout=2.0)
        except subprocess.TimeoutExpired:
            proc.wait()
            out, err = b"", b""
        return None, out, err


def tail(data, lines=3):
    text = data.decode("utf-8", "replace").strip().splitlines()
    return " / ".join(line.strip() for line in text[-lines:])


def resolve(python):
    if os.sep in python:
        return python if os.access(python, os.X_OK) else None
    return shutil.which(python)


def find_torch(pythons, deadline):
    """The first configured interpreter that has torch, and what each other one lacked."""
    tried = []
    for python in pythons:
        path = resolve(os.path.expanduser(python))
        if path is None:
            tried.append("%s (not found)" % python)
            continue
        rc, _, err = run_bounded([path, "-I", "-c", FIND_TORCH], min(10.0, deadline.left(1.0)))
        if rc == 0:
            return path, tried
        tried.append("%s (%s)" % (python, "no torch" if rc == 3 else "timed out" if rc is None else tail(err, 1)))
    return None, tried


def sysfs_device(bus_id):
    """nvidia-smi's 00000000:83:00.0 is /sys/bus/pci/devices/0000:83:00.0."""
    domain, _, rest = bus_id.lower().partition(":")
    return "/sys/bus/pci/devices/%s:%s" % (domain[-4:].rjust(4, "0"), rest)


def read(path):
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def parse_cpulist(text):
    cpus = set()
    for part in (text or "").split(","):
        if "-" in part:
            low, high = part.split("-", 1)
            cpus.update(range(int(low), int(high) + 1))
        elif part.strip():
            cpus.add(int(part))
    return cpus


def placement(gpu):
    """The GPU's NUMA node and its CPUs this process may use (None: leave the worker be)."""
    device = sysfs_device(str(gpu.get("bus_id") or ""))
    node, cpulist = read(device + "/numa_node"), read(device + "/local_cpulist")
    try:
        cpus = parse_cpulist(cpulist) & os.sched_getaffinity(0)
    except (ValueError, AttributeError, OSError):
        cpus = set()
    return (int(node) if node and node.lstrip("-").isdigit() else None), cpus


class Worker:
    """One GPU's worker process, its output relayed line by line as it comes."""

    def __init__(self, python, code, gpu, request):
        self.gpu = gpu
        self.uuid = gpu["uuid"]
        self.ready = threading.Event()
        self.reported = set()
        self.stderr = b""
        node, cpus = placement(gpu)
        emit({"kind": "placement", "gpu": self.uuid, "numa_node": node, "cpus": len(cpus) or None})

        def start():
            os.setpgid(0, 0)
            if cpus:
                os.sched_setaffinity(0, cpus)

        env = dict(os.environ, CUDA_VISIBLE_DEVICES=self.uuid, CUDA_DEVICE_ORDER="PCI_BUS_ID")
        self.proc = subprocess.Popen([python, "-I", "-c", code, "run"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=start, env=env)
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        self.readers = [threading.Thread(target=self._out, daemon=True), threading.Thread(target=self._err, daemon=True)]
        for reader in self.readers:
            reader.start()

    def _out(self):
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue  # a library's print: not ours
            if not isinstance(message, dict):
                continue
            if message.get("kind") == "ready":
                self.ready.set()
                continue
            message["gpu"] = self.uuid
            self.reported.add(message.get("name") or message.get("kind"))
            emit(message)
        self.ready.set()  # it exited: nobody waits for it to be ready

    def _err(self):
        for chunk in iter(lambda: self.proc.stderr.read(4096), b""):
            self.stderr = (self.stderr + chunk)[-4096:]

    def go(self, word):
        try:
            self.proc.stdin.write((word + "\n").encode())
            self.proc.stdin.flush()
        except (OSError, ValueError):
            pass  # it is gone already


class Sampler:
    """nvidia-smi's own loop (-lms) over the run, each row stamped as it arrives, in a
    thread of its own (a slow nvidia-smi never holds the workers back). Older drivers call
    the throttle reasons clocks_throttle_reasons: each field list in turn, until one is not
    refused."""

    def __init__(self, field_lists, period_ms):
        self.proc = None
        self.count = 0
        self.stopped = False
        self._lock = threading.Lock()
        if shutil.which("nvidia-smi") and field_lists:
            threading.Thread(target=self._run, args=(field_lists, period_ms), daemon=True).start()

    def _run(self, field_lists, period_ms):
        for fields in field_lists:
            argv = ["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits",
                    "-lms", str(period_ms)]
            with self._lock:
                if self.stopped:
                    return
                self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                             preexec_fn=new_group)
            first = self.proc.stdout.readline()
            if first and "is not a valid field" not in first.decode("utf-8", "replace"):
                emit({"kind": "sample_fields", "fields": fields})
                self._row(first)
                for line in self.proc.stdout:
                    self._row(line)
                return
            kill_group(self.proc)
            self.proc.wait()

    def _row(self, line):
        if self.count < MAX_SAMPLES:
            self.count += 1
            emit({"kind": "sample", "t": round(time.time(), 3), "row": line.decode("utf-8", "replace").strip()})

    def stop(self):
        with self._lock:
            self.stopped = True
            proc = self.proc
        if proc is not None:
            kill_group(proc)
            proc.wait()


def gpu_section(request, deadline):
    python, tried = find_torch(request.get("pythons") or ["python3"], deadline)
    if python is None:
        emit({"kind": "section", "status": "skipped",
              "reason": "no torch in the configured interpreters (tried: %s)" % ", ".join(tried)})
        return
    emit({"kind": "python", "python": python})
    code = request["worker"]
    rc, out, err = run_bounded([python, "-I", "-c", code, "context"], min(120.0, deadline.left(2.0)))
    lines = [line for line in out.decode("utf-8", "replace").splitlines() if line.startswith("{")]
    if rc is None:
        emit({"kind": "section", "status": "timeout", "reason": "torch did not start in time (import torch, CUDA init)"})
        return
    if rc != 0 or not lines:
        emit({"kind": "section", "status": "error", "reason": "torch failed to start: %s" % (tail(err) or "exit %s" % rc)})
        return
    context = json.loads(lines[-1])
    emit(context)
    if not context.get("cuda_available"):
        emit({"kind": "section", "status": "skipped", "reason": context.get("why_not") or "CUDA not available"})
        return
    gpus = request.get("gpus") or []
    store = tempfile.mkdtemp(prefix="driftwatch-perf-")
    until = time.time() + deadline.left(1.0)
    workers = []
    sampler = Sampler(request.get("sample_fields") or [], int(request.get("sample_ms", 200)))
    try:
        for rank, gpu in enumerate(gpus):
            run = dict(request.get("run") or {}, until=until, rank=rank, world=len(gpus),
                       store=os.path.join(store, "rendezvous"), floors=(request.get("floors") or {}).get(gpu["uuid"], {}))
            if request.get("all_reduce_floor") is not None:  # every rank: they re-measure together
                run["floors"] = dict(run["floors"], all_reduce=request["all_reduce_floor"])
            workers.append(Worker(python, code, gpu, run))
        for worker in workers:  # all at once, or not at all
            worker.ready.wait(deadline.left(1.0))
        word = "go" if all(w.proc.poll() is None for w in workers) else "stop"
        emit({"kind": "go", "word": word, "t": round(time.time(), 3)})
        for worker in workers:
            worker.go(word)
        for worker in workers:
            try:
                worker.proc.wait(deadline.left(0.5))
            except subprocess.TimeoutExpired:
                pass
    finally:
        for worker in workers:
            alive = worker.proc.poll() is None
            kill_group(worker.proc)
            worker.proc.wait()
            for reader in worker.readers:
                reader.join(1.0)
            emit({"kind": "worker", "gpu": worker.uuid, "rc": worker.proc.returncode, "killed": alive,
                  "stderr": tail(worker.stderr), "reported": sorted(r for r in worker.reported if r)})
        sampler.stop()
        shutil.rmtree(store, ignore_errors=True)


def sweep_session():
    """SIGKILL whatever of this session is still alive but this process: a grandchild that
    moved to a process group of its own (a compile worker, a stray helper) outlives the
    group kills above, never this. (The agent stops the whole session at its deadline;
    this covers a run that ends in time.)"""
    me, session = os.getpid(), os.getsid(0)
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return
    for pid in pids:
        if pid == me:
            continue
        try:
            with open("/proc/%d/stat" % pid, "rb") as stat:
                fields = stat.read().decode("utf-8", "replace").rpartition(") ")[2].split()
            if int(fields[3]) == session and fields[0] not in ("Z", "X"):
                os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            continue


def main():
    request = json.loads(sys.stdin.read() or "{}")
    deadline = Deadline(float(request.get("seconds", 50)))
    try:
        gpu_section(request, deadline)
    finally:
        if os.getsid(0) == os.getpid():  # the command's own session: all of it is ours
            sweep_session()
        emit({"kind": "done"})


if __name__ == "__main__":
    main()
