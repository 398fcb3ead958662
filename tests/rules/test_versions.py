"""The known-bad data file ships with the package; [[rules]] entries are checked at load."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from driftwatch.config import parse_config
from driftwatch.errors import UserError
from driftwatch.rules.versions import shipped_rules

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def test_every_shipped_entry_has_a_public_reference() -> None:
    rules = shipped_rules()
    assert len(rules) >= 4
    assert all(r.reference.startswith("https://github.com/") for r in rules)
    assert {r.reference for r in rules} >= {
        "https://github.com/vllm-project/vllm/pull/5091", "https://github.com/sgl-project/sglang/issues/7602",
        "https://github.com/NVIDIA/nccl/issues/2353", "https://github.com/vllm-project/vllm/issues/4509",
    }


def test_the_data_file_is_package_data() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "rules/*.toml" in pyproject["tool"]["setuptools"]["package-data"]["driftwatch"]


ENTRY = 'package = "vllm"\nversions = ">=0.10"\nseverity = "high"\nmessage = "m"\nreference = "https://x.example/1"\n'


@pytest.mark.parametrize(("change", "says"), [
    (("versions = \">=0.10\"", "versions = \"0.10\""), "rules.0.versions: not a version range"),
    (("severity = \"high\"", "severity = \"bad\""), "rules.0.severity: Input should be"),
    (("https://x.example/1", "see wiki"), "rules.0.reference: must be a URL"),
    (("message = \"m\"\n", "message = \"m\"\narch = \"sparc\"\n"), "rules.0.arch: must be one of"),
    (("message = \"m\"\n", "message = \"m\"\npackges = \"x\"\n"), "rules.0.packges: unknown key; did you mean 'package'?"),
])
def test_a_bad_entry_is_one_line_at_load(change: tuple[str, str], says: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_config("[[rules]]\n" + ENTRY.replace(*change), source="driftwatch.toml")
    assert str(caught.value).startswith(f"driftwatch.toml: {says}") and "\n" not in str(caught.value)


def test_a_good_entry_loads() -> None:
    [rule] = parse_config("[[rules]]\n" + ENTRY + 'with = {torch = "==2.8.0"}\n').rules
    assert rule.package == "vllm" and rule.with_ == {"torch": "==2.8.0"}
