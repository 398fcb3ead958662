"""The engine probe on real venvs: an engine's version, and whether its source names a setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftwatch.probes import engine
from driftwatch.probes.base import ProbeContext, ProbeError, ProbeSkipped
from driftwatch.probes.engine import EngineProbe, server_pythons, settings_set
from driftwatch.settings import WatchSettings
from driftwatch.transport.local import LocalTransport
from tests.venvs import site_packages, write_dist_info

ENVS = 'import os\nX = os.getenv("VLLM_ATTENTION_BACKEND")\nY = envs.VLLM_USE_V1\n'


def venv(tmp_path: Path, envs: str = ENVS) -> Path:
    import subprocess
    import sys

    tmp_path.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    write_dist_info(site_packages(tmp_path / "v"), "vllm", "vllm", "0.13.0", [],
                    {"vllm/__init__.py": "", "vllm/envs.py": envs, "vllm/data.txt": "VLLM_NOT_IN_PY"})
    return tmp_path / "v" / "bin" / "python"


def collect(python: Path, previous: dict[str, object] | None = None) -> dict[str, object]:
    ctx = ProbeContext(transport=LocalTransport(), watch=WatchSettings(python=[str(python)], processes=[]),
                       previous=previous or {})
    return EngineProbe().collect(ctx)


def test_names_the_source_holds_and_the_ones_it_never_names(tmp_path: Path) -> None:
    facts = collect(venv(tmp_path))
    vllm = facts["engines"]["vllm"]  # type: ignore[index]
    assert vllm["version"] == "0.13.0" and vllm["interpreter"] == str(tmp_path / "v" / "bin" / "python")
    assert vllm["names"]["VLLM_ATTENTION_BACKEND"] is True
    assert vllm["names"]["VLLM_USE_CUDNN_PREFILL"] is False  # retired by the data file, never named here
    assert vllm["files"] == 2 and vllm["truncated"] is None and vllm["error"] is None


def test_the_previous_snapshot_is_the_cache_while_record_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python = venv(tmp_path)
    first = collect(python)
    again = collect(python, previous=first)
    assert again["engines"]["vllm"]["names"] == first["engines"]["vllm"]["names"]  # type: ignore[index]
    assert again["engines"]["vllm"]["files"] == 0  # type: ignore[index]  (nothing read again)


def test_no_engine_no_run() -> None:
    facts = EngineProbe().collect(ProbeContext(transport=LocalTransport(), watch=WatchSettings(python=[], processes=[])))
    assert facts == {"engines": {}, "settings": {}, "interpreters": {}, "environments_error": None}


@pytest.mark.parametrize("unread", [ProbeError("no result from the target: exit 1"), ProbeSkipped("no /proc")])
def test_servers_unread_and_no_engine_is_not_the_fact_no_engine(
    unread: ProbeError | ProbeSkipped, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The servers' interpreters were never learnt: "no engine" would be a false fact that a
    # diff reads as the engine removed. The probe ends the way the processes probe did.
    def fail(ctx: ProbeContext) -> dict[str, object]:
        raise unread

    monkeypatch.setattr(engine, "observed", fail)
    ctx = ProbeContext(transport=LocalTransport(), watch=WatchSettings(python=[], processes=[]))
    with pytest.raises(type(unread), match=f"environments not read: {unread}"):
        EngineProbe().collect(ctx)


def test_settings_and_server_pythons_from_the_processes_facts() -> None:
    facts = {"servers": {"vllm serve": {"argv": ["/venv/bin/vllm", "serve", "m"], "env": {"VLLM_X": "1", "CUDA_Y": "2"}},
                         "api": {"argv": ["/opt/py/bin/python3.12", "-m", "vllm.entrypoints.openai.api_server"],
                                 "env": {"SGLANG_Z": ""}}},
             "login_env": {"VLLM_X": "1"}}
    assert settings_set(facts) == {"VLLM_X": ["login env", "server vllm serve"]}
    assert server_pythons(facts) == ["/venv/bin/python", "/opt/py/bin/python3.12"]


def test_an_interpreter_without_an_engine_is_asked_alongside_but_not_reported(tmp_path: Path) -> None:
    """Every configured interpreter is asked at once (so a slow start is paid once, beside the
    python probe's); one whose distributions hold no engine is then left out of the facts."""
    import subprocess
    import sys

    with_vllm = venv(tmp_path / "a")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "b")], check=True)
    plain = tmp_path / "b" / "bin" / "python"
    ctx = ProbeContext(transport=LocalTransport(), watch=WatchSettings(python=[str(plain), str(with_vllm)], processes=[]))
    facts = EngineProbe().collect(ctx)
    assert facts["interpreters"] == {str(with_vllm): None}
    assert facts["engines"]["vllm"]["interpreter"] == str(with_vllm)  # type: ignore[index]


def test_the_engine_run_does_not_wait_for_the_python_probes(tmp_path: Path) -> None:
    """A slow interpreter start (a venv on NFS) is paid once: the engine collector starts
    while the python probe's run of the same interpreter is still starting, not after it."""
    from driftwatch.collect import collect_snapshot
    from driftwatch.config import Target
    from driftwatch.probes.engine import EngineProbe as Engine
    from driftwatch.probes.python import PythonProbe

    python = venv(tmp_path)
    log = tmp_path / "starts.log"
    slow = tmp_path / "slow-python"
    # Which collector a run is (the engine's carries its REQUEST), logged as it starts and as
    # it goes on after a pause long enough for the other probe's run to start meanwhile.
    slow.write_text(f'#!/bin/sh\nf=$(mktemp)\ncat > "$f"\nk=other\ngrep -q "^REQUEST = " "$f" && k=engine\n'
                    f'echo "start $k" >> {log}\nsleep 3\necho "exec $k" >> {log}\n'
                    f'{python} "$@" < "$f"; rc=$?\nrm -f "$f"\nexit $rc\n')
    slow.chmod(0o755)
    target = Target(name="local", address="local", watch=WatchSettings(python=[str(slow)], processes=[]))
    snapshot = collect_snapshot(target, LocalTransport(), {"python": PythonProbe(), "engine": Engine()}, timeout=30)
    assert snapshot.probes["engine"].facts["engines"]["vllm"]["version"] == "0.13.0"
    lines = log.read_text().splitlines()
    assert lines.index("start engine") < lines.index("exec other"), lines
