"""The one exception hierarchy of driftwatch.

    DriftwatchError           anything driftwatch reports as a one-line message and exit 1
    ├── UserError             bad input: unknown host, bad config, unknown REF, bad flag value
    ├── StoreError            a snapshot file that is corrupt, foreign or newer; a store that cannot be written
    └── TransportError        the target could not be used at all
        ├── ConnectError      unreachable, refused, DNS, connect deadline passed
        ├── AuthError         authentication failed
        └── HostKeyError      unknown or changed host key

Errors from paramiko, socket and subprocess are translated into these at the transport
boundary (``raise ... from``), so nothing above the transport knows about paramiko.
A single command that times out or fails is *not* an exception: it is a CommandResult.
"""

from __future__ import annotations


class DriftwatchError(Exception):
    """Base of every error shown to the user as one line with exit code 1."""


class UserError(DriftwatchError):
    pass


class StoreError(DriftwatchError):
    pass


class TransportError(DriftwatchError):
    pass


class ConnectError(TransportError):
    pass


class AuthError(TransportError):
    pass


class HostKeyError(TransportError):
    pass
