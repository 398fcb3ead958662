"""What a symptom points at: the names its evidence holds, and how strongly a change matches them.

A new error names its cause more often than any prior does: ``undefined symbol:
__nvJitLinkComplete_12_4, version libnvJitLink.so.12`` names libnvJitLink; a traceback's
last frame names the package whose code raised; ``NCCL_P2P_DISABLE`` names an env var. The
names are read from the symptom's own text (the logged message, the probe's error) and from
what its diff module found in it (``Change.mentions``), weighted by how specific they are:

- 3: a library's SONAME, a versioned symbol, an env var name, the module of the last frame;
- 2: any other module or package a path or dotted name mentions;
- 1: a plain word (five letters or more, not a word every error has).

A change matches with the weight of the strongest name it carries (its item, label, values,
the packages it is part of). A path is a name too: an error that names a file under a
directory a change is about (``/dev/shm/nccl-XXXXXX`` under a server's ``/dev/shm``) ties
that change at weight 2; the very path a change is about, at the path's own weight. A
symptom may also name the categories its causes fall under (``Change.pulls``: a changed
canary answer pulls kernels and caches) at weight 1.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from fnmatch import fnmatchcase

from driftwatch.diff.change import Change
from driftwatch.facts.read import normalize_name

SONAME = re.compile(r"\blib([A-Za-z0-9_+-]+?)\.so(?:\.[0-9]+)*\b")
SITE_MODULE = re.compile(r"(?:site|dist)-packages/([A-Za-z_][A-Za-z0-9_]*)")
DOTTED = re.compile(r"\b([a-z_][a-z0-9_]*)\.[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*\b")
ENV_NAME = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]\b")
SYMBOL = re.compile(r"\bsymbol:?\s+([A-Za-z_][A-Za-z0-9_]*)")
WORD = re.compile(r"[A-Za-z][A-Za-z0-9]{4,}")
# Words every error, path or report has: they point at nothing.
COMMON = frozenset({
    "error", "errors", "failed", "failure", "python", "python3", "packages", "package", "lib64", "local",
    "library", "libraries", "module", "modules", "object", "shared", "file", "files", "found", "cannot", "could",
    "while", "raise", "raised", "traceback", "recent", "during", "handling", "exception", "above", "following",
    "return", "called", "value", "version", "nvidia", "cuda", "server", "running", "runtime", "there",
    "which", "other", "again", "please", "using", "check", "occurred", "invalid", "unknown", "undefined",
    "symbol", "import", "importerror", "valueerror", "runtimeerror", "assertionerror", "oserror",
    "usr", "site", "dist", "venv", "home", "root", "self", "init", "main",
})
PATH = re.compile(r"(?<![\w.])/[\w.+@-]+(?:/[\w.+@-]+)*")
FILE_SUFFIX = re.compile(r"\.(?:py|pyc|so|abi3|cpython|log|json|txt)$")


def names_in(text: str, mentions: Iterable[str] = ()) -> dict[str, int]:
    """The names a symptom's text and mentions hold, each with its weight (see the module doc)."""
    found: dict[str, int] = {}

    def add(name: str, weight: int) -> None:
        key = _key(name)
        if len(key) >= 3 and key not in COMMON:
            found[key] = max(found.get(key, 0), weight)

    for match in SONAME.finditer(text):
        add(match.group(1), 3)
    for match in SYMBOL.finditer(text):
        add(match.group(1), 3)
    for match in ENV_NAME.finditer(text):
        add(match.group(0), 3)
    modules = [m.group(1) for m in SITE_MODULE.finditer(text)]
    for module in modules:
        add(module, 2)
    if modules:
        add(modules[-1], 3)  # the last frame: the code that raised
    for match in DOTTED.finditer(text):
        if not FILE_SUFFIX.search(match.group(0)):
            add(match.group(1), 2)
    for word in WORD.findall(text):
        add(word, 1)
    for mention in mentions:
        add(mention, 3)
    return found


def match_weight(change: Change, names: dict[str, int]) -> tuple[int, str]:
    """(the weight of the strongest name this change carries, that name); (0, "") for none."""
    best, which = 0, ""
    for own in change_names(change):
        for name, weight in names.items():
            if own == name:
                found = weight
            elif own.startswith("/"):  # a directory the named path lies in (never "/" or "/dev")
                found = min(weight, 2) if own.count("/") >= 2 and name.startswith(own + "/") else 0
            else:
                found = weight if len(own) >= 5 and name.startswith(own) else 0
            if found > best:
                best, which = found, own if own.startswith("/") else name
    return best, which


def pulled(change: Change, patterns: Iterable[str]) -> bool:
    """A ``category`` or ``category:item`` glob of a symptom's ``pulls`` names this change."""
    for pattern in patterns:
        category, _, item = pattern.partition(":")
        if fnmatchcase(change.category, category) and (not item or fnmatchcase(str(change.item).lower(), item.lower())):
            return True
    return False


def change_names(change: Change) -> set[str]:
    """What a change is about, as keys comparable with a symptom's names: its item and label
    and their parts, a package's import name, a library's SONAME stem, what it is part of."""
    raw = [str(change.item), change.label, *(item for _, item in change.part_of)]
    raw += [str(value) for value in (change.old, change.new) if isinstance(value, str) and len(value) < 200]
    found: set[str] = set()
    for text in raw:
        found.update(_key(path) for path in PATH.findall(text))
        for match in SONAME.finditer(text):
            found.add(_key(match.group(1)))
        for part in re.split(r"[\s/()\[\],:=]+", text):
            part = FILE_SUFFIX.sub("", part)
            found.add(_key(part))
            pieces = [p for p in re.split(r"[-_.]", part) if p]
            found.update(_key(p) for p in pieces if not re.fullmatch(r"cu\d+|\d+|v?\d[\w.]*", p))
    return {name for name in found if len(name) >= 3 and name not in COMMON}


def _key(name: str) -> str:
    """One spelling: case and the -_. separators do not tell names apart (sgl_kernel is sgl-kernel);
    a path is spelled as it is (normalized: no trailing slash, no ``..``)."""
    if name.startswith("/"):
        return posixpath.normpath(name)
    return normalize_name(name.strip("._-")).replace("-", "")
