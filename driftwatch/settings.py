"""What to watch on a host: the ``[watch]`` table of the config, merged per host."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_FOCUS = [
    "sglang",
    "sgl-kernel",
    "sglang-kernel",
    "torch",
    "flashinfer-python",
    "nvidia-nccl-cu12",
    "nvidia-nccl-cu13",
    "triton",
    "transformers",
    "vllm",
]
DEFAULT_ENV = ["SGLANG_*", "SGL_*", "NCCL_*", "CUDA_*", "TORCH_*", "PYTORCH_*", "NVIDIA_*"]


class WatchSettings(BaseModel):
    """Per-host watch list. Paths with ``~`` expand on the target."""

    model_config = ConfigDict(extra="forbid")

    python: list[str] = Field(default_factory=lambda: ["python3"])
    focus: list[str] = Field(default_factory=lambda: list(DEFAULT_FOCUS))
    repos: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    env: list[str] = Field(default_factory=lambda: list(DEFAULT_ENV))
    processes: list[str] = Field(
        default_factory=lambda: [
            "sglang.launch_server",
            "sglang serve",
            "vllm serve",
            "vllm.entrypoints.openai.api_server",
        ]
    )
    logs: list[str] = Field(default_factory=list)
    max_hash_bytes: int = 1024 * 1024 * 1024
    max_files: int = 20000
