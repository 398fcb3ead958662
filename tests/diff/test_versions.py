from __future__ import annotations

import pytest

from driftwatch.diff.versions import step


@pytest.mark.parametrize(
    ("old", "new", "text"),
    [
        ("0.3.16.post4", "0.3.17", "patch upgrade"),
        ("0.3.17", "0.3.16.post4", "patch downgrade"),
        ("2.8.0", "2.9.0", "minor upgrade"),
        ("2.8.0", "3.0", "major upgrade"),
        ("4.57", "4.57.0.1", "patch upgrade"),
        ("0.5.0rc1", "0.5.0rc2", "pre-release upgrade"),
        ("0.5.0rc1", "0.5.0", "pre-release upgrade"),
        ("0.3.16.post3", "0.3.16.post4", "post-release upgrade"),
        ("1.0.dev1", "1.0.dev3", "dev-release upgrade"),
        ("2.8.0+cu128", "2.8.0+cu129", "local build tag +cu128 → +cu129"),
        ("2.8.0", "2.8.0+cu129", "local build tag (none) → +cu129"),
        ("1!1.0", "2!0.1", "epoch upgrade"),
        ("2.8", "2.8.0", "same version, spelled differently"),
        ("weird-version", "1.0", "version changed"),
    ],
)
def test_step_kind(old: str, new: str, text: str) -> None:
    assert step(old, new).text == text


def test_bigger_steps_have_bigger_magnitude() -> None:
    assert (
        step("1.0", "2.0").magnitude > step("1.0", "1.1").magnitude > step("1.0", "1.0.1").magnitude
    )
