"""Collector run on the target as ``<python> -`` by the cuda probe (python >= 3.8, stdlib).

It reports the NCCL and cuDNN wheels this interpreter sees and the raw text of
``torch/version.py``. torch is located with ``importlib.util.find_spec``, which finds the
package without executing its ``__init__``; importing torch would load CUDA libraries,
take seconds and may crash, and its build facts are plain literals in that file anyway.
Parsing happens in the probe, so this script stays dumb and the parser stays testable.
"""

from __future__ import annotations

import json
import os
import re
import sys
from importlib import metadata, util
from typing import Any, Dict, Optional

MARKER = "driftwatch-python-report:"
# Wheels whose versions the cuda facts carry: nvidia-nccl-cu12, nvidia-cudnn-cu13, ...
WANTED = re.compile(r"^nvidia-(nccl|cudnn)-cu\d+$")
# dist-info directory names are normalized with "_"; a cheap pre-filter on them avoids
# parsing METADATA of hundreds of unrelated distributions.
CANDIDATE_DIR = re.compile(r"^nvidia[-_.]+(nccl|cudnn)", re.IGNORECASE)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wanted_distributions() -> Dict[str, str]:
    found: Dict[str, str] = {}
    for dist in metadata.distributions():  # sys.path order: first hit wins, as for import
        path = getattr(dist, "_path", None)
        if path is not None and not CANDIDATE_DIR.match(os.path.basename(str(path))):
            continue
        try:
            # Parsed once; .get because [...] on a missing header is deprecated on 3.12+.
            meta: Any = dist.metadata
            name = normalize(meta.get("Name") or "")
            version = meta.get("Version")
        except Exception:  # a corrupt METADATA must not hide the others
            continue
        if WANTED.match(name) and name not in found and version:
            found[name] = version
    return found


def torch_version_file() -> Optional[Dict[str, str]]:
    try:
        spec = util.find_spec("torch")  # finds, does not execute torch/__init__.py
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(location, "version.py")
        try:
            with open(path, "rb") as f:
                return {"path": path, "text": f.read(65536).decode("utf-8", "replace")}
        except OSError:
            continue
    return None


def main() -> None:
    # `python -` puts the login directory first on sys.path; it is not part of the env.
    if sys.path and sys.path[0] == "":
        del sys.path[0]
    report: Dict[str, Any] = {"distributions": wanted_distributions(), "torch": torch_version_file()}
    text = json.dumps(report, ensure_ascii=False, sort_keys=True)
    try:
        data = (MARKER + text + "\n").encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        data = (MARKER + json.dumps(report, sort_keys=True) + "\n").encode("ascii")
    sys.stdout.flush()
    sys.stdout.buffer.write(b"\n" + data)
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
