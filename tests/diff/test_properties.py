"""Properties every rule must keep: a host equals itself, and direction is symmetric."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from driftwatch.diff import Change, DiffOptions

from driftwatch.explain import diff_snapshots
from driftwatch.model import ProbeRecord, ProbeStatus, Snapshot
from tests.diff.builders import GPU0, GPU1, INSTALLED, SRT, baseline, make_snapshot

json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from(["a", "b", "", "x.y"])
)
json_tree = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["k", "volatile", "v", "GPU-1"]), inner, max_size=3),
    ),
    max_leaves=8,
)


def pick(draw: st.DrawFn, *values: Any) -> Any:
    return draw(st.sampled_from(values))


def _python(draw: st.DrawFn, facts: dict[str, Any]) -> None:
    interp = facts["python"]["interpreters"]["python3"]
    interp["version"] = pick(draw, "3.12.3", "3.12.4")
    if draw(st.integers(0, 9)) == 0:
        interp["error"] = "No such file or directory"
    dists = interp["distributions"]
    for name in list(dists):
        if draw(st.integers(0, 5)) == 0:
            del dists[name]
            continue
        dists[name].update(
            version=pick(
                draw, dists[name]["version"], "0.3.17", "2.8.0+cu129", "1.0rc1", "not a version"
            ),
            record_sha256=pick(draw, dists[name]["record_sha256"], "other", None),
            installed_at=pick(draw, INSTALLED, INSTALLED + 60),
            editable=pick(draw, False, True),
            source_commit=pick(draw, None, "a" * 40, "b" * 40),
            requires=pick(draw, dists[name]["requires"], ["sgl-kernel==0.3.17", "torch>=2.9"]),
        )


def _gpu(draw: st.DrawFn, facts: dict[str, Any]) -> None:
    gpu = facts["gpu"]
    gpu["driver_version"] = pick(draw, "590.48.01", "595.71.05")
    for uuid in (GPU0, GPU1):
        if draw(st.integers(0, 6)) == 0:
            del gpu["gpus"][uuid]
            continue
        gpu["gpus"][uuid].update(
            memory_free_mib=pick(draw, 143770, 143000, 121242, 90000),
            ecc_uncorrected_volatile=pick(draw, 0, 2, None),
            pcie_gen=pick(draw, 5, 4),
            pcie_width=pick(draw, 16, 8),
            persistence_mode=pick(draw, "Enabled", "Disabled"),
            compute_cap=pick(draw, "9.0", "9.1"),
        )
        gpu["gpus"][uuid]["volatile"]["temperature_c"] = pick(draw, 31, 70)
    if draw(st.integers(0, 9)) == 0:
        gpu["processes"] = None  # nvidia-smi could not list them
        return
    for uuid, pid in ((GPU0, 10291), (GPU0, 777), (GPU1, 10291)):
        if draw(st.booleans()):
            gpu["processes"][f"{uuid}:{pid}"] = {
                "gpu_uuid": uuid,
                "pid": pid,
                "name": pick(draw, "memhog", "python3"),
                "used_mib": pick(draw, 500, 22528, 60000),
            }


def _rest(draw: st.DrawFn, facts: dict[str, Any]) -> None:
    repo = facts["git"]["repos"]["~/sglang"]
    repo.update(
        head=pick(draw, repo["head"], "c" * 40),
        dirty=pick(draw, [], ["a.py"], ["a.py", "b.py"]),
        diff_sha256=pick(draw, None, "d1", "d2"),
        error=pick(draw, None, None, None, "not a repo"),
    )
    for path in list(facts["files"]["files"]):
        if draw(st.integers(0, 5)) == 0:
            del facts["files"]["files"][path]
        else:
            facts["files"]["files"][path].update(
                sha256=pick(draw, "s1", "s2"),
                mtime=pick(draw, 1.0, 2.0),
                error=pick(draw, None, None, "too large"),
            )
    if draw(st.booleans()):
        facts["files"]["files"][f"{SRT}/new.py"] = {
            "size": 1,
            "mtime": 1.0,
            "mode": "0644",
            "sha256": "n",
            "error": None,
        }
    facts["system"].update(
        boot_id=pick(draw, "b1", "b2"),
        kernel=pick(draw, "5.15", "6.8"),
        shm_bytes=pick(draw, 1 << 36, 1 << 33),
        memlock=pick(draw, "unlimited", "64"),
    )
    facts["system"]["volatile"]["uptime_s"] = pick(draw, 1.0, 2.0)
    facts["system"]["nvidia_modules"] = pick(
        draw, {"nvidia": "590.48.01", "nvidia_uvm": None}, {"nvidia": "595.71.05"}
    )
    cuda = facts["cuda"]
    cuda["nccl"]["system"] = pick(
        draw, cuda["nccl"]["system"], {}, {"/usr/lib/libnccl.so.2.23.4": "2.23.4"}
    )
    cuda["torch"]["python3"].update(
        cuda=pick(draw, "12.8", "12.9"), git_version=pick(draw, "g1", "g2")
    )
    if draw(st.integers(0, 9)) == 0:
        cuda["torch"]["python3"] = {"error": "timed out"}
    cuda["nccl"]["system"] = pick(draw, cuda["nccl"]["system"], {"/usr/lib/libnccl.so.2": None})
    cuda["toolkit"]["nvcc"] = pick(draw, "12.8.93", None)


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    facts: dict[str, Any] = baseline()
    _python(draw, facts)
    _gpu(draw, facts)
    _rest(draw, facts)
    probes: dict[str, Any] = dict(facts)
    probes["extra"] = draw(
        st.dictionaries(st.sampled_from(["a", "b", "volatile"]), json_tree, max_size=3)
    )
    for name in list(probes):
        status = draw(
            st.sampled_from(
                [ProbeStatus.ok] * 6 + [ProbeStatus.timeout, ProbeStatus.error, ProbeStatus.skipped]
            )
        )
        if status is not ProbeStatus.ok:
            probes[name] = ProbeRecord(status=status, error="boom")
        elif draw(st.integers(0, 12)) == 0:
            del probes[name]
    return make_snapshot(host=pick(draw, "gpu01", "gpu01", "gpu02"), **probes)


def _key(change: Change, swap: bool) -> str:
    old, new = (change.new, change.old) if swap else (change.old, change.new)
    return json.dumps([change.category, change.item, old, new], sort_keys=True, default=str)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots(), st.booleans())
def test_a_snapshot_equals_itself(snapshot: Snapshot, include_volatile: bool) -> None:
    options = DiffOptions(include_volatile=include_volatile)
    assert diff_snapshots(snapshot, snapshot, options=options).changes == []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots(), snapshots(), st.booleans())
def test_swapping_old_and_new_swaps_every_change(
    a: Snapshot, b: Snapshot, include_volatile: bool
) -> None:
    options = DiffOptions(include_volatile=include_volatile)
    forward = diff_snapshots(a, b, options=options).changes
    backward = diff_snapshots(b, a, options=options).changes
    assert sorted(_key(c, swap=False) for c in forward) == sorted(
        _key(c, swap=True) for c in backward
    )
    assert {(c.category, c.item) for c in forward} == {(c.category, c.item) for c in backward}
