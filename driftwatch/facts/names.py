"""How people name what a fact describes, and which category of change it files under."""

from __future__ import annotations

from typing import Any

from driftwatch.facts.read import Facts


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


def short_path(path: Any) -> str:
    """``nvidia/nccl/lib/libnccl.so.2`` for a file in site-packages; others as they are."""
    text = str(path)
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in text:
            return text.rsplit(marker, 1)[1]
    return text
