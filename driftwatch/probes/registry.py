"""The one list that says which probes run. Order here is the order in a snapshot.

Opt-in probes run only where the host's ``[watch]`` settings ask for them (``perf``: the
snapshot or check ``--perf`` flag, or ``[watch] perf = true``); otherwise a snapshot has no
record of them at all, and costs nothing more: their modules are not even imported.
"""

from __future__ import annotations

import importlib

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

# Opt-in probe → (its module, its class), imported only where a host asks for it.
OPT_IN: dict[str, tuple[str, str]] = {"perf": ("driftwatch.probes.perf", "PerfProbe")}
assert OPT_IN.keys() == OPT_IN_PROBES  # settings.OPT_IN_PROBES is what diff/ reads


def opt_in(name: str) -> Probe:
    module, cls = OPT_IN[name]
    probe: Probe = getattr(importlib.import_module(module), cls)()
    return probe


def probes_for(watch: WatchSettings) -> dict[str, Probe]:
    """The default probes, and the opt-in ones this host's settings ask for."""
    wanted = {name: opt_in(name) for name in OPT_IN if getattr(watch, name, False)}
    return {**DEFAULT_PROBES, **wanted} if wanted else DEFAULT_PROBES
