"""The last redaction pass every probe record gets, whatever the probe forgot."""

from __future__ import annotations

from pathlib import Path

from driftwatch.collect import run_probe
from driftwatch.model import ProbeStatus
from driftwatch.probes.base import Facts, ProbeContext, ProbeError
from driftwatch.probes.git import GitProbe
from driftwatch.settings import WatchSettings
from driftwatch.transport.local import LocalTransport
from tests.venvs import git

SLACK = "https://hooks.slack.com/services/T000/B000/SEKRITslack"
SIGNED = "https://b.s3.amazonaws.com/w.bin?X-Amz-Credential=SEKRITcred&X-Amz-Signature=SEKRITsig"


def test_a_secret_in_a_fact_no_probe_redacts_is_not_recorded(tmp_path: Path) -> None:
    # The git probe records commit subjects as they are; someone committed a webhook URL.
    git(tmp_path, "init", "-q")
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", f"alerts go to {SLACK} now, weights at {SIGNED}")
    ctx = ProbeContext(transport=LocalTransport(), watch=WatchSettings(repos=[str(tmp_path)]), timeout=20)
    record = run_probe(GitProbe(), ctx)
    assert record.status is ProbeStatus.ok, record.error
    repo = record.facts["repos"][str(tmp_path)]
    assert repo["subject"] == "alerts go to https://hooks.slack.com/<redacted> now, weights at https://b.s3.amazonaws.com/w.bin?<redacted>"
    assert len(repo["head"]) == 40 and "SEKRIT" not in record.model_dump_json()


class _Failing:
    name = "failing"

    def collect(self, ctx: ProbeContext) -> Facts:
        raise ProbeError("pip: could not fetch https://ci:SEKRITpw@pypi.example.com/simple/torch/")


def test_an_error_message_loses_its_credentials() -> None:
    record = run_probe(_Failing(), ProbeContext(transport=LocalTransport()))
    assert record.status is ProbeStatus.error
    assert record.error == "pip: could not fetch https://ci:<redacted>@pypi.example.com/simple/torch/"
