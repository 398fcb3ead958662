"""Hostile login environments, each on an sshd of its own (tests/hostile.py): the login
shells Debian packages, and profiles that print without a newline, print a hello of their
own, read stdin or end the shell before the command runs. In both modes: through the
agent, and with a session channel per command."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftwatch.probes.base import ProbeContext, ProbeError
from driftwatch.probes.system import SystemProbe
from tests.hostile import SHELLS, login_dotfile, login_host

MODES = ["agent", "channels"]
# Quotes of both kinds, `!` (csh history), `$`, a backslash, lines, and a 20 KB comment:
# csh refuses a word over ~8 KB.
TRICKY = (
    "# " + "x" * 20000 + "\n"
    "printf '%s\\n' \"it's\" 'say \"hi\"' '$HOME!' 'a\\b'\n"
    "cat\n"
)
TRICKY_OUT = b"it's\nsay \"hi\"\n$HOME!\na\\b\nthe input\nline two\n"
XTERM_TITLE = 'printf "\\033]0;gpu-box\\007"\n'  # the common ~/.bashrc line: no newline


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shell", SHELLS, ids=[Path(s).name.replace("bsd-", "") for s in SHELLS])
def test_every_login_shell_runs_the_command_as_sent(tmp_path: Path, shell: str, mode: str) -> None:
    with login_host(tmp_path, shell=shell) as host, host.transport(use_agent=mode == "agent") as transport:
        result = transport.run(TRICKY, timeout=20, stdin=b"the input\nline two\n")
        assert (result.stdout, result.exit_code) == (TRICKY_OUT, 0), result.error_text
        assert transport.mode == mode, transport.agent_error


@pytest.mark.parametrize("mode", MODES)
def test_a_profile_printing_without_a_newline_changes_no_output(tmp_path: Path, mode: str) -> None:
    with login_host(tmp_path, dotfiles={".bashrc": XTERM_TITLE}) as host:
        with host.transport(use_agent=mode == "agent") as transport:
            result = transport.run("echo '@@hostname gpu-box'; echo '@@kernel 6.8'", timeout=30)
            assert result.stdout == b"@@hostname gpu-box\n@@kernel 6.8\n" and result.ok, result.error_text
            assert transport.mode == mode, transport.agent_error  # a missed hello falls back to channels
            facts = SystemProbe().collect(ProbeContext(transport))
            assert facts["hostname"] and facts["hostname"] == host_hostname(transport)


@pytest.mark.parametrize("mode", MODES)
def test_a_profile_that_prints_megabytes_changes_no_output(tmp_path: Path, mode: str) -> None:
    # An HPC login banner, `module avail` in ~/.bashrc: far more than the room a command's
    # output has ahead of it. On a channel of its own the start mark came after the
    # buffer's end: "the command did not start", on every command, every run.
    banner = tmp_path / "banner"
    banner.write_bytes(b"Lmod: " + b"x" * 2_000_000)  # no newline either
    with login_host(tmp_path / "host", dotfiles={".bashrc": f"cat {banner}\n"}) as host:
        with host.transport(use_agent=mode == "agent") as transport:
            result = transport.run("echo out; cat", timeout=30, stdin=b"in\n")
            assert (result.stdout, result.exit_code) == (b"out\nin\n", 0), result.error_text[-300:]
            assert not result.truncated
            assert transport.mode == mode, transport.agent_error


def host_hostname(transport: object) -> str:
    return transport.run("hostname", timeout=10).text.strip()  # type: ignore[attr-defined]


def test_a_profile_printing_a_hello_of_its_own_is_not_the_agent(tmp_path: Path) -> None:
    profile = 'echo \'{"hello": 1, "pid": 1}\'\n'
    with login_host(tmp_path, dotfiles={".bashrc": profile}) as host, host.transport() as transport:
        for _ in range(3):
            result = transport.run("echo fine", timeout=10)
            assert result.stdout == b"fine\n" and result.ok, result.error_text
        assert transport.mode == "agent", transport.agent_error


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shell", ["/bin/bash", "/usr/bin/zsh", "/usr/bin/fish", "/usr/bin/tcsh"])
def test_a_profile_that_reads_stdin_does_not_eat_the_commands_input(tmp_path: Path, shell: str, mode: str) -> None:
    reads = "set line = $<\n" if shell.endswith("csh") else "read line\n"
    with login_host(tmp_path, shell=shell, dotfiles=login_dotfile(shell, reads)) as host:
        with host.transport(use_agent=mode == "agent") as transport:
            result = transport.run("cat", timeout=30, stdin=b'{"request": 1}\nsecond\n')
            assert result.stdout == b'{"request": 1}\nsecond\n' and result.ok, result.error_text
            assert transport.mode == mode, transport.agent_error


def test_a_shell_that_never_runs_the_command_is_an_error_not_empty_output(tmp_path: Path) -> None:
    # A profile that ends the shell: exit status 0 and no output, for every command.
    with login_host(tmp_path, dotfiles={".bashrc": "exit 0\n"}) as host:
        with host.transport(use_agent=False) as transport:
            result = transport.run("echo '@@hostname gpu-box'", timeout=10)
            assert result.exit_code is None and not result.ok
            assert "did not start" in result.error_text and "no start mark" in result.error_text
            with pytest.raises(ProbeError, match="did not start"):
                SystemProbe().collect(ProbeContext(transport))
