"""`driftwatch snapshot` of hosts whose login environment is hostile, end to end: each test
gets an sshd of its own whose login shell, profile, temp folder or mounts it writes
(tests/hostile.py). What must hold: every probe reads what the host has, or fails as
itself; nothing a login environment does turns into a fact."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from driftwatch.cli import main
from tests.hostile import login_dotfile, login_host, tmpfs_setup
from tests.sshd import Sshd

DRIVER = "590.48.01"  # the default capture the fake nvidia-smi replays
# Long: a missed hello waits it out before falling back to channels, which the time shows.
CONNECT_TIMEOUT = 30
XTERM_TITLE = 'printf "\\033]0;gpu-box\\007"\n'


def dirty_repo(path: Path) -> str:
    """A git repo with an uncommitted change; the digest the git probe must record."""
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    run = {"cwd": path, "check": True, "capture_output": True}
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"], **run)
    (path / "edited.py").write_text("mem_fraction_static = 0.55\n")
    subprocess.run(["git", "add", "edited.py"], **run)
    diff = subprocess.run(["git", "diff", "HEAD", "--no-ext-diff", "--binary"], **run).stdout
    return hashlib.sha256(diff).hexdigest()


def configure(root: Path, host: Sshd, repo: Path) -> None:
    (root / "driftwatch.toml").write_text(
        f'timeout = 30\nconnect_timeout = {CONNECT_TIMEOUT}\nssh_config = "{host.ssh_config_path}"\n'
        f'known_hosts = "{host.known_hosts_path}"\n[watch]\npython = []\nprocesses = []\nrepos = ["{repo}"]\n'
    )


def snapshot(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, float]:
    started = time.monotonic()
    code = main(["snapshot", "testhost", "--json"])
    elapsed = time.monotonic() - started
    [entry] = json.loads(capsys.readouterr().out)
    return code, entry["snapshot"], elapsed


def assert_read_as_it_is(snap: dict, repo: Path, digest: str) -> None:
    probes = snap["probes"]
    failed = {name: p["error"] for name, p in probes.items() if p["status"] not in ("ok", "skipped")}
    assert failed == {}
    assert probes["system"]["facts"]["hostname"] == socket.gethostname()
    assert probes["gpu"]["facts"]["driver_version"] == DRIVER
    git = probes["git"]["facts"]["repos"][str(repo)]
    assert (git["error"], git["dirty"], git["diff_sha256"]) == (None, ["edited.py"], digest)


@pytest.mark.parametrize(
    "shell,profile",
    [("/bin/bash", XTERM_TITLE), ("/bin/bash", 'echo \'{"hello": 1, "pid": 1}\'\nread line\n'),
     ("/usr/bin/tcsh", 'echo "Welcome to the GPU cluster"\n'), ("/bin/bsd-csh", ""),
     ("/usr/bin/fish", "echo -n (set_color normal)\n"), ("/usr/bin/zsh", XTERM_TITLE)],
    ids=["bash-xterm-title", "bash-own-hello-reads-stdin", "tcsh", "csh", "fish", "zsh-xterm-title"],
)
def test_a_login_shell_and_its_profile_change_no_fact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], shell: str, profile: str
) -> None:
    digest = dirty_repo(tmp_path / "repo")
    with login_host(tmp_path / "host", shell=shell, dotfiles=login_dotfile(shell, profile)) as host:
        configure(tmp_path, host, tmp_path / "repo")
        monkeypatch.chdir(tmp_path)
        code, snap, elapsed = snapshot(capsys)
    assert code == 0
    assert_read_as_it_is(snap, tmp_path / "repo", digest)
    assert elapsed < CONNECT_TIMEOUT - 5, "the agent's hello was missed: the snapshot waited out the connect timeout"


# The file each shell reads only as a login shell, and its line that exports a variable.
LOGIN_PROFILE = {
    "/bin/bash": (".profile", "export NCCL_SOCKET_IFNAME=eth-{tag}\n"),
    "/bin/dash": (".profile", "export NCCL_SOCKET_IFNAME=eth-{tag}\n"),
    "/usr/bin/zsh": (".zprofile", "export NCCL_SOCKET_IFNAME=eth-{tag}\n"),
    "/usr/bin/fish": (".config/fish/config.fish", "if status is-login\n  set -gx NCCL_SOCKET_IFNAME eth-{tag}\nend\n"),
    "/usr/bin/tcsh": (".login", "setenv NCCL_SOCKET_IFNAME eth-{tag}\n"),
    "/bin/bsd-csh": (".login", "setenv NCCL_SOCKET_IFNAME eth-{tag}\n"),
}


@pytest.mark.parametrize("shell", sorted(LOGIN_PROFILE))
def test_the_login_environment_is_read_with_the_users_own_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], shell: str
) -> None:
    # A tcsh user sets NCCL_SOCKET_IFNAME in ~/.login; it used to be read with `bash -l`,
    # which never reads that file: the variable was not recorded, and a change to it was
    # "no drift".
    tag = Path(shell).name
    name, line = LOGIN_PROFILE[shell]
    with login_host(tmp_path / "host", shell=shell, dotfiles={name: line.format(tag=tag)}) as host:
        configure(tmp_path, host, tmp_path)
        monkeypatch.chdir(tmp_path)
        code, snap, _ = snapshot(capsys)
    assert code == 0
    facts = snap["probes"]["processes"]["facts"]
    assert facts["login_env_error"] is None
    assert (Path(facts["login_shell"]).name, facts["login_env"].get("NCCL_SOCKET_IFNAME")) == (tag, f"eth-{tag}")


@pytest.mark.parametrize("temp", ["missing", "full"])
def test_a_missing_or_full_temp_folder_is_not_blamed_on_the_driver_or_the_repo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], temp: str
) -> None:
    digest = dirty_repo(tmp_path / "repo")
    folder = tmp_path / "tmp"
    setup = tmpfs_setup(folder, size_kib=16, fill=True) if temp == "full" else ""
    env = {"TMPDIR": str(folder if temp == "full" else tmp_path / "no-such-folder")}
    with login_host(tmp_path / "host", session_env=env, setup=setup) as host:
        configure(tmp_path, host, tmp_path / "repo")
        monkeypatch.chdir(tmp_path)
        if temp == "full":  # the host really has no room there
            with host.transport() as transport:
                full = transport.run(f"df -k {folder} | tail -n 1; echo x >{folder}/probe", timeout=10)
            assert " 100% " in full.text and full.exit_code != 0, full.text
        code, snap, _ = snapshot(capsys)
    assert code == 0
    assert_read_as_it_is(snap, tmp_path / "repo", digest)


def test_an_address_for_local_is_refused_not_ignored(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Meant: snapshot the sshd host under the name `local`. It used to snapshot this machine.
    (tmp_path / "driftwatch.toml").write_text(f'[hosts.local]\naddress = "{sshd.destination}"\n')
    monkeypatch.chdir(tmp_path)
    assert main(["snapshot", "local"]) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        f"driftwatch: error: driftwatch.toml: hosts.local.address: `local` is this machine, read without SSH; "
        f"to reach {sshd.destination} give it a name of its own ([hosts.NAME] with address = ...). "
        "[hosts.local] may set [watch] keys for this machine\n"
    )
    assert not (tmp_path / "snapshots").exists()


def test_a_profile_that_hangs_leaves_one_shell_behind_not_one_per_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every session of this user blocks in ~/.bashrc (an NFS home that does not answer). The
    # agent's shell never runs its launch line; a channel per command would block the same
    # way and stay behind on the host after we leave: 12 hung shells a run, before this.
    nap = f"sleep 97.{os.getpid()}{time.time_ns() % 10_000}"  # a command line to count them by
    with login_host(tmp_path / "host", dotfiles={".bashrc": nap + "\n"}) as host:
        (tmp_path / "driftwatch.toml").write_text(
            f'timeout = 8\nconnect_timeout = 2\nssh_config = "{host.ssh_config_path}"\n'
            f'known_hosts = "{host.known_hosts_path}"\n[watch]\npython = []\nprocesses = []\n'
        )
        monkeypatch.chdir(tmp_path)
        try:
            started = time.monotonic()
            code = main(["snapshot", "testhost", "--json"])
            elapsed = time.monotonic() - started
            [entry] = json.loads(capsys.readouterr().out)
            time.sleep(0.5)  # sshd's children have started what they were going to
            hung = subprocess.run(["pgrep", "-f", "-x", nap], capture_output=True, text=True).stdout.split()
        finally:
            subprocess.run(["pkill", "-f", "-x", nap], check=False)
    # Nothing of the host was read: an error of the host, no snapshot stored to diff against.
    assert code == 1 and "snapshot" not in entry, entry
    assert entry["error"].startswith("nothing collected: "), entry
    assert "the login shell did not start within 2s" in entry["error"], entry
    assert len(hung) <= 1, f"{len(hung)} hung login shells left on the host"  # root: see the next test
    assert elapsed < 8, "each command waited out its own timeout in a hung session"


def test_a_profile_that_hangs_leaves_no_shell_behind_for_an_unprivileged_user(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The one shell the test above may leave is the agent's own, stuck in ~/.bashrc: for a
    # user other than root, sshd kills the session's process group when asked (the SSH
    # "signal" request; sshd refuses it for root, whose session runs unseparated), so a
    # cron job every 5 minutes does not pile 288 shells a day onto a hung host.
    nap = f"sleep 96.{os.getpid()}{time.time_ns() % 10_000}"
    top = Path(tempfile.mkdtemp(prefix="driftwatch-nobody-"))  # reachable by nobody: not pytest's 0700 folder
    top.chmod(0o755)
    try:
        with login_host(top / "host", dotfiles={".bashrc": nap + "\n"}, user="nobody") as host:
            (top / "driftwatch.toml").write_text(
                f'timeout = 8\nconnect_timeout = 2\nssh_config = "{host.ssh_config_path}"\n'
                f'known_hosts = "{host.known_hosts_path}"\n[watch]\npython = []\nprocesses = []\n'
            )
            monkeypatch.chdir(top)
            try:
                code = main(["snapshot", "testhost", "--json"])
                [entry] = json.loads(capsys.readouterr().out)
                time.sleep(0.5)
                hung = subprocess.run(["pgrep", "-f", "-x", nap], capture_output=True, text=True).stdout.split()
            finally:
                subprocess.run(["pkill", "-f", "-x", nap], check=False)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    assert code == 1 and "the login shell did not start within 2s" in entry["error"], entry
    assert hung == [], f"{len(hung)} hung login shells left on the host"


def test_a_host_whose_every_command_fails_to_start_is_an_error_not_drift(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A good baseline, then the user's ~/.bashrc starts with `exit 0` (a broken dotfile
    # push): sshd still accepts the login, and every command ends before it starts. The
    # host was never read, so `check` may not call that drift (exit 2, "driftwatch_up 1").
    with login_host(tmp_path / "host") as host:
        (tmp_path / "driftwatch.toml").write_text(
            f'timeout = 8\nconnect_timeout = 3\nssh_config = "{host.ssh_config_path}"\n'
            f'known_hosts = "{host.known_hosts_path}"\n[watch]\npython = []\nprocesses = []\n'
        )
        monkeypatch.chdir(tmp_path)
        assert main(["snapshot", "testhost", "--label", "good"]) == 0
        capsys.readouterr()
        (tmp_path / "host" / "home" / ".bashrc").write_text("exit 0\n")
        code = main(["check", "testhost", "--nhc"])
        nhc = capsys.readouterr().out.strip()
        metrics = tmp_path / "metrics"
        metrics.mkdir()
        textfile_code = main(["check", "testhost", "--textfile", str(metrics)])
        capsys.readouterr()
    assert code == 1, nhc
    assert nhc.startswith("ERROR: driftwatch: could not check: nothing collected: "), nhc
    assert "did not start" in nhc, nhc
    [prom] = metrics.glob("*.prom")
    assert textfile_code == 1
    assert 'driftwatch_up{host="testhost"} 0.0' in prom.read_text()
