"""The ``cuda`` probe: NCCL, cuDNN, the CUDA toolkit and the build of torch.

One shell script gathers the system side (``ldconfig -p``, NCCL libraries in the usual
directories, ``nvcc --version``, where ``/usr/local/cuda`` points); each configured
interpreter's NCCL/cuDNN wheels and the text of its ``torch/version.py`` (never
``import torch``) come from the run of ``python_collect.py`` that the python probe shares.
What the target really lacks is ``null``/missing; what could not be read is not: a failed
shell script, or no interpreter readable at all, fails the probe (a failure is never
"absent"), and an interpreter that could not be read is marked with its error.
"""

from __future__ import annotations

import ast
import os
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from driftwatch.probes.base import Facts, ProbeContext, ProbeError, ProbeTimeout
from driftwatch.probes.python import extract_report, interpreter_reports
from driftwatch.probes.sections import split_sections
from driftwatch.transport import CommandResult

# Directories where distributions and CUDA installers put libnccl; LD_LIBRARY_PATH is
# added on the target because that is where a job would find it first.
NCCL_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/usr/local/cuda/lib64",
    "/usr/local/cuda/lib",
    "/usr/local/cuda/targets/x86_64-linux/lib",
    "/usr/local/cuda/targets/sbsa-linux/lib",
    "/usr/local/nccl/lib",
    "/opt/nccl/lib",
)

# POSIX sh. Sections start with "@@name". ldconfig lives in /sbin, which is often not on
# a non-root PATH. nvcc: PATH first, then $CUDA_HOME (or /usr/local/cuda) like torch's
# extension builder, because non-interactive SSH shells rarely have CUDA on PATH.
SHELL_SCRIPT = f"""\
ldc=$( {{ ldconfig -p || /sbin/ldconfig -p || /usr/sbin/ldconfig -p; }} 2>/dev/null | grep 'libnccl\\.so' )
echo '@@ldconfig'
printf '%s\\n' "$ldc"
echo '@@libs'
{{
  printf '%s\\n' "$ldc" | sed -n 's/^.*=> *//p'
  {{ printf '%s\\n' {" ".join(NCCL_DIRS)}; printf '%s\\n' "${{LD_LIBRARY_PATH:-}}" | tr ':' '\\n'; }} |
  while IFS= read -r d; do
    [ -n "$d" ] || continue
    for f in "$d"/libnccl.so*; do [ -e "$f" ] && printf '%s\\n' "$f"; done
  done
}} | sort -u | while IFS= read -r f; do printf '%s\\t%s\\n' "$f" "$(readlink -f "$f" 2>/dev/null)"; done
echo '@@nvcc'
if command -v nvcc >/dev/null 2>&1; then nvcc --version 2>&1
elif [ -x "${{CUDA_HOME:-/usr/local/cuda}}/bin/nvcc" ]; then "${{CUDA_HOME:-/usr/local/cuda}}/bin/nvcc" --version 2>&1
fi
echo '@@cuda_link'
[ -e /usr/local/cuda ] && readlink -f /usr/local/cuda
exit 0
"""

# Wheels whose versions the cuda facts carry: nvidia-nccl-cu12, nvidia-cudnn-cu13, ...
_CUDA_WHEEL = re.compile(r"^nvidia-(nccl|cudnn)-cu\d+$")
_NVCC_V = re.compile(r"\bV(\d+\.\d+(?:\.\d+)*)\b")
_NVCC_RELEASE = re.compile(r"\brelease (\d+\.\d+)\b")
_NCCL_FILE = re.compile(r"libnccl\.so\.(\d+(?:\.\d+)*)$")


def parse_nvcc_version(text: str) -> str | None:
    """``12.8.93`` from ``nvcc --version`` ("Cuda compilation tools, release 12.8, V12.8.93")."""
    match = _NVCC_V.search(text) or _NVCC_RELEASE.search(text)
    return match.group(1) if match else None


def nccl_version_from_path(path: str) -> str | None:
    """``2.21.5`` from ``.../libnccl.so.2.21.5``; None for an unversioned name."""
    match = _NCCL_FILE.search(os.path.basename(path))
    return match.group(1) if match else None


def parse_ldconfig_nccl(text: str) -> list[str]:
    """Paths of the libnccl entries of ``ldconfig -p`` output, in its order."""
    paths: list[str] = []
    for line in text.splitlines():
        if "libnccl.so" in line and "=>" in line:
            path = line.split("=>", 1)[1].strip()
            if path and path not in paths:
                paths.append(path)
    return paths


def parse_nccl_libraries(ldconfig: str, libs: str) -> dict[str, str | None]:
    """System NCCL libraries: real file path -> version from its file name.

    ``libs`` holds ``candidate<TAB>realpath`` lines from the target; the ``libnccl.so.2``
    symlinks ldconfig knows resolve to files like ``libnccl.so.2.21.5`` that carry the full
    version, and many links to one file are one library.
    """
    real: dict[str, str] = {}
    for line in libs.splitlines():
        candidate, _, target = line.partition("\t")
        if candidate.strip():
            real[candidate.strip()] = target.strip() or candidate.strip()
    for path in parse_ldconfig_nccl(ldconfig):
        real.setdefault(path, path)  # not resolved on the target: keep what ldconfig said
    return {target: nccl_version_from_path(target) for target in sorted(set(real.values()))}


def parse_torch_version_py(text: str) -> dict[str, str | None]:
    """``__version__``, ``cuda`` and ``git_version`` from the text of ``torch/version.py``.

    Real files assign plain literals (``cuda: Optional[str] = '12.8'``); they are read
    with ``ast.literal_eval`` so nothing of the file is executed.
    """
    wanted = {"__version__": "version", "cuda": "cuda", "git_version": "git_version"}
    facts: dict[str, str | None] = {key: None for key in wanted.values()}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return facts
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id in wanted:
                try:
                    literal = ast.literal_eval(value)
                except (ValueError, TypeError, SyntaxError, RecursionError):
                    continue  # not a plain literal: never evaluated
                facts[wanted[target.id]] = literal if isinstance(literal, str) else None
    return facts


def parse_toolkit(sections: dict[str, str]) -> dict[str, str | None]:
    link = sections.get("cuda_link", "").strip()
    return {"nvcc": parse_nvcc_version(sections.get("nvcc", "")), "cuda_link": link or None}


def parse_cuda_report(text: str) -> dict[str, Any]:
    """One interpreter's part, from its ``python_collect.py`` report:
    {"distributions": {nvidia nccl/cudnn wheel: version}, "torch": facts|None}."""
    data = extract_report(text)
    dists = data.get("distributions")
    distributions: dict[str, str] = {}
    for key, dist in (dists.items() if isinstance(dists, dict) else []):
        version = dist.get("version") if isinstance(dist, dict) else None
        if _CUDA_WHEEL.match(str(key)) and isinstance(version, str):
            distributions[str(key)] = version
    torch = data.get("torch")
    torch_facts = None
    if isinstance(torch, dict) and isinstance(torch.get("text"), str):
        torch_facts = {**parse_torch_version_py(torch["text"]), "path": torch.get("path")}
    return {"distributions": distributions, "torch": torch_facts}


def _interpreter_report(outcome: CommandResult | ProbeError) -> dict[str, Any] | str:
    """The parsed report of one interpreter, or why there is none."""
    if isinstance(outcome, ProbeError):
        return str(outcome)
    try:
        return parse_cuda_report(outcome.text)
    except ProbeError as exc:
        return str(exc)


class CudaProbe:
    name = "cuda"

    def collect(self, ctx: ProbeContext) -> Facts:
        with ThreadPoolExecutor(max_workers=1) as pool:
            shell = pool.submit(ctx.run, SHELL_SCRIPT)
            outcomes = interpreter_reports(ctx)
            result = shell.result()  # a shell timeout fails the probe
        if result.exit_code != 0:  # e.g. no `sh` builtins it needs: nothing it printed is a fact
            last = result.error_text.splitlines()[-1:]
            raise ProbeError(f"CUDA stack script failed: {last[0] if last else f'exit {result.exit_code}'}")
        sections = split_sections(result.text)

        nccl: dict[str, str] = {}
        cudnn: dict[str, str] = {}
        torch: dict[str, Any] = {}
        # Configured order: the first interpreter that has a wheel names its version; the
        # python probe keeps every interpreter's own copy.
        reports = {interpreter: _interpreter_report(outcome) for interpreter, outcome in outcomes.items()}
        if reports and all(isinstance(report, str) for report in reports.values()):
            # No interpreter could be read: the wheels are unknown, not absent.
            summary = "; ".join(f"{name}: {report}" for name, report in reports.items())
            if all(isinstance(outcome, ProbeTimeout) for outcome in outcomes.values()):
                raise ProbeTimeout(summary)
            raise ProbeError(f"no interpreter could be read: {summary}")
        for interpreter, report in reports.items():
            if isinstance(report, str):
                # Unknown is not "no torch": say so instead of looking like an uninstall.
                # The diff compares wheels only between snapshots that read the same
                # interpreters (see driftwatch.diff.cuda).
                torch[interpreter] = {"error": report}
                continue
            for name, version in report["distributions"].items():
                target = nccl if "-nccl-" in name else cudnn
                target.setdefault(name, version)
            if report["torch"] is not None:
                torch[interpreter] = report["torch"]

        return {
            "nccl": {
                "distributions": dict(sorted(nccl.items())),
                "system": parse_nccl_libraries(sections.get("ldconfig", ""), sections.get("libs", "")),
            },
            "torch": torch,
            "toolkit": parse_toolkit(sections),
            "cudnn": dict(sorted(cudnn.items())),
        }
