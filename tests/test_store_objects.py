"""What only an object store has to get right: names without links, one prefix per host,
and every failure of the service as one line. Against moto's real S3 server (tests/s3.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from driftwatch.errors import StoreError
from driftwatch.store import SnapshotStore
from driftwatch.store import objects as objects_module
from tests.builders import snapshot
from tests.s3 import S3Server, ThrottlingServer
from tests.sshd import free_port


@pytest.fixture
def bucket(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    s3.use(monkeypatch)
    return s3.bucket()


def test_a_taken_name_is_never_overwritten(bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SnapshotStore(f"s3://{bucket}/dw")
    # Another writer already holds the name this write draws first.
    taken = store.location("gpu01", "20260219T100000.000000Z-aaaaaaaaaaaa.json")
    store.backend.replace(taken, b"the other writer's snapshot")
    suffixes = iter(["aaaaaaaaaaaa", "bbbbbbbbbbbb"])
    monkeypatch.setattr(objects_module.secrets, "token_hex", lambda n: next(suffixes))
    mine = store.save(snapshot())
    assert str(mine).endswith("20260219T100000.000000Z-bbbbbbbbbbbb.json")
    assert store.backend.read(taken) == b"the other writer's snapshot", "If-None-Match: the PUT must not replace it"
    assert store.load(mine) == snapshot()


def test_a_host_is_listed_by_its_own_prefix_and_the_store_in_one_walk(bucket: str) -> None:
    store = SnapshotStore(f"s3://{bucket}/dw")
    for n in range(20):
        store.save(snapshot(f"gpu{n:02d}"))
    calls: list[tuple[str, str]] = []
    fs = store.backend.fs  # type: ignore[attr-defined]
    real_ls, real_find = fs.ls, fs.find
    fs.ls = lambda path, **kw: calls.append(("ls", path)) or real_ls(path, **kw)
    fs.find = lambda path, **kw: calls.append(("find", path)) or real_find(path, **kw)
    assert len(store.paths("gpu07")) == 1
    assert calls == [("ls", f"{bucket}/dw/gpu07")], "one host: one listing of its own prefix"
    calls.clear()
    assert len(store.hosts()) == 20 and len(store.inventory()) == 20
    assert calls == [("find", f"{bucket}/dw")] * 2, "every host: one walk of the store, not one listing per host"


def test_endpoint_from_the_config_table_or_the_global_variable(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    s3.use(monkeypatch, endpoint_env="")
    bucket = s3.bucket()
    SnapshotStore(f"s3://{bucket}/dw", options={"endpoint_url": s3.endpoint, "region": "us-east-1"}).save(snapshot())
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    assert SnapshotStore(f"s3://{bucket}/dw").hosts() == ["gpu01"]


@pytest.mark.parametrize(
    ("key", "secret", "message"),
    [
        ("AKIAWRONGWRONGWRONG0", "x", "access denied (The AWS Access Key Id you provided does not exist"),
        (None, "wrong-secret", "access denied (The request signature we calculated does not match"),
    ],
)
def test_wrong_credentials_are_one_line(
    s3: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch, key: str | None, secret: str, message: str
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key or s3.key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    store = SnapshotStore(f"s3://{bucket}/dw")
    for attempt in (store.ensure_writable, lambda: store.paths("gpu01"), store.hosts):
        with pytest.raises(StoreError) as info:
            attempt()
        assert message in str(info.value) and "\n" not in str(info.value) and "check the credentials" in str(info.value)


def test_a_missing_bucket_is_one_line(bucket: str) -> None:
    store = SnapshotStore("s3://no-such-bucket/dw")
    for attempt in (store.ensure_writable, lambda: store.paths("gpu01"), store.hosts, lambda: store.save(snapshot())):
        with pytest.raises(StoreError, match="the bucket does not exist") as info:
            attempt()
        assert "\n" not in str(info.value)


@pytest.fixture
def throttling(request: pytest.FixtureRequest) -> Iterator[ThrottlingServer]:
    status, code, message = request.param
    server = ThrottlingServer(status, code, message)
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("throttling", "expected"),
    [
        ((503, "SlowDown", "Please reduce your request rate."), "the server is throttling requests"),
        ((500, "InternalError", "We encountered an internal error. Please try again."), "internal error"),
    ],
    indirect=["throttling"],
)
def test_throttling_and_server_errors_give_up_after_bounded_tries(
    s3: S3Server, monkeypatch: pytest.MonkeyPatch, throttling: ThrottlingServer, expected: str
) -> None:
    s3.use(monkeypatch, endpoint_env="")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", throttling.endpoint)
    store = SnapshotStore("s3://bucket/dw")
    for attempt in (lambda: store.save(snapshot()), lambda: store.paths("gpu01")):
        before, start = throttling.requests, time.monotonic()
        with pytest.raises(StoreError) as info:
            attempt()
        assert expected in str(info.value).lower() and "\n" not in str(info.value)
        assert throttling.requests - before == objects_module.TRIES, "retries are bounded: 4 tries, then one line"
        assert time.monotonic() - start < 60


def test_an_endpoint_that_is_down_is_one_line(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    s3.use(monkeypatch, endpoint_env="")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(StoreError, match=r"cannot be written: cannot reach the object store") as info:
        SnapshotStore("s3://bucket/dw").ensure_writable()
    assert "\n" not in str(info.value)
