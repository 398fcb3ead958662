"""Which lines of a server log are errors, and of which kind.

Every error gets one of six kinds, the question an on-call engineer asks first:

* ``oom``: an allocation failed (CUDA/HIP/NPU out of memory, ``torch.OutOfMemoryError``,
  ``torch.AcceleratorError: CUDA error: out of memory``).
* ``kv-budget``: the memory budget left no room (or too little) for the KV cache: SGLang's
  "Not enough memory … --mem-fraction-static" and 2026 "Loaded weights leave no GPU memory
  for the KV cache", vLLM's "No available memory for the cache blocks", "max seq len (N) is
  larger than the maximum number of tokens that can be stored in KV cache (M)", a negative
  "Available KV cache memory", "# GPU blocks: 0", free memory below the requested
  utilisation, unbalanced free memory across ranks, a token pool that ran out.
* ``nccl``: NCCL/RCCL/HCCL errors and collective timeouts, and NCCL's own ``WARN`` lines
  (``NCCL WARN Error: failed to extend /dev/shm/nccl-… to N bytes``, ``Call to posix_fallocate
  failed``: the container's /dev/shm is too small for its shared-memory transport).
* ``custom-allreduce``: the custom all-reduce kernel's peer-to-peer setup failed ("peer access
  is not supported between these two devices").
* ``engine-start``: the engine process says it failed to start ("EngineCore failed to
  start.", "Engine core initialization failed", an engine or scheduler exception before the
  server was ready, a child process that died during start-up).
* ``other``: every other exception line or error record, among them Triton's
  ``OutOfResources: out of resource: shared memory`` (a kernel configuration that asks for more
  shared memory per block than this GPU has) and Ray's ``Unhandled error (suppress with
  'RAY_IGNORE_UNHANDLED_ERRORS=1')``: a task's exception nobody retrieved.

``detail`` keeps the finer name (``not_enough_memory``, ``no_kv_memory``, ``cuda_oom``, …) so
that two different KV-budget failures stay apart. Rules are tried in order; the first wins.
"""

from __future__ import annotations

import re
from typing import NamedTuple

KINDS = ("oom", "kv-budget", "nccl", "custom-allreduce", "engine-start", "other")
# Where a root cause is more likely: the budget or the allocator before "it failed to start".
# Errors are listed in this order (stable within a kind), so the first one is the likely cause.
CAUSE_ORDER = ("kv-budget", "oom", "custom-allreduce", "nccl", "other", "engine-start")


def cause_rank(kind: object) -> int:
    return CAUSE_ORDER.index(kind) if kind in CAUSE_ORDER else len(CAUSE_ORDER)


class Rule(NamedTuple):
    kind: str
    detail: str
    words: tuple[str, ...]  # plain substrings, one of which must be in the line (cheap pre-check)
    pattern: re.Pattern[str]


RULES: list[Rule] = [
    Rule("custom-allreduce", "peer_access", ("peer access", "custom_all_reduce.cu"),
         re.compile(r"peer access is not supported|custom_all_reduce\.cuh?:\d+")),
    # "enought" is the v0.1.x spelling; later eras append "Current value: ...=0.85".
    Rule("kv-budget", "not_enough_memory", ("--mem-fraction-static",),
         re.compile(r"Not enought? memory\.?\s*Please (?:try to )?increase --mem-fraction-static")),
    Rule("kv-budget", "no_kv_memory", ("leave no GPU memory", "No available memory"),
         re.compile(r"Loaded weights leave no GPU memory for the KV cache|No available memory for the cache blocks")),
    Rule("kv-budget", "kv_cache_too_small", ("KV cache", "KVCache", "max seq len"), re.compile(
        r"KV cache is needed, which is larger than the available KV cache memory"
        r"|larger than the maximum number of tokens that can be stored in KV cache"
        r"|To serve at least one request with the models?'s max seq len"
        r"|[Ii]nsufficient memory for KV cache|InsufficientKVCacheMemoryError")),
    Rule("kv-budget", "startup_memory_below_utilization", ("Free memory on device",),
         re.compile(r"Free memory on device .{0,80}less than desired GPU memory utilization")),
    Rule("kv-budget", "tp_memory_imbalance", ("unbalanced",), re.compile(r"The memory capacity is unbalanced")),
    Rule("kv-budget", "token_pool_exhausted", ("out of memory",), re.compile(
        r"alloc_req_slots runs out of memory|Prefill out of memory|Decode out of memory"
        r"|Out of memory\. Try to lower your batch size|KV cache pool is full")),
    Rule("oom", "cuda_oom", ("out of memory", "OutOfMemory", "ErrorMemoryAllocation", "ALLOC_FAILED", "MEMORY_ALLOCATION"),
         re.compile(r"(?:CUDA|HIP|NPU|XPU|MPS|cuda|hip|npu) (?:error: )?out of memory|OutOfMemoryError|hipErrorOutOfMemory"
                    r"|cudaErrorMemoryAllocation|CUBLAS_STATUS_ALLOC_FAILED|ACL_ERROR_RT_MEMORY_ALLOCATION")),
    Rule("nccl", "nccl_shm", ("NCCL WARN",), re.compile(
        r"NCCL WARN (?:Error: failed to extend /dev/shm/|Call to posix_fallocate failed"
        r"|Error while (?:creating|attaching to) shared memory segment)")),
    Rule("nccl", "nccl_warn", ("NCCL WARN",), re.compile(r"\bNCCL WARN \S")),
    Rule("other", "triton_out_of_resources", ("OutOfResources", "out of resource:"),
         re.compile(r"\bOutOfResources\b|\bout of resource: shared memory")),
    Rule("other", "ray_unhandled_error", ("nhandled error",),
         re.compile(r"Unhandled error \(suppress with '?RAY_IGNORE_UNHANDLED_ERRORS=1'?\)|Possible unhandled error from worker")),
    Rule("nccl", "nccl_timeout", ("Watchdog", "timed out", "Timeout"), re.compile(
        r"Watchdog caught collective operation timeout|ProcessGroupNCCL.{0,80}?[Tt]ime(?:d )?out")),
    Rule("nccl", "nccl_error", ("nccl", "NCCL", "DistBackendError", "HCCL", "RCCL", "hccl"), re.compile(
        r"\bnccl(?:Internal|UnhandledCuda|System|Remote|InvalidUsage|InvalidArgument)Error\b|\bncclInvalid(?:Argument|Usage)\b"
        r"|NCCL error|DistBackendError|[HR]CCL error|HCCL function error|hccl\w*Error"
        r"|Failed to (?:load|import) NCCL library")),
    Rule("engine-start", "engine_failed_to_start", ("failed to start", "initialization failed", "Initialization failed"),
         re.compile(r"EngineCore failed to start|Engine core initialization failed|[Ii]nitialization failed"
                    r"|WorkerProc failed to start|failed to start the engine")),
    Rule("engine-start", "child_failed", ("sigquit", "died unexpectedly", "Child process"), re.compile(
        r"Received sigquit from a child process|Worker proc \S+ died unexpectedly|Child process unexpectedly failed")),
]  # fmt: skip

# "… hit an exception" heads a traceback: before the server was ready it is why start-up
# failed; after, a crash of a running server.
# Any process that names itself ("DetokenizerManager", SGLang's "Scheduler", "Worker 3"), and
# V1's EngineCore dying after start-up.
_HIT = re.compile(r"\b[A-Z][A-Za-z_]{1,60}(?: \d{1,6})? hit an exception|Exception in (?:ModelTpServer|run_worker_process)"
                  r"|Exception in worker \S+ while processing method|EngineCore encountered a fatal error")
# A traceback's last line: "ValueError: …", "torch.OutOfMemoryError: …", a bare "KeyboardInterrupt".
_EXCEPTION = re.compile(r"(?:[A-Za-z_]\w{0,80}\.){0,6}[A-Z]\w{0,80}?(?:Error|Exception|Failed|Interrupt)(?::\s|:?$)")
# Error records without an exception class: uvicorn's "ERROR:    Exception in ASGI application",
# Ascend CANN's "[ERROR] 2025-08-14-13:42:44 (PID:5309, …) ERR99999 …".
_ERROR_RECORD = re.compile(r"ERROR: |\[ERROR\] ")
_EXCEPTION_WORDS = ("Error", "Exception", "Failed", "Interrupt")
_QUIET_LEVELS = ("DEBUG", "INFO", "WARNING")
# Source lines a traceback quotes ('raise ValueError("No available memory …")') are not errors.
_SOURCE_LINES = ("raise ", "logger.", "File \"", '"', "'", "f\"", "assert ", "return ", "warnings.warn")
# A Python warning ("/…/resource_tracker.py:123: UserWarning: … died unexpectedly") is not an error.
_WARNING = re.compile(r"\S{0,300}:\d{1,6}: \w{0,60}Warning: ")
_WORDS = re.compile("|".join(re.escape(word) for word in sorted({w for rule in RULES for w in rule.words})))


def classify(message: str, started: bool, level: str = "") -> tuple[str, str] | None:
    """(kind, detail) when ``message`` (one line, prefixes removed) reports an error.

    ``level`` is the record's level where the prefix said it: an INFO or WARNING record
    that mentions a failure ("Custom allreduce is disabled because … P2P test failed") is
    not one. ``started``: the engine had finished starting, so an exception is no longer a
    start-up failure.
    """
    message = message.strip()
    if level in _QUIET_LEVELS or message.startswith(_SOURCE_LINES):
        return None
    if "Warning: " in message and _WARNING.match(message):
        return None
    if _WORDS.search(message):
        for rule in RULES:
            if any(word in message for word in rule.words) and rule.pattern.search(message):
                return rule.kind, rule.detail
    if ("hit an exception" in message or message.startswith("Exception in ") or "fatal error" in message) \
            and _HIT.search(message):
        return ("other", "runtime_exception") if started else ("engine-start", "startup_exception")
    head = message[:400]  # cheap tests first: most lines of a log name no exception at all
    if any(word in head for word in _EXCEPTION_WORDS) and _EXCEPTION.match(message):
        return ("oom", "cuda_oom") if "out of memory" in message else ("other", "exception")
    if "ERROR" in head and _ERROR_RECORD.match(message):
        return "other", "error_record"
    return None
