from __future__ import annotations

from driftwatch.diff import Severity

from driftwatch.explain import diff_snapshots
from driftwatch.diff.generic import walk
from tests.diff.builders import baseline, diff_after, make_snapshot


def test_unknown_probe_facts_are_low_changes_in_its_category() -> None:
    env = {"vars": {"NCCL_DEBUG": "INFO", "CUDA_VISIBLE_DEVICES": "0,1"}, "volatile": {"t": 1}}
    env2 = {"vars": {"NCCL_DEBUG": "WARN", "NCCL_P2P_DISABLE": "1"}, "volatile": {"t": 2}}
    changes = diff_snapshots(make_snapshot(env=env), make_snapshot(env=env2)).changes
    got = {(c.category, c.item, c.old, c.new, c.severity) for c in changes}
    assert got == {
        ("env", "vars.CUDA_VISIBLE_DEVICES", "0,1", None, Severity.low),
        ("env", "vars.NCCL_DEBUG", "INFO", "WARN", Severity.low),
        ("env", "vars.NCCL_P2P_DISABLE", None, "1", Severity.low),
    }
    assert {c.explanation for c in changes} >= {"env probe: vars.NCCL_DEBUG: INFO → WARN"}


def test_a_new_field_in_a_known_probe_is_not_lost() -> None:
    changes = diff_after(lambda f: f["system"].update(numa_nodes=2)).changes
    assert [(c.category, c.item, c.severity) for c in changes] == [
        ("system", "numa_nodes", Severity.low)
    ]


def test_absent_and_null_are_the_same() -> None:
    assert list(walk({"a": None}, {}, (), include_volatile=False)) == []


def test_malformed_facts_fall_back_to_the_walk_instead_of_crashing() -> None:
    facts = baseline()
    facts["gpu"]["gpus"] = ["not", "a", "dict"]
    changes = diff_snapshots(make_snapshot(), make_snapshot(**facts)).changes
    assert changes and all(c.category == "gpu" for c in changes)
