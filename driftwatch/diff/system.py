"""The host itself (the ``system`` probe): reboots, kernel, limits, NVIDIA modules."""

from __future__ import annotations

from typing import Any

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.facts.read import Facts, as_dict

KEYS = frozenset(
    {
        "hostname",
        "kernel",
        "os_release",
        "boot_id",
        "machine_id",
        "memlock",
        "shm_bytes",
        "nvidia_modules",
    }
)

# field → (severity, sentence with {old} and {new}); identity fields are info across hosts.
RULES: dict[str, tuple[Severity, str]] = {
    "boot_id": (
        Severity.medium,
        "the host rebooted (boot id changed): drivers reloaded, /dev/shm and GPU settings reset",
    ),
    "kernel": (
        Severity.high,
        "kernel {old} → {new}: the NVIDIA module was rebuilt or reloaded for it",
    ),
    "os_release": (Severity.medium, "OS {old} → {new}: system libraries were upgraded"),
    "hostname": (Severity.low, "hostname {old} → {new}"),
    "machine_id": (
        Severity.medium,
        "machine id changed: this is another machine or a reinstalled OS",
    ),
    "memlock": (
        Severity.medium,
        "memlock limit {old} → {new}: NCCL over InfiniBand/RDMA needs it unlimited",
    ),
}
IDENTITY = frozenset({"boot_id", "hostname", "machine_id"})


def diff_system(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    changes = []
    for field, (severity, template) in RULES.items():
        o, n = old.get(field), new.get(field)
        if o != n:
            if ctx.different_hosts and field in IDENTITY:
                severity = Severity.info  # two machines differ here by nature
            text = template.format(old=fmt.value(o), new=fmt.value(n))
            changes.append(Change("system", field, o, n, severity, text))
    shm = _shm(old.get("shm_bytes"), new.get("shm_bytes"))
    changes += [shm] if shm else []
    # The modules probe reads the same modules with what they provide; it speaks for them.
    if not any(ctx.facts_of("modules")):
        changes += _modules(as_dict(old.get("nvidia_modules")), as_dict(new.get("nvidia_modules")))
    return changes


def _shm(old: Any, new: Any) -> Change | None:
    if old == new:
        return None
    o, n = fmt.number(old), fmt.number(new)
    smaller = o is not None and n is not None and n < o
    # NCCL and dataloader workers live in /dev/shm; too small fails at the first collective.
    severity = Severity.high if smaller else Severity.low
    text = f"/dev/shm {fmt.size(old)} → {fmt.size(new)}" + (
        ": NCCL and dataloaders need shared memory" if smaller else ""
    )
    return Change("system", "/dev/shm", old, new, severity, text)


def _modules(old: Facts, new: Facts) -> list[Change]:
    changes = []
    # A loaded module may have no version (null), so presence is judged by key here.
    names = sorted(
        k for k in old.keys() | new.keys() if k not in old or k not in new or old[k] != new[k]
    )
    for name in names:
        if name not in old:
            text = f"kernel module {name} {fmt.value(new.get(name))} is now loaded"
            changes.append(Change("driver", name, None, new.get(name), Severity.medium, text))
        elif name not in new:
            text = (
                f"kernel module {name} is no longer loaded (was {fmt.value(old.get(name))}): "
                "what it provides is gone"
            )
            changes.append(Change("driver", name, old.get(name), None, Severity.high, text))
        else:
            was, now = fmt.value(old.get(name)), fmt.value(new.get(name))
            text = f"kernel module {name} {was} → {now}: the driver was reloaded"
            changes.append(
                Change("driver", name, old.get(name), new.get(name), Severity.high, text)
            )
    return changes
