"""`driftwatch show`: the compile caches, NCCL settings and models of a snapshot."""

from __future__ import annotations

from driftwatch.report.show import sections
from tests.diff.builders import make_snapshot


def test_caches_nccl_settings_and_models_have_their_sections() -> None:
    caches = {"caches": {
        "~/.cache/flashinfer": {"exists": True, "error": None, "truncated": None,
                                "entries": {"0.6.12": {"files": 131, "bytes": 3 << 20}, "cubins": {"files": 2, "bytes": 0}}},
        "~/.triton/cache": {"exists": False, "error": None, "entries": {}},
        "/tmp/torchinductor_$USER": {"exists": True, "error": "Permission denied", "entries": {}}}}
    nccl = {"files": {"/etc/nccl.conf": {"settings": {"NCCL_IB_USE_INLINE": "1"}, "error": None},
                      "~/.nccl.conf": {"settings": None, "error": None}}}
    models = {"models": {"Qwen/Qwen3-8B": {"kind": "hub", "exists": True, "error": None, "revision": "9b1c0d27" * 5,
                                           "files": {"config.json": {}}, "weights": {"a": {}, "b": {}}},
                         "/models/gone": {"kind": "local", "exists": False, "error": None}}}
    found = {s.title: s.rows for s in sections(make_snapshot(caches=caches, nccl_conf=nccl, models=models))}
    assert found["Compile caches"] == [["~/.cache/flashinfer", "133 files, 3.0 MiB", "0.6.12, cubins"],
                                       ["/tmp/torchinductor_$USER", "unreadable: Permission denied", ""]]
    assert found["NCCL configuration files"] == [["/etc/nccl.conf", "NCCL_IB_USE_INLINE=1"]]
    assert found["Models"] == [["Qwen/Qwen3-8B", "hub @ 9b1c0d2", "1 file, 2 weights"],
                               ["/models/gone", "not found", ""]]
