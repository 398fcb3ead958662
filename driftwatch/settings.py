"""What to watch on a host: the ``[watch]`` table of the config, merged per host."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from driftwatch.probes.locations import DEFAULT_CACHES, DEFAULT_NCCL_CONF

# Probes that run only when asked for: a snapshot without them says nothing about their
# facts, so their absence on one side of a diff is context, never drift.
OPT_IN_PROBES = frozenset({"perf"})

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
# The variables that public incident reports show changing what a server loads or does:
# the servers' own knobs, NCCL/NVSHMEM/UCX/Gloo transports, the dynamic loader (LD_PRELOAD
# and LD_LIBRARY_PATH decide which libnccl is loaded), Hugging Face locations and modes,
# thread counts and the rendezvous address. Secret-looking names (HF_TOKEN) keep only their
# name: driftwatch.redact replaces the value.
DEFAULT_ENV = [
    "SGLANG_*", "SGL_*", "NCCL_*", "CUDA_*", "TORCH_*", "PYTORCH_*", "NVIDIA_*",
    "LD_PRELOAD", "LD_LIBRARY_PATH", "VLLM_*", "HF_*", "TRANSFORMERS_*", "OMP_NUM_THREADS",
    "NVSHMEM_*", "UCX_*", "GLOO_*", "MASTER_ADDR", "MASTER_PORT",
]

# Running servers recorded by default: substrings of a process's command line.
DEFAULT_PROCESSES = ["sglang.launch_server", "sglang serve", "vllm serve", "vllm.entrypoints.openai.api_server"]


class WatchSettings(BaseModel):
    """Per-host watch list. Paths with ``~`` expand on the target."""

    model_config = ConfigDict(extra="forbid")

    python: list[str] = Field(default_factory=lambda: ["python3"])
    focus: list[str] = Field(default_factory=lambda: list(DEFAULT_FOCUS))
    repos: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    env: list[str] = Field(default_factory=lambda: list(DEFAULT_ENV))
    processes: list[str] = Field(default_factory=lambda: list(DEFAULT_PROCESSES))
    logs: list[str] = Field(default_factory=list)
    # Compile and JIT cache directories (~ and $USER expand on the target). Known ones are
    # also followed where the login or a server's environment moves them (TRITON_CACHE_DIR).
    caches: list[str] = Field(default_factory=lambda: list(DEFAULT_CACHES))
    cache_max_entries: int = 200_000  # per cache directory walked; beyond, "truncated"
    # NCCL's configuration files; the file NCCL_CONF_FILE names is added wherever it is set.
    nccl_conf: list[str] = Field(default_factory=lambda: list(DEFAULT_NCCL_CONF))
    # Local model directories or Hugging Face hub ids, besides the models running servers serve.
    models: list[str] = Field(default_factory=list)
    # The opt-in performance fingerprint (snapshot/check --perf): its hard wall-clock bound.
    perf: bool = False
    perf_timeout: float = Field(default=60.0, gt=5, le=3600, allow_inf_nan=False)
    # Run the output canary on this host in every snapshot/check (None: as [canary] enabled says).
    canary: bool | None = None
    max_hash_bytes: int = 1024 * 1024 * 1024
    max_files: int = 20000
