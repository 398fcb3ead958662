"""Which changes a typed pattern names (accept, [[ignore]]) or mentions (history --item)."""

from __future__ import annotations

import pytest

from driftwatch.diff import Change, Severity
from driftwatch.triage.patterns import mentions, names_change

DRIVER = Change("driver", "driver", "595.71.05", "610.57.04", Severity.critical, "NVIDIA driver 595.71.05 → 610.57.04")
GPU = Change(
    "gpu", "GPU-3f2a9c41", 408, 400, Severity.medium, "GPU 0 (H200, 00:18) reserved memory (MiB) 408 → 400",
    label="GPU 0 (H200, 00000000:18:00.0)",
)
NCCL_WHEEL = Change("package", "nvidia-nccl-cu12", "2.27.3", "2.28.3", Severity.high, "nvidia-nccl-cu12 2.27.3 → 2.28.3")
TORCH_NCCL = Change("cuda", "torch (python3)", "2.21", "2.27", Severity.high, "torch's NCCL 2.21 → 2.27")
FILE = Change("file", "/srv/sglang/srt/server_args.py", "ab12", "cd34", Severity.medium, "server_args.py edited")
DIGIT = Change("system", "kernel", "5.15", "6.8", Severity.high, "kernel 5.15 → 6.8: one more digit")


@pytest.mark.parametrize(
    ("pattern", "change", "named"),
    [
        ("driver", DRIVER, True),
        ("DRIVER", DRIVER, True),  # any case
        ("driver:driver", DRIVER, True),
        ("gpu:driver", DRIVER, False),  # the category must match too
        ("gpu:*", GPU, True),
        ("gpu:*", DRIVER, False),
        ("GPU-3f2a9c41", GPU, True),  # the identity
        ("GPU 0*", GPU, True),  # or the name a report shows
        ("gpu 0 (h200*", GPU, True),
        ("nvidia-nccl-*", NCCL_WHEEL, True),
        ("package:nvidia-*", NCCL_WHEEL, True),
        ("nccl", NCCL_WHEEL, False),  # names an item exactly (or by glob): no substring
        ("*nccl*", NCCL_WHEEL, True),
        ("/srv/sglang/srt/server_args.py", FILE, True),  # a path, whole
        ("file:/srv/sglang/srt/*.py", FILE, True),
        ("sgl-kernel", DRIVER, False),
    ],
)
def test_names_change(pattern: str, change: Change, named: bool) -> None:
    assert names_change(pattern, change) is named


def test_an_item_with_a_colon_is_matched_whole() -> None:
    kv = Change("log", "/data/logs/s.log: kv cache", 10, 4, Severity.medium, "KV cache 10 → 4 GiB")
    assert names_change("/data/logs/s.log: kv cache", kv)
    assert names_change("log:*kv cache", kv)


@pytest.mark.parametrize(
    ("pattern", "change", "found"),
    [
        ("nccl", NCCL_WHEEL, True),  # in the item
        ("NCCL", TORCH_NCCL, True),  # a word of the explanation
        ("nccl", DRIVER, False),
        ("cuda", TORCH_NCCL, True),  # the category
        ("git", DIGIT, False),  # "digit" is not the word git
        ("*nccl*", TORCH_NCCL, True),  # a glob on one word of the explanation
        ("nv*", NCCL_WHEEL, True),  # a glob on the item
        ("reserved", GPU, True),
        ("GPU 0", GPU, True),  # the shown name
    ],
)
def test_mentions(pattern: str, change: Change, found: bool) -> None:
    assert mentions(pattern, change) is found
