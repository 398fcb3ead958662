"""The one list that says which probes run. Order here is the order in a snapshot."""

from __future__ import annotations

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

# What `driftwatch canary` collects: the canary, the servers it asks (their command lines
# are evidence of what answered), and the system facts that tell one host from another.
CANARY_ONLY = ("system", "processes", "canary")


def probes_for(
    canary: bool, settings: CanarySettings | None = None, url: str | None = None, only_canary: bool = False
) -> dict[str, Probe]:
    """The probes of one snapshot: the defaults, plus the opt-in canary when asked for
    (``only_canary``: the canary and the few probes it stands on)."""
    if not (canary or only_canary):
        return DEFAULT_PROBES
    probes = {**DEFAULT_PROBES, "canary": CanaryProbe(settings, url)}
    if only_canary:
        return {name: probes[name] for name in CANARY_ONLY}
    return probes
