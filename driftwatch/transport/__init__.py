"""Transports run shell commands on a target: ``local`` (subprocess) or SSH (paramiko).

Every probe gets a :class:`Transport` and nothing else, so it runs unchanged on the local
machine, over SSH and in tests.
"""

from driftwatch.transport.base import (
    DEFAULT_MAX_OUTPUT,
    CommandResult,
    Survivor,
    Transport,
    quote_path,
)

__all__ = ["DEFAULT_MAX_OUTPUT", "CommandResult", "Survivor", "Transport", "quote_path"]
