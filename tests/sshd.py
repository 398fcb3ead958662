"""A throwaway OpenSSH server on 127.0.0.1 for tests that need a real SSH peer.

Everything lives in one temp directory: host key, client key, authorized_keys, a
known_hosts that trusts the host key, and an ssh config with two aliases:

    testhost   HostName 127.0.0.1, Port, User, IdentityFile, UserKnownHostsFile
    jumped     the same server reached through `ProxyJump testhost`

Sessions get `<workdir>/bin` first on PATH (sshd's SetEnv), holding an `nvidia-smi` that
replays a real capture: tests choose the capture and make it hang through `fake_env()`,
since the collector's environment never reaches the remote side.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftwatch.transport.ssh import SshTransport

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")
FAKE_NVIDIA_SMI = Path(__file__).parent / "fakes" / "nvidia-smi"
DEFAULT_CAPTURE = Path(__file__).parent / "fixtures" / "nvidia-smi" / "linux-x86_64__nvidia-h200__590.48.01.txt"
SESSION_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
START_TIMEOUT = 15.0


def find_sshd() -> str | None:
    # sshd re-executes itself and insists on an absolute path.
    for path in SSHD_CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    found = shutil.which("sshd")
    return os.path.abspath(found) if found else None


def free_port() -> int:
    """A port nothing listens on right now (the kernel's pick for an ephemeral bind)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def keygen(path: Path) -> Path:
    """A new passphrase-less ed25519 key at ``path`` (and ``path``.pub)."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "driftwatch-test", "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    return path


def public_key(path: Path) -> str:
    """``TYPE BASE64`` of the key at ``path``, without the comment."""
    kind, blob = Path(f"{path}.pub").read_text().split()[:2]
    return f"{kind} {blob}"


@dataclass
class Sshd:
    host: str
    port: int
    user: str
    key_path: str  # the client key sshd accepts
    known_hosts_path: str  # trusts the server's host key as [127.0.0.1]:PORT
    ssh_config_path: str
    host_public_key: str  # "ssh-ed25519 AAAA..."
    workdir: Path
    log_path: Path
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def destination(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    @property
    def known_hosts_line(self) -> str:
        return f"[{self.host}]:{self.port} {self.host_public_key}"

    def transport(self, destination: str | None = None, **kw: Any) -> SshTransport:
        """A connected SshTransport; keyword arguments override the fixture's files."""
        kw.setdefault("ssh_config_path", self.ssh_config_path)
        kw.setdefault("known_hosts_path", self.known_hosts_path)
        kw.setdefault("key_filename", self.key_path)
        kw.setdefault("connect_timeout", 10)
        return SshTransport.connect(destination or self.destination, **kw)

    @property
    def fake_env_path(self) -> Path:
        return self.workdir / "fake.env"

    def fake_env(self, **variables: str) -> None:
        """Environment for the session's fake nvidia-smi (FAKE_NVIDIA_SMI_HANG=1, ...)."""
        values = {"FAKE_NVIDIA_SMI_CAPTURE": str(DEFAULT_CAPTURE), **variables}
        self.fake_env_path.write_text("".join(f"{k}={shlex_quote(v)}\n" for k, v in values.items()))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def start_sshd(
    workdir: Path,
    sshd: str,
    extra_config: str = "",
    *,
    prefix: Sequence[str] = (),
    session_env: dict[str, str] | None = None,
    user: str | None = None,
) -> Sshd:
    """Start sshd; ``extra_config`` lines are appended (for MaxStartups the last value counts).
    Sessions log in as ``user`` (default: whoever runs the tests).
    ``prefix`` runs before sshd (it must exec it, e.g. into a mount namespace), and
    ``session_env`` is set in every session (sshd's SetEnv); a ``PATH`` there replaces the
    usual session PATH, after the fake nvidia-smi's directory (a host without `timeout`), and
    a ``HOME`` there replaces the private empty home sessions get by default."""
    workdir.mkdir(parents=True, exist_ok=True)
    host_key = keygen(workdir / "host_ed25519")
    client_key = keygen(workdir / "client_ed25519")
    authorized = workdir / "authorized_keys"
    authorized.write_text(public_key(client_key) + "\n")
    # Privilege separation directory; missing in fresh containers. Only root can create it,
    # and only root-run sshd needs it.
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    user = user or getpass.getuser()
    # Sessions get a home of their own, as every host of a real fleet has: the developer
    # machine's ~/.bashrc (pyenv init: a rehash under one machine-wide lock per login) would
    # otherwise run in every session of every test, slow and contended under load.
    session_env = {"HOME": str(private_home(workdir)), **(session_env or {})}
    last_error = ""
    for _ in range(3):  # the free port can be taken between our probe and sshd's bind
        port = free_port()
        server = _launch(workdir, sshd, host_key, client_key, authorized, user, port, extra_config,
                         list(prefix), session_env)
        error = _wait_ready(server)
        if not error:
            return server
        server.stop()
        last_error = error
    raise RuntimeError(f"sshd did not start: {last_error}")


def _fake_bin(workdir: Path) -> Path:
    bin_dir = workdir / "bin"
    bin_dir.mkdir(exist_ok=True)
    wrapper = bin_dir / "nvidia-smi"
    wrapper.write_text(
        "#!/bin/sh\nset -a\n"
        f'[ -f {workdir / "fake.env"} ] && . {workdir / "fake.env"}\nset +a\n'
        # -I -S: the real nvidia-smi is a C binary; don't charge each call a site import.
        f'exec {sys.executable} -I -S {FAKE_NVIDIA_SMI} "$@"\n'
    )
    wrapper.chmod(0o755)
    return bin_dir


def shlex_quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


def private_home(workdir: Path) -> Path:
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    for name in (".bashrc", ".profile"):
        (home / name).touch()
    return home


def _launch(
    workdir: Path,
    sshd: str,
    host_key: Path,
    client_key: Path,
    authorized: Path,
    user: str,
    port: int,
    extra: str = "",
    prefix: list[str] | None = None,
    session_env: dict[str, str] | None = None,
) -> Sshd:
    config = workdir / "sshd_config"
    bin_dir = _fake_bin(workdir)
    session_env = dict(session_env or {})
    session_path = session_env.pop("PATH", SESSION_PATH)
    more_env = "".join(f" {name}={value}" for name, value in session_env.items())
    config.write_text(
        f"""\
Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile {workdir / "sshd.pid"}
AuthorizedKeysFile {authorized}
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AllowTcpForwarding yes
MaxSessions 10
MaxStartups 50:30:100
LogLevel VERBOSE
SetEnv PATH={bin_dir}:{session_path}{more_env}
{extra}
"""
    )
    known_hosts = workdir / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {public_key(host_key)}\n")
    ssh_config = workdir / "ssh_config"
    common = f"""\
    HostName 127.0.0.1
    Port {port}
    User {user}
    IdentityFile {client_key}
    UserKnownHostsFile {known_hosts}
"""
    ssh_config.write_text(f"Host testhost\n{common}\nHost jumped\n{common}    ProxyJump testhost\n")
    log_path = workdir / f"sshd-{port}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [*(prefix or []), sshd, "-D", "-e", "-f", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in pytest reaches us, not sshd mid-test
        )
    return Sshd(
        host="127.0.0.1",
        port=port,
        user=user,
        key_path=str(client_key),
        known_hosts_path=str(known_hosts),
        ssh_config_path=str(ssh_config),
        host_public_key=public_key(host_key),
        workdir=workdir,
        log_path=log_path,
        _process=process,
    )


def _wait_ready(server: Sshd) -> str:
    """'' once sshd sends its banner; otherwise why it never will."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        assert server._process is not None
        if server._process.poll() is not None:
            return f"sshd exited with {server._process.returncode}: {server.log().strip()}"
        try:
            with socket.create_connection((server.host, server.port), timeout=2) as sock:
                if sock.recv(4).startswith(b"SSH-"):
                    return ""
        except OSError:
            pass
        time.sleep(0.05)
    return f"no SSH banner on port {server.port} within {START_TIMEOUT:g}s: {server.log().strip()}"


@contextmanager
def sshd_with_home(tmp_path: Path) -> Iterator[tuple[Sshd, Path]]:
    """A throwaway sshd whose sessions have ``tmp_path/home`` as HOME (caches, NCCL files and
    hub cache sit at their real default places there), with the fake nvidia-smi's default
    capture; skipped where OpenSSH's sshd is not installed."""
    import pytest

    exe = find_sshd()
    if exe is None:
        pytest.skip("OpenSSH sshd is not installed (apt-get install openssh-server; .ci/run does it)")
    home = tmp_path / "home"
    home.mkdir()
    server = start_sshd(tmp_path / "sshd", exe, session_env={"HOME": str(home)})
    try:
        server.fake_env()
        yield server, home
    finally:
        server.stop()
