from __future__ import annotations

from typing import Any

from driftwatch.diff import Severity
from tests.diff.builders import diff_after


def test_cuda_stack_changes_are_high() -> None:
    def edit(f: dict[str, Any]) -> None:
        cuda = f["cuda"]
        cuda["nccl"]["distributions"]["nvidia-nccl-cu12"] = "2.28.3"
        cuda["nccl"]["system"] = {"/usr/lib/x86_64-linux-gnu/libnccl.so.2.23.4": "2.23.4"}
        cuda["torch"]["python3"]["cuda"] = "12.9"
        cuda["toolkit"]["nvcc"] = "12.9.41"
        cuda["cudnn"]["nvidia-cudnn-cu12"] = "9.11.0.98"

    changes = diff_after(edit).changes
    assert {(c.category, c.item) for c in changes} == {
        ("nccl", "nvidia-nccl-cu12"),
        ("nccl", "libnccl (system)"),
        ("cuda", "torch (python3)"),
        ("cuda", "nvcc"),
        ("cuda", "nvidia-cudnn-cu12"),
    }
    assert {c.severity for c in changes} == {Severity.high}
    assert any(c.explanation.startswith("system libnccl 2.21.5 → 2.23.4") for c in changes)


def test_reboot_kernel_and_limits() -> None:
    def edit(f: dict[str, Any]) -> None:
        f["system"].update(
            boot_id="new-boot", kernel="5.15.0-172-generic", shm_bytes=8 << 30, memlock="65536"
        )
        f["system"]["nvidia_modules"].pop("nvidia_uvm")

    got = {c.item: (c.category, c.severity) for c in diff_after(edit).changes}
    assert got == {
        "boot_id": ("system", Severity.medium),
        "kernel": ("system", Severity.high),
        "/dev/shm": ("system", Severity.high),
        "memlock": ("system", Severity.medium),
        "nvidia_uvm": ("driver", Severity.high),
    }
    reboot = next(c for c in diff_after(edit).changes if c.item == "boot_id")
    assert "rebooted" in reboot.explanation


def test_unreadable_torch_build_is_not_a_cuda_change() -> None:
    change = diff_after(lambda f: f["cuda"]["torch"].update(python3={"error": "timed out"})).changes
    assert [(c.item, c.severity) for c in change] == [("torch (python3)", Severity.low)]
    assert "could not be read: timed out" in change[0].explanation


def test_system_nccl_without_a_version_counts_by_file_name() -> None:
    def edit(f: dict[str, Any]) -> None:
        f["cuda"]["nccl"]["system"] = {"/usr/lib/x86_64-linux-gnu/libnccl.so.2": None}

    change = diff_after(edit).changes[0]
    assert (change.old, change.new) == ("2.21.5", "libnccl.so.2")


def test_wheels_are_not_compared_when_an_interpreter_went_unread() -> None:
    # The second interpreter could not be read this time: its wheels are unknown, so the
    # merged NCCL/cuDNN wheel lists would falsely read "absent".
    def edit(f: dict[str, Any]) -> None:
        f["cuda"]["torch"]["/opt/other/bin/python3"] = {"error": "timed out after 10s"}
        f["cuda"]["nccl"]["distributions"] = {}
        f["cuda"]["cudnn"] = {}

    changes = diff_after(edit).changes
    assert not [c for c in changes if c.item in ("nvidia-nccl-cu12", "nvidia-cudnn-cu12")]
    assert [(c.category, c.severity) for c in changes] == [("cuda", Severity.low)]  # "could not be read"
