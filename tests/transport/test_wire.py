"""Channel messages never follow the channel's close: a real sshd drops the whole
connection for one that does (paramiko issues #1115, #1705)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.hostile import login_host


def test_a_profile_that_exits_at_once_never_costs_the_connection(tmp_path: Path) -> None:
    # Each command's session ends as it starts (`exit 0` in ~/.bashrc) while we still send
    # it stdin: with paramiko's own send, a data or EOF message sometimes went out behind
    # the close, and sshd dropped the connection ("data packet referred to nonexistent
    # channel"): the commands after it failed as "connection lost" instead of "never started".
    with login_host(tmp_path / "host", dotfiles={".bashrc": "exit 0\n"}) as host:
        with host.transport(use_agent=False) as ssh, ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda _: ssh.run("cat", timeout=10, stdin=b"x" * 200_000), range(256)))
        log = host.log()
    assert "nonexistent channel" not in log, log[-2000:]
    errors = {result.error_text.strip().splitlines()[-1] for result in results}
    assert all("lost" not in error and "closed" not in error for error in errors), errors


def test_sending_through_key_exchanges_neither_stalls_nor_fails(tmp_path: Path) -> None:
    # A send waits for a key exchange to end; it must not wait holding the channel's lock,
    # which the transport thread needs to hand in the window adjusts that end the wait.
    import os
    import threading
    import time

    with login_host(tmp_path / "host") as host:
        with host.transport(use_agent=False) as ssh:
            data = os.urandom(8 * 1024 * 1024)
            done = threading.Event()

            def rekey() -> None:
                while not done.is_set():
                    for client in ssh._clients:  # noqa: SLF001  # the connection under the transport
                        transport = client.get_transport()
                        if transport is not None and transport.is_active():
                            transport.renegotiate_keys()
                    time.sleep(0.05)

            thread = threading.Thread(target=rekey, daemon=True)
            thread.start()
            started = time.monotonic()
            try:
                result = ssh.run("cat", timeout=60, stdin=data)
            finally:
                done.set()
                thread.join(5)
            took = time.monotonic() - started
    assert result.ok and result.stdout == data, result.error_text[-300:]
    assert took < 20, f"{took:.1f}s: a send waited out a key exchange"
