"""The loaded-stack facts (libraries, driver, caches probes) in the shapes docs/facts.md gives."""

from __future__ import annotations

from typing import Any

SITE = "/root/ml-env/lib/python3.12/site-packages"
WHEEL_NCCL = f"{SITE}/nvidia/nccl/lib/libnccl.so.2"
SYSTEM_NCCL = "/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5"


def library(path: str, name: str, version: str, owners: dict[str, str] | None = None) -> dict[str, Any]:
    return {"name": name, "version": version, "size": 219000000, "mtime": 1771495200.0, "build_id": "a7f4c0de",
            "soname": name, "error": None, "owners": owners or {}, "volatile": {}}


def libraries(*, shared: dict[str, Any] | None = None, modified: dict[str, Any] | None = None,
              missing: dict[str, Any] | None = None, maps: list[str] | None = None) -> dict[str, Any]:
    files = {WHEEL_NCCL: library(WHEEL_NCCL, "libnccl.so.2", "2", {"nvidia-nccl-cu12": "2.27.3"}),
             SYSTEM_NCCL: library(SYSTEM_NCCL, "libnccl.so.2", "2.21.5")}
    return {
        "files": files,
        "servers": {"sglang.launch_server": {"libnccl.so.2": maps if maps is not None else [WHEEL_NCCL]}},
        "servers_error": None,
        "interpreters": {"python3": {"libraries": [WHEEL_NCCL], "error": None}},
        "system": [SYSTEM_NCCL],
        "integrity": {"python3": {
            "distributions": {"torch": "2.8.0+cu128", "nvidia-nccl-cu12": "2.27.3"},
            "modified": modified or {}, "missing": missing or {}, "unreadable": {}, "shared": shared or {},
            "error": None, "volatile": {}}},
        "truncated": False,
        "volatile": {},
    }


def two_nccl_wheels(on_disk: str | None = "nvidia-nccl-cu12") -> dict[str, Any]:
    return {WHEEL_NCCL: {"claimed_by": {"nvidia-nccl-cu12": "2.28.9", "nvidia-nccl-cu13": "2.30.7"},
                         "on_disk": on_disk, "sha256": "0" * 64, "size": 219000000, "volatile": {}}}


def driver(module: str = "590.48.01", user: str = "590.48.01", *, switches: int = 0,
           fabric: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "kernel_module": {"version": module, "flavor": "open", "arch": "x86_64", "source": "/proc/driver/nvidia/version"},
        "userspace": {"version": user, "libraries": {f"/usr/lib/x86_64-linux-gnu/libcuda.so.{user}": user}},
        "fabric_manager": fabric,
        "persistenced": {"installed": True, "running": True},
        "container_toolkit": None,
        "nvswitches": switches,
        "cmdline": {"text": "BOOT_IMAGE=/vmlinuz ro", "params": {"BOOT_IMAGE": "/vmlinuz", "ro": None}},
    }


def flashinfer_cache(version: str, objects: dict[str, list[float]]) -> dict[str, Any]:
    entry = {"owner": {"package": "flashinfer-python", "version": version}, "files": len(objects) + 3,
             "bytes": 48213344, "oldest": min(v[1] for v in objects.values()), "newest": max(v[1] for v in objects.values()),
             "digest": "d" * 64, "objects": objects, "object_count": len(objects), "symlinks": 0, "unreadable": 0,
             "first_unreadable": None, "truncated": None, "volatile": {"dirs": {}}}
    return {"caches": {"~/.cache/flashinfer": {
        "path": "/root/.cache/flashinfer", "layout": "flashinfer", "via": [], "exists": True, "error": None,
        "truncated": None, "same_as": None, "entries": {version: entry}}},
        "locations_error": None, "volatile": {}}
