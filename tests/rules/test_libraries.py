"""The stack as loaded: one file two owners, modified installs, shadowed libraries."""

from __future__ import annotations

from driftwatch.severity import Severity
from tests.rules.builders import SGLANG, found, make_snapshot, not_run, processes, server
from tests.rules.stack import SITE, SYSTEM_NCCL, WHEEL_NCCL, libraries, two_nccl_wheels


def test_two_nccl_wheels_owning_one_file_say_which_copy_loads() -> None:
    [finding] = found("file-two-owners", make_snapshot(libraries=libraries(shared=two_nccl_wheels())))
    assert finding.severity is Severity.high and finding.observed
    assert finding.why == (
        "nvidia/nccl/lib/libnccl.so.2 is installed by nvidia-nccl-cu12 2.28.9 and nvidia-nccl-cu13 2.30.7: the copy "
        "on disk is nvidia-nccl-cu12's, so nvidia-nccl-cu12 2.28.9 is what loads, whatever the other's metadata says"
    )
    assert finding.fix.startswith("pip uninstall nvidia-nccl-cu13 (it deletes this file too), then pip install")
    assert ("package", "nvidia-nccl-cu13") in finding.subjects and ("nccl", "nvidia/nccl/lib/libnccl.so.2") in finding.subjects
    [none] = found("file-two-owners", make_snapshot(libraries=libraries(shared=two_nccl_wheels(None))))
    assert "matches none of them" in none.why
    assert found("file-two-owners", make_snapshot(libraries=libraries())) == []
    assert not_run("file-two-owners", make_snapshot()) == "no libraries facts in this snapshot"


def test_a_focus_install_that_no_longer_matches_its_record() -> None:
    lib = f"{SITE}/torch/lib/libtorch_cuda.so"
    modified = {lib: {"distribution": "torch", "size": 1, "mtime": 1.0, "sha256": "a" * 64, "expected_sha256": "b" * 64}}
    missing = {f"{SITE}/torch/_C.py": {"distribution": "torch", "error": None}}
    [finding] = found("modified-install", make_snapshot(libraries=libraries(modified=modified, missing=missing)))
    assert finding.severity is Severity.high
    assert finding.why.startswith("torch 2.8.0+cu128: 1 file differs from its RECORD and 1 file it lists is missing "
                                  "(torch/lib/libtorch_cuda.so, torch/_C.py)")
    assert finding.fix == "pip install --force-reinstall --no-deps 'torch==2.8.0+cu128'"
    assert ("package", "torch") in finding.subjects
    assert found("modified-install", make_snapshot(libraries=libraries())) == []


def test_a_server_mapping_the_system_nccl_instead_of_its_wheels() -> None:
    env = {"LD_LIBRARY_PATH": "/usr/lib/x86_64-linux-gnu"}
    snap = make_snapshot(libraries=libraries(maps=[SYSTEM_NCCL]), processes=processes(server(*SGLANG, env=env)))
    [finding] = found("shadowed-library", snap)
    assert finding.severity is Severity.high
    assert finding.why.startswith(f"the server sglang.launch_server maps {SYSTEM_NCCL} (version 2.21.5), not its "
                                  "wheels' nvidia/nccl/lib/libnccl.so.2 (nvidia-nccl-cu12 2.27.3)")
    assert "its environment sets LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu" in finding.why
    assert ("env", "LD_LIBRARY_PATH") in finding.subjects and ("nccl", "libnccl.so.2 (sglang.launch_server)") in finding.subjects


def test_two_copies_in_one_process_and_a_replaced_library() -> None:
    [two] = found("shadowed-library", make_snapshot(libraries=libraries(maps=[WHEEL_NCCL, SYSTEM_NCCL])))
    assert "two copies of libnccl.so.2 loaded in one process" in two.why
    [deleted] = found("shadowed-library", make_snapshot(libraries=libraries(maps=[WHEEL_NCCL + " (deleted)"])))
    assert deleted.severity is Severity.medium and deleted.fix == "restart the server sglang.launch_server"
    assert found("shadowed-library", make_snapshot(libraries=libraries())) == []
    unknown = libraries()
    unknown["servers_error"] = "the /proc walk failed"
    assert "mapped libraries are unknown" in not_run("shadowed-library", make_snapshot(libraries=unknown))
