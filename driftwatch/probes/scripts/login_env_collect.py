# Runs ON THE TARGET under any python3 >= 3.6, stdlib only. Reads a JSON request on
# stdin and prints one JSON document: the environment a fresh login shell of this user
# gets (the profiles' CUDA_VISIBLE_DEVICES, NCCL_* ...), filtered by the requested globs,
# with credential-named variables and token-looking values already redacted.
import fnmatch
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # type checkers only; the annotations are strings: importing typing costs ~5 ms per start
    from typing import Dict, List, Optional, Tuple

POSIX_SHELLS = {"bash", "sh", "dash", "zsh", "ksh", "mksh"}
# csh reads ~/.login only as a login shell reading commands: argv[0] "-csh", commands on
# stdin (BSD csh ignores ~/.login under -c; tcsh would take either).
CSH_SHELLS = {"csh", "tcsh", "bsd-csh"}
LOGIN_SHELLS = POSIX_SHELLS | CSH_SHELLS | {"fish"}
KILL_GRACE = 1.0  # seconds between TERM and KILL
REDACTED = "<redacted>"


def login_shell() -> str:
    """The user's own shell when it is one we know how to log in with (its profiles are
    the ones that count), else bash, else sh."""
    try:
        shell = pwd.getpwuid(os.getuid()).pw_shell
    except KeyError:
        shell = ""
    if os.path.basename(shell) in LOGIN_SHELLS and os.access(shell, os.X_OK):
        return shell
    return shutil.which("bash") or "/bin/sh"


def login_command(shell: str, marker: str) -> "Tuple[List[str], Optional[bytes]]":
    """The argv that starts ``shell`` as a login shell, and what to write on its stdin.
    The shell prints ``marker`` (separating what the profiles print themselves), then
    becomes `cat` of its own environment: no second interpreter start on the target. The
    line is the same in every family: ``marker`` is hex and a colon, quoted alike in all."""
    line = "printf '%%s' '%s'; exec cat /proc/self/environ" % marker
    name = os.path.basename(shell)
    if name in CSH_SHELLS:
        return ["-" + name], (line + "\n").encode()
    return [shell, "-l", "-c", line], None


def start(shell: str, marker: str) -> "Tuple[subprocess.Popen, Optional[bytes]]":
    # A clean environment, so the result is what a fresh login gets from the profiles,
    # not whatever the caller (cron, an interactive ssh session) happened to export.
    home = os.environ.get("HOME") or os.path.expanduser("~")
    user = os.environ.get("USER") or os.environ.get("LOGNAME") or ""
    if not user:  # cron and some ssh setups export neither
        try:
            user = pwd.getpwuid(os.getuid()).pw_name
        except KeyError:
            pass
    env = {"HOME": home, "USER": user, "LOGNAME": user, "SHELL": shell,
           "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    argv, stdin = login_command(shell, marker)
    proc = subprocess.Popen(argv, executable=shell, stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                            cwd=home if os.path.isdir(home) else "/", start_new_session=True)
    return proc, stdin


def stop_group(proc: subprocess.Popen) -> None:
    """TERM the shell and whatever its profile started, then KILL what is left after the
    grace: a profile killed outright can leave a tool's lock behind (pyenv's rehash lock
    then makes every later login on the host wait 60 s); TERM lets its EXIT trap run."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except OSError:
        return  # the group is gone
    deadline = time.monotonic() + KILL_GRACE
    while time.monotonic() < deadline:
        proc.poll()  # reaps the shell: a zombie still counts as a member of its group
        try:
            os.killpg(proc.pid, 0)
        except OSError:
            return  # everyone left on TERM
        time.sleep(0.05)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def stopped_with(started: "Tuple[subprocess.Popen, Optional[bytes]]") -> "Tuple[subprocess.Popen, Optional[bytes]]":
    """The shell runs in a session of its own, out of reach of what stops this script's
    group: when the command around this script is stopped first (its deadline came before
    the shell's own), this script's SIGTERM stops the shell's group too, then exits."""
    def on_term(signum, frame):  # type: ignore[no-untyped-def]
        stop_group(started[0])
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    return started


def finish(started: "Tuple[subprocess.Popen, Optional[bytes]]", marker: str,
           timeout: float) -> "Tuple[Optional[Dict[str, str]], Optional[str]]":
    proc, stdin = started
    try:
        out, _ = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        if proc.stdout is not None:
            proc.stdout.close()
        proc.wait()
        return None, "login shell timed out after %gs" % timeout
    at = out.rfind(marker.encode())
    if at < 0 or proc.returncode != 0:
        return None, "login shell printed no environment (exit %s)" % proc.returncode
    env = {}
    for entry in out[at + len(marker):].split(b"\0"):
        name, sep, value = entry.decode("utf-8", "replace").partition("=")
        if sep:
            env[name] = value
    return env, None


def keep(name: str, request: "Dict") -> bool:
    return name in (request.get("always_env") or []) or any(
        fnmatch.fnmatchcase(name, glob) for glob in request.get("env") or [])


def redact(env: "Dict[str, str]", request: "Dict") -> "Dict[str, str]":
    """The collector redacts again with the full rules; this keeps secrets off the wire."""
    rules = {key: re.compile(request[key]) for key in
             ("secret_name_re", "url_secret_name_re", "url_head_re", "token_re") if request.get(key)}
    names, tokens = rules.get("secret_name_re"), rules.get("token_re")
    allowed = set(request.get("not_secret") or [])
    out = {}
    for name, value in env.items():
        upper = name.upper()
        if names and upper not in allowed and names.search(upper):
            # A webhook/DSN URL keeps scheme://host/, so a changed destination stays visible.
            head = rules["url_head_re"].match(value.strip()) if "url_head_re" in rules else None
            url_name = "url_secret_name_re" in rules and rules["url_secret_name_re"].search(upper)
            out[name] = head.group("scheme") + head.group("host") + "/" + REDACTED if head and url_name else REDACTED
        else:
            out[name] = tokens.sub(REDACTED, value) if tokens else value
    return out


def main() -> None:
    request = json.load(sys.stdin)
    shell = login_shell()
    try:
        marker = "driftwatch-login-env-%s:" % os.urandom(8).hex()
        env, error = finish(stopped_with(start(shell, marker)), marker, float(request["timeout"]))
    except OSError as exc:
        env, error = None, "login shell failed: %s" % (exc.strerror or exc)
    if env is not None:
        env = redact(dict((k, v) for k, v in env.items() if keep(k, request)), request)
    json.dump({"login_shell": shell, "login_env": env, "login_env_error": error}, sys.stdout)


if __name__ == "__main__":
    main()
