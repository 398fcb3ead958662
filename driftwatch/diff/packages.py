"""Python interpreters and their installed distributions (the ``python`` probe)."""

from __future__ import annotations

from typing import Any

from driftwatch.facts import fmt
from driftwatch.diff.imports import diff_imports
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.facts.read import Facts, as_dict
from driftwatch.diff.distributions import describe_distribution
from driftwatch.diff.generic import changed_keys

KEYS = frozenset({"interpreters"})


def diff_python(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    old_interps, new_interps = as_dict(old.get("interpreters")), as_dict(new.get("interpreters"))
    # With one interpreter the name is noise; with several, say which one changed.
    several = len(old_interps.keys() | new_interps.keys()) > 1
    changes: list[Change] = []
    for key in changed_keys(old_interps, new_interps):
        o, n = old_interps.get(key), new_interps.get(key)
        if not isinstance(o, dict) or not isinstance(n, dict):
            changes.append(_presence(key, as_dict(o), as_dict(n), o is None))
            continue
        changes += diff_interpreter(key, o, n, ctx, f" in {key}" if several else "")
    return changes


def diff_interpreter(
    key: str, old: Facts, new: Facts, ctx: DiffContext, where: str
) -> list[Change]:
    old_error, new_error = old.get("error"), new.get("error")
    if old_error or new_error:
        # A failed interpreter has no distributions: comparing them would read as
        # "everything uninstalled".
        return [_error_change(key, old_error, new_error)] if old_error != new_error else []
    changes: list[Change] = []
    if old.get("version") != new.get("version"):
        changes.append(
            _python_change(
                key,
                old.get("version"),
                new.get("version"),
                Severity.high,
                f"{key} is now Python {new.get('version')} (was {old.get('version')}): compiled "
                "extensions built for the old interpreter may not load",
            )
        )
    for field in ("executable", "prefix"):
        if old.get(field) != new.get(field):
            changes.append(
                _python_change(
                    key,
                    old.get(field),
                    new.get(field),
                    Severity.medium,
                    f"{key} {field} is now {new.get(field)} (was {old.get(field)}): "
                    "a different environment",
                )
            )
    changes += diff_distributions(
        new.get("version"),
        as_dict(old.get("distributions")),
        as_dict(new.get("distributions")),
        ctx,
        where,
    )
    changes += diff_imports(key, as_dict(old.get("resolution")), as_dict(new.get("resolution")),
                            as_dict(old.get("distributions")), as_dict(new.get("distributions")))
    return changes


def diff_distributions(
    python_version: Any, old: Facts, new: Facts, ctx: DiffContext, where: str
) -> list[Change]:
    names = changed_keys(old, new)
    return [
        describe_distribution(
            name,
            as_dict(old.get(name)) or None,
            as_dict(new.get(name)) or None,
            old,
            new,
            ctx,
            where,
        )
        for name in names
    ]


def _presence(key: str, old: Facts, new: Facts, added: bool) -> Change:
    if added:
        return _python_change(
            key,
            None,
            new.get("version"),
            Severity.low,
            f"interpreter {key} ({fmt.value(new.get('executable'))}) is now recorded",
        )
    return _python_change(
        key,
        old.get("version"),
        None,
        Severity.medium,
        f"interpreter {key} ({fmt.value(old.get('executable'))}) is no longer recorded",
    )


def _error_change(key: str, old_error: Any, new_error: Any) -> Change:
    if new_error and not old_error:
        severity = Severity.high
        text = f"{key} could not be inspected: {fmt.value(new_error)} (is the interpreter gone?)"
    elif old_error and not new_error:
        severity = Severity.info
        text = f"{key} can be inspected again (was: {fmt.value(old_error)}); packages not compared"
    else:
        severity = Severity.low
        text = f"{key} still cannot be inspected: {fmt.value(new_error)}"
    return _python_change(key, old_error, new_error, severity, text)


def _python_change(key: str, old: Any, new: Any, severity: Severity, text: str) -> Change:
    return Change("python", key, old, new, severity, text)
