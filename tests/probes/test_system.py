"""The system probe: pure parsing of its sections, and a run on this machine."""

from __future__ import annotations

from driftwatch.collect import run_probe
from driftwatch.model import ProbeStatus
from driftwatch.probes.base import ProbeContext
from driftwatch.probes.system import SystemProbe, parse_system
from driftwatch.transport.local import LocalTransport

# Captured on an 8x H100 host (Ubuntu 22.04, driver 590.48.01).
GPU_HOST = """\
@@hostname gpu01
@@kernel 5.15.0-171-generic
@@os_release Ubuntu 22.04.5 LTS
@@boot_id 0b7c2f3e-4d1a-4bde-9a57-2a4b7f0c9e11
@@machine_id 5f1e0c3a9b2d4e6f8a7b6c5d4e3f2a1b
@@uptime 864123.45
@@memlock unlimited
@@shm_kb 1056763904
@@module nvidia_uvm 590.48.01
@@module nvidia_drm
@@module nvidia 590.48.01
"""


def test_parse_gpu_host() -> None:
    facts = parse_system(GPU_HOST)
    assert facts["hostname"] == "gpu01"
    assert facts["memlock"] == "unlimited"
    assert facts["shm_bytes"] == 1056763904 * 1024
    assert facts["nvidia_modules"] == {"nvidia_uvm": "590.48.01", "nvidia_drm": None, "nvidia": "590.48.01"}
    assert facts["volatile"] == {"uptime_s": 864123.45}


def test_parse_missing_values_are_none() -> None:
    facts = parse_system("@@hostname h\n@@kernel 6.1\n@@boot_id \n@@shm_kb \n")
    assert facts["boot_id"] is None and facts["shm_bytes"] is None and facts["nvidia_modules"] == {}


def test_local_run_has_identity() -> None:
    record = run_probe(SystemProbe(), ProbeContext(transport=LocalTransport()))
    assert record.status is ProbeStatus.ok
    boot_id = open("/proc/sys/kernel/random/boot_id").read().strip()
    assert record.facts["boot_id"] == boot_id
    assert record.facts["kernel"]
