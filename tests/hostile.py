"""A test host whose login environment the test writes: its login shell, its dotfiles,
its session environment and what is mounted where, for that test only.

The sshd runs in a mount namespace of its own (tests/mountns.py) with a copy of
``/etc/passwd`` bound over the real one, in which the user the tests log in as (root)
has the test's shell and home: every session of that sshd starts the shell a hostile host
would (tcsh, fish, a bash whose ``.bashrc`` prints or reads stdin), and nothing outside
the namespace sees a change. Extra mounts (a full tmpfs as the temp folder) are made in
the same namespace. Needs root and util-linux ``unshare``, as the other namespace tests.
"""

from __future__ import annotations

import getpass
import os
import pwd
import shlex
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.mountns import bind_prefix, need_bind_mounts
from tests.sshd import Sshd, find_sshd, start_sshd

# The login shells Debian packages (`.ci/run` installs tcsh, csh, zsh and fish).
SHELLS = ("/bin/bash", "/bin/dash", "/usr/bin/zsh", "/usr/bin/fish", "/usr/bin/tcsh", "/bin/bsd-csh")
# The file each of them reads for a non-interactive `SHELL -c COMMAND` from sshd.
STARTUP_FILE = {
    "bash": ".bashrc",  # Debian's bash reads it when sshd starts it
    "zsh": ".zshenv",
    "fish": ".config/fish/config.fish",
    "tcsh": ".tcshrc",
    "bsd-csh": ".cshrc",  # BSD csh (package csh): with tcsh installed, `csh` may be either
}


def need_shell(shell: str) -> str:
    """``shell``'s real path, or skip: the shells come from Debian's packages."""
    found = shutil.which(shell)
    if found is None:
        package = {"bsd-csh": "csh"}.get(Path(shell).name, Path(shell).name)
        pytest.skip(f"{shell} is not installed (apt-get install {package}; .ci/run does it)")
    return found


def passwd_with(shell: str, home: Path, user: str) -> str:
    """/etc/passwd with ``user``'s shell and home replaced."""
    lines = []
    for line in Path("/etc/passwd").read_text().splitlines():
        fields = line.split(":")
        if len(fields) == 7 and fields[0] == user:
            fields[5], fields[6] = str(home), shell
        lines.append(":".join(fields))
    return "\n".join(lines) + "\n"


def namespace_prefix(binds: dict[str, Path], setup: str = "") -> list[str]:
    """``bind_prefix(binds)`` with shell commands ``setup`` run first in the namespace."""
    prefix = bind_prefix(binds)
    if setup:
        prefix[-2] = f"{setup} && {prefix[-2]}"
    return prefix


@contextmanager
def login_host(
    workdir: Path,
    *,
    shell: str = "/bin/bash",
    dotfiles: dict[str, str] | None = None,
    session_env: dict[str, str] | None = None,
    setup: str = "",
    user: str | None = None,
) -> Iterator[Sshd]:
    """An sshd whose sessions log in with ``shell`` and a home holding ``dotfiles``
    ({path relative to the home: text}), with ``session_env`` set and the shell commands
    ``setup`` run in its mount namespace before it starts (``mount -t tmpfs ...``).
    ``user``: an existing unprivileged account to log in as instead (``nobody``), given
    the home; ``workdir`` must then be one that account can reach (not under pytest's
    0700 temp folder)."""
    exe = find_sshd() or pytest.skip("OpenSSH sshd is not installed")
    shell = need_shell(shell)
    user = user or getpass.getuser()
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    for name, text in (dotfiles or {}).items():
        path = home / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if user != getpass.getuser():
        owner = pwd.getpwnam(user)
        for path in (home, *home.rglob("*")):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    passwd = workdir / "passwd"
    passwd.write_text(passwd_with(shell, home, user))
    binds = {"/etc/passwd": passwd}
    need_bind_mounts(binds)
    server = start_sshd(
        workdir / "sshd", exe, prefix=namespace_prefix(binds, setup), session_env={"HOME": str(home), **(session_env or {})},
        user=user,
    )
    try:
        server.fake_env()
        yield server
    finally:
        server.stop()


def tmpfs_setup(folder: Path, *, size_kib: int, fill: bool) -> str:
    """Namespace setup: a tmpfs of ``size_kib`` KiB on ``folder`` (made here), filled up
    to the last byte when ``fill``: a temp folder with no room left."""
    folder.mkdir(parents=True, exist_ok=True)
    quoted = shlex.quote(str(folder))
    command = f"mount -t tmpfs -o size={size_kib}k tmpfs {quoted}"
    if fill:
        command += f" && {{ dd if=/dev/zero of={quoted}/fill bs=4k 2>/dev/null || true; }}"
    return command


def login_dotfile(shell: str, text: str) -> dict[str, str]:
    """``text`` in the start-up file ``shell`` reads for ``SHELL -c``; dash reads none."""
    name = STARTUP_FILE.get(os.path.basename(shell))
    return {name: text} if name else {}
