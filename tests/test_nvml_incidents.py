"""NVML's own words (issue 20, item 9), each incident made on a real host over SSH: the
driver probe reads /proc/driver/nvidia/version from an sshd in its own mount namespace
(tests/test_stack_incidents.py's boot_host), nvidia-smi fails with the words public reports
quote, and the diff must explain them with both versions and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_stack_incidents import boot_host, install_userspace, snapshot_and_diff  # noqa: F401 (a fixture)
from tests.test_nvidia_errors import NO_MODULE

__all__ = ["boot_host"]


def failing_smi(bin_dir: Path, *lines: str, code: int) -> None:
    """An nvidia-smi that prints ``lines`` (on stdout, as the real one does) and exits ``code``."""
    text = "\n".join(lines)
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\ncat <<'EOF'\n{text}\nEOF\nexit {code}\n")


def test_userspace_upgraded_under_the_module_in_nvmls_words(
    boot_host: dict[str, Path], capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    def upgrade() -> None:
        install_userspace(boot_host["libs"], "580.178.04")
        failing_smi(boot_host["bin"], "Failed to initialize NVML: Driver/library version mismatch",
                    "NVML library version: 580.178", code=18)

    changes, _ = snapshot_and_diff(capsys, upgrade, exit_code=3)
    assert changes[0]["category"] == "driver" and "580.173.02" in changes[0]["explanation"]
    gpu = next(c for c in changes if (c["category"], c["item"]) == ("probe", "gpu"))
    assert gpu["explanation"].startswith("gpu probe failed: nvidia-smi --query-gpu failed: Failed to initialize NVML")
    assert gpu["explanation"].endswith(
        ": NVML's userspace library (580.178) does not match the loaded kernel module: "
        "the driver was upgraded under it, and no new CUDA process starts until a reboot or a reload of the nvidia "
        "modules")
    assert "is the NVIDIA driver loaded" not in gpu["explanation"]


def test_kernel_updated_without_a_module_built_for_it(
    boot_host: dict[str, Path], capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    release = boot_host["bin"].parent / "release"
    release.write_text("6.8.0-60-generic\n")
    (boot_host["bin"] / "uname").write_text(
        f'#!/bin/sh\nif [ "$1" = -r ]; then cat {release}; else exec /bin/uname "$@"; fi\n')
    (boot_host["bin"] / "uname").chmod(0o755)
    cmdline = boot_host["cmdline"]

    def kernel_update() -> None:
        # The new kernel booted; DKMS built nothing for it, so no nvidia module is loaded.
        release.write_text("6.8.0-62-generic\n")
        cmdline.write_text(cmdline.read_text().replace("6.8.0-60", "6.8.0-62"))
        (boot_host["driver"] / "nvidia" / "version").unlink()
        failing_smi(boot_host["bin"], *NO_MODULE.splitlines(), code=9)

    changes, first_line = snapshot_and_diff(capsys, kernel_update, exit_code=3)
    top = changes[0]
    assert (top["category"], top["severity"]) == ("driver", "critical")
    assert top["explanation"].startswith("the NVIDIA kernel module is no longer loaded (was 580.173.02)")
    assert ("known-bad state (observed): nvidia-smi says it couldn't communicate with the NVIDIA driver: no nvidia "
            "kernel module is loaded for the running kernel 6.8.0-62-generic: after a kernel update, DKMS did not "
            "build the driver for it") in top["explanation"]
    assert "Fix: dkms status" in top["explanation"]
    kernel = next(c for c in changes if (c["category"], c["item"]) == ("system", "kernel"))
    assert kernel["old"] == "6.8.0-60-generic" and kernel["new"] == "6.8.0-62-generic"
    assert "most likely cause: the NVIDIA kernel module is no longer loaded" in first_line  # ≤ 200 characters

