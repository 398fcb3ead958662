"""A small container image's root filesystem, assembled from this machine's own Python.

``build_rootfs`` copies the interpreter, the standard-library modules a sleeping server
imports, and the shared libraries they load (found with ``ldd``) into a directory, then
adds a venv at ``/opt/venv`` (``pyvenv.cfg``, ``bin/python3`` → the interpreter) whose
site-packages holds real ``.dist-info`` directories (sglang, sgl-kernel, torch, …, with
RECORDs whose hashes match) and a fake ``sglang.launch_server`` that maps a real ELF
library (``sgl_kernel/common_ops.so``, built with a known GNU build-id) and sleeps.
``image_tar`` packs it for ``podman import`` / ``docker import`` / ``ctr images import``:
no registry, no network. About 20 MB; built once per test session.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

from tests.elfs import build_library
from tests.venvs import write_dist_info

VENV = "/opt/venv"
# The python3 a Debian image has; else the interpreter running the tests.
SYSTEM_PYTHON = "/usr/bin/python3"

SERVER = '''\
"""A stand-in for SGLang's server: maps its kernel library, says it is ready, sleeps."""
import ctypes, os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
ctypes.CDLL(os.path.join(os.path.dirname(here), "sgl_kernel", "common_ops.so"))
ready = os.environ.get("READY_FILE")
if ready:
    open(ready, "w").close()
time.sleep(float(os.environ.get("SLEEP", "3600")))
'''

_STDLIB_PROBE = (
    "import runpy, ctypes, time, json, os, sys\n"
    "print('\\n'.join(sorted({m.__file__ for m in list(sys.modules.values()) if getattr(m, '__file__', None)})))"
)


def interpreter() -> str:
    """The interpreter an image gets: Debian's /usr/bin/python3, else the tests' own."""
    if os.path.exists(SYSTEM_PYTHON):
        return os.path.realpath(SYSTEM_PYTHON)
    return os.path.realpath(shutil.which("python3") or "python3")


def _copy(root: Path, src: str) -> None:
    """Copy ``src`` into ``root`` under the same path, and its symlink chain (a SONAME
    link such as libz.so.1 → libz.so.1.2.13) as links."""
    seen = 0
    while seen < 8:
        seen += 1
        dst = root / src.lstrip("/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        if os.path.islink(src):
            target = os.readlink(src)
            if not dst.exists() and not dst.is_symlink():
                dst.symlink_to(target)
            src = os.path.normpath(os.path.join(os.path.dirname(src), target))
            continue
        if not dst.exists():
            shutil.copy2(src, dst)
        return


def _base(root: Path, python: str) -> str:
    """The interpreter, the stdlib modules a server imports and their libraries; returns the
    interpreter's X.Y."""
    files = subprocess.run([python, "-I", "-c", _STDLIB_PROBE], capture_output=True, text=True, check=True).stdout.split()
    paths = json.loads(subprocess.run(
        [python, "-I", "-c", "import json, sysconfig; print(json.dumps(sysconfig.get_paths()))"],
        capture_output=True, text=True, check=True).stdout)
    stdlib = paths["stdlib"]
    for name in files:
        if name.startswith(stdlib):
            _copy(root, name)
    for name in Path(stdlib, "encodings").glob("*.py"):
        _copy(root, str(name))
    _copy(root, python)
    native = [python, *(f for f in files if f.endswith(".so"))]
    ldd = subprocess.run(["ldd", *native], capture_output=True, text=True, check=False).stdout
    for word in ldd.split():
        if word.startswith("/") and os.path.exists(word):
            _copy(root, word)
    for link in ("/bin", "/lib", "/lib64", "/sbin"):  # Debian's merged /usr
        if os.path.islink(link) and not (root / link.lstrip("/")).exists():
            (root / link.lstrip("/")).symlink_to(os.readlink(link))
    version = subprocess.run([python, "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    return version


def build_rootfs(root: Path, *, sgl_kernel: str = "0.3.16", work: Path | None = None) -> Path:
    """A root filesystem under ``root``: the machine's python, a venv at /opt/venv with
    sglang 0.5.6, sgl-kernel ``sgl_kernel`` (its build-id follows the version), torch and
    nvidia-nccl-cu12 as real dist-infos, and ``sglang.launch_server``."""
    python = interpreter()
    version = _base(root, python)
    venv = root / VENV.lstrip("/")
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python3").symlink_to(python)
    (venv / "bin" / "python").symlink_to("python3")
    (venv / "pyvenv.cfg").write_text(
        f"home = {os.path.dirname(python)}\ninclude-system-site-packages = false\nversion = {version}\n")
    site = venv / "lib" / f"python{version}" / "site-packages"
    site.mkdir(parents=True)
    if not (venv / "lib64").exists():
        (venv / "lib64").symlink_to("lib")
    build_id = hashlib.sha1(f"sgl-kernel {sgl_kernel}".encode()).hexdigest()
    library = build_library((work or root.parent) / f"common_ops-{sgl_kernel}.so", build_id)
    write_dist_info(site, "sgl_kernel", "sgl-kernel", sgl_kernel, [], {
        "sgl_kernel/__init__.py": "", "sgl_kernel/version.py": f'__version__ = "{sgl_kernel}"\n',
        "sgl_kernel/common_ops.so": library.read_bytes(),
    })
    write_dist_info(site, "sglang", "sglang", "0.5.6", [f"sgl-kernel=={sgl_kernel}", "torch==2.8.0"], {
        "sglang/__init__.py": '__version__ = "0.5.6"\n', "sglang/launch_server.py": SERVER,
    })
    write_dist_info(site, "torch", "torch", "2.8.0+cu128", [], {
        "torch/__init__.py": 'raise RuntimeError("driftwatch must never import torch")\n',
        "torch/version.py": "__version__ = '2.8.0+cu128'\ncuda = '12.8'\n",
    })
    write_dist_info(site, "nvidia_nccl_cu12", "nvidia-nccl-cu12", "2.27.3", [], {"nvidia/nccl/__init__.py": ""})
    for sub in ("tmp", "dev", "proc", "sys", "run", "etc"):
        (root / sub).mkdir(exist_ok=True)
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    return root


def image_tar(root: Path, out: Path) -> Path:
    """``root`` as a plain tar (what ``podman import`` and ``docker import`` read)."""
    with tarfile.open(out, "w") as archive:
        archive.add(root, arcname=".")
    return out


def oci_archive(root: Path, out: Path, ref: str) -> Path:
    """``root`` as a one-layer OCI image archive named ``ref`` (what ``ctr images import``
    reads: an index.json, a manifest, a config and the layer, by their sha256)."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as archive:
        archive.add(root, arcname=".")
    layer_bytes = layer.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer_bytes).hexdigest()
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": {"Env": ["PATH=/opt/venv/bin:/usr/bin:/bin"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }).encode()
    blobs = {"layer": layer_bytes, "config": config}
    digests = {k: hashlib.sha256(v).hexdigest() for k, v in blobs.items()}
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + digests["config"],
                   "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": "sha256:" + digests["layer"],
                    "size": len(layer_bytes)}],
    }).encode()
    blobs["manifest"] = manifest
    digests["manifest"] = hashlib.sha256(manifest).hexdigest()
    index = json.dumps({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + digests["manifest"],
        "size": len(manifest), "annotations": {"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": ref.rsplit(":", 1)[-1]},
    }]}).encode()
    with tarfile.open(out, "w") as archive:
        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        add("oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        add("index.json", index)
        for key, data in blobs.items():
            add(f"blobs/sha256/{digests[key]}", data)
    return out
