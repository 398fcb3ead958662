"""GPU state: ECC, PCIe links, persistence, MIG, other processes, free memory."""

from __future__ import annotations

from typing import Any

from driftwatch.model import ProbeStatus
from driftwatch.severity import Severity
from tests.diff.builders import GPU0, GPU1, failed
from tests.rules.builders import SGLANG, VLLM, baseline, found, logs, make_snapshot, not_run, processes, server
from tests.seed import seed_log


def gpus(**fields: Any) -> dict[str, Any]:
    facts = baseline()
    facts["gpu"]["gpus"][GPU0].update(fields)
    return facts


def test_uncorrected_ecc_errors_are_critical_and_observed() -> None:
    [finding] = found("uncorrected-ecc", make_snapshot(**gpus(ecc_uncorrected_volatile=2)))
    assert finding.severity is Severity.critical and finding.observed and finding.subjects == (("gpu", GPU0),)
    assert finding.why.startswith("GPU 0 (H200, 00000000:83:00.0) has 2 uncorrected ECC errors") and "drain" in finding.fix
    assert found("uncorrected-ecc", make_snapshot()) == []
    facts = baseline()
    for gpu in facts["gpu"]["gpus"].values():
        gpu["ecc_uncorrected_volatile"] = None  # ECC off: nvidia-smi says [N/A]
    assert "no ECC error counters" in not_run("uncorrected-ecc", make_snapshot(**facts))


def busy(pct: int, **fields: Any) -> dict[str, Any]:
    facts = gpus(**fields)
    facts["gpu"]["gpus"][GPU0]["volatile"]["utilization_gpu_pct"] = pct
    return facts


def test_a_pcie_link_below_its_maximum_while_busy() -> None:
    [gen] = found("pcie-link-degraded", make_snapshot(**busy(95, pcie_gen=3)))
    assert gen.severity is Severity.medium and "gen 3 of 5" in gen.why and "95% busy" in gen.why
    [width] = found("pcie-link-degraded", make_snapshot(**busy(95, pcie_width=8)))
    assert width.severity is Severity.high and "width x8 of 16" in width.why
    assert found("pcie-link-degraded", make_snapshot(**busy(0, pcie_gen=1))) == []  # idle: power saving


def test_persistence_off() -> None:
    [finding] = found("persistence-off", make_snapshot(**gpus(persistence_mode="Disabled")))
    assert finding.severity is Severity.low and "nvidia-persistenced" in finding.fix
    assert found("persistence-off", make_snapshot()) == []
    assert "the gpu probe timeout" in not_run("persistence-off", make_snapshot(gpu=failed(ProbeStatus.timeout, "hung")))


def with_server(facts: dict[str, Any], *argv: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    facts["processes"] = processes(server(*(argv or SGLANG), env=env or {}))
    return facts


def test_mig_on_a_gpu_the_server_uses() -> None:
    [finding] = found("mig-on-server-gpu", make_snapshot(**with_server(gpus(mig_mode="Enabled"))))
    assert finding.severity is Severity.high and "sglang server expects as whole GPUs" in finding.why
    hidden = with_server(gpus(mig_mode="Enabled"), env={"CUDA_VISIBLE_DEVICES": "1"})
    assert found("mig-on-server-gpu", make_snapshot(**hidden)) == []
    assert "no server is running or logged" in not_run("mig-on-server-gpu", make_snapshot(**gpus(mig_mode="Enabled")))


def holder(facts: dict[str, Any], name: str, mib: int, uuid: str = GPU0, pid: int = 10291) -> dict[str, Any]:
    facts["gpu"]["processes"][f"{uuid}:{pid}"] = {"gpu_uuid": uuid, "pid": pid, "name": name, "used_mib": mib}
    return facts


def test_another_process_holding_memory_on_the_servers_gpu() -> None:
    facts = holder(with_server(baseline(), *SGLANG, "--tp", "2"), "/root/tools/memhog", 22528)
    [finding] = found("other-process-on-server-gpu", make_snapshot(**facts))
    assert finding.severity is Severity.high and not finding.observed
    assert finding.why.startswith("pid 10291 (/root/tools/memhog) holds 22.0 GiB on GPU 0 (H200, 00000000:83:00.0)")
    assert finding.subjects == (("gpu-process", f"{GPU0}:10291"), ("gpu", GPU0))
    # The server's own ranks (its worker pids, whatever their names) and GPUs it does not use are no evidence.
    for pid, name in ((4250, "sglang::scheduler_TP0"), (4242, "python3"), (4251, "/opt/foreign-name")):
        own = holder(with_server(baseline(), *SGLANG, "--tp", "2"), name, 60000, pid=pid)
        assert found("other-process-on-server-gpu", make_snapshot(**own)) == []
    elsewhere = holder(with_server(baseline(), *SGLANG, "--tp", "1"), "/root/tools/memhog", 22528, uuid=GPU1)
    assert found("other-process-on-server-gpu", make_snapshot(**elsewhere)) == []
    unlisted = with_server(baseline(), *SGLANG)
    unlisted["gpu"]["processes"] = None
    assert "could not list" in not_run("other-process-on-server-gpu", make_snapshot(**unlisted))


def test_a_python_job_that_is_not_the_server_is_another_process() -> None:
    # Most foreign GPU jobs are Python: a training script, a notebook, another server's rank.
    for name in ("python3", "/usr/bin/python", "python -m sglang.launch_server", "ray::IDLE", "torchrun"):
        facts = holder(with_server(baseline(), *SGLANG, "--tp", "2"), name, 22528, pid=31337)
        [finding] = found("other-process-on-server-gpu", make_snapshot(**facts))
        assert finding.why.startswith(f"pid 31337 ({name}) holds 22.0 GiB on GPU 0")
    # A snapshot that does not record the server's workers cannot tell them apart: it says nothing.
    old = holder(with_server(baseline(), *SGLANG, "--tp", "2"), "python3", 22528, pid=31337)
    for server_facts in old["processes"]["servers"].values():
        del server_facts["volatile"]["descendants"]
    assert "worker processes" in not_run("other-process-on-server-gpu", make_snapshot(**old))


def test_the_log_showing_the_failure_makes_it_observed() -> None:
    facts = holder(baseline(), "/root/tools/memhog", 22528)
    facts["processes"] = processes()  # the server died
    facts["logs"] = logs(seed_log(0.88, fails=True))
    [finding] = found("other-process-on-server-gpu", make_snapshot(**facts))
    assert finding.observed and "Not enough memory" in finding.why


def test_free_memory_below_what_the_fraction_needs() -> None:
    # SGLang 0.88 on 140 GiB leaves 16.8 GiB free after 71.7 GiB of weights: it needs 88.6 GiB free.
    facts = gpus(memory_free_mib=60 * 1024)
    facts["processes"] = processes()
    facts["logs"] = logs(seed_log(0.88, fails=False))
    findings = found("free-memory-below-fraction", make_snapshot(**facts))
    assert [f.subjects for f in findings] == [(("gpu", GPU0),)]
    assert findings[0].severity is Severity.critical and "60.0 GiB free" in findings[0].why
    facts["gpu"]["gpus"][GPU0]["memory_free_mib"] = 140 * 1024
    assert found("free-memory-below-fraction", make_snapshot(**facts)) == []
    running = with_server(gpus(memory_free_mib=1024), *SGLANG)
    running["logs"] = logs(seed_log(0.88, fails=False))
    assert "running" in not_run("free-memory-below-fraction", make_snapshot(**running))


def test_vllm_needs_its_utilization_free() -> None:
    facts = gpus(memory_free_mib=100 * 1024)
    facts["processes"] = processes()
    facts["logs"] = (logs(
        "INFO 01-11 05:52:49 api_server.py:713] non-default args: {'model': '/models/Llama-3.1-70B', "
        "'tensor_parallel_size': 1, 'gpu_memory_utilization': 0.9}\n"
        "ValueError: Free memory on device (100.0/140.4 GiB) on startup is less than desired GPU memory "
        "utilization (0.9, 126.4 GiB).\n"
    ))
    [finding] = found("free-memory-below-fraction", make_snapshot(**facts))
    assert finding.observed and "--gpu-memory-utilization 0.9" in finding.why
    assert VLLM[0] == "vllm"


def test_a_pending_row_remap_or_failed_remap_says_drain_and_reset() -> None:
    def repair(state: dict[str, str]) -> Any:
        facts = baseline()
        for gpu in facts["gpu"]["gpus"].values():  # what H100/H200 drivers answer when healthy
            gpu.update(retired_pages_pending=None, remapped_rows_pending="No", remapped_rows_failure="No")
        facts["gpu"]["gpus"][GPU0].update(state)
        return make_snapshot(**facts)

    assert found("pending-memory-repair", repair({})) == []
    [pending] = found("pending-memory-repair", repair({"remapped_rows_pending": "Yes"}))
    assert pending.severity is Severity.high and pending.observed and pending.subjects == (("gpu", GPU0),)
    assert "row remap is pending" in pending.why and "reset the GPU" in pending.fix
    [failed] = found("pending-memory-repair", repair({"remapped_rows_pending": "Yes", "remapped_rows_failure": "Yes"}))
    assert failed.severity is Severity.critical and "replace the GPU" in failed.fix
    # An older snapshot (or a GPU that reports none of these): the rule says it could not run.
    assert "no retired-page or remapped-row state" in not_run("pending-memory-repair", make_snapshot())
