# driftwatch perf, the GPU worker. Runs ON THE TARGET under the interpreter that has the
# host's own torch, as `python -I -c '<perf_math.py + this>' MODE`, started by perf_gpu.py
# (never by itself: the driver bounds it, pins it and kills it). Prints JSON lines.
#
# MODE "context": what the software stack is (no GPU work; CUDA is initialised only to
#   count the devices, after the preflight found every GPU idle):
#   {"kind": "context", "torch", "cuda", "git_version", "cudnn", "nccl", "cublas",
#    "cuda_available", "why_not", "devices": [{"name", "capability", "memory_mib"}]}
# MODE "run": one GPU (CUDA_VISIBLE_DEVICES holds its UUID), request on the first stdin line:
#   {"until": epoch, "rank": r, "world": n, "store": path, "gemm": {...}, "hbm": {...},
#    "link": {...}, "allreduce": {...}, "floors": {figure: value}}
#   prints {"kind": "ready"}, waits for a line "go" (so that every GPU starts at once, and
#   shared power and cooling show as they do under real work), then per figure
#   {"kind": "figure", "name", "t0", "t1", ...summary or {"status", "reason"}}, and rank 0
#   {"kind": "all_reduce", ...} after the all-reduce over every worker.
# Timing is by CUDA events around batches of back-to-back calls, after warm-up calls that
# are not counted; each batch is synchronised so that a hung GPU is noticed at the bound.
import datetime
import json
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # for linters and type checkers only: the prelude perf_math.py is sent first
    from driftwatch.probes.scripts.perf_math import allreduce_gb_s, copy_gb_s, gemm_tflops, quantile, summary, transfer_gb_s


def emit(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def first_line(exc):
    text = str(exc).strip().splitlines()
    return "%s: %s" % (type(exc).__name__, text[0] if text else "")


def nccl_version(torch):
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001  # a CPU build, or NCCL not loadable
        return None
    if isinstance(version, tuple):
        return ".".join(str(part) for part in version)
    if isinstance(version, int):  # older torch: 22703 is 2.27.3
        major, rest = divmod(version, 10000) if version >= 10000 else divmod(version, 1000)
        minor, patch = divmod(rest, 100)
        return "%d.%d.%d" % (major, minor, patch)
    return str(version)


def distribution_version(*names):
    try:
        from importlib import metadata
    except ImportError:
        return None
    for name in names:
        try:
            return metadata.version(name)
        except Exception:  # noqa: BLE001  # not installed (a system CUDA): unknown, not absent
            continue
    return None


def context():
    import torch

    report = {
        "kind": "context", "torch": torch.__version__, "cuda": torch.version.cuda,
        "git_version": getattr(torch.version, "git_version", None), "nccl": nccl_version(torch),
        "cublas": distribution_version("nvidia-cublas-cu12", "nvidia-cublas-cu13", "nvidia-cublas"),
        "cudnn": None, "cuda_available": False, "why_not": None, "devices": [],
    }
    if torch.version.cuda is None:
        report["why_not"] = "torch %s was built without CUDA" % torch.__version__
        emit(report)
        return
    try:
        torch.cuda.init()
        count = torch.cuda.device_count()
    except Exception as exc:  # noqa: BLE001  # no driver, a driver too old for this torch
        report["why_not"] = "CUDA is not usable by torch %s: %s" % (torch.__version__, first_line(exc))
        emit(report)
        return
    report["cuda_available"] = count > 0
    if count == 0:
        report["why_not"] = "torch %s sees no CUDA device" % torch.__version__
    for index in range(count):
        props = torch.cuda.get_device_properties(index)
        report["devices"].append({
            "name": props.name, "capability": "%d.%d" % (props.major, props.minor),
            "memory_mib": props.total_memory // (1 << 20),
        })
    try:
        report["cudnn"] = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001
        pass
    emit(report)


class Timer:
    """Batches of ``step`` timed by CUDA events: seconds per call, one value per batch."""

    def __init__(self, torch, until):
        self.torch, self.until = torch, until

    def seconds(self, step, batches, batch_s, warmup=3):
        torch = self.torch
        for _ in range(warmup):
            step()
        torch.cuda.synchronize()
        begin = time.perf_counter()
        step()
        torch.cuda.synchronize()
        once = max(time.perf_counter() - begin, 1e-6)
        reps = max(1, int(batch_s / once))
        found = []
        while len(found) < batches and time.time() + once * reps < self.until:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                step()
            end.record()
            end.synchronize()
            found.append(start.elapsed_time(end) / 1000.0 / reps)
        return found


def measured(timer, name, make, rate, unit, method, request, floors):
    """One figure of this GPU: measured, and once more when below its floor."""
    spec = request.get("batches", {})
    batches, batch_s = int(spec.get("count", 10)), float(spec.get("seconds", 0.05))
    t0 = time.time()
    try:
        step = make()
        times = timer.seconds(step, batches, batch_s)
        if not times:
            return {"kind": "figure", "name": name, "status": "error", "t0": t0, "t1": time.time(),
                    "reason": "no batch fitted before the bound"}
        figure = summary([rate(t) for t in times], unit, method)
        floor = floors.get(name)
        if isinstance(floor, (int, float)) and figure["value"] < floor:
            again = timer.seconds(step, batches, batch_s)
            figure["remeasured"] = round(quantile([rate(t) for t in again], 0.5), 4) if again else None
    except Exception as exc:  # noqa: BLE001  # a CUDA error, out of memory: this figure's error
        return {"kind": "figure", "name": name, "status": "error", "reason": first_line(exc), "t0": t0, "t1": time.time()}
    finally:
        step = None
        timer.torch.cuda.empty_cache()
    figure.update(kind="figure", name=name, t0=t0, t1=time.time())
    return figure


def fp8_unsupported(torch, device):
    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        return "torch %s has no float8 matmul (torch._scaled_mm)" % torch.__version__
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) < (8, 9):
        return "fp8 needs compute capability 8.9 or newer (this GPU: %d.%d)" % (major, minor)
    return None


def gpu_figures(torch, request, timer):
    device = torch.device("cuda", 0)
    floors = request.get("floors") or {}
    n = int(request.get("gemm", {}).get("n", 8192))
    hbm = int(request.get("hbm", {}).get("bytes", 1 << 30))
    link = int(request.get("link", {}).get("bytes", 256 << 20))

    def bf16():
        a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        out = torch.empty(n, n, device=device, dtype=torch.bfloat16)
        return lambda: torch.matmul(a, b, out=out)

    def fp8():
        a = torch.randn(n, n, device=device, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=device, dtype=torch.bfloat16).to(torch.float8_e4m3fn).t()  # column-major
        one = torch.ones((), device=device, dtype=torch.float32)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    def hbm_copy():
        src = torch.empty(hbm, device=device, dtype=torch.uint8).fill_(1)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)

    def h2d():
        host = torch.empty(link, dtype=torch.uint8, pin_memory=True).fill_(1)
        dev = torch.empty(link, device=device, dtype=torch.uint8)
        return lambda: dev.copy_(host, non_blocking=True)

    def d2h():
        host = torch.empty(link, dtype=torch.uint8, pin_memory=True)
        dev = torch.empty(link, device=device, dtype=torch.uint8).fill_(1)
        return lambda: host.copy_(dev, non_blocking=True)

    gemm_method = "torch.matmul %dx%dx%d, warm-up excluded" % (n, n, n)
    yield measured(timer, "gemm_bf16", bf16, lambda t: gemm_tflops(n, n, n, t), "TFLOP/s",
                   "bf16 " + gemm_method, request, floors)
    why = fp8_unsupported(torch, device)
    if why:
        yield {"kind": "figure", "name": "gemm_fp8", "status": "skipped", "reason": why}
    else:
        yield measured(timer, "gemm_fp8", fp8, lambda t: gemm_tflops(n, n, n, t), "TFLOP/s",
                       "fp8 e4m3 torch._scaled_mm %dx%dx%d, bf16 out, warm-up excluded" % (n, n, n), request, floors)
    yield measured(timer, "hbm_copy", hbm_copy, lambda t: copy_gb_s(hbm, t), "GB/s",
                   "device copy of %d MiB, read + write bytes counted" % (hbm >> 20), request, floors)
    yield measured(timer, "h2d", h2d, lambda t: transfer_gb_s(link, t), "GB/s",
                   "pinned host to device, %d MiB" % (link >> 20), request, floors)
    yield measured(timer, "d2h", d2h, lambda t: transfer_gb_s(link, t), "GB/s",
                   "device to pinned host, %d MiB" % (link >> 20), request, floors)


def all_reduce(torch, request, until):
    """One NCCL all-reduce over every worker (measured again below its floor); rank 0 reports it."""
    import torch.distributed as dist

    spec = request.get("allreduce", {})
    nbytes = int(spec.get("bytes", 1 << 30))
    warmup, iters = int(spec.get("warmup", 5)), int(spec.get("iters", 20))
    rank, world = int(request["rank"]), int(request["world"])
    floor = (request.get("floors") or {}).get("all_reduce")
    t0 = time.time()
    left = max(until - time.time() - 1.0, 1.0)
    dist.init_process_group("nccl", init_method="file://" + request["store"], rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=left))
    try:
        data = torch.ones(nbytes // 4, device=torch.device("cuda", 0), dtype=torch.float32)

        def busbw(count):
            """Per-iteration busbw of ``count`` timed all-reduces; every rank runs the same."""
            found = []
            for _ in range(count):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                dist.all_reduce(data)
                end.record()
                end.synchronize()
                found.append(allreduce_gb_s(nbytes, start.elapsed_time(end) / 1000.0, world))
            return found

        for _ in range(warmup):
            dist.all_reduce(data)
        torch.cuda.synchronize()
        rates = busbw(iters)
        figure = summary([bus for _, bus in rates], "GB/s",
                         "NCCL all-reduce of %d MiB float32 over %d GPUs, one process each, %d warm-up + %d timed; "
                         "busbw = algbw x 2(n-1)/n" % (nbytes >> 20, world, warmup, iters))
        # Every rank decides alike (the same median): the second measurement needs them all.
        if isinstance(floor, (int, float)) and figure["value"] < floor:
            figure["remeasured"] = round(quantile([bus for _, bus in busbw(iters)], 0.5), 4)
        if rank == 0:
            figure.update(kind="all_reduce", algbw=round(quantile([alg for alg, _ in rates], 0.5), 4), ranks=world,
                          bytes=nbytes, t0=t0, t1=time.time(), nccl=nccl_version(torch),
                          env={k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")})
            emit(figure)
    finally:
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001  # after a failed collective: nothing left to tidy
            pass


def run():
    request = json.loads(sys.stdin.readline())
    until = float(request["until"])
    import torch

    torch.cuda.set_device(0)
    torch.cuda.init()
    emit({"kind": "ready"})
    if sys.stdin.readline().strip() != "go":
        return  # the driver gave up on the others: nothing is measured alone
    timer = Timer(torch, until)
    for figure in gpu_figures(torch, request, timer):
        emit(figure)
    if int(request.get("world", 1)) > 1:
        try:
            all_reduce(torch, request, until)
        except Exception as exc:  # noqa: BLE001  # NCCL error, a rank gone: said by rank 0
            if int(request["rank"]) == 0:
                emit({"kind": "all_reduce", "status": "error", "reason": first_line(exc)})


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "context":
        context()
    elif mode == "run":
        run()
    else:
        sys.exit("perf worker: unknown mode %r" % mode)


if __name__ == "__main__":
    main()
