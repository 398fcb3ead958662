"""Real virtual environments that look like an SGLang GPU host's, for probe tests.

``make_gpu_venv`` creates a venv (``python -m venv --without-pip``: fast, no network) and
hand-writes into its site-packages the ``.dist-info`` directories pip would leave for
sglang (editable, from a real git checkout), sgl-kernel, torch, flashinfer-python,
nvidia-nccl-cu12 and nvidia-cudnn-cu12, with RECORD files whose hashes match the files.
torch gets a real ``torch/version.py`` and an ``__init__.py`` that raises, so any probe
that imports torch fails loudly.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

TORCH_GIT_VERSION = "a1cb3cc05d46d198467bebbb6e8fba50a325d4e7"

# What torch 2.8.0's setup writes to torch/version.py, byte for byte in shape.
TORCH_VERSION_PY = f"""\
from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']
__version__ = '2.8.0+cu128'
debug = False
cuda: Optional[str] = '12.8'
git_version = '{TORCH_GIT_VERSION}'
hip: Optional[str] = None
xpu: Optional[str] = None
"""

TORCH_INIT_PY = 'raise RuntimeError("driftwatch must never import torch")\n'

# (name on disk, Name, Version, Requires-Dist lines, {relative file: content})
_DISTS: list[tuple[str, str, str, list[str], dict[str, str]]] = [
    (
        "sgl_kernel",
        "sgl-kernel",
        "0.3.16.post4",
        [],
        {
            "sgl_kernel/__init__.py": "from sgl_kernel.version import __version__\n",
            "sgl_kernel/version.py": '__version__ = "0.3.16.post4"\n',
        },
    ),
    (
        "torch",
        "torch",
        "2.8.0+cu128",
        [
            "filelock",
            "typing-extensions>=4.10.0",
            "sympy>=1.13.3",
            "networkx",
            "jinja2",
            "fsspec",
            'nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux" and platform_machine == "x86_64"',
            'nvidia-nccl-cu12==2.27.3; platform_system == "Linux" and platform_machine == "x86_64"',
            'triton==3.4.0; platform_system == "Linux" and platform_machine == "x86_64"',
            'opt-einsum>=3.3; extra == "opt-einsum"',
        ],
        {"torch/__init__.py": TORCH_INIT_PY, "torch/version.py": TORCH_VERSION_PY},
    ),
    (
        "nvidia_nccl_cu12",
        "nvidia-nccl-cu12",
        "2.27.3",
        [],
        {"nvidia/nccl/__init__.py": "", "nvidia/nccl/lib/libnccl.so.2": "\x7fELF-not-really\n"},
    ),
    (
        "nvidia_cudnn_cu12",
        "nvidia-cudnn-cu12",
        "9.10.2.21",
        ["nvidia-cublas-cu12"],
        {"nvidia/cudnn/__init__.py": "", "nvidia/cudnn/lib/libcudnn.so.9": "\x7fELF-not-really\n"},
    ),
    (
        "flashinfer_python",
        "flashinfer-python",
        "0.4.1",
        ["ninja", "numpy", "nvidia-cudnn-frontend>=1.13.0", "requests", "tabulate", "torch", "tqdm"],
        {"flashinfer/__init__.py": '__version__ = "0.4.1"\n'},
    ),
]

SGLANG_VERSION = "0.5.6"


def site_packages(venv: Path) -> Path:
    """The venv's purelib directory (the venv runs the same python as the tests)."""
    return venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def sglang_checkout(venv: Path) -> Path:
    """The git checkout the venv's editable sglang points into (``<it>/python``)."""
    return venv / "src" / "sglang"


def record_line(root: Path, rel: str) -> str:
    """The RECORD line pip writes for the file ``root/rel``: path, sha256, size."""
    return _record_entry(rel, (root / rel).read_bytes())


def write_dist_info(
    site: Path,
    disk_name: str,
    name: str,
    version: str,
    requires: list[str],
    files: dict[str, str] | dict[str, bytes] | dict[str, str | bytes],
    *,
    direct_url: dict[str, object] | None = None,
) -> Path:
    """Write ``files`` and a pip-style ``<disk_name>-<version>.dist-info`` into ``site``."""
    for rel, content in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(content.encode() if isinstance(content, str) else content)
    dist_info = site / f"{disk_name}-{version}.dist-info"
    dist_info.mkdir(parents=True)
    metadata = ["Metadata-Version: 2.4", f"Name: {name}", f"Version: {version}"]
    metadata += [f"Requires-Dist: {req}" for req in requires]
    (dist_info / "METADATA").write_text("\n".join(metadata) + "\n\n")
    (dist_info / "WHEEL").write_text("Wheel-Version: 1.0\nGenerator: setuptools\nRoot-Is-Purelib: false\n")
    (dist_info / "INSTALLER").write_text("pip\n")
    extra = ["METADATA", "WHEEL", "INSTALLER"]
    if direct_url is not None:
        (dist_info / "direct_url.json").write_text(json.dumps(direct_url))
        extra.append("direct_url.json")
    lines = [record_line(site, rel) for rel in files]
    lines += [record_line(site, f"{dist_info.name}/{rel}") for rel in extra]
    lines.append(f"{dist_info.name}/RECORD,,")
    (dist_info / "RECORD").write_text("\n".join(lines) + "\n")
    return dist_info


def build_wheel(out_dir: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    """A real wheel (a zip with ``files`` and a dist-info whose RECORD hashes them), as a
    build backend would write it, for ``pip install`` to install."""
    disk = re.sub(r"[-_.]+", "_", name)
    dist_info = f"{disk}-{version}.dist-info"
    members = {
        **files,
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n".encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: driftwatch-tests\nRoot-Is-Purelib: false\nTag: py3-none-any\n",
    }
    record = [_record_entry(rel, data) for rel, data in members.items()] + [f"{dist_info}/RECORD,,"]
    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"{disk}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for rel, data in members.items():
            archive.writestr(rel, data)
        archive.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return wheel


def pip_install(python: Path, *wheels: Path, force: bool = False) -> None:
    """Install wheels into ``python``'s environment with this process's pip (the test venvs
    have none): no index, no dependencies, no cache; pip writes the RECORD."""
    argv = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
            "--no-cache-dir", "--disable-pip-version-check", *(["--force-reinstall"] if force else []), *map(str, wheels)]
    subprocess.run(argv, check=True, capture_output=True)


def _record_entry(rel: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{len(data)}"


def git(cwd: Path, *args: str) -> str:
    """Run git with a fixed identity, unaffected by the user's configuration."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    cmd = [
        "git",
        "-c",
        "user.name=Test",
        "-c",
        "user.email=test@example.com",
        "-c",
        "commit.gpgsign=false",
        "-c",
        "init.defaultBranch=main",
        *args,
    ]
    return subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _make_sglang_checkout(checkout: Path) -> None:
    package = checkout / "python" / "sglang"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f'__version__ = "{SGLANG_VERSION}"\n')
    (checkout / "python" / "pyproject.toml").write_text(f'[project]\nname = "sglang"\nversion = "{SGLANG_VERSION}"\n')
    git(checkout, "init", "-q")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-q", "-m", "Initial commit")


def make_gpu_venv(path: Path) -> Path:
    """Create the venv at ``path`` and return its python executable."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site = site_packages(path)
    for disk_name, name, version, requires, files in _DISTS:
        write_dist_info(site, disk_name, name, version, requires, files)

    checkout = sglang_checkout(path)
    _make_sglang_checkout(checkout)
    # A PEP 660 editable install as pip + setuptools leave it: a .pth file adding the
    # source tree to sys.path, and direct_url.json with dir_info.editable.
    pth = f"__editable__.sglang-{SGLANG_VERSION}.pth"
    write_dist_info(
        site,
        "sglang",
        "sglang",
        SGLANG_VERSION,
        ["aiohttp", "requests", "tqdm", "numpy", 'sgl-kernel==0.3.16.post4; extra == "srt"'],
        {pth: f"{checkout / 'python'}\n"},
        direct_url={"dir_info": {"editable": True}, "url": (checkout / "python").as_uri()},
    )
    return path / "bin" / "python"


def old_pythons() -> list[str]:
    """Working python3.8 / python3.9 interpreters on this machine (PATH or pyenv), the
    oldest that target hosts may run, for checking the collector scripts against them."""
    found = []
    for version in ("3.8", "3.9"):
        candidates = [shutil.which(f"python{version}")]
        candidates += [str(p) for p in sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}"))]
        for candidate in filter(None, candidates):
            # A pyenv shim exists for every installed version but refuses the inactive ones.
            check = subprocess.run([candidate, "-c", "pass"], check=False, capture_output=True)
            if check.returncode == 0:
                found.append(candidate)
                break
    return found
