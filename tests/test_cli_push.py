"""Push mode: every node runs `check local` into one shared store; `fleet --all` reads them all.

The nodes are this machine under different configured names (`local_name`), each with a
real venv and a fake nvidia-smi replaying a real H200 (tests/localhost.py); the store is
a bucket of a real S3 endpoint (moto's server, tests/s3.py) reached through s3fs.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from driftwatch.cli import main
from driftwatch.model import utcnow
from driftwatch.store import SnapshotStore
from tests.builders import snapshot
from tests.localhost import local_host
from tests.s3 import S3Server
from tests.sshd import free_port
from tests.test_cli_store import run, samples, up, upgrade_sgl_kernel

Node = tuple[Path, str]


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3: S3Server) -> Node:
    """This machine as a node of a fleet whose store is a fresh bucket; returns (root, store URL)."""
    root = local_host(tmp_path, monkeypatch, watch="processes = []\n", local_name="")
    s3.use(monkeypatch)
    return root, f"s3://{s3.bucket()}/fleet"


def configure(root: Path, store: str, name: str | None) -> None:
    """The node's config: its store, and the name it stores `local` under (None: the hostname)."""
    config = root / "driftwatch.toml"
    body = config.read_text().split("# -- node --\n")[-1]
    head = f'store = "{store}"\n' + (f'local_name = "{name}"\n' if name else "")
    config.write_text(head + "# -- node --\n" + body)


def test_nodes_push_to_one_bucket_and_fleet_names_the_odd_one(node: Node, capsys: pytest.CaptureFixture[str]) -> None:
    root, url = node
    for name in ("node-a", "node-b", "node-c"):
        configure(root, url, name)
        assert main(["snapshot", "local", "--label", "good"]) == 0
    upgrade_sgl_kernel(root)  # node-c's packages moved
    capsys.readouterr()
    code, out, err = run(capsys, "check", "local", "--textfile", "prom", "--json")
    assert code == 2, err
    assert json.loads(out)[0]["host"] == "node-c"
    assert up(samples(root / "prom" / "driftwatch_node-c.prom"), host="node-c") == (1, 1, 0)
    code, out, _ = run(capsys, "show", "local@latest", "--json")
    assert code == 0 and json.loads(out)["host"]["name"] == "node-c", "local@ means this node"
    code, out, err = run(capsys, "fleet", "--all", "--store", url, "--json")
    assert code == 2, err
    summary = json.loads(out)["summary"]
    assert summary["hosts"] == ["node-a", "node-b", "node-c"] and summary["outlier_hosts"] == ["node-c"]
    assert "sgl-kernel" in summary["headline"] and summary["stale"] == []
    code, out, _ = run(capsys, "fleet", "--store", url, "--html", str(root / "fleet.html"))  # no TARGET: every host
    assert code == 2 and out.startswith("1 odd host out of 3: node-c")
    page = (root / "fleet.html").read_text()
    assert "node-a" in page and "node-c" in page and "0.3.17" in page, "the matrix shows each node's headline facts"


def test_local_is_stored_under_the_hostname_by_default(node: Node, capsys: pytest.CaptureFixture[str]) -> None:
    root, url = node
    configure(root, url, None)
    assert main(["snapshot", "local"]) == 0
    assert SnapshotStore(url).hosts() == [socket.gethostname()]
    capsys.readouterr()
    code, out, _ = run(capsys, "list", "local", "--json")
    assert code == 0 and [row["host"] for row in json.loads(out)] == [socket.gethostname()]


def test_snapshots_an_older_version_stored_as_local_are_still_this_machines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = local_host(tmp_path, monkeypatch, watch="processes = []\n", local_name="")
    configure(root, "snapshots", "local")
    assert main(["snapshot", "local", "--label", "good"]) == 0  # as before: snapshots/local/
    configure(root, "snapshots", None)  # upgraded: `local` is now the hostname
    capsys.readouterr()
    code, _, err = run(capsys, "check", "local")
    assert code == 0, f"the baseline under local/ must still be found: {err}"
    assert sorted(p.name for p in (root / "snapshots").iterdir() if not p.name.startswith(".")) == [
        "local", socket.gethostname()
    ]
    code, out, _ = run(capsys, "list", "--json")
    assert code == 0 and {row["host"] for row in json.loads(out)} == {socket.gethostname()}
    assert run(capsys, "show", "local@good")[0] == 0


def test_a_stale_node_is_named_and_not_compared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    store = SnapshotStore("snapshots")
    now = utcnow()
    for name, age in (("n1", 1), ("n2", 5), ("n3", 20), ("n4", 200)):  # minutes
        store.save(snapshot(name).model_copy(update={"taken_at": now - timedelta(minutes=age)}))
    code, out, err = run(capsys, "fleet", "--all", "--store", "snapshots", "--json")
    assert code == 1, "a stale node is a problem to look at: its timer stopped"
    summary = json.loads(out)["summary"]
    assert summary["hosts"] == ["n1", "n2", "n3"] and [s["host"] for s in summary["stale"]] == ["n4"]
    assert "n4: stale: its latest snapshot is 3.33h old, over --max-age 1h" in err
    code, out, err = run(capsys, "fleet", "--all", "--store", "snapshots", "--max-age", "10m", "--json")
    assert code == 1 and "only 2 of 4 hosts" not in err
    assert [s["host"] for s in json.loads(out)["summary"]["stale"]] == ["n3", "n4"]
    assert run(capsys, "fleet", "--all", "--store", "snapshots", "--max-age", "1d")[0] == 0
    code, _, err = run(capsys, "fleet", "--all", "--store", "snapshots", "--max-age", "2m")
    assert code == 1 and "only 1 of 4 hosts have a readable snapshot newer than --max-age 2m" in err
    for bad in ("soon", "-1h", "0", "1w"):
        code, _, err = run(capsys, "fleet", "--all", "--store", "snapshots", "--max-age", bad)
        assert code == 1 and err.count("\n") == 1 and "expected a duration such as 30m, 2h or 1d" in err


# -- the store cannot be used: one line, exit 1, and the node's .prom still says so --------


@pytest.mark.parametrize("problem", ["wrong secret", "missing bucket", "endpoint down"])
def test_a_store_that_cannot_be_used_is_one_line_and_a_textfile(
    node: Node, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], problem: str
) -> None:
    root, url = node
    expected = {"wrong secret": "access denied", "missing bucket": "the bucket does not exist",
                "endpoint down": "cannot reach the object store"}[problem]
    if problem == "wrong secret":
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    elif problem == "missing bucket":
        url = "s3://no-such-bucket/fleet"
    else:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{free_port()}")
    configure(root, url, "node-a")
    for argv in (["check", "local", "--textfile", "prom"], ["snapshot", "local"], ["list"], ["fleet", "--all"],
                 ["show", "local@latest"]):
        code, out, err = run(capsys, *argv)
        assert code == 1 and err.count("\n") == 1 and expected in err and "Traceback" not in err, (argv, err)
    assert up(samples(root / "prom" / "driftwatch_node-a.prom"), host="node-a") == (0, 0, 0)


def test_a_store_url_without_the_extra_is_one_line(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['fsspec'] = None; from driftwatch.cli import main; "
            "sys.exit(main(['list', '--store', 's3://bucket/fleet']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "install driftwatch[s3]" in done.stderr
