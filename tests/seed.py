"""The incident driftwatch was built for, as SGLang logged it.

An 8-GPU DeepSeek-V3 server ran for days with the auto-detected ``mem_fraction_static``
0.88; relaunched with ``--mem-fraction-static 0.55`` it fails on every rank with "Not
enough memory": 21.7 GB free after loading weights leaves a negative KV cache budget.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


class StandinServer:
    """A stand-in ``python -m sglang.launch_server`` (a module of the test venv that only
    sleeps), launched with a chosen command line and environment, in its own session."""

    def __init__(self, python: Path, model: str) -> None:
        self.python, self.model = python, model
        self.proc: subprocess.Popen[bytes] | None = None

    def launch(self, flags: list[str], env: dict[str, str]) -> None:
        self.stop()
        argv = [str(self.python), "-m", "sglang.launch_server", "--model-path", self.model, *flags]
        self.proc = subprocess.Popen(argv, env={**os.environ, **env}, start_new_session=True)
        time.sleep(0.3)  # let it exec, so /proc shows its argv

    def stop(self) -> None:
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None


def seed_log(fraction: float, *, fails: bool) -> str:
    lines = [
        (f"[2026-02-19 10:00:00] server_args=ServerArgs(model_path='/models/DeepSeek-V3', tokenizer_path="
        f"'/models/DeepSeek-V3', trust_remote_code=True, mem_fraction_static={fraction}, max_running_requests=None, "
        "max_total_tokens=None, chunked_prefill_size=8192, tp_size=8, pp_size=1, cuda_graph_max_bs=None, "
        "attention_backend=None, speculative_algorithm=None, enable_dp_attention=False, log_level='info')")
    ]
    for rank in range(8):
        lines.append(f"[2026-02-19 10:00:05 TP{rank}] Load weight begin. avail mem=93.43 GB")
    for rank in (3, 0, 7, 1, 2, 6, 4, 5):  # ranks finish in any order
        lines.append(
            f"[2026-02-19 10:02:11 TP{rank}] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, "
            "avail mem=21.70 GB, mem usage=71.73 GB."
        )
    if fails:
        for rank in (2, 5, 0, 1, 7, 3, 6, 4):
            lines += [
                f"[2026-02-19 10:02:12 TP{rank}] Scheduler hit an exception: Traceback (most recent call last):",
                '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 2836, in run_scheduler_process',
                "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)",
                "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
                "",
            ]  # fmt: skip
        lines.append("[2026-02-19 10:02:12] Received sigquit from a child process. It usually means the child failed.")
    else:
        for rank in range(8):
            lines.append(
                f"[2026-02-19 10:02:12 TP{rank}] KV Cache is allocated. #tokens: 161792, KV size: 10.40 GB"
            )
            lines.append(f"[2026-02-19 10:02:12 TP{rank}] Memory pool end. avail mem=11.10 GB")
        lines += [
            ("[2026-02-19 10:02:40 TP0] max_total_num_tokens=161792, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            "max_running_requests=2048, context_len=163840, available_gpu_mem=9.21 GB"),
            "[2026-02-19 10:02:41] INFO:     Application startup complete.",
            "[2026-02-19 10:02:42] The server is fired up and ready to roll!",
        ]  # fmt: skip
    return "\n".join(lines) + "\n"
