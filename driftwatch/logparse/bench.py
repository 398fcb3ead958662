"""Results of offline runs: SGLang's bench_one_batch / bench_latency / bench_offline_throughput
and vLLM's benchmark scripts print their figures as plain lines, not log records."""

from __future__ import annotations

import re
from typing import Any

from driftwatch.logparse.common import to_number

_NUM = r"(-?\d[\d,]*(?:\.\d+)?)"
# bench_one_batch / bench_latency: "Prefill. latency: 0.02265 s, throughput:   2648.96 token/s";
# warm-up first, then "Benchmark ...": the last figures printed are the benchmark's.
_STEP = re.compile(rf"^(Prefill|Total)\. +latency: +{_NUM} s, throughput: +{_NUM} token/s")
_DECODE = re.compile(rf"^Decode\. +median latency: +{_NUM} s, median throughput: +{_NUM} token/s")
_BATCH = re.compile(rf"^Decode \d+\. Batch size: {_NUM}")
# A result table ("====== Offline Throughput Benchmark Result =======") of "Label (unit):  value".
_TABLE_START = re.compile(r"^=+ ?[A-Za-z][\w /-]{0,60}(?:Result|Benchmark)\w* ?=+\s*$")
_TABLE_ROW = re.compile(rf"^([A-Za-z][A-Za-z0-9 ()/%.-]{{1,60}}?):\s+{_NUM}\s*$")
_TABLE_END = re.compile(r"^=+\s*$")
_VLLM_THROUGHPUT = re.compile(rf"^Throughput: {_NUM} requests/s, {_NUM} total tokens/s(?:, {_NUM} output tokens/s)?")
_VLLM_LATENCY = re.compile(rf"^Avg latency: {_NUM} seconds")
_SNAKE = re.compile(r"[^a-z0-9]+")
MAX_TABLE_ROWS = 60
MARKERS = ("Warmup ...", "Benchmark ...")


def snake(label: str) -> str:
    """"Input token throughput (tok/s)" → "input_token_throughput_tok_s"."""
    return _SNAKE.sub("_", label.lower()).strip("_")[:80]


class BenchScanner:
    """Feed it every line; ``results`` holds the figures, ``seen`` whether it was a bench run."""

    def __init__(self) -> None:
        self.results: dict[str, Any] = {}
        self.seen = False
        self._rows_left = 0

    def scan(self, line: str) -> bool:
        if self._rows_left:
            self._rows_left -= 1
            row = _TABLE_ROW.match(line)
            if row:
                self._put(snake(row.group(1)), row.group(2))
                return True
            if _TABLE_END.match(line):
                self._rows_left = 0
            return bool(line)
        if not line or line[0] not in "=PTDAWB":
            return False
        if line.startswith("=") and _TABLE_START.match(line):
            self._rows_left, self.seen = MAX_TABLE_ROWS, True
            return True
        if line in MARKERS:
            self.seen = True
            return True
        return self._step(line)

    def _step(self, line: str) -> bool:
        step = _STEP.match(line)
        if step:
            name = step.group(1).lower()
            self._put(f"{name}_latency_s", step.group(2))
            self._put(f"{name}_throughput_tok_s", step.group(3))
            return True
        decode = _DECODE.match(line)
        if decode:
            self._put("decode_median_latency_s", decode.group(1))
            self._put("decode_median_throughput_tok_s", decode.group(2))
            return True
        batch = _BATCH.match(line)
        if batch:
            self._put("batch_size", batch.group(1))
            return True
        throughput = _VLLM_THROUGHPUT.match(line)
        if throughput:
            for key, value in zip(("requests_per_s", "total_tokens_per_s", "output_tokens_per_s"), throughput.groups(), strict=True):
                if value is not None:
                    self._put(key, value)
            return True
        latency = _VLLM_LATENCY.match(line)
        if latency:
            self._put("avg_latency_s", latency.group(1))
            return True
        return False

    def _put(self, key: str, text: str) -> None:
        value = to_number(text)
        if value is not None:
            self.results[key] = value
            self.seen = True
