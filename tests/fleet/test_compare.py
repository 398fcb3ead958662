"""compare_fleet on snapshots built in code: majority, outliers, splits, identity, ranking."""

from __future__ import annotations

import json

import pytest

from driftwatch.diff import Severity
from driftwatch.fleet import compare_fleet
from driftwatch.model import ProbeStatus
from tests.diff.builders import dists, failed, make_snapshot
from tests.fleet.builders import Edit, Facts, fleet, gpu, host_facts, kernel, old_nccl


def test_one_odd_host_is_named_with_the_majority_value() -> None:
    result = fleet(8, {3: old_nccl})
    [finding] = result.findings  # the wheel and the CUDA stack report one split once
    assert finding.category == "nccl" and finding.item == "nvidia-nccl-cu12"
    assert finding.severity is Severity.high
    assert finding.majority == ("2.27.3", 7) and finding.outliers == (("gpu03", "2.21.5"),)
    assert finding.explanation == "gpu03: nvidia-nccl-cu12 2.21.5 where the other 7 hosts have 2.27.3"
    summary = result.summary
    assert summary["outlier_hosts"] == ["gpu03"] and summary["agree"] is False
    assert summary["headline"] == "1 odd host out of 8: gpu03 — nvidia-nccl-cu12 2.21.5 where the other 7 hosts have 2.27.3"


def test_identical_hosts_agree_although_their_identities_differ() -> None:
    one, two = host_facts(1), host_facts(2)
    assert not set(one["gpu"]["gpus"]) & set(two["gpu"]["gpus"])  # no shared GPU UUID
    result = fleet(3)
    assert result.agree and result.findings == []
    assert result.summary["headline"] == "all 3 hosts agree"
    assert result.summary["outlier_hosts"] == []


def test_gpus_are_matched_by_index_not_uuid() -> None:
    def narrow_link(facts: Facts) -> None:
        gpu(facts, 1).update(pcie_width=8)
        # Dict order must not matter: list this host's GPUs the other way round.
        facts["gpu"]["gpus"] = dict(reversed(list(facts["gpu"]["gpus"].items())))
        for g in facts["gpu"]["gpus"].values():
            g["bus_id"] = g["bus_id"].replace("00000000", "00000001")

    [finding] = fleet(3, {2: narrow_link}).findings
    assert finding.item == "GPU 1" and finding.severity is Severity.high
    assert finding.outliers == (("gpu02", 8),) and finding.majority == (16, 2)
    assert "PCIe link width 8" in finding.explanation


def test_two_hosts_that_differ_have_no_majority() -> None:
    result = fleet(2, {2: kernel("6.8.0-50-generic")})
    [finding] = result.findings
    assert finding.majority is None and finding.outliers == ()
    assert finding.values == (("5.15.0-171-generic", ("gpu01",)), ("6.8.0-50-generic", ("gpu02",)))
    assert result.summary["outlier_hosts"] == [] and not result.agree
    assert result.summary["headline"].startswith("no majority among 2 hosts — kernel: ")
    assert "5.15.0-171-generic on gpu01; 6.8.0-50-generic on gpu02" in finding.explanation


def test_a_fifty_fifty_split_lists_every_value_and_names_no_odd_host() -> None:
    new = kernel("6.8.0-50-generic")
    result = fleet(4, {3: new, 4: new})
    [finding] = result.findings
    assert finding.majority is None and finding.outliers == ()
    assert dict(finding.values) == {"5.15.0-171-generic": ("gpu01", "gpu02"), "6.8.0-50-generic": ("gpu03", "gpu04")}
    assert result.summary["outlier_hosts"] == []


def test_with_several_values_the_majority_still_needs_more_than_half() -> None:
    result = fleet(5, {2: kernel("6.1"), 4: kernel("6.8")})
    [finding] = result.findings
    assert finding.majority == ("5.15.0-171-generic", 3)
    assert finding.outliers == (("gpu02", "6.1"), ("gpu04", "6.8"))
    assert result.summary["headline"].startswith("2 odd hosts out of 5: gpu02, gpu04 — kernel: 6.1 on gpu02; 6.8 on gpu04")


def test_a_failed_probe_is_reported_and_its_facts_are_not_compared() -> None:
    def hang(facts: Facts) -> None:
        facts["gpu"] = failed(ProbeStatus.timeout, "command timed out after 10s")  # type: ignore[assignment]

    result = fleet(3, {2: hang})
    [finding] = result.findings  # not "GPU 0 absent", "driver absent", ...
    assert finding.category == "probe" and finding.item == "gpu"
    assert finding.outliers == (("gpu02", "timeout"),) and finding.severity is Severity.high
    assert "command timed out after 10s" in finding.explanation
    assert "not compared" in finding.explanation


def test_volatile_readings_and_memory_use_are_ignored() -> None:
    def busy(facts: Facts) -> None:
        g = gpu(facts, 0)
        g["volatile"].update(temperature_c=80, power_draw_w=650.0, sm_clock_mhz=1980)
        g.update(memory_used_mib=500, memory_free_mib=143271)
        facts["system"]["volatile"]["uptime_s"] = 9.0

    assert fleet(3, {1: busy}).agree


def test_a_host_whose_gpu_memory_is_held_stands_out() -> None:
    def hog(pid: int, name: str) -> Edit:
        def edit(facts: Facts) -> None:
            uuid = next(u for u, g in facts["gpu"]["gpus"].items() if g["index"] == 0)
            facts["gpu"]["processes"] = {f"{uuid}:{pid}": {"gpu_uuid": uuid, "pid": pid, "name": name, "used_mib": 20480}}

        return edit

    # The same program under different pids on every host: they agree.
    server = {n: hog(1000 + n, "/usr/bin/python3") for n in (1, 2)}
    assert fleet(2, server).agree

    [finding] = fleet(3, {3: hog(4242, "/root/tools/memhog")}).findings
    assert finding.category == "gpu-process" and finding.severity is Severity.high
    assert finding.outliers == (("gpu03", "1 compute process (memhog)"),)
    assert finding.majority == ("no compute process", 2)
    assert "holding 20.0 GiB" in finding.explanation
    assert finding.explanation.startswith("gpu03: GPU 0 runs 1 compute process (memhog)")
    assert finding.explanation.endswith("where the other 2 hosts have no compute process")


def test_a_value_the_majority_lacks_is_absent_on_the_others() -> None:
    def extra(facts: Facts) -> None:
        dists(facts)["vllm"] = dict(dists(facts)["requests"], name="vllm", version="0.11.0")

    [finding] = fleet(3, {2: extra}).findings
    assert finding.explanation == "gpu02: vllm 0.11.0 where it is absent on the other 2 hosts"


def test_a_missing_package_is_one_finding() -> None:
    [finding] = fleet(3, {1: lambda f: dists(f).pop("requests")}).findings
    assert finding.item == "requests" and finding.outliers == (("gpu01", None),)
    assert finding.severity is Severity.low  # not a focus package
    assert "gpu01: requests absent where the other 2 hosts have 2.32.3" == finding.explanation


def test_a_rebuild_with_the_same_version_is_reported_by_its_record() -> None:
    [finding] = fleet(3, {2: lambda f: dists(f)["sgl-kernel"].update(record_sha256="f" * 64)}).findings
    assert finding.item == "sgl-kernel" and finding.severity is Severity.high  # a focus package
    assert "same version, different build" in finding.explanation and "ffffffffffff…" in finding.explanation


def test_interpreters_configured_differently_per_host_match_by_position() -> None:
    def own_venv(n: int) -> Edit:
        def edit(facts: Facts) -> None:
            interps = facts["python"]["interpreters"]
            entry = interps.pop("python3")
            prefix = f"/srv/venv{n}"
            entry.update(executable=f"{prefix}/bin/python", prefix=prefix)
            for d in entry["distributions"].values():
                d["location"] = f"{prefix}/lib/python3.12/site-packages"
            interps[f"{prefix}/bin/python"] = entry
            facts["cuda"]["torch"] = {f"{prefix}/bin/python": facts["cuda"]["torch"]["python3"]}

        return edit

    assert fleet(3, {n: own_venv(n) for n in (1, 2, 3)}).agree

    def also_old_torch(facts: Facts) -> None:
        own_venv(3)(facts)
        next(iter(facts["python"]["interpreters"].values()))["distributions"]["torch"]["version"] = "2.7.1"
        next(iter(facts["cuda"]["torch"].values()))["version"] = "2.7.1"

    edits: dict[int, Edit] = {1: own_venv(1), 2: own_venv(2), 3: also_old_torch}
    [finding] = fleet(3, edits).findings
    assert finding.item == "torch" and finding.outliers == (("gpu03", "2.7.1"),)


def test_ranking_follows_the_diff_and_the_worst_host_comes_first() -> None:
    def many_small(facts: Facts) -> None:
        dists(facts)["numpy"]["version"] = "2.2.0"
        dists(facts)["requests"]["version"] = "2.31.0"

    def new_driver(facts: Facts) -> None:
        facts["gpu"]["driver_version"] = "595.71.05"

    result = fleet(5, {2: many_small, 4: new_driver, 5: old_nccl})
    categories = [f.category for f in result.findings]
    assert categories == ["driver", "nccl", "package", "package"]
    assert [f.severity for f in result.findings][:2] == [Severity.critical, Severity.high]
    assert result.summary["outlier_hosts"] == ["gpu04", "gpu05", "gpu02"]
    assert result.summary["headline"].startswith("3 odd hosts out of 5: gpu04, gpu05, gpu02 — gpu04: NVIDIA driver 595.71.05")


def test_json_has_findings_and_summary_with_every_key() -> None:
    document = json.loads(json.dumps(fleet(3, {3: old_nccl}).to_json()))
    assert set(document) == {"findings", "ignored", "summary", "known_bad"}  # ignored: what [[ignore]] rules hide
    [finding] = document["findings"]
    assert {"category", "item", "severity", "explanation", "majority", "outliers", "values"} <= set(finding)
    assert finding["outliers"] == [{"host": "gpu03", "value": "2.21.5"}]
    assert finding["majority"] == {"value": "2.27.3", "count": 2}
    assert {"hosts", "outlier_hosts", "agree", "headline"} <= set(document["summary"])


def test_one_host_is_not_a_fleet() -> None:
    with pytest.raises(ValueError):
        compare_fleet({"gpu01": make_snapshot()})



def test_each_hosts_known_bad_states_are_named() -> None:
    result = fleet(3, {3: old_nccl})
    # gpu03's NCCL 2.21.5 is the odd one out, and a known-bad version (its graph-capture deadlock).
    # It also breaks torch's pin on nvidia-nccl-cu12.
    assert list(result.known_bad) == ["gpu03"]
    states = {state.rule: state for state in result.known_bad["gpu03"]}
    assert set(states) == {"known-bad-version", "unmet-requirement"}
    assert "2.21.5" in states["known-bad-version"].why and "sglang/issues/7602" in states["known-bad-version"].reference
    assert states["unmet-requirement"].why == "torch 2.8.0+cu128 requires nvidia-nccl-cu12==2.27.3, but 2.21.5 is installed"


def test_a_file_one_host_had_no_time_to_hash_is_no_odd_value() -> None:
    # gpu02's walk ran out of time before the file: its content there is not known, so it
    # is neither the odd value nor a vote; gpu03's edit is still found.
    from tests.diff.builders import SRT

    path = f"{SRT}/server_args.py"

    def unhashed(facts: Facts) -> None:
        facts["files"]["files"][path].update(sha256=None, error="not hashed: out of time")

    def edited(facts: Facts) -> None:
        facts["files"]["files"][path].update(sha256="f" * 64)

    assert fleet(4, {2: unhashed}).findings == []
    [finding] = fleet(4, {2: unhashed, 3: edited}).findings
    assert finding.item == path and [host for host, _ in finding.outliers] == ["gpu03"], finding.explanation


def test_hosts_that_log_in_as_different_users_compare_their_files_under_home() -> None:
    # The config watches ~/sglang/…: it is /root/sglang on gpu01 and gpu03, and
    # /home/ubuntu/sglang on gpu02, where the same file is the same fact.
    from tests.diff.builders import SRT

    def home(path: str) -> Edit:
        def edit(facts: Facts) -> None:
            files = facts["files"]
            files["home"] = path
            files["files"] = {name.replace("/root/", path + "/", 1): entry for name, entry in files["files"].items()}
        return edit

    assert fleet(3, {1: home("/root"), 2: home("/home/ubuntu"), 3: home("/root")}).findings == []

    def edited_there(facts: Facts) -> None:
        home("/home/ubuntu")(facts)
        facts["files"]["files"][f"{SRT}/server_args.py".replace("/root/", "/home/ubuntu/")]["sha256"] = "f" * 64

    [finding] = fleet(3, {1: home("/root"), 2: edited_there, 3: home("/root")}).findings
    assert finding.item == "~/sglang/python/sglang/srt/server_args.py" and finding.outliers[0][0] == "gpu02"
