"""The config file (TOML) and turning TARGET words into hosts to snapshot.

Lookup order: ``--config FILE``, ``./driftwatch.toml``, ``~/.config/driftwatch/config.toml``,
then built-in defaults, which are enough to snapshot ``local`` or any SSH host.
"""

from __future__ import annotations

import difflib
import re
import socket
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from driftwatch.canary.settings import CanarySettings
from driftwatch.errors import UserError
from driftwatch.settings import WatchSettings
from driftwatch.store.backend import DEFAULT_MAX_FILE_BYTES

if TYPE_CHECKING:
    from driftwatch.rules.versions import VersionRule
    from driftwatch.triage.ignore import IgnoreRule
else:  # at run time the fields hold what parse_config's _tables built
    VersionRule = IgnoreRule = Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

LOCAL = "local"
# The longest deadline a config or flag may set. inf, nan and absurd values passed
# validation before and failed later (a traceback, or a lock wait of 2 x inf).
MAX_SECONDS = 86400.0
MIN_TIMEOUT = 1.0  # per probe: one given less starts no command (probes.base.MIN_COMMAND_S)


class HostConfig(BaseModel):
    """``[hosts.NAME]``: where the host is, plus any ``[watch]`` key to override."""

    model_config = ConfigDict(extra="allow")

    address: str | None = None


class StoreOptions(BaseModel):
    """``[store_options]``: how to reach an s3:// store. Never a secret: credentials come from
    the environment, ``~/.aws`` or an instance role (``AWS_ENDPOINT_URL[_S3]`` work too)."""

    model_config = ConfigDict(extra="forbid")

    endpoint_url: str | None = None  # an S3-compatible server: MinIO, Ceph RGW...
    region: str | None = None
    profile: str | None = None  # a profile in ~/.aws/config and ~/.aws/credentials

    def as_dict(self) -> dict[str, str]:
        return {k: v for k, v in self.model_dump().items() if v}


# Keys that would put a credential in the config file: refused, with where to put it instead.
_SECRET_KEY = re.compile(r"key|secret|token|password|passwd|credential", re.IGNORECASE)


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: str = "snapshots"  # a folder, or an object-store URL (s3://bucket/prefix, gs://..., az://...)
    store_options: StoreOptions = Field(default_factory=StoreOptions)
    # What the target `local` is stored under; default: this machine's hostname.
    local_name: str | None = Field(default=None, min_length=1)
    timeout: float = Field(default=10.0, ge=MIN_TIMEOUT, le=MAX_SECONDS, allow_inf_nan=False)
    connect_timeout: float = Field(default=10.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
    accept_new_host_key: bool = False
    ssh_config: str | None = None  # default ~/.ssh/config
    known_hosts: str | None = None  # default ~/.ssh/known_hosts (or UserKnownHostsFile)
    free_memory_threshold_mib: int = 1024
    # The most read of one file of the store; a larger one is skipped and named (store/backend.py).
    max_snapshot_bytes: int = Field(default=DEFAULT_MAX_FILE_BYTES, gt=0)
    watch: WatchSettings = Field(default_factory=WatchSettings)
    canary: CanarySettings = Field(default_factory=CanarySettings)  # [canary]: the output canary (opt-in)
    hosts: dict[str, HostConfig] = Field(default_factory=dict)
    groups: dict[str, list[str]] = Field(default_factory=dict)
    # [[ignore]] (triage.ignore.IgnoreRule: never drift) and [[rules]] (rules.versions.
    # VersionRule: known-bad version ranges), validated by parse_config: their models are
    # built only when a config has such tables (~17 ms of every command's start otherwise).
    ignore: list[IgnoreRule] = Field(default_factory=list)
    rules: list[VersionRule] = Field(default_factory=list)
    source: str | None = None  # the file this came from, for messages

    def local_host_name(self) -> str:
        """The name the target ``local`` is stored under: ``local_name``, else the hostname
        (what the system probe records as ``hostname``), else ``local``."""
        return self.local_name or socket.gethostname() or LOCAL


def canary_wanted(config: Config, watch: WatchSettings, asked: bool = False) -> bool:
    """Whether a snapshot of a host with ``watch`` runs the canary: ``--canary``, else the
    host's (or [watch]'s) ``canary``, else ``[canary] enabled``."""
    if asked:
        return True
    return config.canary.enabled if watch.canary is None else watch.canary


@dataclass(frozen=True)
class Target:
    """One host to snapshot: the name it is stored under, and how to reach it."""

    name: str
    address: str  # "local", or an SSH destination / ~/.ssh/config alias
    watch: WatchSettings

    @property
    def is_local(self) -> bool:
        return self.address == LOCAL

    def with_perf(self) -> Target:
        """This target with the opt-in perf probe asked for (``--perf``)."""
        return replace(self, watch=self.watch.model_copy(update={"perf": True}))


def config_candidates(explicit: str | None) -> list[Path]:
    if explicit:
        return [Path(explicit)]
    return [Path("driftwatch.toml"), Path.home() / ".config" / "driftwatch" / "config.toml"]


def load_config(explicit: str | None = None) -> Config:
    for path in config_candidates(explicit):
        if path.is_file():
            return parse_config(_read(path), source=str(path))
        if explicit:
            raise UserError(f"config file not found: {path}")
    return Config()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read config file {path}: {exc}") from exc


def parse_config(text: str, *, source: str = "<config>") -> Config:
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{source}: not valid TOML: {exc}") from exc
    _refuse_secrets(data, source)
    tables = {key: data.pop(key) for key in ("ignore", "rules") if key in data}
    try:
        config = Config.model_validate({**data, "source": source})
        for name in config.hosts:
            try:
                host_watch(config, name)  # validate overrides now, not mid-snapshot
            except ValidationError as exc:
                raise UserError(f"{source}: hosts.{name}.{_first_error(exc, WatchSettings, HostConfig)}") from exc
        config.ignore, config.rules = (_tables(key, tables.get(key)) for key in ("ignore", "rules"))
    except ValidationError as exc:
        raise UserError(f"{source}: {_first_error(exc)}") from exc
    local = config.hosts.get(LOCAL)
    if local is not None and local.address is not None:  # `local` never connects: it would go unused
        raise UserError(
            f"{source}: hosts.local.address: `local` is this machine, read without SSH; to reach "
            f"{local.address} give it a name of its own ([hosts.NAME] with address = ...). "
            "[hosts.local] may set [watch] keys for this machine"
        )
    for group, members in config.groups.items():
        unknown = [m for m in members if m not in config.hosts and m not in config.groups]
        if unknown:
            raise UserError(f"{source}: group {group!r} names unknown host(s): {', '.join(unknown)}")
    for number, rule in enumerate(config.ignore, 1):
        unknown = [g for g in rule.groups if g not in config.groups]
        if unknown:
            raise UserError(f"{source}: {rule.describe(number)} names unknown group(s): {', '.join(unknown)}")
    return config


def _tables(key: str, raw: Any) -> list[Any]:
    """The config's ``[[ignore]]`` or ``[[rules]]`` tables as their models; errors keep the
    location (``ignore.0.until``) a whole-config validation would give."""
    if not raw:
        return []
    from driftwatch.rules.versions import VersionRule
    from driftwatch.triage.ignore import IgnoreRule

    model: type[IgnoreRule] | type[VersionRule] = IgnoreRule if key == "ignore" else VersionRule
    return list(TypeAdapter(dict[str, list[model]]).validate_python({key: raw}).get(key, []))  # type: ignore[valid-type]


def _refuse_secrets(data: dict[str, Any], source: str) -> None:
    canary = data.get("canary")
    if isinstance(canary, dict) and any(k in canary for k in ("api_key", "key", "token")):
        raise UserError(
            f"{source}: canary: no API key in the config file; name the environment variable that holds it: "
            'api_key_env = "OPENAI_API_KEY"'
        )
    options = data.get("store_options")
    secret = next((k for k in options if _SECRET_KEY.search(str(k))), None) if isinstance(options, dict) else None
    if secret is not None:
        raise UserError(
            f"{source}: store_options.{secret}: no credentials in the config file; use the environment "
            "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), a profile in ~/.aws (store_options.profile) or an instance role"
        )


def _first_error(exc: ValidationError, *models: type[BaseModel]) -> str:
    err = exc.errors()[0]
    loc = list(err["loc"])
    parents = loc[:-1]
    if len(loc) >= 2 and loc[0] == "ignore" and isinstance(loc[1], int):
        loc[:2] = [f"[[ignore]] #{loc[1] + 1}"]  # as the reader counts the tables in the file
    where = ".".join(str(p) for p in loc)
    message = f"{where}: {err['msg'].removeprefix('Value error, ')}"
    if err["type"] == "extra_forbidden" and loc:
        known = _known_keys(parents, models or (Config,))
        close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
        message = f"{where}: unknown key" + (f"; did you mean {close[0]!r}?" if close else
                                             f" (known: {', '.join(sorted(known))})")
    return message


def _known_keys(parents: list[Any], models: tuple[type[BaseModel], ...]) -> list[str]:
    """The keys allowed where an unknown key sits: ``watch.pyhton`` → WatchSettings' fields."""
    from driftwatch.rules.versions import VersionRule
    from driftwatch.triage.ignore import IgnoreRule

    nested = {"watch": WatchSettings, "store_options": StoreOptions, "rules": VersionRule, "ignore": IgnoreRule}
    if parents and parents[0] in nested:
        models = (nested[parents[0]],)
    elif parents and parents[0] == "hosts":
        models = (WatchSettings, HostConfig)
    return sorted({name for model in models for name in model.model_fields if name != "source"})


def host_watch(config: Config, name: str) -> WatchSettings:
    """The ``[watch]`` table with the host's own keys laid over it."""
    host = config.hosts.get(name)
    overrides = {k: v for k, v in (host.model_extra or {}).items()} if host else {}
    return WatchSettings.model_validate({**config.watch.model_dump(), **overrides})


def resolve_targets(config: Config, words: list[str]) -> list[Target]:
    """Expand groups and config hosts; anything else is an SSH destination as written."""
    targets: list[Target] = []
    seen: set[str] = set()
    for name in _expand(config, words, set()):
        if name in seen:
            continue
        seen.add(name)
        host = config.hosts.get(name)
        address = (host.address if host and host.address else name) if name != LOCAL else LOCAL
        # `local` is stored under this machine's name, so nodes sharing a store never collide.
        stored = config.local_host_name() if name == LOCAL else name
        targets.append(Target(name=stored, address=address, watch=host_watch(config, name)))
    return targets


def _expand(config: Config, words: list[str], visiting: set[str]) -> list[str]:
    names: list[str] = []
    for word in words:
        if not word.strip():
            raise UserError("empty target name")
        if word in config.groups:
            if word in visiting:
                raise UserError(f"group {word!r} contains itself")
            names.extend(_expand(config, config.groups[word], visiting | {word}))
        else:
            names.append(word)
    return names
