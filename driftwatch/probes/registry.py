"""The one list that says which probes run. Order here is the order in a snapshot.

Opt-in probes run only where the host's ``[watch]`` settings ask for them (``perf``: the
snapshot or check ``--perf`` flag, or ``[watch] perf = true``); otherwise a snapshot has no
record of them at all, and costs nothing more: their modules are not even imported.
"""

from __future__ import annotations

import importlib

from driftwatch.canary.settings import CanarySettings
from driftwatch.probes.base import Probe
from driftwatch.probes.canary import CanaryProbe
from driftwatch.probes.caches import CachesProbe
from driftwatch.probes.containers import ContainersProbe
from driftwatch.probes.cuda import CudaProbe
from driftwatch.probes.driver import DriverProbe
from driftwatch.probes.engine import EngineProbe
from driftwatch.probes.files import FilesProbe
from driftwatch.probes.git import GitProbe
from driftwatch.probes.gpu import GpuProbe
from driftwatch.probes.libraries import LibrariesProbe
from driftwatch.probes.logs import LogsProbe
from driftwatch.probes.models import ModelsProbe
from driftwatch.probes.modules import ModulesProbe
from driftwatch.probes.nccl_conf import NcclConfProbe
from driftwatch.probes.processes import ProcessesProbe
from driftwatch.probes.python import PythonProbe
from driftwatch.probes.system import SystemProbe
from driftwatch.settings import OPT_IN_PROBES, WatchSettings

DEFAULT_PROBES: dict[str, Probe] = {
    probe.name: probe
    for probe in (
        SystemProbe(),
        GpuProbe(),
        DriverProbe(),
        ModulesProbe(),
        PythonProbe(),
        CudaProbe(),
        GitProbe(),
        FilesProbe(),
        ProcessesProbe(),
        LogsProbe(),
        CachesProbe(),
        NcclConfProbe(),
        ModelsProbe(),
        LibrariesProbe(),
        ContainersProbe(),
        EngineProbe(),
    )
}

# Opt-in probe → (its module, its class), imported only where a host asks for it.
OPT_IN: dict[str, tuple[str, str]] = {"perf": ("driftwatch.probes.perf", "PerfProbe")}
assert OPT_IN.keys() == OPT_IN_PROBES  # settings.OPT_IN_PROBES is what diff/ reads
# What `driftwatch canary` collects: the canary, the servers it asks (their command lines
# are evidence of what answered), and the system facts that tell one host from another.
CANARY_ONLY = ("system", "processes", "canary")


def opt_in(name: str) -> Probe:
    module, cls = OPT_IN[name]
    probe: Probe = getattr(importlib.import_module(module), cls)()
    return probe


def probes_for(
    watch: WatchSettings, canary: bool = False, settings: CanarySettings | None = None, url: str | None = None,
    only_canary: bool = False,
) -> dict[str, Probe]:
    """The probes of one snapshot: the defaults, the opt-in ones this host's settings ask for
    (perf), and the canary when asked for (``only_canary``: the canary and the few probes it
    stands on)."""
    wanted = {name: opt_in(name) for name in OPT_IN if getattr(watch, name, False)}
    if canary or only_canary:
        wanted["canary"] = CanaryProbe(settings, url)
    if only_canary:
        return {name: {**DEFAULT_PROBES, **wanted}[name] for name in CANARY_ONLY}
    return {**DEFAULT_PROBES, **wanted} if wanted else DEFAULT_PROBES
