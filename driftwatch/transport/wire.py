"""Channel messages sent while the channel's lock is held, so none follows its close.

paramiko builds a channel's data and EOF messages under the channel's lock and sends them
after releasing it; the transport thread, answering the server's close in between, sends
its own CLOSE first (paramiko issues #1115 and #1705, open). sshd frees a channel once both
closes have passed, so a data or EOF message behind them names a channel it no longer has,
and for that it drops the whole connection ("data packet referred to nonexistent channel
3"): every command on it is lost. Seen here with a profile that exits at once (`exit 0` in
``.bashrc``) on a loaded machine. What is sent here goes out before the close, or not at all.

paramiko has no call for RFC 4254's "signal" request either; it is built here the way
paramiko's own channel requests are.
"""

from __future__ import annotations

import time

import paramiko
from paramiko.common import cMSG_CHANNEL_DATA, cMSG_CHANNEL_REQUEST
from paramiko.message import Message


def _rekey_done(channel: paramiko.Channel) -> None:
    """Wait, without the channel's lock, while a key exchange holds sending back: the
    transport thread takes that lock to hand us a window adjust, and a send waiting under
    it for the exchange's end would keep the exchange from ending (until paramiko's 30 s
    timeout). A send finds the way clear after this but for a rekey begun in between."""
    transport = channel.transport
    if transport is None:
        return
    end = time.monotonic() + getattr(transport, "clear_to_send_timeout", 30.0)
    # As paramiko's own wait: a transport that dies meanwhile ends it at once.
    while transport.is_active() and not transport.clear_to_send.wait(0.1) and time.monotonic() < end:
        pass


def send(channel: paramiko.Channel, data: bytes) -> int:
    """``channel.send(data)``: the bytes sent (0 after our EOF), OSError once it is closed,
    TimeoutError when no window opens within its timeout."""
    _rekey_done(channel)
    with channel.lock:
        if channel.closed:
            raise OSError("Socket is closed")
        size = channel._wait_for_send_window(len(data))  # noqa: SLF001  # under the lock, as paramiko's send
        if size == 0:
            return 0
        message = Message()
        message.add_byte(cMSG_CHANNEL_DATA)
        message.add_int(channel.remote_chanid)
        message.add_string(data[:size])
        channel.transport._send_user_message(message)  # noqa: SLF001
        return size


def shutdown_write(channel: paramiko.Channel) -> None:
    """``channel.shutdown_write()``: our EOF, unless the channel is closed or it was sent."""
    _rekey_done(channel)
    with channel.lock:
        if channel.closed:
            return
        message = channel._send_eof()  # noqa: SLF001  # None once sent
        if message is not None:
            channel.transport._send_user_message(message)  # noqa: SLF001


def kill_session(channel: paramiko.Channel) -> None:
    """Have sshd SIGKILL the session's process group: a login shell stuck in its profile (an
    NFS home that does not answer) would otherwise stay on the host after we leave, one per
    run. OpenSSH's sshd (7.9 and later) answers a "signal" request with killpg() of the
    session it started, for any user but root (whose session runs without privilege
    separation, where it refuses). No reply is asked for: a server that does not know the
    request ignores it."""
    message = Message()
    message.add_byte(cMSG_CHANNEL_REQUEST)
    message.add_int(channel.remote_chanid)
    message.add_string("signal")
    message.add_boolean(False)  # want reply
    message.add_string("KILL")
    _rekey_done(channel)
    with channel.lock:
        if channel.active and not channel.closed:
            channel.transport._send_user_message(message)  # noqa: SLF001
