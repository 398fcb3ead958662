"""How people name what a fact describes, and which category of change it files under."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from driftwatch.facts.read import Facts, as_dict, normalize_name


def gpu_label(gpu: Facts, uuid: str) -> str:
    """``GPU 0 (H200, 00000000:18:00.0)``: how people and nvidia-smi name a GPU."""
    index, name, bus = gpu.get("index"), gpu.get("name"), gpu.get("bus_id")
    short = str(name).removeprefix("NVIDIA ") if name else None
    details = ", ".join(str(part) for part in (short, bus) if part)
    if index is None:
        return f"GPU {uuid}" + (f" ({details})" if details else "")
    return f"GPU {index} ({details or uuid})"


def file_category(path: str) -> str:
    """nccl for NCCL's files, cuda for the other NVIDIA/CUDA libraries, else package."""
    name = path.rsplit("/", 1)[-1]
    if "nccl" in path:
        return "nccl"
    if "/nvidia/" in path or name.startswith(("libcu", "libnv")):
        return "cuda"
    return "package"


def under_home(files: Facts, home: Any) -> Facts:
    """The files probe's ``files`` keyed as the config names them where ``~`` expanded:
    ``~/sglang/x.py`` for ``/home/ubuntu/sglang/x.py``, so hosts that log in as different
    users compare the same files. Other paths, and all of them without ``home``, as they are."""
    if not isinstance(home, str) or home in ("", "/") or not home.startswith("/"):
        return files
    prefix = home.rstrip("/") + "/"
    return {"~/" + path[len(prefix):] if path.startswith(prefix) else path: entry for path, entry in files.items()}


def short_path(path: Any) -> str:
    """``nvidia/nccl/lib/libnccl.so.2`` for a file in site-packages; others as they are."""
    text = str(path)
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in text:
            return text.rsplit(marker, 1)[1]
    return text


@lru_cache(maxsize=65536)
def package_subjects(name: str) -> tuple[tuple[str, str], ...]:
    """The diff's keys for a distribution: its package line, and the CUDA stack's line for
    the NCCL and cuDNN wheels the cuda probe also reports."""
    found: tuple[tuple[str, str], ...] = (("package", name),)
    if name.startswith("nvidia-nccl-"):
        found += (("nccl", name),)
    elif name.startswith("nvidia-cudnn-"):
        found += (("cuda", name),)
    return found


def owned_by(*entries: Facts) -> tuple[tuple[str, str], ...]:
    """The diff's keys of the distributions that own these files (a library's RECORD owners):
    what a change to the files is part of."""
    names = sorted({normalize_name(str(name)) for entry in entries for name in as_dict(entry.get("owners"))})
    return tuple(key for name in names for key in package_subjects(name))
