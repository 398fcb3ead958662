"""The store in an object store (``s3://bucket/prefix``, ``gs://…``, ``az://…``) through fsspec.

The layout is the folder's: ``<prefix>/<host folder>/<UTC time>-<suffix>.json``.

What holds, and what does not (an object store has no rename, no hard link, no lock):

- **A snapshot is one PUT**, which S3 makes visible whole or not at all: no reader ever
  sees half a snapshot under its name. Its name is its own UTC time plus a random
  48-bit suffix, and on S3 the PUT carries ``If-None-Match: *`` (refused with 412 if the
  name exists), so two writers never overwrite each other. A server that ignores the
  condition (older S3-compatible servers) still gets unique names.
- **Listing a host** lists its prefix only; ``list`` and ``fleet --all`` list the store's
  prefix once (paginated), never once per host.
- **Labels and alert state are objects written whole, last writer wins.** ``label`` on
  the same snapshot from two machines at once may lose one label; two machines checking
  the same host at once may both alert. In push mode each node writes only its own
  prefix, so this does not arise.
- **Locks are local**: a file under ``~/.cache/driftwatch/locks/`` serializes overlapping
  runs on one machine (two cron runs of one node), not runs on different machines.
- **Reads are capped** (``max_snapshot_bytes``): an object the listing shows over the cap
  is skipped and named without a GET, any other read is a ranged GET of at most the cap.
- **Errors** (no credentials, access denied, no bucket, endpoint down, throttling, 5xx)
  become one ``StoreError`` line. S3 requests have a 5 s connect and 20 s read deadline
  and 4 tries at most (botocore's standard retry mode, which backs off on throttling).
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar


from driftwatch.errors import StoreError, UserError
from driftwatch.fileio import make_dir
from driftwatch.store.backend import DEFAULT_MAX_FILE_BYTES, Location, over_cap
from driftwatch.store.names import SUFFIX

T = TypeVar("T")
S3_SCHEMES = ("s3", "s3a")
EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "az": "azure", "abfs": "azure", "adl": "azure"}
TRIES, CONNECT_S, READ_S = 4, 5, 20


class ObjectBackend:
    def __init__(
        self, url: str, options: dict[str, str] | None = None, *, max_bytes: int = DEFAULT_MAX_FILE_BYTES
    ) -> None:
        self.max_bytes = max_bytes
        self._sizes: dict[str, int] = {}  # key: size, as the listings showed them
        scheme, _, rest = url.partition("://")
        self.scheme = scheme.lower()
        self.base = rest.strip("/")
        if not self.base:
            raise UserError(f"store {url!r}: name a bucket, e.g. {scheme}://bucket/driftwatch")
        self.root: str = f"{self.scheme}://{self.base}"
        self.fs = open_filesystem(self.scheme, options or {})
        self._exclusive = self.scheme in S3_SCHEMES  # If-None-Match on PUT

    # -- addresses -----------------------------------------------------------------
    def location(self, folder: str, name: str) -> str:
        return f"{self.root}/{folder}/{name}"

    def folder_of(self, location: Location) -> str | None:
        text = str(location)
        if not text.startswith(self.root + "/"):
            return None
        folder, sep, name = text[len(self.root) + 1:].partition("/")
        return folder if sep and name and "/" not in name else None

    def _key(self, location: Location) -> str:
        return str(location).partition("://")[2]

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - fsspec, botocore and aiohttp errors end here, as one line
            raise StoreError(f"{what}: {describe(exc)}") from exc

    # -- the root --------------------------------------------------------------------
    def check_readable(self) -> None:
        return None

    def prepare(self) -> list[str]:
        return []  # object stores were never written with the old folder names

    def ensure_writable(self) -> None:
        probe = f"{self.base}/.driftwatch-write-check-{secrets.token_hex(6)}"
        self._call(f"snapshot store {self.root} cannot be written", lambda: self.fs.pipe_file(probe, b"\n"))
        try:
            self.fs.rm_file(probe)
        except Exception:  # noqa: BLE001 - a bucket that keeps what it is given is still writable
            pass

    # -- reading -----------------------------------------------------------------------
    def names(self, folder: str) -> list[str]:
        prefix = f"{self.base}/{folder}"

        def ls() -> list[str]:
            try:
                return [self._seen(entry).rsplit("/", 1)[-1] for entry in self.fs.ls(prefix, detail=True)]
            except FileNotFoundError as exc:
                if "bucket" in str(exc).lower():
                    raise
                return []  # no such host prefix: no snapshots

        return self._call(f"snapshot store {self.root}", ls)

    def listing(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        found_keys = self._call(f"snapshot store {self.root}", lambda: self.fs.find(self.base, detail=True))
        for info in found_keys.values():
            key = self._seen(info)
            folder, sep, name = key[len(self.base) + 1:].partition("/")
            if sep and name and "/" not in name and not folder.startswith("."):
                found.setdefault(folder, []).append(name)
        return found

    def _seen(self, info: dict[str, Any]) -> str:
        """An entry of a listing: its key, with its size remembered for the read cap."""
        key = str(info["name"])
        if isinstance(info.get("size"), int):
            self._sizes[key] = info["size"]
        return key

    def _get(self, key: str, cap: int) -> bytes:
        """At most ``cap`` + 1 bytes of an object: one ranged GET."""
        data: bytes = self.fs.cat_file(key, start=0, end=cap + 1)
        return data

    def read(self, location: Location) -> bytes:
        key, cap = self._key(location), self.max_bytes
        listed = self._sizes.get(key)
        if listed is not None and listed > cap:
            raise StoreError(over_cap(location, listed, cap))
        data = self._call(f"{location}: cannot read snapshot", lambda: self._get(key, cap))
        if len(data) > cap:
            raise StoreError(over_cap(location, listed or len(data), cap))
        return data

    def head(self, location: Location, size: int) -> tuple[bytes, int | None]:
        key = self._key(location)
        data = self._call(f"{location}: cannot read snapshot", lambda: self._get(key, size - 1))
        return data, self._sizes.get(key)

    def read_state(self, folder: str, name: str) -> bytes | None:
        try:
            data = self._get(f"{self.base}/{folder}/{name}", self.max_bytes)
        except Exception:  # noqa: BLE001 - absent or unreachable: alert again rather than never
            return None
        return data if len(data) <= self.max_bytes else None

    # -- writing -----------------------------------------------------------------------
    def create(self, folder: str, stem: str, data: bytes) -> str:
        for _ in range(3):
            location = self.location(folder, f"{stem}-{secrets.token_hex(6)}{SUFFIX}")
            try:
                self._put(self._key(location), data, exclusive=self._exclusive)
                return location
            except FileExistsError:  # 412: that name was just taken (48 random bits: never, in practice)
                continue
            except Exception as exc:  # noqa: BLE001
                raise StoreError(f"{location}: could not store the snapshot: {describe(exc)}") from exc
        raise StoreError(f"{self.root}/{folder}: could not store the snapshot: no free name for {stem}")

    def _put(self, key: str, data: bytes, *, exclusive: bool) -> None:
        if exclusive:
            self.fs.pipe_file(key, data, mode="create")
        else:
            self.fs.pipe_file(key, data)

    def replace(self, location: Location, data: bytes) -> None:
        self._call(f"{location}: could not rewrite the snapshot", lambda: self.fs.pipe_file(self._key(location), data))

    def delete(self, location: Location) -> None:
        self._call(f"{location}: could not delete the snapshot", lambda: self.fs.rm_file(self._key(location)))

    def write_state(self, folder: str, name: str, data: bytes) -> None:
        key = f"{self.base}/{folder}/{name}"
        self._call(f"{self.root}/{folder}/{name}: could not be written", lambda: self.fs.pipe_file(key, data))

    def clean_temps(self, folder: str) -> list[Location]:
        return []  # a PUT leaves no temp object behind

    @contextmanager
    def lock(self, folder: str, *, timeout: float) -> Iterator[None]:
        """A lock file on this machine: overlapping runs here take turns (see the module doc)."""
        place = lock_folder() / hashlib.sha256(self.root.encode()).hexdigest()[:16]
        try:
            make_dir(place, 0o700)
            from filelock import FileLock

            lock = FileLock(str(place / f"{folder}.lock"), timeout=timeout, mode=0o600)
        except OSError as exc:
            raise StoreError(f"{place}: cannot take the host's lock: {exc.strerror or exc}") from exc
        with lock:
            yield


def lock_folder() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "driftwatch" / "locks"


def open_filesystem(scheme: str, options: dict[str, str]) -> Any:
    """An fsspec filesystem for ``scheme``; a one-line UserError when its package is missing."""
    extra = EXTRAS.get(scheme)
    hint = f"install driftwatch[{extra}] (pip install 'driftwatch[{extra}]')" if extra else "install its fsspec package"
    try:
        import fsspec
    except ImportError:
        raise UserError(f"{scheme}:// stores need fsspec: {hint}") from None
    try:
        cls = fsspec.get_filesystem_class(scheme)
    except ImportError:
        raise UserError(f"{scheme}:// stores need a package that is not installed: {hint}") from None
    except ValueError:
        raise UserError(f"unknown store URL scheme {scheme}:// (use a folder, file://, s3://, gs:// or az://)") from None
    if scheme not in S3_SCHEMES:
        if options:
            raise UserError(f"[store_options] apply to s3:// stores; {scheme}:// takes its settings from its own environment")
        return cls()
    client: dict[str, str] = {}
    if options.get("endpoint_url"):
        client["endpoint_url"] = options["endpoint_url"]
    if options.get("region"):
        client["region_name"] = options["region"]
    kwargs: dict[str, Any] = {
        "client_kwargs": client,
        "config_kwargs": {
            "connect_timeout": CONNECT_S,
            "read_timeout": READ_S,
            "retries": {"total_max_attempts": TRIES, "mode": "standard"},
        },
        "use_listings_cache": False,  # other nodes write meanwhile: always list afresh
        "skip_instance_cache": True,
    }
    if options.get("profile"):
        kwargs["profile"] = options["profile"]
    fs = cls(**kwargs)
    fs.retries = 1  # s3fs's own retry loop off: botocore's bounded retries above are the only ones
    return fs


def describe(exc: BaseException) -> str:
    """One line saying what went wrong with the object store, and what to check."""
    name = type(exc).__name__
    text = " ".join(str(exc).split())[:300] or name
    lowered = text.lower()
    if "NoCredentials" in name or "unable to locate credentials" in lowered:
        return ("no credentials found: set AWS_PROFILE or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                "or use ~/.aws/credentials or an instance role")
    if isinstance(exc, PermissionError) or "accessdenied" in lowered.replace(" ", ""):
        return (f"access denied ({text}): check the credentials (environment, AWS_PROFILE, ~/.aws, instance role) "
                "and the bucket policy")
    if isinstance(exc, FileNotFoundError):
        return f"the bucket does not exist ({text})" if "bucket" in lowered else f"not found ({text})"
    if "slowdown" in lowered or "reduce your request rate" in lowered or "throttl" in lowered:
        return f"the server is throttling requests ({text}); gave up after {TRIES} tries"
    if any(k in name for k in ("EndpointConnection", "ConnectTimeout", "ConnectionError", "ClientConnector")) or \
            isinstance(exc, ConnectionError):
        return f"cannot reach the object store ({text})"
    if "Timeout" in name or isinstance(exc, TimeoutError):
        return f"the object store did not answer in time ({text})"
    return f"{text} ({name})" if name not in text else text
