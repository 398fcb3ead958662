"""driftwatch_info: what a host runs as low-churn labels, for fleet queries in Prometheus."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from driftwatch.cli import main
from driftwatch.cron.info import INFO_LABELS, MAX_VALUE, info_labels
from driftwatch.cron.textfile import write_textfile
from driftwatch.model import ProbeRecord, ProbeStatus
from tests.builders import snapshot
from tests.localhost import local_host


def info_samples(prom: Path) -> list[dict[str, str]]:
    return [
        s.labels
        for family in text_string_to_metric_families(prom.read_text())
        for s in family.samples
        if s.name == "driftwatch_info" and s.value == 1
    ]


def python(*interpreters: dict) -> dict:
    return {"interpreters": {f"/opt/env{i}/bin/python": facts for i, facts in enumerate(interpreters)}}


def dists(**versions: str) -> dict:
    return {"version": "3.12.3", "distributions": {name.replace("_", "-"): {"version": v} for name, v in versions.items()}}


def test_a_real_local_snapshot_gives_every_label(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_host(tmp_path, monkeypatch, watch="processes = []\n")  # a GPU venv, nvidia-smi replaying an H200
    assert main(["check", "local", "--baseline", "none", "--textfile", str(tmp_path / "prom")]) == 1  # no baseline
    [prom] = (tmp_path / "prom").glob("driftwatch_*.prom")  # named after the host `local` is stored as
    [labels] = info_samples(prom)
    assert prom.name == f"driftwatch_{labels.pop('host')}.prom"
    assert labels == {
        "driver": "590.48.01", "cuda": "12.8", "torch": "2.8.0+cu128", "nccl": "2.27.3",
        "sglang": "0.5.6", "sgl_kernel": "0.3.16.post4", "vllm": "", "flashinfer": "0.4.1",
        "gpu_model": "NVIDIA H200", "gpu_count": "1", "image_id": "",
    }


def test_unknown_is_empty_never_a_guess() -> None:
    failed = ProbeRecord(status=ProbeStatus.timeout, error="nvidia-smi hung")
    snap = snapshot(python=python(dists(torch="2.8.0")))
    snap.probes["gpu"] = failed
    labels = info_labels(snap)
    assert labels["driver"] == labels["gpu_count"] == labels["gpu_model"] == ""  # not "0" GPUs: unknown
    assert labels["torch"] == "2.8.0" and labels["sglang"] == ""
    no_gpu = info_labels(snapshot(gpu={"driver_version": "590.48.01", "cuda_version": "13.1", "gpus": {}}))
    assert no_gpu["gpu_count"] == "0" and no_gpu["driver"] == "590.48.01"


def test_an_unreadable_interpreter_hides_what_later_ones_hold() -> None:
    first_wins = info_labels(snapshot(python=python(dists(torch="2.9.0"), dists(torch="2.8.0", vllm="0.11.0"))))
    assert (first_wins["torch"], first_wins["vllm"]) == ("2.9.0", "0.11.0")
    unreadable = info_labels(snapshot(python=python({"error": "timed out"}, dists(torch="2.8.0"))))
    assert unreadable["torch"] == ""


def test_nccl_is_the_wheel_else_the_system_library() -> None:
    both = {"nccl": {"distributions": {"nvidia-nccl-cu12": "2.27.3"}, "system": {"/usr/lib/libnccl.so.2.21.5": "2.21.5"}}}
    assert info_labels(snapshot(cuda=both))["nccl"] == "2.27.3"
    system = {"nccl": {"distributions": {}, "system": {"/usr/lib/libnccl.so.2.21.5": "2.21.5"}}}
    assert info_labels(snapshot(cuda=system))["nccl"] == "2.21.5"


def test_values_are_clean_bounded_and_the_labels_fixed(tmp_path: Path) -> None:
    hostile = "0.5.6\n\x1b]0;pwned\x07" + "9" * 300
    labels = info_labels(snapshot(python=python(dists(sglang=hostile))))
    assert list(labels) == list(INFO_LABELS)
    assert len(labels["sglang"]) == MAX_VALUE and labels["sglang"].startswith("0.5.6\\n\\x1b]0;pwned\\x07")
    prom = write_textfile(tmp_path, "gpu01", snapshot=snapshot(python=python(dists(sglang=hostile))), result=None)
    [sample] = info_samples(prom)
    assert sample["sglang"] == labels["sglang"]


def test_a_host_not_reached_has_no_info(tmp_path: Path) -> None:
    assert info_samples(write_textfile(tmp_path, "gpu01", snapshot=None, result=None)) == []


def test_image_id_and_packages_of_containerised_servers() -> None:
    def server(image_id: str, sgl_kernel: str) -> dict:
        return {"container": {"image": {"ref": "lmsysorg/sglang:latest", "id": image_id}},
                "python": {"error": None, "distributions": {"sgl-kernel": {"version": sgl_kernel}}}}

    containers = {"servers": {"a": server("sha256:" + "c" * 64, "0.3.17"), "b": server("sha256:" + "c" * 64, "0.3.17"),
                              "host": {"container": None}}, "kernel": {}}
    labels = info_labels(snapshot(python=python(dists(torch="2.8.0")), containers=containers))
    assert labels["image_id"] == "c" * 12  # one value for many containers of one image: bounded cardinality
    assert labels["sgl_kernel"] == "0.3.17" and labels["torch"] == "2.8.0"  # the host's own interpreter first
    containers["servers"]["b"] = server("d" * 64, "0.3.16")  # podman's ids have no sha256: prefix
    assert info_labels(snapshot(containers=containers))["image_id"] == "c" * 12 + "," + "d" * 12
