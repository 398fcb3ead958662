"""The rulebook: every rule by name, and ``diagnose`` that runs them over one snapshot.

A rule is a small pure function ``Host -> list[Finding]``; the registry's key is its name
(what ``doctor --json`` and the alert fingerprints call it). A rule whose facts are not in
the snapshot raises :class:`~driftwatch.rules.host.Missing` and is listed as not run; one
that meets facts of a shape it does not know (a foreign or older snapshot) is too, and
never crashes the report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from driftwatch.model import Snapshot
from driftwatch.rules import (
    caches,
    containers,
    driver_cuda,
    driver_layers,
    engine,
    engine_defaults,
    gpu_power,
    imports,
    gpu_state,
    known_bad,
    launch,
    libraries,
    perf,
    modules,
    nvml,
    requirements,
    settings,
)
from driftwatch.rules.finding import Diagnosis, Finding, NotRun
from driftwatch.rules.host import Host, Missing, RuleOptions

Rule = Callable[[Host], list[Finding]]

RULES: dict[str, Rule] = {
    # the stack: does what is installed fit together and fit the driver?
    "driver-below-cuda-build": driver_cuda.driver_below_builds,
    "green-contexts-need-driver": driver_cuda.green_contexts,
    "unmet-requirement": requirements.unmet_requirements,
    "shadowed-package": imports.shadowed_packages,
    "user-bin-shadows-command": imports.user_bin_commands,
    "known-bad-version": known_bad.known_bad_versions,
    # the stack as loaded (libraries, caches)
    "file-two-owners": libraries.file_two_owners,
    "modified-install": libraries.modified_installs,
    "shadowed-library": libraries.shadowed_libraries,
    "stale-compile-cache": caches.stale_caches,
    # the driver's layers
    "kernel-module-vs-userspace": driver_layers.kernel_module_vs_userspace,
    "fabric-manager": driver_layers.fabric_manager,
    "gpudirect-rdma-missing": modules.gpudirect_rdma_missing,
    "nccl-misses-nvidia-peermem": modules.nccl_misses_peermem,
    "nvidia-smi-says": nvml.nvidia_smi_says,
    # how the server is launched
    "kv-budget-sglang": launch.sglang_budget,
    "kv-budget-vllm": launch.vllm_budget,
    "visible-devices-below-parallelism": settings.visible_devices,
    "expandable-segments-custom-allreduce": settings.expandable_segments,
    **{rule: settings.switch_rule(rule) for rule in settings.SWITCHES},
    "nccl-debug-unset": settings.nccl_debug_unset,
    # what the server runs under: its container's /dev/shm, CPU quota, memlock
    "shm-too-small": containers.shm_too_small,
    "cpu-limit-below-threads": containers.cpu_limit_below_threads,
    "memlock-small-with-rdma": containers.memlock_small_with_rdma,
    "engine-setting-ignored": engine.ignored_settings,
    "moved-default": engine_defaults.moved_defaults_rule,
    # the GPUs
    "uncorrected-ecc": gpu_state.uncorrected_ecc,
    "pending-memory-repair": gpu_state.pending_memory_repair,
    "pcie-link-degraded": gpu_state.pcie_degraded,
    "persistence-off": gpu_state.persistence_off,
    "mig-on-server-gpu": gpu_state.mig_enabled,
    "other-process-on-server-gpu": gpu_state.other_process_memory,
    "free-memory-below-fraction": gpu_state.free_below_fraction,
    # what the host delivers (the opt-in perf probe)
    "perf-below-peak": perf.below_peak,
    "perf-all-reduce-below-nvlink": perf.allreduce_below_nvlink,
    "perf-gpu-below-siblings": perf.below_siblings_rule,
    "perf-hardware-slowdown": perf.hardware_slowdown,
    "power-limit-below-default": gpu_power.power_below_default,
    "clocks-held-while-idle": gpu_power.clocks_held_while_idle,
}
# Facts of an unexpected shape: the rule cannot read them, which is not a finding.
SHAPE_ERRORS = (TypeError, AttributeError, KeyError, ValueError, IndexError)


def diagnose(snapshot: Snapshot, options: RuleOptions | None = None, rules: dict[str, Rule] | None = None) -> Diagnosis:
    host = Host(snapshot, options or RuleOptions())
    findings: list[Finding] = []
    not_run: list[NotRun] = []
    ran: set[str] = set()
    for name, rule in (rules if rules is not None else RULES).items():
        try:
            found = rule(host)
        except Missing as exc:
            not_run.append(NotRun(name, str(exc)))
            continue
        except SHAPE_ERRORS as exc:
            not_run.append(NotRun(name, f"facts of an unexpected shape ({type(exc).__name__}: {exc})"))
            continue
        ran.add(name)
        findings += [replace(f, rule=name) for f in found]
    ranked = sorted(findings, key=lambda f: (-f.severity.rank, not f.observed))
    return Diagnosis(ranked, not_run, frozenset(ran))
