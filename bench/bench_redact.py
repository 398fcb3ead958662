"""What does the last redaction pass cost on a big host? 800 distributions, 5,000 files.

``collect.run_probe`` passes every probe record's strings through ``redact_strings``
(token formats, URL credentials) before the record exists. This times that pass over the
facts of bench_diff's big host against what the collector pays anyway for the same
snapshot (``json.loads`` of it, and writing it with ``model_dump_json``), in the same
process. Run:

    python bench/bench_redact.py [--repeat N]

Two cases: clean facts (nothing to redact), and every distribution installed from a URL
with credentials (every ``direct_url`` and one ``requires`` entry each rewritten).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_diff import base_facts, median_time, snapshot_json  # noqa: E402

from driftwatch.redact import redact_strings  # noqa: E402


def with_credentials(facts: dict[str, Any]) -> dict[str, Any]:
    facts = copy.deepcopy(facts)
    for name, dist in facts["python"]["interpreters"]["python3"]["distributions"].items():
        dist["direct_url"] = f"git+https://ci:hunter2-{name}@git.example.com/org/{name}.git"
        dist["requires"][0] = f"{name}-extra @ https://ci:hunter2@pypi.example.com/{name}.whl"
    return facts


def bench(label: str, facts: dict[str, Any], repeat: int) -> None:
    text = snapshot_json(facts)
    redact = median_time(lambda: [redact_strings(v) for v in facts.values()], repeat)
    load = median_time(lambda: json.loads(text), repeat)
    dump = median_time(lambda: snapshot_json(facts), repeat)
    print(
        f"{label:12} redact {redact:.4f} s  json.loads {load:.4f} s  model_dump_json {dump:.4f} s  "
        f"redact/json.loads {redact / load:4.2f}x  ({len(text) / 1e6:.1f} MB of JSON)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    facts = base_facts()
    print(f"800 distributions, 8 GPUs, 5,000 files; median of {args.repeat} runs")
    bench("clean", facts, args.repeat)
    bench("credentials", with_credentials(facts), args.repeat)


if __name__ == "__main__":
    main()
