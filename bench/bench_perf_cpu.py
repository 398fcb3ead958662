"""The perf probe's CPU section, run back to back: how long it takes, and how much its
figures move on their own (what driftwatch/figures.py's CPU noise floor is designed from).

Runs the section N times as the probe does (``probes.perf.cpu_section`` on the local
target: a fresh interpreter each time, numpy where the interpreter has it), alternating
between the interpreters given, and prints per interpreter and figure: the median wall
seconds of the section (interpreter start and imports included), the figures' spread on the
log scale, the lowest ratio of a run to the one before it, and how many consecutive pairs
the diff would call a drop with one run of history (the noise floor standing). With --save,
the runs are written in the format of tests/fixtures/perf/cpu_runs_loaded_2core.json.

Run:  python bench/bench_perf_cpu.py [--repeat 20] [--python /usr/bin/python3 --python .venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from driftwatch.facts.figures import judge  # noqa: E402
from driftwatch.probes.base import ProbeContext  # noqa: E402
from driftwatch.probes.perf import Budget, cpu_section  # noqa: E402
from driftwatch.settings import WatchSettings  # noqa: E402
from driftwatch.transport.local import LocalTransport  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--python", action="append", help="interpreter (repeatable); default: this one and /usr/bin/python3")
    parser.add_argument("--save", type=Path, help="write the runs as JSON here")
    args = parser.parse_args()
    pythons = args.python or [sys.executable, "/usr/bin/python3"]
    runs: dict[str, list[dict[str, object]]] = {p: [] for p in pythons}
    transport = LocalTransport()
    try:
        for round_ in range(args.repeat):
            for python in pythons[round_ % len(pythons):] + pythons[: round_ % len(pythons)]:
                ctx = ProbeContext(transport=transport, watch=WatchSettings(python=[python], perf=True))
                start = time.monotonic()
                section = cpu_section(ctx, Budget(60.0), {})
                wall = time.monotonic() - start
                runs[python].append({"load": os.getloadavg()[0], "wall_s": round(wall, 3), "backend": section.get("backend"),
                                     "figures": section.get("figures", {})})
    finally:
        transport.close()
    print(f"{'interpreter':<28} {'backend':<7} {'figure':<6} {'wall s':>7} {'max s':>6} {'log σ':>6} "
          f"{'min ratio':>9} {'drops':>5}   (n={args.repeat}, load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores)")
    for python, rows in runs.items():
        walls = [float(r["wall_s"]) for r in rows]  # type: ignore[arg-type]
        for name in ("gemm", "copy"):
            figures = [r["figures"].get(name, {}) for r in rows]  # type: ignore[union-attr]
            values = [f["value"] for f in figures if f.get("status") == "ok"]
            if len(values) < 2:
                print(f"{python[-28:]:<28} {name}: fewer than 2 figures ({[f.get('reason') for f in figures][:2]})")
                continue
            ratios = [b / a for a, b in zip(values, values[1:], strict=False)]
            drops = sum(
                1 for a, b in zip(figures, figures[1:], strict=False)
                if a.get("status") == b.get("status") == "ok"
                and (v := judge([a["value"]], "cpu", a, dict(b, remeasured=b["value"]))) is not None and v.drop
            )
            sigma = statistics.stdev(math.log(v) for v in values)
            print(f"{python[-28:]:<28} {str(rows[0]['backend']):<7} {name:<6} {statistics.median(walls):>7.2f} "
                  f"{max(walls):>6.2f} {sigma:>6.3f} {min(ratios):>9.3f} {drops:>5}")
    if args.save:
        args.save.write_text(json.dumps({"runs": runs}, indent=1))


if __name__ == "__main__":
    main()
