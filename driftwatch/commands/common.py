"""What every command needs: the config, the store and the consoles."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_core import to_json

from driftwatch.config import Config, load_config
from driftwatch.errors import UserError
from driftwatch.fileio import replace_file
from driftwatch.model import utcnow
from driftwatch.store import SnapshotStore
from driftwatch.triage.ignore import Ignoring

if TYPE_CHECKING:
    from rich.console import Console

    from driftwatch.triage.apply import RuleUse

HTML_MODE = 0o644
# rich is imported when something is printed, not at start-up: `snapshot` imports it
# while the target's command agent is still starting (see commands/snapshot.py).


def load(config_path: str | None, store_path: str | None) -> tuple[Config, SnapshotStore]:
    config = load_config(config_path)
    store = SnapshotStore(
        store_path or config.store, options=config.store_options.as_dict(), local_name=config.local_host_name(),
        max_bytes=config.max_snapshot_bytes,
    )
    return config, store


def store_origin(config: Config, store_path: str | None) -> str:
    """Where the store a command read came from: ``--store``, a config file, or the default."""
    if store_path:
        return "from --store"
    if config.source and "store" in config.model_fields_set:
        return f"from {config.source}"
    found = f" (the config {config.source} sets none)" if config.source else (
        " (no ./driftwatch.toml nor ~/.config/driftwatch/config.toml)")
    return f"the default, relative to this folder{found}"


# Off a terminal (cron mail, `| less`, CI logs) nothing is wrapped: a bus id or a snapshot
# file name broken mid-word at rich's default 80 columns cannot be searched or pasted.
UNWRAPPED = 1 << 16


def _width(stream: Any) -> int | None:
    """None (rich asks the terminal, or COLUMNS) on a terminal; too wide to wrap elsewhere."""
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):
        terminal = False
    return None if terminal or os.environ.get("COLUMNS") else UNWRAPPED


def stdout_console() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True, width=_width(sys.stdout))


def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True, width=_width(sys.stderr))


def print_json(document: Any) -> None:
    # pydantic-core's encoder: json.dumps with indent= falls back to the pure-Python
    # encoder, ~10x slower (24 ms for a snapshot watching 2,000 files).
    sys.stdout.write(to_json(document, indent=1, fallback=str).decode("utf-8") + "\n")


@contextmanager
def store_warnings(store: SnapshotStore) -> Iterator[None]:
    """Print what the store skipped (unreadable files, each named once) when the block ends, even on an error."""
    try:
        yield
    finally:
        for warning in store.take_warnings():
            warn(warning)


def warn(message: str) -> None:
    """``driftwatch: warning: ...`` on stderr, escaped (messages quote host text)."""
    from rich.text import Text

    from driftwatch.report.safe import clean

    stderr_console().print(Text(clean(f"driftwatch: warning: {message}"), style="yellow"))


def ignoring(config: Config) -> Ignoring:
    """The config's [[ignore]] rules, judged at this moment."""
    return Ignoring(config.ignore, config.groups, utcnow())


def warn_unused_rules(config: Config, use: RuleUse) -> None:
    """One warning per ignore rule that could have applied in this command and named nothing."""
    for number in use.unused():
        rule = config.ignore[number - 1]
        warn(f"{rule.describe(number)} in {config.source or 'the config'} matched nothing in this run ({rule.reason})")


def host_message(host: str, message: str) -> str:
    """``driftwatch: gpu01: reason``, without repeating a host the reason already names."""
    return f"driftwatch: {message}" if message.startswith(host) else f"driftwatch: {host}: {message}"


def emit(
    form: str, document: Callable[[], Any], markdown: Callable[[], str], terminal: Callable[[Console], None]
) -> None:
    """Print a report in the chosen form: JSON alone on stdout, Markdown, or the terminal view."""
    if form == "json":
        print_json(document())
    elif form == "markdown":
        sys.stdout.write(markdown())
    else:
        terminal(stdout_console())


def html_path(name: str | None) -> Path | None:
    """``--html FILE``, checked before the command does its work (a fleet snapshot of 64
    hosts is not redone for a mistyped folder). The write itself can still fail: write_html."""
    if name is None:
        return None
    path = Path(name)
    if not name.strip():
        raise UserError("--html needs a file name, e.g. --html report.html")
    if path.is_dir():
        raise UserError(f"--html {name}: is a folder; name a file in it")
    if not path.parent.is_dir():
        raise UserError(f"--html {name}: no folder {path.parent}")
    return path


def write_html(path: Path | None, page: Callable[[], str]) -> None:
    """Write the page to ``path`` whole or not at all (temp file, then rename), mode 0644
    whatever the umask: a report to read and attach, never one anybody may rewrite."""
    if path is None:
        return
    data = page().encode("utf-8")
    try:
        replace_file(path, data, mode=HTML_MODE)
    except OSError as exc:
        raise UserError(f"cannot write --html {path}: {exc.strerror or exc}") from exc
