# driftwatch agent. Runs ON THE TARGET under any python3 >= 3.6, stdlib only, as
# `python3 -I -S -c '<this file>'` on ONE SSH session channel, so that N commands cost one
# login-shell start (~/.bashrc with conda or pyenv init) instead of N.
#
# Protocol, one JSON document per line:
#   out  {"hello": 1, "pid": PID}                                  once, first
#   in   {"id": int, "script": str, "stdin": base64|null, "timeout": float, "max_output": int}
#   out  {"id": int, "rc": int|null, "stdout": b64, "stderr": b64, "truncated": bool}
#        or {"id": int, "rc": null, "error": str} for a request it cannot run
# "script" arrives already wrapped in `timeout -k` by the client: the target kills it at
# its deadline even if this agent or the connection is gone.
import base64
import binascii
import json
import os
import subprocess
import sys
import threading
import time

MAX_PARALLEL = 16
KILL_AFTER = 2  # driftwatch.transport.base.KILL_AFTER: the wrapper's SIGKILL escalation
# Past the wrapper's own SIGKILL we stop waiting (e.g. `timeout` stuck on a process in D
# state) and answer with what we have; a little sooner than the client's own deadline.
BACKSTOP = 0.5
EXIT_GRACE = 1.0  # after stdin EOF nobody reads answers: do not linger for them
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


def execute(script, stdin, timeout, max_output):
    proc = subprocess.Popen(
        ["sh", "-c", script],
        stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = Sink(max_output), Sink(max_output)
    readers = [spawn(out.drain, proc.stdout), spawn(err.drain, proc.stderr)]
    if stdin is not None:
        spawn(feed, proc.stdin, stdin)
    try:
        rc = proc.wait(max(1, int(timeout + 0.999)) + KILL_AFTER + BACKSTOP)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        rc = None
    # Output normally ends with the command; a background process that kept the pipe
    # open must not hold the answer back.
    for reader in readers:
        reader.join(1.0 if rc is not None else 0.2)
    if rc is not None and rc < 0:
        rc = 128 - rc  # killed by a signal: report it as a shell would
    return {
        "rc": rc,
        "stdout": b64(out.value()),
        "stderr": b64(err.value()),
        "truncated": out.truncated or err.truncated,
    }


def handle(request_id, script, stdin, timeout, max_output):
    with _slots:
        try:
            reply = execute(script, stdin, timeout, max_output)
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
    try:
        data = None if stdin is None else base64.b64decode(stdin.encode("ascii"), validate=True)
    except (ValueError, binascii.Error):
        return request_id, None, "stdin is not base64"
    return request_id, (script, data, float(timeout), max_output), None


def main():
    send({"hello": 1, "pid": os.getpid()})
    workers = []
    for line in iter(sys.stdin.buffer.readline, b""):
        if not line.strip():
            continue
        request_id, arguments, error = parse(line)
        if arguments is not None:
            # A thread per request, waiting for a slot there: this loop must keep reading,
            # or the client's writes would stall behind a busy agent.
            workers = [worker for worker in workers if worker.is_alive()]
            workers.append(spawn(handle, request_id, *arguments))
        elif request_id is not None:
            send({"id": request_id, "rc": None, "error": "driftwatch agent: bad request: " + error})
    # stdin EOF: the client closed the channel. Commands still running are bounded by their
    # own `timeout` wrappers; give them a moment to answer, then go.
    deadline = time.monotonic() + EXIT_GRACE
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
