# Runs ON THE TARGET under any python3 >= 3.6, stdlib only. Reads a JSON request on stdin
# and asks each OpenAI-compatible endpoint of it (an address on the target itself, usually
# 127.0.0.1:PORT) whether it is ready, which model it serves, and the canary's prompts;
# prints one JSON document holding every raw answer, bounded: a connect and a per-request
# deadline, one deadline for the whole run, and a size cap per response body. The collector
# parses the answers; this script only decides when to stop asking (a server that is down,
# still loading, refusing the key, or not an OpenAI API gets no prompt). The API key, when
# one is given, only travels in the Authorization header: it is never printed.
import http.client
import json
import socket
import ssl
import sys
import time

CHUNK = 65536


def fetch(endpoint, method, path, body, request, deadline):
    """One HTTP exchange: status, content type, body text (up to the cap), seconds taken,
    and an error sentence instead of an exception."""
    out = {"path": path, "status": None, "type": None, "body": None, "elapsed_s": None, "error": None,
           "truncated": False}
    start = time.monotonic()
    cut = min(deadline, start + float(request["request_timeout"]))
    left = cut - start
    if left < 0.05:
        out["error"] = "not sent: no time left of the canary's deadline"
        return out
    host, port = endpoint["host"], int(endpoint["port"])
    connect = max(0.05, min(float(request["connect_timeout"]), left))
    try:
        if endpoint.get("scheme") == "https":
            context = ssl.create_default_context()
            if endpoint.get("loopback"):  # a self-signed certificate on the host's own loopback
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            conn = http.client.HTTPSConnection(host, port, timeout=connect, context=context)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=connect)
        conn.connect()
    except ConnectionRefusedError:
        out["error"] = "connection refused"
        return finish(out, start)
    except socket.timeout:
        out["error"] = "no connection within %gs" % round(connect, 1)
        return finish(out, start)
    except (OSError, ssl.SSLError) as exc:
        out["error"] = "cannot connect: %s" % (getattr(exc, "strerror", None) or exc)
        return finish(out, start)
    headers = {"Accept": "application/json", "User-Agent": "driftwatch-canary"}
    data = None
    if body is not None:
        data = json.dumps(body).encode("utf-8")
        headers["Content-Type"] = "application/json"
    if endpoint.get("api_key"):
        headers["Authorization"] = "Bearer " + endpoint["api_key"]
    try:
        conn.sock.settimeout(max(0.05, cut - time.monotonic()))
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        out["status"] = response.status
        out["type"] = response.getheader("Content-Type")
        limit = int(request["max_bytes"])
        chunks, size = [], 0
        while True:
            left = cut - time.monotonic()
            if left <= 0:
                raise socket.timeout()
            conn.sock.settimeout(left)
            piece = response.read(min(CHUNK, limit + 1 - size))
            if not piece:
                break
            chunks.append(piece)
            size += len(piece)
            if size > limit:
                out["truncated"] = True
                out["error"] = "response larger than %d bytes: not read further" % limit
                break
        out["body"] = b"".join(chunks)[:limit].decode("utf-8", "replace")
    except socket.timeout:
        out["error"] = "no complete answer within %gs" % round(cut - start, 1)
    except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
        out["error"] = "%s: %s" % (type(exc).__name__, getattr(exc, "strerror", None) or exc)
    finally:
        conn.close()
    return finish(out, start)


def finish(out, start):
    out["elapsed_s"] = round(time.monotonic() - start, 4)
    return out


def loads(answer):
    try:
        return json.loads(answer["body"] or "")
    except ValueError:
        return None


def first_model(answer):
    """The id of the first model /v1/models lists, or None."""
    document = loads(answer)
    data = document.get("data") if isinstance(document, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict) and isinstance(data[0].get("id"), str):
        return data[0]["id"], data[0].get("owned_by")
    return None, None


def stopped(answer, what, has_key):
    """Why nothing more is sent after this answer (None: go on), and the state it means."""
    status = answer["status"]
    if answer["error"] and status is None:
        return "error", "%s: %s" % (what, answer["error"])
    if status == 503:
        return "not_ready", "%s answers 503: the server is up but not ready (still loading?)" % what
    if status in (401, 403):
        if has_key:
            return "error", "%s answers %d: the API key was refused" % (what, status)
        return "error", "%s answers %d: the server requires an API key ([canary] api_key_env)" % (what, status)
    return None, None


def probe_endpoint(endpoint, request, deadline):
    has_key = bool(endpoint.get("api_key"))
    out = {"key": endpoint["key"], "state": "ok", "error": None, "health": None, "models": None, "info": {},
           "dialect": endpoint.get("dialect"), "model": None, "runs": []}
    health = fetch(endpoint, "GET", "/health", None, request, deadline)
    out["health"] = health
    if health["error"] == "connection refused":
        out["state"], out["error"] = "error", "connection refused: nothing listens on %s:%s" % (
            endpoint["host"], endpoint["port"])
        return out
    state, why = stopped(health, "/health", has_key)
    if state == "not_ready" or (state == "error" and health["status"] is None):
        out["state"], out["error"] = state, why
        return out
    models = fetch(endpoint, "GET", "/v1/models", None, request, deadline)
    out["models"] = models
    state, why = stopped(models, "/v1/models", has_key)
    if state:
        out["state"], out["error"] = state, why
        return out
    if models["status"] != 200 or models["error"]:
        out["state"] = "error"
        out["error"] = "/v1/models: %s" % (models["error"] or "HTTP %s" % models["status"])
        return out
    model, owned_by = first_model(models)
    if model is None:
        out["state"] = "error"
        out["error"] = "/v1/models is not an OpenAI model list (%s)" % (models["type"] or "no content type")
        return out
    out["model"] = model
    dialect = endpoint.get("dialect") or request["owners"].get(str(owned_by)) or "openai"
    out["dialect"] = dialect
    for path in request["info_paths"].get(dialect, []):
        answer = fetch(endpoint, "GET", path, None, request, deadline)
        out["info"][path] = answer
        if answer["status"] == 200:
            break  # the newer path answered: the deprecated one is not asked
    extras = request["extras"].get(dialect, {})
    for prompt in request["prompts"]:
        for repeat in range(int(request["repeats"])):
            body = dict(prompt["body"])
            body.update(extras.get(prompt["kind"], {}))
            body["model"] = model
            answer = fetch(endpoint, "POST", prompt["path"], body, request, deadline)
            out["runs"].append({"prompt": prompt["name"], "repeat": repeat, "answer": answer})
            if answer["status"] is None or answer["status"] in (401, 403, 503):
                return out  # down, timed out or refusing mid-way: the rest would only wait
    return out


def main():
    request = json.load(sys.stdin)
    deadline = time.monotonic() + float(request["deadline"])
    endpoints = {}
    for endpoint in request["endpoints"]:
        endpoints[endpoint["key"]] = probe_endpoint(endpoint, request, deadline)
    json.dump({"endpoints": endpoints}, sys.stdout)


main()
