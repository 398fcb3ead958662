"""Symptoms are not causes: what broke heads the report, and the change its evidence names
ranks first among the causes, above decoys and known-bad notes that hold anyway."""

from __future__ import annotations

from typing import Any

from driftwatch.diff import Change, Severity
from driftwatch.explain import diff_snapshots
from driftwatch.explain.evidence import match_weight, names_in
from driftwatch.explain.rank import rank_changes
from driftwatch.model import ProbeRecord, ProbeStatus
from driftwatch.report.diff import headline
from tests.diff.builders import GPU1, SRT, baseline, dist, dists, failed, make_snapshot
from tests.diff.test_containers import in_container, server_process, snapshot
from tests.rules.builders import SGLANG, logs, processes, server

Facts = dict[str, Any]
STARTED = "[2026-02-25 10:00:00] server_args=ServerArgs(model_path='/models/x', tp_size=1, mem_fraction_static=0.88)\n"
NVJITLINK = (
    "Traceback (most recent call last):\n"
    '  File "/venv/lib/python3.12/site-packages/sglang/launch_server.py", line 5, in <module>\n'
    "ImportError: /venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so: undefined symbol: "
    "__nvJitLinkComplete_12_4, version libnvJitLink.so.12\n"
)


def good() -> Facts:
    facts = baseline()
    dists(facts)["nvidia-nvjitlink-cu12"] = dist("nvidia-nvjitlink-cu12", "12.8.93")
    dists(facts)["jupyterlab"] = dist("jupyterlab", "4.2.0")
    facts["processes"] = processes(server(*SGLANG, "--tp", "1", env={"NCCL_DEBUG": "INFO"}))
    facts["logs"] = logs(STARTED)
    return facts


def decoys(facts: Facts) -> None:
    """Innocent changes beside the cause: a notebook upgrade, a debug switch, a touched file,
    a notebook holding memory on another GPU."""
    dists(facts)["jupyterlab"]["version"] = "4.3.0"
    facts["processes"]["servers"]["sglang.launch_server"]["env"]["NCCL_DEBUG"] = "WARN"
    facts["files"]["files"][f"{SRT}/server_args.py"]["mtime"] += 3600
    facts["gpu"]["processes"][f"{GPU1}:5555"] = {"gpu_uuid": GPU1, "pid": 5555, "name": "/usr/bin/jupyter", "used_mib": 3072}


def broke(facts: Facts, log: str) -> None:
    facts["processes"]["servers"] = {}  # the server no longer starts
    facts["logs"] = logs(STARTED + log)


def test_the_error_names_its_cause_and_the_symptom_heads_the_report() -> None:
    new = good()
    decoys(new)
    dists(new)["nvidia-nvjitlink-cu12"]["version"] = "12.1.105"  # an older nvJitLink under the same torch
    broke(new, NVJITLINK)
    result = diff_snapshots(make_snapshot(**good()), make_snapshot(minutes=60, **new))
    causes = [c for c in result.drift_changes if not c.symptom]
    assert causes[0].item == "nvidia-nvjitlink-cu12", [c.explanation for c in causes[:3]]
    assert causes[0].explanation.endswith("the new error names nvjitlink")
    assert result.summary["most_likely_cause"] == causes[0].cause
    assert result.summary["symptom"].startswith("new other error: ImportError: ")
    assert result.summary["symptom"].endswith("undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12")
    top = headline(result)
    assert top.startswith("new ") and "; most likely cause: nvidia-nvjitlink-cu12 12.8.93 → 12.1.105" in top
    # Symptoms are listed after the causes, marked as such; the server that stopped is one.
    symptoms = [c for c in result.drift_changes if c.symptom]
    assert {c.category for c in symptoms} == {"log", "process"}
    assert result.changes.index(symptoms[0]) > result.changes.index(causes[-1])
    assert all(change.to_json()["role"] == "symptom" for change in symptoms)


def test_a_stopped_server_with_nothing_named_is_not_the_cause() -> None:
    new = good()
    dists(new)["torch"]["version"] = "2.9.0+cu128"
    new["processes"]["servers"] = {}
    result = diff_snapshots(make_snapshot(**good()), make_snapshot(minutes=60, **new))
    assert result.summary["symptom"] == "server sglang.launch_server is no longer running"
    assert result.summary["most_likely_cause"].startswith("torch 2.8.0+cu128 → 2.9.0+cu128")


def test_only_a_symptom_says_nothing_recorded_explains_it() -> None:
    new = good()
    new["processes"]["servers"] = {}
    result = diff_snapshots(make_snapshot(**good()), make_snapshot(minutes=60, **new))
    assert result.summary["most_likely_cause"] is None
    assert headline(result) == "server sglang.launch_server is no longer running; no recorded change explains it (1 change)"


def test_a_package_the_server_never_imports_ranks_below_one_it_does() -> None:
    # jupyterlab is in no engine's requirement closure and maps no library; numpy is sglang's.
    new = good()
    dists(new)["jupyterlab"]["version"] = "5.0.0"  # major: high
    dists(new)["numpy"]["version"] = "2.1.4"  # minor
    result = diff_snapshots(make_snapshot(**good()), make_snapshot(minutes=60, **new))
    order = [c.item for c in result.drift_changes]
    assert order.index("numpy") < order.index("jupyterlab"), [c.explanation for c in result.drift_changes]
    assert [c.untouched for c in result.drift_changes if c.item == "jupyterlab"] == [True]


def test_names_of_an_undefined_symbol_error_weigh_the_specific_above_the_plain() -> None:
    names = names_in(NVJITLINK)
    assert names["nvjitlink"] == 3 and names["nvjitlinkcomplete124"] == 3
    assert names["torch"] == 3  # the module whose file raised
    assert "error" not in names and "undefined" not in names
    change = Change("package", "nvidia-nvjitlink-cu12", "12.8.93", "12.1.105", Severity.medium, "")
    assert match_weight(change, names) == (3, "nvjitlink")
    assert match_weight(Change("package", "jupyterlab", "4", "5", Severity.high, ""), names) == (0, "")


def test_a_carrier_ranks_above_what_it_carries() -> None:
    inner = Change("package", "sgl-kernel", "0.3.16", "0.3.17", Severity.high, "inner", tie=3)
    image = Change("image", "lmsysorg/sglang:latest", "sha256:59ef", "sha256:cc75", Severity.medium, "image",
                   carries=(("package", "sgl-kernel"),))
    other = Change("env", "X", None, "1", Severity.high, "other", tie=1)
    assert [c.item for c in rank_changes([other, image, inner])] == ["lmsysorg/sglang:latest", "sgl-kernel", "X"]


def test_a_package_installed_with_another_that_requires_it_says_it_was_pulled_in() -> None:
    old, new = good(), good()
    for name, version in (("flashinfer-python", "0.5.0"), ("torch", "2.9.0+cu128")):
        dists(new)[name]["version"] = version
        dists(new)[name]["installed_at"] += 86400
    dists(new)["flashinfer-python"]["requires"] = ["torch==2.9.0", "numpy"]
    result = diff_snapshots(make_snapshot(**old), make_snapshot(minutes=60, **new))
    [torch] = [c for c in result.changes if c.item == "torch"]
    assert "installed with flashinfer-python 0.4.1 → 0.5.0, whose requirement torch==2.9.0 pulled it in" in torch.explanation


# NCCL's shared-memory transport failing on a smaller /dev/shm (NVIDIA/nccl #342, #525): the
# first line says what failed, the next names the segment it could not create under /dev/shm.
NCCL_SHM = ("a1b2c3d4e5f6:52:52 [0] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device\n"
            "a1b2c3d4e5f6:52:52 [0] include/shm.h:48 NCCL WARN Error while creating shared memory segment "
            "/dev/shm/nccl-Ll2Iso (size 9637888)\n")


def test_an_error_under_a_directory_ties_the_change_to_that_directory() -> None:
    key = "sglang.launch_server@a"
    procs = {key: server_process("/models/a", "a")}
    old, new = in_container("a", shm=32 << 30), in_container("a", shm=1 << 30)  # --shm-size 1g, still too small
    new["python"]["distributions"]["torch"] = dist("torch", "2.9.0+cu128")  # a decoy of higher severity
    before, after = snapshot(0, procs, {key: old}), snapshot(60, procs, {key: new})
    for side, text in ((before, STARTED), (after, STARTED + NCCL_SHM)):
        side.probes["logs"] = ProbeRecord(status=ProbeStatus.ok, duration_s=0.1, facts=logs(text))
    result = diff_snapshots(before, after)
    causes = [c for c in result.drift_changes if not c.symptom]
    assert causes[0].item == f"{key} /dev/shm", [c.explanation for c in causes[:3]]
    assert causes[0].explanation.endswith("— the new error names /dev/shm")
    assert result.summary["symptom"] == "new nccl error: NCCL WARN Call to posix_fallocate failed : No space left on device"
    # A path is matched by its directories, never by a bare top level or a longer sibling name.
    names = {"/dev/shm/nccl-XXXXXX": 3}
    assert match_weight(Change("process", "s /dev/shm", 1, 2, Severity.low, ""), names) == (2, "/dev/shm")
    assert match_weight(Change("process", "s /dev", 1, 2, Severity.low, ""), names) == (0, "")
    assert match_weight(Change("process", "s /dev/sh", 1, 2, Severity.low, ""), names) == (0, "")
    assert match_weight(Change("file", "/dev/shm/nccl-XXXXXX", 1, 2, Severity.low, ""), names) == (3, "/dev/shm/nccl-XXXXXX")


def test_a_probe_that_now_hangs_is_never_explained_by_how_the_server_was_launched() -> None:
    # nvidia-smi hangs: a server's environment cannot make it; naming CUDA_VISIBLE_DEVICES as
    # the cause would be a false why. What the probe reads (the driver, the host) may be.
    new = good()
    new["processes"]["servers"]["sglang.launch_server"]["env"]["CUDA_VISIBLE_DEVICES"] = "1"
    new["gpu"] = failed(ProbeStatus.timeout, "timed out after 10s")
    result = diff_snapshots(make_snapshot(**good()), make_snapshot(minutes=60, **new))
    assert result.summary["most_likely_cause"] is None
    assert result.summary["symptom"] == "gpu probe timed out (nvidia-smi hung?): after 10s"
    assert headline(result).startswith("gpu probe timed out (nvidia-smi hung?): after 10s; no recorded change explains it (")

    new["system"]["nvidia_modules"]["nvidia"] = "595.45.04"  # the kernel module under nvidia-smi moved
    result = diff_snapshots(make_snapshot(**good()), make_snapshot(minutes=60, **new))
    causes = [c for c in result.drift_changes if not c.symptom]
    assert causes[0].category == "driver", [c.explanation for c in causes]
    assert result.summary["most_likely_cause"] == causes[0].cause
    assert "; most likely cause: " in headline(result)
