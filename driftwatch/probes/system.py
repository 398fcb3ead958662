"""System facts: who the host is, when it booted, and the limits a GPU server runs into."""

from __future__ import annotations

from driftwatch.probes.base import Facts, ProbeContext, ProbeError
from driftwatch.probes.sections import first, parse_sections

# Plain POSIX sh and /proc reads: every line is independent, so one missing tool only
# empties its own fact.
SCRIPT = r"""
echo "@@hostname $(hostname 2>/dev/null || cat /proc/sys/kernel/hostname)"
echo "@@kernel $(uname -r)"
echo "@@os_release $( (. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") )"
echo "@@boot_id $(cat /proc/sys/kernel/random/boot_id 2>/dev/null)"
echo "@@machine_id $(cat /etc/machine-id 2>/dev/null)"
echo "@@uptime $(cut -d' ' -f1 /proc/uptime 2>/dev/null)"
echo "@@memlock $(ulimit -l 2>/dev/null)"
echo "@@shm_kb $(df -kP /dev/shm 2>/dev/null | awk 'NR==2 {print $2}')"
for m in $(awk '$1 ~ /^nvidia/ {print $1}' /proc/modules 2>/dev/null); do
  echo "@@module $m $(cat /sys/module/$m/version 2>/dev/null)"
done
"""


def parse_system(text: str) -> Facts:
    sections = parse_sections(text)
    modules: dict[str, str | None] = {}
    for line in sections.get("module", []):
        name, _, version = line.partition(" ")
        modules[name] = version.strip() or None
    shm_kb = first(sections, "shm_kb")
    uptime = first(sections, "uptime")
    return {
        "hostname": first(sections, "hostname"),
        "kernel": first(sections, "kernel"),
        "os_release": first(sections, "os_release"),
        "boot_id": first(sections, "boot_id"),
        "machine_id": first(sections, "machine_id"),
        "memlock": first(sections, "memlock"),
        "shm_bytes": int(shm_kb) * 1024 if shm_kb and shm_kb.isdigit() else None,
        "nvidia_modules": modules,
        "volatile": {"uptime_s": _float(uptime)},
    }


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class SystemProbe:
    name = "system"

    def collect(self, ctx: ProbeContext) -> Facts:
        result = ctx.run(SCRIPT)
        facts = parse_system(result.text)
        if facts["kernel"] is None:
            raise ProbeError(f"no system facts: {result.error_text or 'empty output'}")
        return facts
