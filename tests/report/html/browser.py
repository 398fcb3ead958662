"""A real headless Chromium (Debian's ``chromium``) loading a page over file://, as a person
opening an email attachment would: what it built (the DOM after any script would have
run) and what it said on its console.

``--dump-dom`` prints the document once it has loaded; ``--enable-logging=stderr --v=0``
puts every console message, CSP refusals included, on stderr as ``…:CONSOLE…`` lines. The
flags keep Chromium off the network (this machine has none; without them it tries
Google's hosts at every start) and out of any profile but a fresh one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.report.html.dom import Node, parse

NAMES = ("chromium", "chromium-browser")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--enable-logging=stderr", "--v=0", "--dump-dom",
)  # fmt: skip
_CONSOLE = re.compile(r":CONSOLE[:(]")


def chromium() -> str:
    """The browser's path; the test skips, saying what is missing, when it is not installed
    (a developer's machine). CI installs it (.ci/run), so there a missing browser fails."""
    found = next((path for path in map(shutil.which, NAMES) if path), None)
    if found is None:
        message = "no chromium on PATH: the HTML report's browser checks need Debian's chromium (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


@dataclass(frozen=True)
class Loaded:
    dom: Node
    title: str  # document.title after loading: a script that ran would have changed it
    console: list[str]  # console messages: errors, warnings, CSP refusals


def load(browser: str, page: Path, deadline_s: float = 120.0, width: int | None = None) -> Loaded:
    """``width``: the window's width in CSS pixels (Chromium's default otherwise)."""
    size = [f"--window-size={width},900"] if width else []
    with tempfile.TemporaryDirectory(prefix="driftwatch-chromium-") as profile:
        process = subprocess.Popen(
            [browser, *FLAGS, *size, f"--user-data-dir={profile}", page.resolve().as_uri()],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,  # its renderer and helpers are killed with it
        )
        try:
            out, err = process.communicate(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            pytest.fail(f"chromium had not loaded {page.name} after {deadline_s:g} s: a script that ran (an alert?) would do that")
    assert process.returncode == 0, err[-2000:]
    dom = parse(out)
    assert dom.find_all("body"), f"chromium printed no document: {out[:500]!r} {err[-2000:]}"
    titles = dom.find_all("title")
    return Loaded(dom, titles[0].text if titles else "", [line for line in err.splitlines() if _CONSOLE.search(line)])


# Laid out by the browser, read back by a script the test adds to its own copy of a page
# (the page's CSP, which refuses every script, is left out of that copy): whether the page
# or any box in it can scroll sideways, and which.
_SIDEWAYS = """<script>
const found = [];
const page = document.documentElement;
if (page.scrollWidth > page.clientWidth) found.push(`page ${page.scrollWidth}>${page.clientWidth}`);
for (const box of document.querySelectorAll("body *")) {
  const overflow = getComputedStyle(box).overflowX;
  if ((overflow === "auto" || overflow === "scroll") && box.scrollWidth > box.clientWidth)
    found.push(`${box.tagName.toLowerCase()}.${box.className} ${box.scrollWidth}>${box.clientWidth}`);
}
document.body.setAttribute("data-sideways", JSON.stringify(found));
</script>"""


def sideways(browser: str, html: str, folder: Path, name: str, width: int) -> list[str]:
    """What scrolls sideways when ``html`` is opened in a window ``width`` pixels wide."""
    measured = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)
    assert "Content-Security-Policy" not in measured and "</body>" in measured
    page = folder / f"{name}-{width}.html"
    page.write_text(measured.replace("</body>", _SIDEWAYS + "</body>"), encoding="utf-8")
    body = load(browser, page, width=width).dom.find("body")
    assert "data-sideways" in body.attrs, "the measuring script did not run"
    found: list[str] = json.loads(body.attrs["data-sideways"])
    return found
