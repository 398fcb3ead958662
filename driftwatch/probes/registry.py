"""The one list that says which probes run. Order here is the order in a snapshot."""

from __future__ import annotations

from driftwatch.probes.base import Probe
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
