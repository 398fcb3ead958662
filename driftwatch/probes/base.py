"""What a probe is, and what it is given.

A probe fetches raw text from the target through its transport and turns it into facts
with pure ``parse_*`` functions that tests drive with captured real output. A probe that
cannot do its job raises :class:`ProbeError` (recorded as ``error``) or lets
:class:`ProbeTimeout` escape (recorded as ``timeout``); the collector never drops it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Protocol, TypeVar

from driftwatch import interrupt
from driftwatch.settings import WatchSettings
from driftwatch.transport import DEFAULT_MAX_OUTPUT, CommandResult, Transport
from driftwatch.transport.base import CLIENT_GRACE, DEFAULT_PYTHONS, first_python

Facts = dict[str, Any]
MIN_COMMAND_S = 0.5  # less than this left before the --deadline: the command is not started


class ProbeError(Exception):
    """The probe ran but could not produce its facts."""


class ProbeTimeout(ProbeError):
    """A command of the probe passed its deadline."""


class ProbeSkipped(Exception):
    """Nothing to collect here (e.g. no repos configured); recorded as ``skipped``."""


T = TypeVar("T")


class Shared:
    """What several probes of one snapshot need from the target, fetched once: the first
    probe to ask runs ``compute``, the others wait for its result (or its exception)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._results: dict[Hashable, Future[Any]] = {}

    def once(self, key: Hashable, compute: Callable[[], T]) -> T:
        with self._lock:
            future = self._results.get(key)
            first = future is None
            if future is None:
                future = self._results[key] = Future()
        if first:
            try:
                future.set_result(compute())
            except BaseException as exc:  # noqa: BLE001  (the waiters get it too, never hang)
                future.set_exception(exc)
        result: T = future.result()
        return result


@dataclass
class ProbeContext:
    transport: Transport
    watch: WatchSettings = field(default_factory=WatchSettings)
    timeout: float = 10.0
    # The host's previous snapshot's facts for this probe, for caches (e.g. file digests).
    previous: Facts = field(default_factory=dict)
    # One per snapshot, the same for all its probes (a probe run alone gets its own).
    shared: Shared = field(default_factory=Shared)

    @property
    def time_left(self) -> float:
        """The timeout for a command started now: the probe's, shortened under --deadline to
        end before the cut, less the grace a transport waits past a command's deadline.
        Budgets inside a command (a login shell's, a walk's) are shares of it."""
        return interrupt.within(self.timeout, margin=CLIENT_GRACE)

    def run(self, script: str, *, stdin: bytes | None = None, python: str | None = None) -> CommandResult:
        """Run ``script`` on the target within the probe's deadline.

        Raises ProbeTimeout when the deadline passed (naming what outlived SIGKILL, if
        anything did), and ProbeError when the command left no exit status (connection
        lost, transport closed) or its output passed the size bound (facts parsed from a
        cut output would be wrong, not partial).
        """
        timeout = self.time_left
        if timeout < MIN_COMMAND_S:
            raise ProbeTimeout("not run: no time left before the --deadline")
        if python is None:
            result = self.transport.run(script, timeout=timeout, stdin=stdin)
        else:  # the agent can run it without starting an interpreter (Transport.run)
            result = self.transport.run(script, timeout=timeout, stdin=stdin, python=python)
        if result.timed_out:
            cut = " (all that was left before the --deadline)" if timeout < self.timeout else ""
            message = f"timed out after {round(timeout, 1):g}s{cut}"
            if result.survivors:  # in D state: nobody can kill them, so say they are there
                message += "; still alive after SIGKILL: " + ", ".join(map(str, result.survivors))
            raise ProbeTimeout(message)
        if result.exit_code is None and interrupt.expired():
            raise ProbeTimeout("cut short at the --deadline")
        if result.exit_code is None:
            # No exit status: the connection dropped, the agent died or the run was
            # interrupted. Whatever it printed is cut short: not facts.
            last = result.error_text.splitlines()[-1:]
            raise ProbeError(f"no result from the target: {last[0] if last else 'the command ended without an exit status'}")
        if result.truncated:
            raise ProbeError(f"output truncated at the {DEFAULT_MAX_OUTPUT // 2**20} MiB bound: {_first_line(script)}")
        return result


@cache
def load_script(name: str) -> str:
    """A target-side script shipped as package data in ``driftwatch/probes/scripts``."""
    # Anchored at the regular package so it resolves in wheels, editable installs and zips.
    return (resources.files("driftwatch") / "probes" / "scripts" / name).read_text(encoding="utf-8")


def collector_script(name: str) -> str:
    """A ``<python> -`` collector from ``probes/scripts``, preceded by the prelude
    ``dists.py`` it builds on (distribution discovery without importlib.metadata)."""
    return load_script("dists.py") + "\n\n" + load_script(name)


def collect_json(
    ctx: ProbeContext, script_name: str, request: dict[str, Any], *, what: str, keys: tuple[str, ...],
    preludes: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Run a collector script (``run_target_python``) with ``request`` as JSON on stdin; its
    JSON report, an object holding an object under each of ``keys``. A failed run is a
    ProbeError with the script's last stderr line; an unreadable report is one too."""
    result = run_target_python(ctx, script_name, json.dumps(request).encode(), preludes=preludes)
    if result.exit_code != 0:
        last = result.error_text.splitlines()[-1:]
        raise ProbeError(last[0] if last else f"{what} script exit {result.exit_code}")
    return json_report(result.text, what, keys)


def json_report(text: str, what: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """A collector's JSON report: an object holding an object under each of ``keys``."""
    try:
        report = json.loads(text)
    except ValueError as exc:
        raise ProbeError(f"unreadable {what} report: {exc}") from exc
    if not isinstance(report, dict):
        raise ProbeError(f"unreadable {what} report: not an object")
    for key in keys:
        if not isinstance(report.get(key), dict):
            raise ProbeError(f"unreadable {what} report: no {key}")
    return report


def run_target_python(
    ctx: ProbeContext, script_name: str, request: bytes, *, preludes: tuple[str, ...] = ()
) -> CommandResult:
    """Run a stdlib script from ``probes/scripts`` (after the ``preludes`` it builds on)
    with the target's system python3, else the first configured interpreter it has, else
    whatever ``python3`` is on PATH.

    Any python3 >= 3.6 runs these scripts; the system one comes first because a pyenv or
    conda shim first on PATH costs ~60 ms of CPU per start. -I -S: the standard library
    only, no site (nor any .pth hooks a GPU environment installs). The script travels as a
    ``-c`` argument and the request on stdin, so no path or pattern from the config is ever
    interpreted by a shell.
    """
    pythons = [DEFAULT_PYTHONS[0], *ctx.watch.python, *DEFAULT_PYTHONS[1:]]
    code = "\n\n".join(load_script(name) for name in (*preludes, script_name))
    return ctx.run(first_python(code, pythons), stdin=request, python=code)


class Probe(Protocol):
    name: str

    def collect(self, ctx: ProbeContext) -> Facts: ...


def _first_line(script: str) -> str:
    line = script.strip().splitlines()[0] if script.strip() else ""
    return line if len(line) <= 80 else line[:77] + "..."
