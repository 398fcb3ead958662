"""The one list that says which probes run. Order here is the order in a snapshot.

Opt-in probes run only where the host's ``[watch]`` settings ask for them (``perf``: the
snapshot or check ``--perf`` flag, or ``[watch] perf = true``); otherwise a snapshot has no
record of them at all, and costs nothing more.
"""

from __future__ import annotations

from driftwatch.probes.base import Probe
from driftwatch.probes.caches import CachesProbe
from driftwatch.probes.containers import ContainersProbe
from driftwatch.probes.cuda import CudaProbe
from driftwatch.probes.driver import DriverProbe
from driftwatch.probes.files import FilesProbe
from driftwatch.probes.git import GitProbe
from driftwatch.probes.gpu import GpuProbe
from driftwatch.probes.libraries import LibrariesProbe
from driftwatch.probes.logs import LogsProbe
from driftwatch.probes.models import ModelsProbe
from driftwatch.probes.nccl_conf import NcclConfProbe
from driftwatch.probes.perf import PerfProbe
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
    )
}

OPT_IN: dict[str, Probe] = {probe.name: probe for probe in (PerfProbe(),)}
assert OPT_IN.keys() == OPT_IN_PROBES  # settings.OPT_IN_PROBES is what diff/ reads


def probes_for(watch: WatchSettings) -> dict[str, Probe]:
    """The default probes, and the opt-in ones this host's settings ask for."""
    wanted = {name: probe for name, probe in OPT_IN.items() if getattr(watch, name, False)}
    return {**DEFAULT_PROBES, **wanted} if wanted else DEFAULT_PROBES
