"""The six error kinds, on messages as the servers print them (prefix already removed)."""

from __future__ import annotations

import pytest

from driftwatch.logparse.errors import KINDS, classify

# (message, kind, detail): real lines (see tests/fixtures) and the source strings of each era.
MESSAGES = [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.74 GiB.", "oom", "cuda_oom"),
    ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 12.95 GiB.", "oom", "cuda_oom"),
    ("torch.AcceleratorError: CUDA error: out of memory", "oom", "cuda_oom"),
    ("RuntimeError: CUDA error: out of memory", "oom", "cuda_oom"),
    ("NPU out of memory. Tried to allocate 296.00 MiB", "oom", "cuda_oom"),
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", "kv-budget", "not_enough_memory"),
    ("ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.88.",
     "kv-budget", "no_kv_memory"),
    (("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
     "initializing the engine."), "kv-budget", "no_kv_memory"),
    (("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in "
     "KV cache (21424)."), "kv-budget", "kv_cache_too_small"),
    ("ValueError: To serve at least one request with the model's max seq len (196608),", "kv-budget", "kv_cache_too_small"),
    (("ValueError: Free memory on device (6.92/8.0 GiB) on startup is less than desired GPU memory utilization "
     "(0.9, 7.2 GiB)."), "kv-budget", "startup_memory_below_utilization"),
    ("ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes.",
     "kv-budget", "tp_memory_imbalance"),
    ("RuntimeError: alloc_req_slots runs out of memory. Please set a smaller number for `--max-running-requests`.",
     "kv-budget", "token_pool_exhausted"),
    ("RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)", "nccl", "nccl_error"),
    (("RuntimeError: create:torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:89 HCCL function error: "
     "HcclCommInitRootInfo(numRanks, &rootInfo, rank, &(comm->hcclComm_)), error code is 7"), "nccl", "nccl_error"),
    ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE)", "nccl", "nccl_timeout"),
    ("Failed to load NCCL library from libnccl.so.2 .It is expected if you are not running on NVIDIA/AMD GPUs.",
     "nccl", "nccl_error"),
    ("RuntimeError: CUDART error: peer access is not supported between these two devices",
     "custom-allreduce", "peer_access"),
    (("Failed: Cuda error /home/runner/work/vllm/vllm/csrc/custom_all_reduce.cuh:307 'peer access is not supported "
     "between these two devices'"), "custom-allreduce", "peer_access"),
    ("EngineCore failed to start.", "engine-start", "engine_failed_to_start"),
    ("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
     "engine-start", "engine_failed_to_start"),
    ("Scheduler hit an exception: Traceback (most recent call last):", "engine-start", "startup_exception"),
    ("WorkerProc hit an exception: %s", "engine-start", "startup_exception"),
    # sgl-project/sglang#9329; a worker that names its rank (logger.error("Worker %d hit an exception: %s")).
    ("DetokenizerManager hit an exception: Traceback (most recent call last):", "engine-start", "startup_exception"),
    ("Worker 3 hit an exception: Traceback (most recent call last):", "engine-start", "startup_exception"),
    ("EngineCore encountered a fatal error.", "engine-start", "startup_exception"),  # vllm-project/vllm#17276
    ("misc/shmutils.cc:71 NCCL WARN Error: failed to extend /dev/shm/nccl-fjwOOB to 5967876 bytes", "nccl", "nccl_shm"),
    ("include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device", "nccl", "nccl_shm"),
    ("proxy.cc:1326 NCCL WARN Socket recv failed", "nccl", "nccl_warn"),  # pytorch/ci-infra#490
    (("triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 98304, Hardware limit: "
      "65536. Reducing block sizes or `num_stages` may help."), "other", "triton_out_of_resources"),
    ("ERROR worker.py:399 -- Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): ray::raise_error()",
     "other", "ray_unhandled_error"),
    ("Exception in worker VllmWorkerProcess while processing method load_model.", "engine-start", "startup_exception"),
    ("Received sigquit from a child process. It usually means the child failed.", "engine-start", "child_failed"),
    ("Worker proc VllmWorker-0 died unexpectedly, shutting down executor.", "engine-start", "child_failed"),
    ("KeyError: 'model.layers.55.mlp.experts.w2_weight_scale_inv'", "other", "exception"),
    ("OSError: [Errno 12] Cannot allocate memory", "other", "exception"),
    ("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:", "other", "exception"),
    ("[ERROR] 2025-08-14-13:42:44 (PID:5309, Device:-1, RankID:-1) ERR99999 UNKNOWN applicaiton exception",
     "other", "error_record"),
]  # fmt: skip


@pytest.mark.parametrize(("message", "kind", "detail"), MESSAGES)
def test_kind_of_each_error_line(message: str, kind: str, detail: str) -> None:
    assert classify(message, started=False) == (kind, detail)
    assert kind in KINDS


def test_an_exception_after_start_up_is_not_a_start_up_failure() -> None:
    assert classify("Scheduler hit an exception: Traceback (most recent call last):", started=True) == (
        "other", "runtime_exception")


@pytest.mark.parametrize(
    ("message", "level"),
    [
        # vLLM says so at INFO or WARNING when nothing failed.
        ("Custom allreduce is disabled because your platform lacks GPU P2P capability or P2P test failed.", "WARNING"),
        ("Failed to import NCCL library: Failed to load NCCL library from libnccl.so.2 .", "INFO"),
        # A traceback quotes source lines; a Python warning names a failure.
        ('raise ValueError("No available memory for the cache blocks. "', ""),
        ('"Try increasing `gpu_memory_utilization` when "', ""),
        ("warnings.warn('resource_tracker: process died unexpectedly, '", ""),
        ("/x/resource_tracker.py:123: UserWarning: resource_tracker: process died unexpectedly, relaunching.", ""),
        ("Traceback (most recent call last):", ""),
        ('File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 699, in run_engine_core', ""),
        ("The server is fired up and ready to roll!", ""),
        ("Ignore import error when loading sglang.srt.models.mindspore: No module named 'mindspore'", ""),
    ],
)
def test_what_is_not_an_error(message: str, level: str) -> None:
    assert classify(message, started=False, level=level) is None
