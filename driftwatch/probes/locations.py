"""Where the serving stack keeps state on a host, and the variables that move it.

Compile and JIT caches, NCCL's configuration files and the Hugging Face hub cache live at
default paths that an environment variable can move. A snapshot records the defaults and,
when the login environment or a running server's environment sets one of these variables,
the place it points to as well. Read from the projects' sources (2026-08):

* FlashInfer ``jit/env.py``: ``$FLASHINFER_WORKSPACE_BASE`` (else ``~``) ``/.cache/flashinfer/
  <version>/<archs>/cached_ops/<op>/`` — top-level entries are FlashInfer versions.
* Triton ``runtime/cache.py``: ``$TRITON_CACHE_DIR``, else ``$TRITON_HOME`` (else ``~``)
  ``/.triton/cache/<base32 key>/``, written to a temp dir and renamed into place.
* torch ``utils/cpp_extension.py``: ``$TORCH_EXTENSIONS_DIR/<ext>/``, else
  ``${XDG_CACHE_HOME:-~/.cache}/torch_extensions/py310_cu121/<ext>/``.
* vLLM ``envs.py``: ``$VLLM_CACHE_ROOT``, else ``${XDG_CACHE_HOME:-~/.cache}/vllm``.
* Inductor: ``$TORCHINDUCTOR_CACHE_DIR``, else ``${TMPDIR:-/tmp}/torchinductor_$USER``.
* SGLang: ``$SGLANG_JIT_CACHE_ROOT`` (``~/.cache/sglang``); DeepGEMM ``$DG_JIT_CACHE_DIR``
  (``~/.deep_gemm``); the CUDA driver's PTX JIT cache ``$CUDA_CACHE_PATH`` (``~/.nv/ComputeCache``).
* NCCL ``src/misc/param.cc``: ``$NCCL_CONF_FILE`` (else ``~/.nccl.conf``), then ``/etc/nccl.conf``.
* huggingface_hub ``constants.py``: ``$HF_HUB_CACHE``, else ``$HUGGINGFACE_HUB_CACHE``, else
  ``$HF_HOME/hub``, else ``${XDG_CACHE_HOME:-~/.cache}/huggingface/hub``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class CacheLayout:
    name: str
    default: str  # as it goes into [watch] caches; ~ and $USER expand on the target
    owner: str | None  # the distribution that writes it (PEP 503 name), None for the driver
    # Matches a configured path of this kind wherever it lives (~/.cache/flashinfer, or
    # /data/home/.cache/flashinfer on a host with another home).
    pattern: re.Pattern[str]
    # (variable, template) in the order the owner consults them; "{}" is the value.
    relocations: tuple[tuple[str, str], ...] = ()
    versioned: bool = False  # top-level entries are the owner's versions


CACHE_LAYOUTS: tuple[CacheLayout, ...] = (
    CacheLayout("flashinfer", "~/.cache/flashinfer", "flashinfer-python",
                re.compile(r"(^|/)\.cache/flashinfer$"),
                (("FLASHINFER_WORKSPACE_BASE", "{}/.cache/flashinfer"),), versioned=True),
    CacheLayout("triton", "~/.triton/cache", "triton", re.compile(r"(^|/)\.triton/cache$"),
                (("TRITON_CACHE_DIR", "{}"), ("TRITON_HOME", "{}/.triton/cache"))),
    CacheLayout("torch_extensions", "~/.cache/torch_extensions", "torch", re.compile(r"(^|/)torch_extensions$"),
                (("TORCH_EXTENSIONS_DIR", "{}"), ("XDG_CACHE_HOME", "{}/torch_extensions"))),
    CacheLayout("vllm", "~/.cache/vllm", "vllm", re.compile(r"(^|/)\.cache/vllm$"),
                (("VLLM_CACHE_ROOT", "{}"), ("XDG_CACHE_HOME", "{}/vllm"))),
    CacheLayout("cuda", "~/.nv/ComputeCache", None, re.compile(r"(^|/)ComputeCache$"),
                (("CUDA_CACHE_PATH", "{}"),)),
    CacheLayout("torchinductor", "/tmp/torchinductor_$USER", "torch", re.compile(r"(^|/)torchinductor_[^/]*$"),
                (("TORCHINDUCTOR_CACHE_DIR", "{}"), ("TMPDIR", "{}/torchinductor_$USER"))),
    CacheLayout("sglang", "~/.cache/sglang", "sglang", re.compile(r"(^|/)\.cache/sglang$"),
                (("SGLANG_JIT_CACHE_ROOT", "{}"),)),
    CacheLayout("deep_gemm", "~/.deep_gemm", "deep-gemm", re.compile(r"(^|/)\.?deep_gemm$"),
                (("DG_JIT_CACHE_DIR", "{}"),)),
)
DEFAULT_CACHES = [layout.default for layout in CACHE_LAYOUTS]

NCCL_CONF_ENV = "NCCL_CONF_FILE"
DEFAULT_NCCL_CONF = ["/etc/nccl.conf", "~/.nccl.conf"]

# (variable, template) in huggingface_hub's order of precedence.
HF_HUB_ENV: tuple[tuple[str, str], ...] = (
    ("HF_HUB_CACHE", "{}"),
    ("HUGGINGFACE_HUB_CACHE", "{}"),
    ("HF_HOME", "{}/hub"),
    ("XDG_CACHE_HOME", "{}/huggingface/hub"),
)
DEFAULT_HF_HUB = "~/.cache/huggingface/hub"

# Recorded for every server and the login shell whatever [watch] env says: they decide
# which caches, config files and model files are really read.
LOCATION_ENV: tuple[str, ...] = tuple(dict.fromkeys(
    [var for layout in CACHE_LAYOUTS for var, _ in layout.relocations]
    + [var for var, _ in HF_HUB_ENV] + [NCCL_CONF_ENV]
))


def layout_of(path: str) -> CacheLayout | None:
    """The known cache a configured path is (by its shape), or None for another directory."""
    trimmed = path.rstrip("/")
    return next((layout for layout in CACHE_LAYOUTS if layout.pattern.search(trimmed)), None)


def relocated(relocations: tuple[tuple[str, str], ...], env: dict[str, str]) -> tuple[str, str] | None:
    """(variable, the path it moves the directory to) for the first variable ``env`` sets,
    as its owner reads them; None when none is set. An empty or relative value is ignored
    here (its owner would resolve it against a working directory we do not know)."""
    for var, template in relocations:
        value = (env.get(var) or "").strip()
        if value.startswith(("/", "~")):
            return var, template.format(value.rstrip("/") or "/")
    return None
