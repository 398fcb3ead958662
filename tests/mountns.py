"""A host whose /proc says what a test needs: an sshd started in its own mount namespace,
with files bind-mounted over ``/proc/cmdline`` and ``/proc/driver``.

This is what a container runtime does to the /proc a container sees; here it lets a test
give the real driver probe, over a real SSH session, a loaded NVIDIA kernel module and a
kernel command line, and change them between two snapshots (the bound files are rewritten
in place, so the mounts show the new content). Needs root and util-linux ``unshare``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest


def bind_prefix(binds: dict[str, Path]) -> list[str]:
    """A command prefix that runs the rest of the command line with ``binds``
    ({mount point: file or directory}) mounted over the given paths, in a private mount
    namespace (the rest of the machine keeps its /proc)."""
    mounts = " && ".join(f"mount --bind {shlex.quote(str(src))} {shlex.quote(dst)}" for dst, src in binds.items())
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", f'{mounts} && exec "$@"', "sh"]


def need_bind_mounts(binds: dict[str, Path]) -> None:
    """Skip the test unless ``binds`` can be mounted here (root, unshare, mount points)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare to give a test host its own /proc view")
    check = subprocess.run([*bind_prefix(binds), "true"], capture_output=True, check=False)
    if check.returncode != 0:
        pytest.skip(f"cannot bind-mount over /proc here: {check.stderr.decode(errors='replace').strip()}")
