"""Whatever a log holds, the parsers return plain JSON and never raise: real lines cut,
spliced and stuffed with absurd numbers must not cost the snapshot its logs probe."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from driftwatch.logparse import (
    detect_and_parse,
    parse_log_parts,
    parse_sglang_log,
    parse_vllm_log,
)
from tests.logparse.test_sglang import LOG_2026, seed_log
from tests.logparse.test_vllm import V0_NAMESPACE, V1_GOOD, V1_NO_MEMORY

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sglang-logs"
REAL_LINES = [
    line
    for text in [
        *(path.read_text() for path in sorted(FIXTURES.glob("*.txt"))),
        LOG_2026, seed_log(0.55, fails=True), V1_GOOD, V1_NO_MEMORY, V0_NAMESPACE,
    ]
    for line in text.splitlines()
    if line.strip()
]  # fmt: skip
ODD = ["9" * 5000, "1e999", ".", "..", "-", "", "\x00", "\ufffd", "(", "{", "'", "\\", ",", "=", "\n"]


@st.composite
def mutated_lines(draw: st.DrawFn) -> str:
    line = draw(st.sampled_from(REAL_LINES))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(line)))
        action = draw(st.sampled_from(["cut", "insert", "digits"]))
        if action == "cut":
            line = line[:at]
        elif action == "insert":
            line = line[:at] + draw(st.sampled_from(ODD) | st.text(max_size=8)) + line[at:]
        else:
            line = "".join(draw(st.sampled_from(ODD)) if ch.isdigit() else ch for ch in line)
    return line


@settings(max_examples=150, deadline=None)
@given(st.lists(mutated_lines(), min_size=1, max_size=12))
def test_parsers_never_raise_and_stay_json(lines: list[str]) -> None:
    text = "\n".join(lines)
    for facts in (
        detect_and_parse(text),
        parse_sglang_log(text),
        parse_vllm_log(text),
        parse_log_parts(text[: len(text) // 2], text[len(text) // 2 :]),
    ):
        json.dumps(facts, allow_nan=False)
