"""What an error names that a change can touch: the tokens a ranking matches against the diff.

An error points at its cause: ``undefined symbol: __nvJitLinkComplete_12_4, version
libnvJitLink.so.12`` names two libraries, a traceback's frames name the modules (and the
last frame's file) it went through, a message names the variables and the CUDA or NCCL error
it is about. Each parsed error keeps them as ``mentions``::

    {"libraries": ["libcusparse.so.12", "libnvJitLink.so.12"], "symbols": ["__nvJitLinkComplete_12_4"],
     "modules": ["torch"], "paths": ["/…/site-packages/torch/__init__.py", "/…/libcusparse.so.12"],
     "env": ["NCCL_SHM_DISABLE"], "errors": ["ImportError"]}

Every list keeps its first-seen order, is bounded in length and item size, and is empty (the
key absent) when the error names nothing of the kind. Pure and linear: a hostile line costs
one pass of each pattern over a bounded window.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

WINDOW = 2000  # characters of a message searched (the errors themselves are cut at 300)
MAX_ITEMS = 16
MAX_ITEM = 200
MAX_FRAMES = 64

# A traceback frame as Python prints it (prefixes already removed, indentation stripped).
FRAME = re.compile(r'^File "([^"\n]{1,1000})", line \d{1,7}, in ')
_SITE = re.compile(r"/(?:site|dist)-packages/(.+?)\.py$")
_LIBRARY = re.compile(r"\b(lib[A-Za-z0-9_+-]{1,80}\.so(?:\.\d{1,6}){0,4})\b")
_SYMBOL = re.compile(r"undefined symbol: ([A-Za-z_][\w@.$]{0,199})")
_NO_MODULE = re.compile(r"No module named '([\w.]{1,200})'|cannot import name '\w{1,200}' from '([\w.]{1,200})'")
_PATH = re.compile(r"(?<![\w.])(/(?:[\w.+@-]{1,255}/){1,40}[\w.+@-]{1,255})")
_ERROR = re.compile(
    r"\b(CUDA_ERROR_[A-Z_]{2,60}|CUBLAS_STATUS_[A-Z_]{2,60}|CUDNN_STATUS_[A-Z_]{2,60}|CUSPARSE_STATUS_[A-Z_]{2,60}"
    r"|cudaError[A-Z]\w{0,60}|hipError[A-Z]\w{0,60}|nccl[A-Z]\w{0,40}Error|ncclInvalid(?:Argument|Usage)"
    r"|HCCL_E_[A-Z_]{2,40})\b")
_EXCEPTION = re.compile(
    r"^((?:[A-Za-z_]\w{0,80}\.){0,6}(?:[A-Z]\w{0,80}?(?:Error|Exception|Interrupt)|OutOfResources))(?::|$)")
_ENV = re.compile(
    r"\b((?:NCCL|CUDA|VLLM|SGLANG|SGL|TORCH|PYTORCH|TORCHINDUCTOR|TRITON|HF|RAY|NVIDIA|NVSHMEM|UCX|GLOO|OMP"
    r"|FLASHINFER|TRANSFORMERS|LD)_[A-Z0-9_]{2,80})\b")
# NCCL's shared memory segments have random names: one name for them all, so that the same
# failure on eight ranks is one error.
_SHM_SEGMENT = re.compile(r"/dev/shm/nccl-[A-Za-z0-9]{6}\b")
SHM_SEGMENT = "/dev/shm/nccl-XXXXXX"


def module_of(path: str) -> str | None:
    """``torch._C`` for ``/…/site-packages/torch/_C/__init__.py``: the dotted module a frame's
    file is, where it sits in an installed package; None for other files (a script, a checkout)."""
    match = _SITE.search(path)
    if match is None:
        return None
    parts = [p for p in match.group(1).split("/") if p]
    if parts and parts[-1] == "__init__":
        parts.pop()
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


def normalize_shm(text: str) -> str:
    return _SHM_SEGMENT.sub(SHM_SEGMENT, text) if "/dev/shm/nccl-" in text else text


def mentions(message: str, frames: list[str]) -> dict[str, list[str]]:
    """The tokens ``message`` (one error line) and the traceback ``frames`` that led to it
    (file paths, oldest first) name."""
    text = normalize_shm(message.strip()[:WINDOW])
    frames = [f for f in frames if f.startswith("/")]  # "<string>", "<ipython-input-1-…>" are no files
    found: dict[str, list[str]] = {}
    modules = [m for m in (module_of(f) for f in frames) if m]
    modules += [next(g for g in m.groups() if g) for m in _NO_MODULE.finditer(text)]
    # As the loader resolves them ("torch/lib/../../nvidia/cusparse/lib/…" is nvidia/cusparse's).
    paths = [posixpath.normpath(p) for p in frames[-1:] + _PATH.findall(text)]
    exception = _EXCEPTION.match(text)
    errors = ([exception.group(1)] if exception else []) + _ERROR.findall(text)
    env = [name for name in _ENV.findall(text) if not _ERROR.fullmatch(name)]
    for key, values in (("libraries", _LIBRARY.findall(text)), ("symbols", _SYMBOL.findall(text)),
                        ("modules", modules), ("paths", paths), ("env", env), ("errors", errors)):
        kept = _bounded(values)
        if kept:
            found[key] = kept
    return found


def merge(into: dict[str, list[str]], more: Any) -> dict[str, list[str]]:
    """``into`` with ``more``'s tokens added (first-seen order, bounded): one error on eight
    ranks keeps what each rank's traceback named."""
    if not isinstance(more, dict):
        return into
    for key, values in more.items():
        if isinstance(values, list):
            into[key] = _bounded([*into.get(key, []), *(v for v in values if isinstance(v, str))])
    return into


def _bounded(values: list[str]) -> list[str]:
    kept: list[str] = []
    for value in values:
        value = value[:MAX_ITEM]
        if value not in kept:
            kept.append(value)
            if len(kept) == MAX_ITEMS:
                break
    return kept
