"""Real nvidia-smi captures with one setting changed, as the driver would then report it.

``nvidia-smi -pl 450`` changes what ``--query-gpu`` answers for ``power.limit`` and
``enforced.power.limit`` and nothing else; a power brake asserted by the chassis changes the
``clocks_event_reasons`` columns. ``derive_capture`` copies a capture from
tests/fixtures/nvidia-smi and replaces those cells of its query-gpu rows, so the fake
nvidia-smi replays a real capture of a GPU in that state.
"""

from __future__ import annotations

from pathlib import Path

CAPTURES = Path(__file__).parent / "fixtures" / "nvidia-smi"
H200 = CAPTURES / "linux-x86_64__nvidia-h200__590.48.01.txt"


def derive_capture(dest: Path, cells: dict[str, str], *, source: Path = H200,
                   phases: tuple[str, ...] = ("idle", "load")) -> Path:
    """``source`` with the query-gpu cells named in ``cells`` (field → cell as printed,
    units included: ``"450.00 W"``) replaced in the rows of ``phases``."""
    lines = source.read_text().split("\n")
    fields: list[str] | None = None
    in_section = False
    changed = 0
    for i, line in enumerate(lines):
        if line.startswith("# ") and " :: " in line:
            phase = line[2:].split(" :: ", 1)[0]
            in_section = phase in phases and line.split(" :: ", 1)[1].startswith("query-gpu")
            fields = None
        elif in_section and line.startswith("# $ nvidia-smi --query-gpu="):
            fields = line.split("=", 1)[1].split(" ")[0].split(",")
        elif in_section and fields and line and not line.startswith("#") and not line.startswith("timestamp"):
            row = line.split(", ")
            for field, cell in cells.items():
                row[fields.index(field)] = cell
            lines[i] = ", ".join(row)
            changed += 1
    assert changed == len(phases), f"expected one query-gpu row per phase, changed {changed}"
    dest.write_text("\n".join(lines))
    return dest
