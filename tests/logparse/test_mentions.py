"""What each error names, for the ranking to match against the changes."""

from __future__ import annotations

from driftwatch.logparse import detect_and_parse, parse_vllm_log
from driftwatch.logparse.mentions import MAX_ITEMS, mentions, module_of

# vLLM colours each process's prefix (vllm/utils _add_prefix: "\033[1;36m(name pid=N)\033[0;0m ");
# the record is vllm-project/vllm#25943's API server, at ERROR.
CYAN, RESET = "\033[1;36m", "\033[0;0m"


def test_an_ansi_coloured_api_server_prefix_is_read_as_the_record_it_is() -> None:
    text = (f"{CYAN}(APIServer pid=20){RESET} INFO 09-30 02:56:46 [launcher.py:44] Route: /v1/rerank, Methods: POST\n"
            f"{CYAN}(APIServer pid=20){RESET} ERROR 09-30 02:57:01 [async_llm.py:538] AsyncLLM output_handler failed.\n"
            f"{CYAN}(EngineCore_DP0 pid=21){RESET} ERROR 09-30 02:57:01 [core.py:868] "
            "TimeoutError: RPC call to execute_model timed out.\n")
    facts = parse_vllm_log(text)
    assert sorted((e["kind"], e["detail"], e["ranks"]) for e in facts["errors"]) == [
        ("other", "error_record", []), ("other", "exception", ["DP0"])]
    assert "\x1b" not in "".join(e["message"] for e in facts["errors"])


def test_env_vars_and_cuda_error_names_are_told_apart() -> None:
    found = mentions("RuntimeError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
                     "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5 "
                     "ncclUnhandledCudaError: Call to CUDA function failed. Last error: Cuda failure "
                     "'CUDA_ERROR_ILLEGAL_ADDRESS' cudaErrorIllegalAddress", [])
    assert found["env"] == ["NCCL_DEBUG"]
    assert found["errors"] == ["RuntimeError", "ncclUnhandledCudaError", "CUDA_ERROR_ILLEGAL_ADDRESS",
                               "cudaErrorIllegalAddress"]
    assert found["paths"] == ["/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"]


def test_a_missing_module_and_where_frames_sit() -> None:
    assert mentions("ModuleNotFoundError: No module named 'sgl_kernel.flash_attn'", [])["modules"] == [
        "sgl_kernel.flash_attn"]
    assert module_of("/usr/lib/python3/dist-packages/vllm/v1/engine/core.py") == "vllm.v1.engine.core"
    assert module_of("/venv/lib/python3.12/site-packages/torch/_C/__init__.py") == "torch._C"
    assert module_of("/root/sglang/python/sglang/srt/server_args.py") is None  # a checkout, not an install
    assert module_of("/tmp/torchinductor_root/ar/carf.py") is None


def test_frames_of_one_rank_are_not_another_ranks() -> None:
    text = ("(VllmWorker rank=0 pid=7) ERROR 03-12 03:19:03 [multiproc_executor.py:470]   File "
            '"/venv/lib/python3.12/site-packages/vllm/worker/a.py", line 1, in f\n'
            "(VllmWorker rank=1 pid=8) ERROR 03-12 03:19:03 [multiproc_executor.py:470]   File "
            '"/venv/lib/python3.12/site-packages/flashinfer/b.py", line 2, in g\n'
            "(VllmWorker rank=0 pid=7) ERROR 03-12 03:19:03 [multiproc_executor.py:470] ValueError: boom\n")
    [error] = detect_and_parse(text)["errors"]
    assert error["mentions"]["modules"] == ["vllm.worker.a"]


def test_hostile_lines_stay_bounded() -> None:
    line = "ImportError: " + " ".join(f"libx{i}.so.1 undefined symbol: s{i}, NCCL_X{i}" for i in range(500))
    found = mentions(line * 10, [f"/s/site-packages/m{i}.py" for i in range(100)])
    assert all(len(values) <= MAX_ITEMS for values in found.values())
    assert all(len(value) <= 200 for values in found.values() for value in values)
