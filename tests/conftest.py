"""Fixtures shared by the whole test suite.

Every test is hermetic (``isolated``, autouse): it runs on a GPU box where SGLang and vLLM
servers run, ``/etc/nccl.conf`` exists and the user's HOME holds caches, profiles and a
driftwatch config, and sees none of them (``.ci/gpubox`` runs the suite in such a box).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hermetic import isolate

from tests.hooks import Hook
from tests.llama import LlamaServer, new_server, require
from tests.s3 import S3Server, start_moto
from tests.sshd import Sshd, find_sshd, start_sshd


# The files whose tests take tens of seconds each (a real model answering on the CPU, real pip
# installs, a one-node Slurm) run first: with `--dist worksteal` the other workers take the short
# tests meanwhile, and no long test starts last, beside an idle core.
SLOW_FIRST = (
    "tests/probes/test_canary_llama.py",
    "tests/test_cli_canary.py",
    "tests/test_install.py",
    "tests/contrib/test_slurm_healthcheck.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in SLOW_FIRST)  # stable: the rest keep their order


@pytest.fixture(autouse=True)
def isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Each test hermetic: see tests/hermetic.py."""
    yield isolate(tmp_path_factory.mktemp("home"), monkeypatch)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """A real OpenSSH server on 127.0.0.1, for the whole session (see tests/sshd.py)."""
    exe = find_sshd()
    if exe is None:
        pytest.skip("OpenSSH sshd is not installed (apt-get install openssh-server; .ci/run does it)")
    server = start_sshd(tmp_path_factory.mktemp("sshd"), exe)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def hook() -> Iterator[Hook]:
    """Alerts sent with --notify hook.url land in hook.posts."""
    server = Hook()
    yield server
    server.close()


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A real S3 endpoint (moto's server) on 127.0.0.1, for the whole session (see tests/s3.py)."""
    for module in ("moto", "s3fs", "boto3"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"SKIPPED LOUDLY: {module} is not installed (pip install -e '.[test]'; .ci/run does it)")
    server = start_moto(tmp_path_factory.mktemp("moto") / "moto.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """A real llama-cpp-python server with SmolLM2-135M on the CPU, for the whole session
    (see tests/llama.py); skipped loudly when the packages are not installed."""
    require()
    server = new_server(tmp_path_factory.mktemp("llama")).start()
    try:
        yield server
    finally:
        server.stop()
