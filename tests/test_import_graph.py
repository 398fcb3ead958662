"""driftwatch's modules import each other as a tree: no module needs one that needs it.

A cycle makes import order matter and hides which module is the bottom (fleet/ had
flatten → areas → gpus/runtime → flatten, patched with a function-level import).
Package ``__init__`` re-exports do not count: ``from driftwatch.facts import fmt`` needs
the module ``fmt``, not the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "driftwatch"


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "scripts" in path.parts:  # sent to targets as text, never imported
            continue
        name = ".".join(("driftwatch", *path.relative_to(PACKAGE).with_suffix("").parts))
        found[name.removesuffix(".__init__")] = path
    return found


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("driftwatch"):
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in known else node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("driftwatch")}
    return found & known.keys()


def cycles() -> list[list[str]]:
    known = modules()
    edges = {name: sorted(imports(path, known) - {name}) for name, path in known.items()}
    state: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(name: str) -> None:
        state[name] = 1
        stack.append(name)
        for dep in edges[name]:
            if state.get(dep) == 1:
                found.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[name] = 2

    for name in sorted(known):
        if name not in state:
            visit(name)
    return found


def test_the_import_graph_has_no_cycle() -> None:
    assert cycles() == []


# Packages that must not reach up or sideways: the comparison (diff/) and the judgement
# (rules/) read facts through facts/ and never each other; explain/ is the one stage that
# joins them, and nothing below it may import it.
FORBIDDEN = {
    "driftwatch.facts": ("driftwatch.diff", "driftwatch.rules", "driftwatch.explain"),
    "driftwatch.diff": ("driftwatch.rules", "driftwatch.explain"),
    "driftwatch.rules": ("driftwatch.diff", "driftwatch.explain"),
}


def layer_violations() -> list[str]:
    known = modules()
    found = []
    for name, path in sorted(known.items()):
        for package, banned in FORBIDDEN.items():
            if name != package and not name.startswith(package + "."):
                continue
            for dep in sorted(imports(path, known)):
                if any(dep == b or dep.startswith(b + ".") for b in banned):
                    found.append(f"{name} imports {dep}")
    return found


def test_diff_and_rules_never_import_each_other() -> None:
    assert layer_violations() == []
