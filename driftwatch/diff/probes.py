"""Probe health: a probe that broke is a change in itself, never 'facts removed'."""

from __future__ import annotations

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.model import ProbeRecord, ProbeStatus
from driftwatch.settings import OPT_IN_PROBES
from driftwatch.nvidia_errors import read_error

FAILED = (ProbeStatus.error, ProbeStatus.timeout)

# What a hang or failure of each probe usually means on a GPU host.
TIMEOUT_HINTS = {
    "gpu": "nvidia-smi hung?): a wedged driver or a GPU in a bad state",
    "python": "slow or hung filesystem under site-packages?): imports will be slow or hang too",
    "files": "a hung NFS or network mount?): reads of the watched files may hang",
    "git": "a hung mount or a locked repository?): the source tree may be unreadable",
    "cuda": "a hung mount or driver call?): CUDA tools are not answering",
    "system": "the host is overloaded or a mount is hung?)",
    "driver": "a hung driver, systemctl or nvidia tool?)",
    "libraries": "a hung mount under site-packages or the library directories?)",
    "containers": "a hung runtime CLI or a hung mount inside a container?)",
    "canary": "the servers did not answer within the canary's deadline?): their answers are not compared",
}
# What each probe's commands read, as ``pulls``: a failure of the probe is explained by a
# change there or in the host under it (``system``: kernel, mounts, load), by nothing a
# server is launched with. Probes not named here (canary, perf, logs) exercise or read the
# servers themselves: anything may explain them.
PROBE_LAYERS = {
    "gpu": ("driver", "gpu", "system"),
    "driver": ("driver", "system"),
    "cuda": ("cuda", "driver", "system"),
    "python": ("python", "package", "file", "system"),
    "libraries": ("package", "python", "cuda", "file", "system"),
    "files": ("file", "system"),
    "git": ("git", "file", "system"),
    "containers": ("container", "system"),
    "system": ("system", "driver"),
}
ERROR_HINTS = {
    "gpu": "is the NVIDIA driver loaded and nvidia-smi working?",
    "python": "is the configured interpreter still there?",
    "git": "is the repository still there and readable?",
    "canary": "its answers are not compared (a failed canary is never a changed answer)",
}


def comparable(old: ProbeRecord | None, new: ProbeRecord | None) -> bool:
    """Compare facts only when both runs succeeded; else a failure reads as 'all removed'."""
    return (
        old is not None
        and new is not None
        and old.status == ProbeStatus.ok
        and new.status == ProbeStatus.ok
    )


def diff_probe(name: str, old: ProbeRecord | None, new: ProbeRecord | None) -> Change | None:
    old_status = old.status if old is not None else None
    new_status = new.status if new is not None else None
    if old_status == new_status:
        return None
    if name in OPT_IN_PROBES and (old is None or new is None):
        # Asked for on one side only (snapshot --perf, then a cron check without): nothing
        # about the host changed, only what was asked.
        side = "new" if new is None else "old"
        return Change("probe", name, old_status.value if old_status else None, new_status.value if new_status else None,
                      Severity.info, f"{name} was not asked for in the {side} snapshot (opt-in: --{name}); "
                      "its facts are not compared", context=True)
    severity, explanation = _explain(name, old_status, new, old)
    failed = new_status in FAILED
    return Change(
        category="probe",
        item=name,
        old=old_status.value if old_status is not None else None,
        new=new_status.value if new_status is not None else None,
        severity=severity,
        explanation=explanation,
        # A probe that ran and now fails is what broke (nvidia-smi erroring after a driver
        # update), not why: its error text points at the cause.
        symptom=old_status is ProbeStatus.ok and failed,
        headline=_short(name, new) if new is not None and failed else "",
        pulls=PROBE_LAYERS.get(name, ()) if failed else (),
        bounded=failed and name in PROBE_LAYERS,
    )


def _short(name: str, new: ProbeRecord) -> str:
    """``gpu probe failed: … Driver/library version mismatch``: the error's own words, both
    ends; a timeout says what usually hangs (``gpu probe timed out (nvidia-smi hung?): after 10s``)."""
    if new.status == ProbeStatus.timeout:
        hint = TIMEOUT_HINTS.get(name, "a hung command?)").split("?)", 1)[0]
        error = (new.error or "").removeprefix("timed out ")
        return f"{name} probe timed out ({hint}?)" + (f": {fmt.ends(error, 60)}" if error else "")
    return f"{name} probe failed" + (f": {fmt.ends(new.error, 60)}" if new.error else "")


def _explain(
    name: str, was: ProbeStatus | None, new: ProbeRecord | None, old: ProbeRecord | None
) -> tuple[Severity, str]:
    if new is None:
        return (
            Severity.info,
            f"{name} probe is not in the new snapshot (different driftwatch version or config?)",
        )
    if was is None:
        return (
            Severity.info,
            f"{name} probe is new in this snapshot (different driftwatch version or config?)",
        )
    detail = f": {fmt.value(new.error)}" if new.error else ""
    if new.status == ProbeStatus.timeout:
        hint = TIMEOUT_HINTS.get(name, "a hung command?)")
        severity = Severity.high if was == ProbeStatus.ok else Severity.medium
        return severity, f"{name} probe timed out ({hint}{detail}"
    if new.status == ProbeStatus.error:
        said = read_error(new.error) if name == "gpu" else None  # nvidia-smi names the broken layer
        hint = said.hint() if said else ERROR_HINTS.get(name, "its facts could not be read")
        severity = Severity.high if was == ProbeStatus.ok else Severity.medium
        return severity, f"{name} probe failed{detail}: {hint}"
    if new.status == ProbeStatus.skipped:
        return (
            Severity.medium,
            f"{name} probe was skipped{detail} (it ran before): is the tool it needs gone?",
        )
    # Now ok (or skipped before): its facts are back but cannot be compared this time.
    before = f"{was.value}" + (f": {fmt.value(old.error)}" if old is not None and old.error else "")
    return (
        Severity.info,
        f"{name} probe recovered (was {before}); its facts are not compared this time",
    )
