"""Collector run on the target as ``<python> -`` by the cuda probe (python >= 3.8,
stdlib), after the prelude ``dists.py`` (normalize, distribution_paths, emit ...).

It reports the NCCL and cuDNN wheels this interpreter sees and the raw text of
``torch/version.py``. torch is located with ``importlib.util.find_spec``, which finds the
package without executing its ``__init__``; importing torch would load CUDA libraries,
take seconds and may crash, and its build facts are plain literals in that file anyway.
Parsing happens in the probe, so this script stays dumb and the parser stays testable.
"""

from importlib import util

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers only: importing typing costs ~5 ms per start on the target
    from typing import Any

    from driftwatch.probes.scripts.dists import *  # noqa: F403  (the prelude, sent first)

# Wheels whose versions the cuda facts carry: nvidia-nccl-cu12, nvidia-cudnn-cu13, ...
WANTED = re.compile(r"^nvidia-(nccl|cudnn)-cu\d+$")
# dist-info directory names are normalized with "_"; a cheap pre-filter on them avoids
# parsing METADATA of hundreds of unrelated distributions.
CANDIDATE_DIR = re.compile(r"^nvidia[-_.]+(nccl|cudnn)", re.IGNORECASE)


def wanted_distributions() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in distribution_paths():  # sys.path order: first hit wins, as for import
        if not CANDIDATE_DIR.match(os.path.basename(path)):
            continue
        headers = metadata_headers(path) or {}
        name = normalize(first(headers, "name") or "")
        version = first(headers, "version")
        if WANTED.match(name) and name not in found and version:
            found[name] = version
    return found


def torch_version_file() -> dict[str, str] | None:
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


if __name__ == "__main__":
    drop_cwd_from_path()
    report: dict[str, Any] = {"distributions": wanted_distributions(), "torch": torch_version_file()}
    emit(report)
