from __future__ import annotations

from typing import Any

from driftwatch.diff import Severity

from driftwatch.explain import diff_snapshots
from tests.diff.builders import baseline, diff_after, dist, dists, make_snapshot

UPGRADED_AT = 1772028120.0  # 2026-02-25 14:02 UTC


def test_sgl_kernel_upgraded_in_place_is_first_and_high() -> None:
    def edit(f: dict[str, Any]) -> None:
        dists(f)["sgl-kernel"].update(
            version="0.3.17", installed_at=UPGRADED_AT, record_sha256="new"
        )

    first = diff_after(edit).changes[0]
    assert (first.category, first.item, first.old, first.new) == (
        "package",
        "sgl-kernel",
        "0.3.16.post4",
        "0.3.17",
    )
    assert first.severity is Severity.high
    assert first.explanation.startswith(
        "sgl-kernel 0.3.16.post4 → 0.3.17 (patch upgrade, installed 2026-02-25 14:02 UTC): "
        "SGLang's CUDA kernels changed with no change to SGLang's source"
    )


def test_pin_that_no_longer_holds_is_mentioned() -> None:
    result = diff_after(lambda f: dists(f)["sgl-kernel"].update(version="0.3.17"))
    assert (
        "sglang 0.5.6 requires sgl-kernel==0.3.16.post4, but 0.3.17 is installed"
        in result.changes[0].explanation
    )
    assert len(result.changes) == 1  # requirements are evidence, not changes of their own


def test_server_upgraded_without_its_kernels_names_the_pin() -> None:
    def edit(f: dict[str, Any]) -> None:
        dists(f)["sglang"].update(version="0.5.7", requires=["sgl-kernel==0.3.18", "torch==2.8.0"])

    change = diff_after(edit).changes[0]
    assert (
        "sglang 0.5.7 requires sgl-kernel==0.3.18, but 0.3.16.post4 is installed"
        in change.explanation
    )
    assert "with no change" not in change.explanation


def test_pins_on_extras_and_satisfied_pins_are_not_mentioned() -> None:
    change = diff_after(lambda f: dists(f)["transformers"].update(version="4.58.0")).changes[0]
    assert "requires" not in change.explanation  # sglang wants transformers>=4.57: satisfied


def test_uninstalled_dependency_is_named() -> None:
    change = diff_after(lambda f: dists(f).pop("sgl-kernel")).changes[0]
    assert change.severity is Severity.high and change.new is None
    assert (
        "sglang 0.5.6 requires sgl-kernel==0.3.16.post4, but it is not installed"
        in change.explanation
    )


def test_flashinfer_reinstalled_with_same_version() -> None:
    change = diff_after(
        lambda f: dists(f)["flashinfer-python"].update(record_sha256="b" * 64)
    ).changes[0]
    assert change.item == "flashinfer-python" and change.severity is Severity.medium
    assert "reinstalled or rebuilt with the same version" in change.explanation
    assert change.old.startswith("0.4.1 (RECORD") and change.new == "0.4.1 (RECORD bbbbbbbbbbbb)"


def test_reinstall_with_identical_files_is_info() -> None:
    change = diff_after(lambda f: dists(f)["numpy"].update(installed_at=UPGRADED_AT)).changes[0]
    assert change.severity is Severity.info and "identical files" in change.explanation


def test_focus_packages_outrank_others() -> None:
    def edit(f: dict[str, Any]) -> None:
        dists(f)["requests"]["version"] = "3.0.0"  # a major step, but not a package we watch
        dists(f)["triton"] = dist("triton", "3.4.0")

    changes = diff_after(edit).changes
    assert [(c.item, c.severity) for c in changes] == [
        ("triton", Severity.medium),
        ("requests", Severity.medium),
    ]
    minor = diff_after(lambda f: dists(f)["requests"].update(version="2.33.0")).changes[0]
    assert minor.severity is Severity.low


def test_local_build_tag_change() -> None:
    change = diff_after(lambda f: dists(f)["torch"].update(version="2.8.0+cu129")).changes[0]
    assert "local build tag +cu128 → +cu129" in change.explanation
    assert change.severity is Severity.high


def test_editable_source_commit_moved() -> None:
    before, after = baseline(), baseline()
    for facts, commit in ((before, "a" * 40), (after, "b" * 40)):
        dists(facts)["sglang"].update(
            editable=True, direct_url="file:///root/sglang/python", source_commit=commit
        )

    change = diff_snapshots(make_snapshot(**before), make_snapshot(**after)).changes[0]
    assert (change.item, change.old, change.new) == ("sglang", "aaaaaaa", "bbbbbbb")
    assert change.severity is Severity.high
    assert "editable install whose source commit moved aaaaaaa → bbbbbbb" in change.explanation


def test_became_editable() -> None:
    def edit(f: dict[str, Any]) -> None:
        dists(f)["sglang"].update(editable=True, direct_url="file:///root/sglang/python")

    change = diff_after(edit).changes[0]
    assert (
        "is now an editable install from file:///root/sglang/python (was a regular install)"
        in change.explanation
    )


def test_interpreter_version_change() -> None:
    changes = diff_after(
        lambda f: f["python"]["interpreters"]["python3"].update(version="3.12.4")
    ).changes
    assert [(c.category, c.item, c.severity) for c in changes] == [
        ("python", "python3", Severity.high)
    ]


def test_failed_interpreter_does_not_uninstall_everything() -> None:
    def edit(f: dict[str, Any]) -> None:
        f["python"]["interpreters"]["python3"] = {
            "executable": "/root/ml-env/bin/python3",
            "error": "No such file",
        }

    changes = diff_after(edit).changes
    assert [(c.category, c.severity) for c in changes] == [("python", Severity.high)]
    assert "No such file" in changes[0].explanation


def test_second_interpreter_names_where() -> None:
    def edit(f: dict[str, Any]) -> None:
        interps = f["python"]["interpreters"]
        interps["python3"]["distributions"]["numpy"]["version"] = "2.2.0"
        interps["/usr/bin/python3"] = {
            "executable": "/usr/bin/python3",
            "version": "3.10.12",
            "error": None,
            "prefix": "/usr",
            "distributions": {},
        }

    changes = diff_after(edit).changes
    numpy = next(c for c in changes if c.item == "numpy")
    assert "in python3" in numpy.explanation
    assert any(c.category == "python" and c.item == "/usr/bin/python3" for c in changes)
