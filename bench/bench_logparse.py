"""How fast are the log parsers on a realistic 4 MiB server log? Run:

    python bench/bench_logparse.py [--repeat N]

Builds two 4 MiB logs from the real excerpts in tests/fixtures (an SGLang TP8 server and a
vLLM V1 TP2 server: the start-up, then the per-batch lines a serving log is mostly made of,
then a failed restart), and times, in the same process and alternating:

* baseline: read the file and split it into lines (what any parser pays);
* ``parse_log_parts`` on the 2 MiB head and 2 MiB tail, as the logs probe calls it;
* ``detect_and_parse`` on the whole text;
* one hostile line: 2 MiB without a newline, and a 17 kB ``server_args`` line.

Prints medians and the ratio to the baseline.
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from driftwatch.logparse import detect_and_parse, parse_log_parts  # noqa: E402
from tests.logparse.test_vllm import V1_GOOD  # noqa: E402
from tests.seed import seed_log  # noqa: E402

SIZE = 4 * 1024 * 1024
PART = 2 * 1024 * 1024
FIXTURES = ROOT / "tests" / "fixtures" / "server-logs"
SGLANG_BATCH = (
    "[2026-02-19 10:{m:02d}:{s:02d} TP0] Decode batch. #running-req: {r}, #token: {t}, token usage: 0.{u:02d}, "
    "cuda graph: True, gen throughput (token/s): {g}.{u:02d}, #queue-req: 0\n"
    "[2026-02-19 10:{m:02d}:{s:02d}] INFO:     127.0.0.1:{p} - \"POST /v1/chat/completions HTTP/1.1\" 200 OK\n"
)
VLLM_BATCH = (
    "(APIServer pid=5385) INFO 11-03 06:{m:02d}:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: {g}.0 "
    "tokens/s, Avg generation throughput: {r}.{u} tokens/s, Running: {r} reqs, Waiting: 0 reqs, GPU KV cache usage: "
    "{u}.0%, Prefix cache hit rate: 12.{u}%\n"
    "(APIServer pid=5385) INFO:     127.0.0.1:{p} - \"POST /v1/chat/completions HTTP/1.1\" 200 OK\n"
)


def build(start: str, batch: str, restart: str) -> str:
    parts, size, i = [start], len(start), 0
    while size < SIZE - len(restart):
        line = batch.format(m=i // 60 % 60, s=i % 60, r=i % 256, t=i * 7 % 900_000, u=i % 100, g=i % 9000, p=40000 + i % 9999)
        parts.append(line)
        size += len(line)
        i += 1
    parts.append(restart)
    return "".join(parts)


def logs() -> dict[str, str]:
    fixtures = "".join(path.read_text() for path in sorted(FIXTURES.glob("sglang-*.log")))
    return {
        "sglang TP8": build(seed_log(0.88, fails=False) + fixtures, SGLANG_BATCH, seed_log(0.55, fails=True)),
        "vllm V1 TP2": build(V1_GOOD, VLLM_BATCH, (FIXTURES / "vllm-v1-negative-kv-engine-start.log").read_text()),
    }


def probe_path(path: Path) -> tuple[str, str]:
    """What the logs probe hands the parser: 2 MiB of head, 2 MiB of tail (from a line start)."""
    data = path.read_bytes()
    head, tail = data[:PART], data[-PART - 1 :]
    tail = tail[tail.find(b"\n") + 1 :]
    return head[: head.rfind(b"\n")].decode(), tail.decode()


def time_it(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    compileall.compile_dir(str(ROOT / "driftwatch"), quiet=1)
    hostile = {
        "2 MiB, no newline": "x" * PART,
        "17 kB server_args": "[2026-05-15 08:39:30] server_args={"
        + ", ".join(f"'field_{i}': {i * 0.5}" for i in range(1200)) + "}",
    }
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, text in logs().items():
            files[name] = Path(tmp) / f"{name.split()[0]}.log"
            files[name].write_text(text)
        cases: dict[str, Callable[[], object]] = {}
        for name, path in files.items():
            head, tail = probe_path(path)
            text = path.read_text()
            cases[f"{name}: read + splitlines"] = lambda p=path: p.read_text().splitlines()
            cases[f"{name}: parse_log_parts (probe)"] = lambda h=head, t=tail: parse_log_parts(h, t)
            cases[f"{name}: detect_and_parse (whole)"] = lambda t=text: detect_and_parse(t)
        for name, text in hostile.items():
            cases[f"hostile {name}: splitlines"] = lambda t=text: t.splitlines()
            cases[f"hostile {name}: detect_and_parse"] = lambda t=text: detect_and_parse(t)
        times: dict[str, list[float]] = {case: [] for case in cases}
        order = list(cases)
        for round_ in range(args.repeat):
            rotated = order[round_ % len(order) :] + order[: round_ % len(order)]
            for case in rotated:
                times[case].append(time_it(cases[case]))
    medians = {case: statistics.median(values) for case, values in times.items()}
    print(f"median of {args.repeat}; each log {SIZE / 2**20:.0f} MiB\n")
    print("| case | s | × baseline |\n|---|--:|--:|")
    for case, median in medians.items():
        prefix = case.rpartition(": ")[0]
        baseline = medians.get(f"{prefix}: read + splitlines") or medians[f"{prefix}: splitlines"]
        print(f"| {case} | {median:.4f} | {median / baseline:.1f}× |")


if __name__ == "__main__":
    main()
