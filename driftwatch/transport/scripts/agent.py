# driftwatch agent. Runs ON THE TARGET under any python3 >= 3.6, stdlib only, as
# `python3 -I -S -c '<this file>' LIFETIME NONCE` on ONE SSH session channel, so that N
# commands cost one login-shell start (~/.bashrc with conda or pyenv init) instead of N.
# LocalTransport imports its Runner: the local target runs commands the same way.
#
# Protocol, one JSON document per line:
#   out  {"hello": 1, "pid": PID, "nonce": NONCE}                  once, first
#        (NONCE from argv: the client tells it from a profile's output that looks alike)
#   in   {"id": int, "script": str, "stdin": base64|null, "timeout": float, "max_output": int,
#         "python": str (optional)}
#        blank lines are ignored (the client sends some for a profile that reads stdin)
#   out  {"id": int, "rc": int|null, "stdout": b64, "stderr": b64, "truncated": bool,
#         "timed_out": bool, "survivors": [[pid, state, name], ...]}
#        or {"id": int, "rc": null, "error": str} for a request it cannot run
#
# Every command runs in a session (and process group) of its own. At its deadline the
# whole session gets SIGTERM, and SIGKILL KILL_AFTER seconds later if anything of it is
# left, whatever its first process did: a script that dies on TERM does not leave its
# background jobs behind. What is still alive after SIGKILL (a process in D state) is
# reported as a survivor. The agent needs no `timeout` on the target, and it outlives no
# client: at stdin EOF (the client closed the channel or vanished), at the end of its
# LIFETIME, and on SIGTERM/SIGHUP/SIGINT it stops every command it still runs, then exits.
#
# A request with "python" is a stdlib script the client would otherwise start a new
# `python3 -I -S -c` for (`script` is that command): the agent runs the code in a fork of
# itself instead, a process with the same stdin, stdout, stderr, exit status, session and
# deadline, without another interpreter start (~15 ms of CPU each, with `json` and `re`
# imported). Where it cannot fork, it runs `script`.
import base64
import binascii
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings

MAX_PARALLEL = 16
KILL_AFTER = 2  # driftwatch.transport.base.KILL_AFTER: seconds from SIGTERM to SIGKILL
REAP_WAIT = 0.3  # after SIGKILL: time for the kernel to take the processes away
POLL = 0.1  # a scan of /proc on a busy host costs a few ms
LIFETIME = 900.0  # when the client gives none (argv[1])
CHUNK = 65536

_write_lock = threading.Lock()
_slots = threading.BoundedSemaphore(MAX_PARALLEL)


def send(message):
    line = (json.dumps(message, separators=(",", ":")) + "\n").encode("ascii")
    with _write_lock:
        try:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
        except (OSError, ValueError):
            pass  # the client is gone: there is nobody to answer


def b64(data):
    return base64.b64encode(data).decode("ascii")


# -- the processes of a command -----------------------------------------------------------


def parse_stat(text):
    """(state, session, name) from the text of /proc/PID/stat; the name may hold ') '."""
    head, _, tail = text.rpartition(") ")
    fields = tail.split()  # state ppid pgrp session ...
    return fields[0], int(fields[3]), head.partition("(")[2]


def members(sids):
    """{sid: [(pid, state, name)]}: the live processes of each session in ``sids``, in one
    pass over /proc. Zombies are dead already (a container's init may never reap them).
    Without /proc: a session's leader (= its process group), if that still exists."""
    found = {sid: [] for sid in sids}
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        for sid in sids:
            try:
                os.killpg(sid, 0)
                found[sid].append((sid, "?", "?"))
            except OSError:
                pass
        return found
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                state, session, name = parse_stat(stat.read().decode("utf-8", "replace"))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if session in found and state not in ("Z", "X"):
            found[session].append((pid, state, name))
    return found


def alive(sids):
    return [sid for sid, live in members(sids).items() if live]


def signal_sessions(sids, signum):
    """Send ``signum`` to every process of these sessions: their process groups, and any
    member that moved to a group of its own (a nested `timeout`, a shell with job control)."""
    for sid, live in members(sids).items():
        try:
            os.killpg(sid, signum)
        except OSError:
            pass
        for pid, _, _ in live:
            try:
                os.kill(pid, signum)
            except OSError:
                pass


def wait_gone(sids, seconds):
    """The sessions among ``sids`` with a live process after up to ``seconds``."""
    deadline = time.monotonic() + seconds
    left = alive(sids)
    while left and time.monotonic() < deadline:
        time.sleep(POLL)
        left = alive(left)
    return left


def stop_sessions(sids):
    """Politely first: SIGTERM, SIGKILL after KILL_AFTER seconds to whatever is left.
    Returns (whether SIGKILL was needed, {sid: survivors of SIGKILL})."""
    signal_sessions(sids, signal.SIGTERM)
    left = wait_gone(sids, KILL_AFTER)
    if not left:
        return False, {}
    signal_sessions(left, signal.SIGKILL)
    left = wait_gone(left, REAP_WAIT)
    return True, members(left)


# -- running commands ---------------------------------------------------------------------


class Sink:
    """Keeps the first `limit` bytes of a stream and drains the rest, so the command
    never blocks on a full pipe."""

    def __init__(self, limit):
        self.limit = limit
        self.chunks = []
        self.size = 0
        self.truncated = False

    def drain(self, stream):
        fd = stream.fileno()
        try:
            while True:
                data = os.read(fd, CHUNK)
                if not data:
                    break
                room = self.limit - self.size
                if len(data) > room:
                    self.truncated = True
                    data = data[: max(room, 0)]
                if data:
                    self.chunks.append(data)
                    self.size += len(data)
        except OSError:
            pass
        finally:
            stream.close()

    def value(self):
        return b"".join(list(self.chunks))  # list(): a late drain may still append


def feed(stream, data):
    # A thread of its own: a command that writes a lot before reading would deadlock us.
    try:
        stream.write(data)
    except (OSError, ValueError):
        pass  # the command exited or closed its stdin: the rest is not wanted
    try:
        stream.close()
    except (OSError, ValueError):
        pass


def spawn(target, *args):
    thread = threading.Thread(target=target, args=args)
    thread.daemon = True
    thread.start()
    return thread


def exit_status(status):
    """What Popen.returncode says for a wait status: the exit code, or -signal."""
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


class Forked:
    """A fork of this agent running Python code as `python3 -I -S -c CODE` would, in a
    session of its own; to Runner it looks like the Popen of that command."""

    def __init__(self, code, with_stdin):
        read_in, write_in = os.pipe() if with_stdin else (None, None)
        read_out, write_out = os.pipe()
        read_err, write_err = os.pipe()
        # The child closes `settled` with every descriptor of the agent's once it has a
        # session of its own: until then a stop of its session would not reach it.
        wait_settled, settled = os.pipe()
        self._lock = threading.Lock()
        self.returncode = None
        try:
            self.pid = os.fork()
        except OSError:
            for fd in (read_in, write_in, read_out, write_out, read_err, write_err, wait_settled, settled):
                if fd is not None:
                    os.close(fd)
            raise
        if self.pid == 0:  # pragma: no cover  (the child: whatever happens, it never returns)
            status = 255
            try:
                status = run_forked(code, read_in, write_out, write_err)
            finally:
                os._exit(status)
        for fd in (read_in, write_out, write_err, settled):
            if fd is not None:
                os.close(fd)
        try:
            os.read(wait_settled, 1)  # EOF: it has its session, or it is gone
        finally:
            os.close(wait_settled)
        self.stdin = None if write_in is None else os.fdopen(write_in, "wb")
        self.stdout = os.fdopen(read_out, "rb")
        self.stderr = os.fdopen(read_err, "rb")

    def poll(self):
        return self._wait(os.WNOHANG)

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while self.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired("python", timeout)
            delay = min(delay * 2, left, 0.05)
            time.sleep(delay)
        return self.returncode

    def _wait(self, flags):
        with self._lock:  # one reaper: Runner.close() may poll from another thread
            if self.returncode is None:
                try:
                    pid, status = os.waitpid(self.pid, flags)
                except ChildProcessError:
                    pid, status = self.pid, 255 << 8  # reaped elsewhere: not ours to know
                if pid == self.pid:
                    self.returncode = exit_status(status)
            return self.returncode


# Kept for the life of a forked child, never used there: another thread of the agent may
# have held their locks at the fork (the main loop reads sys.stdin), and a stream that is
# collected flushes, taking its lock.
_inherited = []  # type: list


def run_forked(code, stdin_fd, stdout_fd, stderr_fd):
    """In the forked child: become what `python3 -I -S -c CODE` would be, run CODE as
    __main__, and return its exit status as that interpreter would."""
    try:
        # The interpreter's handlers first: whatever reaches it through its session (below)
        # must find them, not the agent's (which would stop the agent's other commands).
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()
        os.dup2(os.open(os.devnull, os.O_RDONLY) if stdin_fd is None else stdin_fd, 0)
        os.dup2(stdout_fd, 1)
        os.dup2(stderr_fd, 2)
        try:  # nothing else of the agent's: its channel, the other commands' pipes
            fds = [int(name) for name in os.listdir("/proc/self/fd")]
        except OSError:
            fds = range(3, 1024)
        for fd in fds:
            if fd > 2:
                try:
                    os.close(fd)
                except OSError:
                    pass
        _inherited.extend([sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__])
        sys.stdin = sys.__stdin__ = text_stream(0, "rb", _inherited[0])  # type: ignore[misc]
        sys.stdout = sys.__stdout__ = text_stream(1, "wb", _inherited[1])  # type: ignore[misc]
        sys.stderr = sys.__stderr__ = text_stream(  # type: ignore[misc]
            2, "wb", _inherited[2], "backslashreplace", line_buffering=True
        )
        sys.argv[:] = ["-c"]
        # The forking thread is one of the agent's daemon threads; as an interpreter's main
        # thread it is not, so that threads the code starts are waited for at its end.
        threading.current_thread()._daemonic = False
    except BaseException:  # noqa: BLE001  # no usable process: say so the only way left
        return 255
    status = 0
    try:
        exec(compile(code, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as exc:
        status = exit_code(exc.code)
    except BaseException:  # noqa: BLE001  # as the interpreter reports an uncaught one
        import linecache
        import traceback

        # Its lines, not the agent's (Python 3.13 caches the -c source as "<string>" too).
        linecache.cache["<string>"] = (len(code), None, code.splitlines(True), "<string>")
        kind, value, trace = sys.exc_info()
        traceback.print_exception(kind, value, trace.tb_next)  # from the code's own frame
        status = 1
    for thread in threading.enumerate():  # as the interpreter waits for them at exit
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = 120  # as the interpreter exits when it cannot flush them
    return status


def text_stream(fd, mode, like, errors=None, line_buffering=False):
    """A standard stream as the interpreter opens it: buffered, no newline translation."""
    return io.TextIOWrapper(io.open(fd, mode, closefd=False), encoding=like.encoding, errors=errors or like.errors,
                            newline="\n", line_buffering=line_buffering)


def exit_code(code):
    """The exit status of ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(str(code) + "\n")
    except (OSError, ValueError):
        pass
    return 1


class Runner:
    """Runs `sh -c SCRIPT` commands, each in a session of its own, and stops them all on
    close(). Safe from many threads; close() may be called twice and from any thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self._closing = threading.Lock()  # held for the whole of close()
        self._running = {}  # session id: Popen
        self.closed = False

    def run(self, script, stdin, timeout, max_output, python=None):
        """A dict: rc (int, None when interrupted), stdout, stderr (bytes), truncated,
        timed_out, interrupted, survivors ([(pid, state, name)] alive after SIGKILL).
        With ``python`` (the code that ``script`` runs under `python3 -I -S -c`), the code
        runs in a fork of this process instead, where it can fork."""
        with self._lock:  # no new process once close() has taken the list to stop
            if self.closed:
                return interrupted()
            proc = None
            if python is not None:
                try:
                    proc = Forked(python, stdin is not None)
                except OSError:
                    proc = None  # out of processes or memory for a copy: the plain command
            if proc is None:
                proc = subprocess.Popen(
                    ["sh", "-c", script],
                    stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                )
            self._running[proc.pid] = proc
        try:
            return self._follow(proc, stdin, timeout, max_output)
        finally:
            with self._lock:
                self._running.pop(proc.pid, None)

    def _follow(self, proc, stdin, timeout, max_output):
        out, err = Sink(max_output), Sink(max_output)
        readers = [spawn(out.drain, proc.stdout), spawn(err.drain, proc.stderr)]
        if stdin is not None:
            spawn(feed, proc.stdin, stdin)
        deadline = time.monotonic() + timeout
        rc = None
        while rc is None and not self.closed and time.monotonic() < deadline:
            left = deadline - time.monotonic()
            # In slices, so that close() interrupts the wait. While stdout is open, wait for
            # its end: a command normally closes it as it exits, and a join wakes at once
            # where Popen.wait polls (up to 50 ms late).
            if readers[0].is_alive():
                readers[0].join(min(left, 0.05))
                rc = proc.poll()
                continue
            try:
                rc = proc.wait(min(left, 0.25))
            except subprocess.TimeoutExpired:
                pass
        if rc is None and self.closed:
            return interrupted()  # close() stops the processes; nobody waits for them here
        timed_out, killed, survivors = rc is None, False, []
        # After a clean exit: anything it left running in the background goes too.
        if timed_out or group_alive(proc.pid):
            killed, left = stop_sessions([proc.pid])
            survivors = left.get(proc.pid, [])
            rc = proc.poll()
        for reader in readers:  # nothing of the command holds the pipes open any more
            reader.join(1.0)
        if timed_out:
            rc = 137 if killed else 124  # as GNU `timeout -k` reports it
        elif rc is not None and rc < 0:
            rc = 128 - rc  # killed by a signal: report it as a shell would
        return {
            "rc": rc,
            "stdout": out.value(),
            "stderr": err.value(),
            "truncated": out.truncated or err.truncated,
            "timed_out": timed_out,
            "interrupted": False,
            "survivors": survivors,
        }

    def close(self):
        """Stop every command still running: SIGTERM, then SIGKILL after KILL_AFTER."""
        with self._closing:
            with self._lock:
                self.closed = True
                running, self._running = self._running, {}
            if running:
                stop_sessions(list(running))
            for proc in running.values():
                proc.poll()  # reap what died: no zombie of ours outlives close()


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)  # cheap: after a clean exit there is normally no such group
    except OSError:
        return False
    return bool(alive([pgid]))


def interrupted():
    return {
        "rc": None,
        "stdout": b"",
        "stderr": b"",
        "truncated": False,
        "timed_out": False,
        "interrupted": True,
        "survivors": [],
    }


# -- the agent ----------------------------------------------------------------------------


def handle(runner, request_id, script, stdin, timeout, max_output, python):
    with _slots:
        try:
            result = runner.run(script, stdin, timeout, max_output, python)
            reply = dict(result, stdout=b64(result["stdout"]), stderr=b64(result["stderr"]))
        except Exception as exc:  # noqa: BLE001  # no `sh`, out of processes: an answer, not a crash
            reply = {"rc": None, "error": f"driftwatch agent: {type(exc).__name__}: {exc}"}
    reply["id"] = request_id
    send(reply)


def parse(line):
    """(id, arguments, error); id is None when there is nobody to answer."""
    try:
        request = json.loads(line.decode("utf-8"))
    except ValueError:
        return None, None, "not JSON"
    if not isinstance(request, dict):
        return None, None, "not an object"
    request_id = request.get("id")
    if not isinstance(request_id, int) or isinstance(request_id, bool):
        return None, None, "no id"
    script, stdin = request.get("script"), request.get("stdin")
    timeout, max_output = request.get("timeout"), request.get("max_output")
    if not isinstance(script, str) or not (stdin is None or isinstance(stdin, str)):
        return request_id, None, "bad script or stdin"
    if not isinstance(timeout, (int, float)) or not isinstance(max_output, int) or max_output < 0:
        return request_id, None, "bad timeout or max_output"
    python = request.get("python")
    if not (python is None or isinstance(python, str)):
        return request_id, None, "bad python"
    try:
        data = None if stdin is None else base64.b64decode(stdin.encode("ascii"), validate=True)
    except (ValueError, binascii.Error):
        return request_id, None, "stdin is not base64"
    return request_id, (script, data, float(timeout), max_output, python), None


def main():
    lifetime = float(sys.argv[1]) if len(sys.argv) > 1 else LIFETIME
    nonce = sys.argv[2] if len(sys.argv) > 2 else ""
    runner = Runner()

    def leave(*_):
        runner.close()  # a second caller waits for the first to finish stopping
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        os._exit(0)

    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, leave)
    # Python 3.12+ warns on every fork of a process with threads: the forked children
    # touch nothing another thread may hold (see run_forked).
    warnings.filterwarnings("ignore", message=".*fork", category=DeprecationWarning)
    timer = threading.Timer(lifetime, leave)
    timer.daemon = True
    timer.start()
    # If this interpreter ever wedges, the kernel ends it (SIGALRM's default action).
    signal.alarm(int(lifetime + KILL_AFTER + 30))
    send({"hello": 1, "pid": os.getpid(), "nonce": nonce})
    for line in iter(sys.stdin.buffer.readline, b""):
        if not line.strip():
            continue
        request_id, arguments, error = parse(line)
        if arguments is not None:
            # A thread per request, waiting for a slot there: this loop must keep reading,
            # or the client's writes would stall behind a busy agent.
            spawn(handle, runner, request_id, *arguments)
        elif request_id is not None:
            send({"id": request_id, "rc": None, "error": "driftwatch agent: bad request: " + error})
    leave()  # stdin EOF: the client closed the channel, or is gone


if __name__ == "__main__":
    main()
