"""Fixtures shared by the whole test suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.hooks import Hook
from tests.sshd import Sshd, find_sshd, start_sshd


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
