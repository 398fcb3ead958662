# driftwatch perf, the CPU section. Runs ON THE TARGET under the host's configured
# interpreter as `python -I -c` (its own site-packages, so numpy is used where it has one;
# the standard library otherwise), any python3 >= 3.6, after the prelude perf_math.py
# (quantile, summary: the conventions of the figures).
#
# Request (JSON on stdin):
#   {"seconds": budget, "shares": {"gemm": s, "copy": s}, "batches": N, "batch_s": seconds per
#    batch, "copy_mib": buffer size, "floors": {"gemm": value, "copy": value}}
#   Each figure gets its share of seconds (set-up and warm-up included), more when it is
#   measured again: below its floor (the host's history says so) it is, once.
# Report (JSON on stdout):
#   {"backend": "numpy"|"stdlib", "numpy": version, "blas": "name version", "threads": n,
#    "threads_from": why, "cpu_model": str, "cpus": n,
#    "figures": {"gemm": FIGURE, "copy": FIGURE}}
#   FIGURE: {"status": "ok", "value": median, "p10", "p90", "n", "unit", "method",
#            "remeasured": median of the second measurement or null}
#        or {"status": "error"|"skipped", "reason": str}
# Throughputs are per batch; the warm-up call is not counted. A copy of B bytes counts 2B
# bytes moved (read + write), as STREAM's Copy does (perf_math.copy_gb_s).
import json
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # for linters and type checkers only: the prelude perf_math.py is sent first
    from driftwatch.probes.scripts.perf_math import copy_gb_s, gemm_tflops, quantile, summary

MIB = 1 << 20


MIN_BATCHES = 3  # a figure's share may run over for these, within the section's bound


def measure(step, rate, batches, batch_s, share_end, until):
    """Per-batch rates of ``step`` (``rate``: seconds of one step -> its figure) after one
    warm-up call; each batch repeats ``step`` enough times to last about ``batch_s``.
    Batches stop at ``share_end`` (the first MIN_BATCHES at ``until``, the section's bound,
    so that a slow host still gets a figure); one that would end past it is not started."""
    start = time.perf_counter()
    step()  # warm-up: first-touch page faults, BLAS thread start, caches
    once = max(time.perf_counter() - start, 1e-6)
    reps = max(1, int(batch_s / once))
    rates = []
    while len(rates) < batches:
        ends = time.perf_counter() + once * reps
        if ends > (until if len(rates) < MIN_BATCHES else share_end):
            break
        begin = time.perf_counter()
        for _ in range(reps):
            step()
        elapsed = time.perf_counter() - begin
        once = elapsed / reps
        rates.append(rate(once))
    return rates


def numpy_threads(np):
    """How many threads numpy's BLAS runs, and how that is known."""
    try:
        import threadpoolctl  # only where the host has it

        pools = [p for p in threadpoolctl.threadpool_info() if p.get("user_api") == "blas"]
        if pools:
            return int(pools[0]["num_threads"]), "threadpoolctl"
    except Exception:  # noqa: BLE001  # absent or broken: the environment says it
        pass
    for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS", "BLIS_NUM_THREADS"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value), name
    return cpus(), "CPUs this process may run on"


def blas_of(np):
    try:
        deps = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return " ".join(str(deps.get(k)) for k in ("name", "version") if deps.get(k))
    except Exception:  # noqa: BLE001  # older numpy: no dict form
        return None


def cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.lower().startswith(("model name", "cpu model", "processor\t: arm")):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return None


def copy_bytes(wanted_mib):
    """The copy buffer: the size asked for; the two buffers at most an eighth of the memory available."""
    size = wanted_mib * MIB
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    size = min(size, int(line.split()[1]) * 1024 // 16)
    except (OSError, ValueError, IndexError):
        pass
    return max(size // MIB, 16) * MIB


def numpy_steps(np, copy_size, threads):
    """name: (make the step, its rate, unit, method); buffers are made in the figure's share."""
    n = 512

    def gemm():
        a = np.random.default_rng(0).random((n, n), dtype=np.float32)
        b = np.random.default_rng(1).random((n, n), dtype=np.float32)
        out = np.empty((n, n), dtype=np.float32)
        return lambda: np.matmul(a, b, out=out)

    def copy():
        src = np.ones(copy_size // 4, dtype=np.float32)
        dst = np.empty_like(src)
        return lambda: np.copyto(dst, src)

    return {
        "gemm": (gemm, lambda s: gemm_tflops(n, n, n, s) * 1e3, "GFLOP/s", "numpy float32 matmul 512x512x512, %s threads" % threads),
        "copy": (copy, lambda s: copy_gb_s(copy_size, s), "GB/s", "numpy copyto of %d MiB, read + write bytes counted" % (copy_size // MIB)),
    }


def stdlib_steps(copy_size):
    import operator

    n = 48

    def gemm():
        a = [[(i * n + j) % 7 + 0.5 for j in range(n)] for i in range(n)]
        columns = [list(c) for c in zip(*[[(i + 2 * j) % 5 + 0.25 for j in range(n)] for i in range(n)])]  # noqa: B905  (3.6+)
        mul = operator.mul
        return lambda: [[sum(map(mul, row, col)) for col in columns] for row in a]

    def copy():
        view_src, view_dst = memoryview(bytearray(b"\x01") * copy_size), memoryview(bytearray(copy_size))

        def step():
            view_dst[:] = view_src

        return step

    return {
        "gemm": (gemm, lambda s: gemm_tflops(n, n, n, s) * 1e3, "GFLOP/s", "pure-Python float matmul 48x48x48, 1 thread"),
        "copy": (copy, lambda s: copy_gb_s(copy_size, s), "GB/s", "memoryview copy of %d MiB, read + write bytes counted" % (copy_size // MIB)),
    }


def figure_of(make, rate, unit, method, request, floor, until):
    """One figure within its share of the section's seconds (more when measured again)."""
    batches, batch_s = int(request.get("batches", 10)), float(request.get("batch_s", 0.03))
    share = float(request.get("share", 0.6))
    try:
        step = make()
        rates = measure(step, rate, batches, batch_s, min(until, time.perf_counter() + share), until)
        if not rates:
            return {"status": "error", "reason": "no batch fitted in the section's bound"}
        figure = summary(rates, unit, method)
        if isinstance(floor, (int, float)) and figure["value"] < floor:
            again = measure(step, rate, batches, batch_s, min(until, time.perf_counter() + share), until)
            figure["remeasured"] = round(quantile(again, 0.5), 4) if again else None
        return figure
    except MemoryError:
        return {"status": "error", "reason": "out of memory for the buffers"}


def main():
    request = json.loads(sys.stdin.read() or "{}")
    until = time.perf_counter() + float(request.get("seconds", 10))
    floors, shares = request.get("floors") or {}, request.get("shares") or {}
    copy_size = copy_bytes(int(request.get("copy_mib", 64)))
    report = {"cpu_model": cpu_model(), "cpus": cpus(), "python": "%d.%d.%d" % sys.version_info[:3]}
    try:
        import numpy as np
    except ImportError:
        steps = stdlib_steps(copy_size)
        report.update(backend="stdlib", numpy=None, blas=None, threads=1, threads_from="the standard library")
    else:
        threads, why = numpy_threads(np)
        steps = numpy_steps(np, copy_size, threads)
        report.update(backend="numpy", numpy=np.__version__, blas=blas_of(np), threads=threads, threads_from=why)
    report["figures"] = {
        name: figure_of(make, rate, unit, method, dict(request, share=shares.get(name, 0.6)), floors.get(name), until)
        for name, (make, rate, unit, method) in steps.items()
    }
    sys.stdout.write(json.dumps(report))


if __name__ == "__main__":
    main()
