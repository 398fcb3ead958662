"""Run commands on this machine: the ``local`` target.

Commands run exactly as the SSH agent runs them on a remote host (its ``Runner``): each in
a session of its own, stopped as a whole at the deadline (SIGTERM, then SIGKILL after
``KILL_AFTER``), and all of them on :meth:`LocalTransport.close`.
"""

from __future__ import annotations

import atexit
import weakref
from typing import Any

from driftwatch.transport.base import (
    DEFAULT_MAX_OUTPUT,
    CommandResult,
    Survivor,
    interrupted_result,
)
from driftwatch.transport.scripts.agent import Runner


# Runners whose commands may still run: at exit (after a Ctrl-C, say) they are stopped
# before the interpreter goes, even if the close() started for them has not finished.
_runners: weakref.WeakSet[Runner] = weakref.WeakSet()


class LocalTransport:
    name = "local"
    reached = True  # this machine's commands always start

    def __init__(self) -> None:
        self._runner = Runner()
        _runners.add(self._runner)

    def run(
        self,
        script: str,
        *,
        timeout: float,
        stdin: bytes | None = None,
        max_output: int = DEFAULT_MAX_OUTPUT,
        python: str | None = None,  # not forked here: a copy of the collector is no small interpreter
    ) -> CommandResult:
        return command_result(self._runner.run(script, stdin, timeout, max_output), self.name)

    def close(self) -> None:
        self._runner.close()


@atexit.register
def _stop_all() -> None:
    for runner in list(_runners):
        runner.close()


def command_result(outcome: dict[str, Any], where: str) -> CommandResult:
    """A CommandResult from what ``Runner.run`` returns (bytes, not yet base64)."""
    if outcome["interrupted"]:
        return interrupted_result(where)
    return CommandResult(
        outcome["stdout"],
        outcome["stderr"],
        outcome["rc"],
        timed_out=outcome["timed_out"],
        truncated=outcome["truncated"],
        survivors=tuple(Survivor(pid, state, name) for pid, state, name in outcome["survivors"]),
    )
