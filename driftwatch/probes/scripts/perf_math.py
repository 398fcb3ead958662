# driftwatch perf: the arithmetic of the figures, a prelude of perf_cpu.py and of the GPU
# worker (perf_gpu_worker.py). Runs ON THE TARGET, any python3 >= 3.6, stdlib only; the
# tests load this file as a module and check every convention here.
#
# Conventions (the figures are only comparable if these never change silently):
#   GEMM      2*m*n*k floating-point operations per product (a multiply and an add each).
#   copy      a copy of B bytes moves 2B bytes (B read + B written), as STREAM's Copy and
#             BabelStream count it; GB/s are 10**9 bytes a second.
#   transfer  a host<->device copy of B bytes moves B bytes (one direction of the link).
#   all-reduce of S bytes over n ranks (nccl-tests, doc/PERFORMANCE.md): algbw = S / t,
#             busbw = algbw * 2(n-1)/n, the bytes each link carries; comparable across n.
GIGA, TERA = 1e9, 1e12


def quantile(values, q):
    """Linear interpolation between closest ranks (numpy's default method)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(rates, unit, method):
    """A figure from per-batch rates: the median, with p10 and p90 as its spread."""
    return {
        "status": "ok", "value": round(quantile(rates, 0.5), 4), "p10": round(quantile(rates, 0.1), 4),
        "p90": round(quantile(rates, 0.9), 4), "n": len(rates), "unit": unit, "method": method,
        "remeasured": None,
    }


def gemm_tflops(m, n, k, seconds, products=1):
    """TFLOP/s of ``products`` (m x k) @ (k x n) products in ``seconds``."""
    return 2.0 * m * n * k * products / seconds / TERA


def copy_gb_s(nbytes, seconds, copies=1):
    """GB/s of ``copies`` copies of ``nbytes`` each: read and written bytes both count."""
    return 2.0 * nbytes * copies / seconds / GIGA


def transfer_gb_s(nbytes, seconds, transfers=1):
    """GB/s of ``transfers`` one-way transfers of ``nbytes`` each (host to device, or back)."""
    return float(nbytes) * transfers / seconds / GIGA


def allreduce_gb_s(nbytes, seconds, ranks):
    """(algbw, busbw) in GB/s of one all-reduce of ``nbytes`` over ``ranks`` ranks taking
    ``seconds``, as nccl-tests computes them."""
    algbw = float(nbytes) / seconds / GIGA
    return algbw, algbw * bus_factor(ranks)


def bus_factor(ranks):
    """2(n-1)/n: what each rank sends and receives in a ring all-reduce, per byte reduced."""
    if ranks < 1:
        raise ValueError("an all-reduce needs at least one rank")
    return 2.0 * (ranks - 1) / ranks
