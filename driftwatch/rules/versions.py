"""Known-bad version ranges as data: the shipped ``known_bad.toml`` and the config's ``[[rules]]``.

Each entry names a package, a range of its versions (PEP 440 specifiers, as ``packaging``
reads them), a severity, a one-line message and the public reference it rests on::

    [[rules]]
    package = "nccl"              # a distribution; "nccl" is NCCL however installed or loaded
    versions = ">=2.28,<2.29.3"
    severity = "high"
    message = "NCCL before 2.29.3 leaks proxy-op slots on aarch64: collectives hang"
    reference = "https://github.com/NVIDIA/nccl/issues/2353"
    arch = "aarch64"              # optional: only on this machine architecture
    with = {torch = "==2.3.0"}    # optional: only together with these packages' versions
    unless_set = ["NCCL_X"]       # optional: not when a server, the login shell or an NCCL file sets it
    fix = "…"                     # optional: defaults to moving out of the range
"""

from __future__ import annotations

import re
import sys
from functools import lru_cache
from importlib import resources

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import BaseModel, ConfigDict, Field, field_validator

from driftwatch.severity import Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

# Loaded with the config (every command): this module imports neither the diff nor the rules.
_PEP503 = re.compile(r"[-_.]+")
NCCL = "nccl"  # the pseudo-package: NCCL wheels, system libnccl, and the version a server logs
ARCHES = ("x86_64", "aarch64")


class VersionRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    package: str = Field(min_length=1)
    versions: str
    severity: Severity
    message: str = Field(min_length=1)
    reference: str
    fix: str | None = None
    arch: str | None = None
    with_: dict[str, str] = Field(default_factory=dict, alias="with")
    unless_set: list[str] = Field(default_factory=list)

    @field_validator("package")
    @classmethod
    def _package(cls, value: str) -> str:
        return normalize_name(value.strip())

    @field_validator("versions")
    @classmethod
    def _versions(cls, value: str) -> str:
        return _specifier(value)

    @field_validator("with_")
    @classmethod
    def _with(cls, value: dict[str, str]) -> dict[str, str]:
        return {normalize_name(name): _specifier(spec) for name, spec in value.items()}

    @field_validator("reference")
    @classmethod
    def _reference(cls, value: str) -> str:
        if not value.startswith(("https://", "http://")):
            raise ValueError("must be a URL (https://…): the public issue or note the rule rests on")
        return value

    @field_validator("arch")
    @classmethod
    def _arch(cls, value: str | None) -> str | None:
        if value is not None and value not in ARCHES:
            raise ValueError(f"must be one of {', '.join(ARCHES)}")
        return value

    @property
    def specifier(self) -> SpecifierSet:
        return SpecifierSet(self.versions)


def normalize_name(name: str) -> str:
    """PEP 503, like ``diff.context.normalize_name``; globs (``nvidia-nccl-cu*``) keep their ``*``."""
    return _PEP503.sub("-", name).lower()


def _specifier(value: str) -> str:
    try:
        SpecifierSet(value)
    except InvalidSpecifier as exc:
        raise ValueError(f"not a version range ({exc}); write it like \">=2.19,<2.20\"") from exc
    if not value.strip():
        raise ValueError("empty version range")
    return value


@lru_cache(maxsize=1)
def shipped_rules() -> tuple[VersionRule, ...]:
    """The entries shipped with driftwatch (``rules/known_bad.toml``, package data)."""
    text = resources.files("driftwatch.rules").joinpath("known_bad.toml").read_text(encoding="utf-8")
    return tuple(VersionRule.model_validate(entry) for entry in tomllib.loads(text)["rules"])
