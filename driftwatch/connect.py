"""Open the transport for a target. paramiko is imported only when a host needs SSH."""

from __future__ import annotations

from driftwatch import interrupt
from driftwatch.config import Config, Target
from driftwatch.errors import ConnectError
from driftwatch.transport import Transport
from driftwatch.transport.local import LocalTransport


def open_transport(target: Target, config: Config, *, accept_new_host_key: bool = False) -> Transport:
    if target.is_local:
        return LocalTransport()
    from driftwatch.transport.ssh import SshTransport

    connect_timeout = interrupt.within(config.connect_timeout)  # --deadline: connecting included
    if connect_timeout <= 0:
        raise ConnectError(f"{target.address}: not connected: no time left before the --deadline")
    transport = SshTransport.connect(
        target.address,
        connect_timeout=connect_timeout,
        ssh_config_path=config.ssh_config,
        known_hosts_path=config.known_hosts,
        accept_new_host_key=accept_new_host_key or config.accept_new_host_key,
    )
    transport.prepare()
    return transport
