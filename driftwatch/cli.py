"""The command line: ``main(argv) -> int`` dispatching to one function per command.

Exit codes follow ``terraform plan -detailed-exitcode``: 0 nothing to report, 1 error,
2 drift; ``snapshot`` uses 3 for "stored, but some probes failed". User mistakes are one
line on stderr and exit 1, never a traceback.
"""

from __future__ import annotations

import atexit
import copy
import io
import os
import sys
from collections.abc import Callable
from typing import Annotated, Any, Optional

# pydantic looks up third-party plugins through importlib.metadata the first time it builds
# a model (~13 ms of every command's start): driftwatch uses none. A user's explicit
# setting wins.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

import typer  # noqa: E402  (after the environment pydantic reads)
from typer.core import TyperArgument, TyperCommand
from typer.exceptions import TyperException

from driftwatch import __version__
from driftwatch.errors import DriftwatchError, UserError

EXIT_OK, EXIT_ERROR, EXIT_DRIFT, EXIT_PARTIAL = 0, 1, 2, 3


class Command(TyperCommand):
    """Help that reads like a man page: ``TARGET...`` and ``[HOST...]`` in the usage line,
    not typer's ``{TARGET}...`` / ``[[HOST]...]...``, and no ``<list[str]>`` type tags."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, TyperArgument):
                param.display_type_rich = lambda ctx: None  # type: ignore[method-assign]

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = ["[OPTIONS]"]
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = (param.metavar or str(param.name).upper()).strip("[]").rstrip(".")
                name += "..." if param.nargs != 1 else ""
                pieces.append(name if param.required else f"[{name}]")
        return pieces

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Environment drift detector for remote GPU hosts: snapshot, diff, check.",
)

ConfigOpt = Annotated[Optional[str], typer.Option("--config", metavar="FILE", help="Config file (TOML). Default: ./driftwatch.toml, then ~/.config/driftwatch/config.toml.")]
StoreOpt = Annotated[Optional[str], typer.Option("--store", metavar="DIR|URL", help="Snapshot store: a folder, or s3://bucket/prefix (also gs://, az://; default from config: ./snapshots).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout, nothing else.")]
CanaryOpt = Annotated[bool, typer.Option("--canary", help="Also run the output canary: fixed greedy prompts to each watched server's OpenAI API, from the host itself (opt-in; [canary] in the config sets it up).")]
HtmlOpt = Annotated[Optional[str], typer.Option("--html", metavar="FILE", help="Also write the report as one self-contained HTML page (no script, nothing fetched: opens from an email attachment).")]
PerfOpt = Annotated[bool, typer.Option("--perf", help="Also measure what the host delivers (opt-in perf probe: CPU GEMM and copy everywhere; on idle GPUs bf16/fp8 GEMM, HBM, host<->device, one NCCL all-reduce), within [watch] perf_timeout (60 s). Busy GPUs (a compute process, > 1 GiB used, > 5% busy) or MIG are refused, never touched.")]
MIN_SECONDS, MAX_SECONDS = 0.1, 86400.0  # MAX_SECONDS: config.MAX_SECONDS (not imported: pydantic is slow to load)
DEFAULT_TIMEOUT_S = 10.0  # the config's `timeout` unless set (config.Config.timeout, not imported either)
MAX_KEEP_DAYS = 36500.0


MIN_TIMEOUT = 1.0  # config.MIN_TIMEOUT: a probe given less starts no command (probes.base.MIN_COMMAND_S)


def _within(low: float) -> Callable[[float | None], float | None]:
    """An option's callback that refuses seconds outside ``low``..MAX_SECONDS (typer passes
    a callback only the value when it takes one argument)."""

    def check(value: float | None) -> float | None:
        # `not a <= x <= b` also refuses nan, which every comparison calls False.
        if value is not None and not low <= value <= MAX_SECONDS:
            raise typer.BadParameter(f"{value:g} is not a number of seconds from {low:g} to {MAX_SECONDS:g}")
        return value

    return check


_seconds, _probe_seconds = _within(MIN_SECONDS), _within(MIN_TIMEOUT)


def _timeout(when: str = "") -> Any:
    """``--timeout`` as every command that takes it says it, with its default."""
    return typer.Option(
        "--timeout", metavar="SECONDS", callback=_probe_seconds,
        help=f"Per-probe deadline in seconds{when} (default: the config's timeout, {DEFAULT_TIMEOUT_S:g} unless set there).",
    )


SEVERITIES = ("critical", "high", "medium", "low", "info")  # diff.Severity (not imported: slow to load)


def _severity(value: str) -> str:
    if value.lower() not in SEVERITIES:
        raise typer.BadParameter(f"{value!r} is not a severity: pick one of {', '.join(SEVERITIES)}")
    return value.lower()


def _days(value: float | None) -> float | None:
    if value is not None and not 0 <= value <= MAX_KEEP_DAYS:
        raise typer.BadParameter(f"{value:g} is not a number of days from 0 to {MAX_KEEP_DAYS:g}")
    return value


def _version(value: bool) -> None:
    if value:
        print(f"driftwatch {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """Environment drift detector for remote GPU hosts.

    Snapshot a host after a good run, diff when it breaks, check from cron.
    TARGET is `local`, an SSH destination ([user@]host[:port] or an ~/.ssh/config alias),
    or a host or group from the config file. REF is a snapshot file, HOST@LABEL,
    HOST@latest, HOST@~N or HOST@<timestamp prefix>.
    """


@app.command(cls=Command, short_help="Collect and store a snapshot of each target.")
def snapshot(
    targets: Annotated[list[str], typer.Argument(metavar="TARGET", help="local, [user@]host[:port], an ssh alias, or a config host/group.", show_default=False)],
    label: Annotated[Optional[list[str]], typer.Option("--label", "-l", metavar="LABEL", help="Label the snapshot (repeatable), e.g. good.")] = None,
    json_out: JsonOpt = False,
    timeout: Annotated[Optional[float], _timeout()] = None,
    parallel: Annotated[int, typer.Option("--parallel", metavar="N", help="Hosts collected at once.", min=1)] = 32,
    accept_new_host_key: Annotated[bool, typer.Option("--accept-new-host-key", help="Trust and save the key of a host not yet in known_hosts (a changed key is always refused).")] = False,
    perf: PerfOpt = False,
    canary: CanaryOpt = False,
    config: ConfigOpt = None,
    store: StoreOpt = None,
) -> int:
    """Collect and store one snapshot per target.

    Exit 0 complete, 3 stored but some probes failed or timed out, 1 nothing collected.
    """
    from driftwatch.commands.snapshot import CanaryAsk, run_snapshot

    return run_snapshot(
        targets, labels=label or [], json_out=json_out, timeout=timeout, parallel=parallel,
        accept_new_host_key=accept_new_host_key, config_path=config, store_path=store, canary=CanaryAsk(asked=canary),
        perf=perf,
    )


@app.command(cls=Command, short_help="Ask each watched server fixed greedy prompts; store the answers.")
def canary(
    targets: Annotated[list[str], typer.Argument(metavar="TARGET", help="local, [user@]host[:port], an ssh alias, or a config host/group.", show_default=False)],
    url: Annotated[Optional[str], typer.Option("--url", metavar="URL", help="The server's address as the TARGET sees it (http://127.0.0.1:30000), instead of each watched server's --host/--port.")] = None,
    label: Annotated[Optional[list[str]], typer.Option("--label", "-l", metavar="LABEL", help="Label the snapshot (repeatable), e.g. good.")] = None,
    json_out: JsonOpt = False,
    parallel: Annotated[int, typer.Option("--parallel", metavar="N", help="Hosts asked at once.", min=1)] = 32,
    accept_new_host_key: Annotated[bool, typer.Option("--accept-new-host-key", help="Trust and save the key of a host not yet in known_hosts.")] = False,
    config: ConfigOpt = None,
    store: StoreOpt = None,
) -> int:
    """Send the canary's fixed greedy prompts to each watched server and store the answers.

    The requests go from the TARGET itself to the server's port there (never from this
    machine): temperature 0, top_p 1, top_k off, a fixed seed, every sampling parameter
    explicit, top-5 logprobs, each prompt twice to measure the server's own noise. A server
    still loading, down, or refusing the key gets no prompt: the reason is recorded.
    Bounded by [canary] deadline (20 s). Stored like a snapshot (with the system and
    processes probes), so `driftwatch diff HOST@good HOST@latest` compares two canaries.
    Exit 0 complete, 3 stored but the canary failed somewhere, 1 nothing collected.
    """
    from driftwatch.commands.canary import run_canary

    return run_canary(
        targets, url=url, labels=label or [], json_out=json_out, parallel=parallel,
        accept_new_host_key=accept_new_host_key, config_path=config, store_path=store,
    )


@app.command("list", cls=Command, short_help="List the snapshots in the store.")
def list_(
    host: Annotated[Optional[str], typer.Argument(metavar="HOST", help="Only this host's snapshots.", show_default=False)] = None,
    json_out: JsonOpt = False,
    config: ConfigOpt = None,
    store: StoreOpt = None,
) -> int:
    """List the snapshots in the store, oldest first."""
    from driftwatch.commands.inspect import run_list

    return run_list(host, json_out=json_out, config_path=config, store_path=store)


@app.command(cls=Command, short_help="Show one snapshot, headline facts first.")
def show(
    ref: Annotated[str, typer.Argument(metavar="REF", help="HOST@latest, HOST@LABEL, HOST@~N, HOST@<timestamp prefix> or a file.")],
    json_out: JsonOpt = False,
    config: ConfigOpt = None,
    store: StoreOpt = None,
) -> int:
    """Show one snapshot, readable (or the whole document with --json)."""
    from driftwatch.commands.inspect import run_show

    return run_show(ref, json_out=json_out, config_path=config, store_path=store)


@app.command(cls=Command, short_help="Explain what changed between two snapshots.")
def diff(
    old: Annotated[str, typer.Argument(metavar="OLD", help="REF of the good state, e.g. gpu01@good.")],
    new: Annotated[str, typer.Argument(metavar="NEW", help="REF of the state to explain, e.g. gpu01@latest.")],
    json_out: JsonOpt = False,
    markdown: Annotated[bool, typer.Option("--markdown", help="Markdown, for pasting into an issue.")] = False,
    all_: Annotated[bool, typer.Option("--all", help="Also show volatile readings (temperature, clocks, uptime...) and the changes the config's ignore rules hide.")] = False,
    html: HtmlOpt = None,
    config: ConfigOpt = None,
    store: StoreOpt = None,
) -> int:
    """Explain what changed from OLD to NEW, most likely cause first.

    Exit 0 no drift, 2 drift, 1 error. Works across hosts too (with a warning). The
    config's ignore rules apply (the changes they hide are counted in one line); when
    OLD is HOST@LABEL, the acceptances of NEW's host against that baseline apply too
    (see accept). Accepted and ignored changes are not drift.
    """
    from driftwatch.commands.diff import run_diff

    return run_diff(
        old, new, json_out=json_out, markdown=markdown, include_volatile=all_, config_path=config, store_path=store,
        html=html,
    )


@app.command(cls=Command, short_help="Snapshot now, diff against the baseline, alert.")
def check(
    targets: Annotated[list[str], typer.Argument(metavar="TARGET", help="Hosts or groups to check.", show_default=False)],
    baseline: Annotated[str, typer.Option("--baseline", metavar="LABEL", help="Diff against the host's newest snapshot with this label.")] = "good",
    notify: Annotated[Optional[list[str]], typer.Option("--notify", metavar="DEST", help="https://… webhook (JSON with a `text` field) or cmd:PATH (JSON on stdin). Repeatable.")] = None,
    textfile: Annotated[Optional[str], typer.Option("--textfile", metavar="DIR", help="Write DIR/driftwatch_<host>.prom for node_exporter's textfile collector.")] = None,
    json_out: JsonOpt = False,
    markdown: Annotated[bool, typer.Option("--markdown", help="Markdown report.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only alerts: a new or different drift, or its resolution (cron mails once per real change).")] = False,
    all_: Annotated[bool, typer.Option("--all", help="Also list the changes the config's ignore rules hide (volatile readings are never drift in check).")] = False,
    timeout: Annotated[Optional[float], _timeout()] = None,
    parallel: Annotated[int, typer.Option("--parallel", metavar="N", help="Hosts checked at once.", min=1)] = 32,
    accept_new_host_key: Annotated[bool, typer.Option("--accept-new-host-key", help="Trust and save the key of a host not yet in known_hosts.")] = False,
    fail_on: Annotated[str, typer.Option("--fail-on", metavar="SEVERITY", help="Exit 2 only for drift at least this severe: critical, high, medium, low or info (any drift).", callback=_severity)] = "info",
    deadline: Annotated[Optional[float], typer.Option("--deadline", metavar="SECONDS", help="Finish the whole command within SECONDS: probes get what is left, and what is unfinished then is a timeout (Slurm kills a health check at 60 s).", callback=_seconds)] = None,
    nhc: Annotated[bool, typer.Option("--nhc", help="For a scheduler's health check: print only one line, `ERROR: driftwatch: <most likely cause>`, when the check fails or cannot run; nothing when it passes.")] = False,
    perf: PerfOpt = False,
    canary: CanaryOpt = False,
    config: ConfigOpt = None,
    store: StoreOpt = None,
) -> int:
    """Snapshot now, diff against the baseline, alert once per new drift (for cron).

    Exit 0 no drift, 2 drift (at or above --fail-on), 1 error (unreachable, no baseline
    yet). Notifications go out when the drift is new or different, and once more when
    it is resolved. Accepted changes (see accept) and those the config's ignore rules
    name are shown but are not drift, until they expire or change again.

    Retention: the host's previous snapshot is deleted when it is unlabelled and identical
    to the new one, unless a command named it (HOST@<time>, HOST@~N) within the last day.
    """
    from pathlib import Path

    from driftwatch.commands.check import CheckRequest, run_check
    from driftwatch.commands.snapshot import CanaryAsk
    from driftwatch.config import load_config
    from driftwatch.diff import Severity

    request = CheckRequest(
        baseline=baseline,
        timeout=timeout or load_config(config).timeout,
        notify=notify or [],
        textfile=Path(textfile) if textfile else None,
        accept_new_host_key=accept_new_host_key,
        quiet=quiet,
        show_ignored=all_,
        fail_on=Severity(fail_on),
        deadline=deadline,
        nhc=nhc,
        perf=perf,
        canary=CanaryAsk(asked=canary),
    )
    return run_check(
        targets, request=request, json_out=json_out, markdown=markdown, parallel=parallel,
        config_path=config, store_path=store,
    )


@app.command(cls=Command, short_help="Compare hosts that should be alike.")
def fleet(
    targets: Annotated[Optional[list[str]], typer.Argument(metavar="TARGET", help="Hosts or groups that should be alike (default: every host in the store).", show_default=False)] = None,
    max_age: Annotated[str, typer.Option("--max-age", metavar="AGE", help="A stored snapshot older than this (30m, 2h, 1d) is stale: named, not compared.")] = "1h",
    snapshot_now: Annotated[bool, typer.Option("--snapshot", help="Snapshot every host now (and store it) instead of comparing the latest stored snapshots.")] = False,
    json_out: JsonOpt = False,
    markdown: Annotated[bool, typer.Option("--markdown", help="Markdown, for pasting into an issue.")] = False,
    parallel: Annotated[int, typer.Option("--parallel", metavar="N", help="Hosts snapshotted at once (with --snapshot).", min=1)] = 32,
    timeout: Annotated[Optional[float], _timeout(", with --snapshot")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Also list the findings the config's ignore rules hide. With no TARGET every host in the store is compared anyway, so `fleet --all --store s3://…` compares them all.")] = False,
    html: Annotated[Optional[str], typer.Option("--html", metavar="FILE", help="Also write a self-contained HTML page: a matrix of hosts × facts, every outlier cell marked, its majority value on hover.")] = None,
    config: ConfigOpt = None,
    store: StoreOpt = None,
) -> int:
    """Compare hosts that should be alike and name the odd ones out.

    For every fact the hosts disagree on: the majority value and each outlier host with
    its value, ranked like diff. Identity (hostnames, boot ids, GPU UUIDs) and volatile
    readings are never outliers. A finding the config's ignore rules name for every
    host it names is counted in one line, not an outlier. With no TARGET, every host in
    the store is compared; no host is contacted unless --snapshot. Exit 0 all agree,
    2 outliers, 1 error (a host unreachable, unreadable or stale).
    """
    from driftwatch.commands.fleet import FleetRequest, parse_age, run_fleet

    request = FleetRequest(
        fresh=snapshot_now, json_out=json_out, markdown=markdown, parallel=parallel, timeout=timeout,
        show_ignored=all_, max_age=parse_age(max_age), html=html,
    )
    return run_fleet(targets or [], request, config_path=config, store_path=store)


@app.command(cls=Command, short_help="Every change on one host, oldest first, with when it happened.")
def history(
    host: Annotated[str, typer.Argument(metavar="HOST", help="A host in the store.")],
    item: Annotated[Optional[str], typer.Option("--item", metavar="PATTERN", help="Only changes that mention PATTERN, any case: found in the category or the item (nccl finds nvidia-nccl-cu12), or as a word of the explanation (nccl finds \"torch's NCCL 2.21\", git does not find \"digit\"). With * ? [ it is a glob on the category, the item or one word.")] = None,
    since: Annotated[Optional[str], typer.Option("--since", metavar="WHEN", help="Only steps seen since: 2026-12-01 (from that day's start, local time), 2026-12-01T18:00, or 12h / 7d / 2w ago.")] = None,
    json_out: JsonOpt = False,
    markdown: Annotated[bool, typer.Option("--markdown", help="Markdown, for pasting into an issue.")] = False,
    all_: Annotated[bool, typer.Option("--all", help="Also list the context findings (folded into a count otherwise) and the changes the config's ignore rules hide.")] = False,
    html: Annotated[Optional[str], typer.Option("--html", metavar="FILE", help="Also write the timeline as one self-contained HTML page.")] = None,
    config: ConfigOpt = None,
    store: StoreOpt = None,
) -> int:
    """Every change between consecutive stored snapshots of HOST, oldest first.

    Each step is headed by the time of the snapshot that first showed it and the one
    before (the change happened in between), and ranked like diff. check keeps every
    distinct state a host was in, so this is the host's timeline: "what changed, and
    when". Snapshots are read one pair at a time; damaged files are skipped with a
    warning naming each. Exit 0, or 1 on an error.

    \b
    driftwatch history gpu01 --item nccl       # NCCL's timeline on gpu01
    driftwatch history gpu01 --since 7d --markdown
    """
    from driftwatch.commands.history import run_history

    return run_history(
        host, pattern=item, since=since, json_out=json_out, markdown=markdown, show_all=all_,
        config_path=config, store_path=store, html=html,
    )


@app.command(cls=Command, short_help="Accept a host's known drift so check stops alerting on it.")
def accept(
    host: Annotated[Optional[str], typer.Argument(metavar="HOST", help="A host in the store, or a config group (each of its hosts).", show_default=False)] = None,
    items: Annotated[Optional[list[str]], typer.Argument(metavar="ITEM", help="Which changes: an item (sgl-kernel, driver, a file path, 'GPU 0*') or CATEGORY:ITEM (gpu:*, package:nvidia-*), globs, any case. Default: all of the drift.", show_default=False)] = None,
    reason: Annotated[Optional[str], typer.Option("--reason", "-r", metavar="TEXT", help="Why (required to accept): shown with every accepted change.")] = None,
    until: Annotated[Optional[str], typer.Option("--until", metavar="WHEN", help="Counts as drift again after this: 2026-12-07 (through that day, local time), 2026-12-07T18:00, or 12h / 7d / 2w from now.")] = None,
    baseline: Annotated[str, typer.Option("--baseline", metavar="LABEL", help="The baseline the drift is from (as check --baseline).")] = "good",
    list_: Annotated[bool, typer.Option("--list", help="List the acceptances (of HOST, or of every host) instead.")] = False,
    revoke: Annotated[bool, typer.Option("--revoke", help="Revoke HOST's acceptances against the baseline (those ITEMs name, or all).")] = False,
    json_out: JsonOpt = False,
    config: ConfigOpt = None,
    store: StoreOpt = None,
) -> int:
    """Accept a host's current drift from its baseline: check stops alerting on it.

    Diffs the host's latest stored snapshot (taken by check or snapshot) against its
    newest snapshot labelled --baseline, and records the drifting changes (all of them, or
    those the ITEMs name; a failed probe only when named) with who, when and why. Accepted
    changes show under ACCEPTED in diff and check and are not drift: no exit 2, no alert,
    not counted in metrics. A change counts again when the host drifts further on it (a
    different new value: "changed again since accepted") or --until passes ("acceptance
    expired"); an acceptance is never extended silently. Exit 0, or 1 on an error.

    \b
    driftwatch accept gpu01 driver --reason "driver 610 rollout" --until 7d
    driftwatch accept --list
    driftwatch accept --revoke gpu01 driver
    """
    from driftwatch.commands import accept as cmd
    from driftwatch.model import utcnow

    if list_ and revoke:
        raise UserError("--list and --revoke are exclusive: pick one")
    if list_:
        if items:
            raise UserError("--list takes at most a HOST, not items")
        return cmd.run_list(host, json_out=json_out, config_path=config, store_path=store)
    if host is None:
        raise UserError("name the HOST (or --list)")
    request = cmd.AcceptRequest(
        items=items or [], baseline=baseline, reason=reason or "", until=cmd.parse_until(until, utcnow()), json_out=json_out
    )
    if revoke:
        return cmd.run_revoke(host, request, config_path=config, store_path=store)
    return cmd.run_accept(host, request, config_path=config, store_path=store)


@app.command(cls=Command, short_help="Known-bad states of a host, each with its fix and reference.")
def doctor(
    targets: Annotated[list[str], typer.Argument(metavar="TARGET|REF", help="A host to snapshot now (and store), or a stored snapshot: HOST@LABEL, HOST@latest, HOST@~N, HOST@<timestamp prefix> or a file.", show_default=False)],
    json_out: JsonOpt = False,
    markdown: Annotated[bool, typer.Option("--markdown", help="Markdown, for pasting into an issue.")] = False,
    timeout: Annotated[Optional[float], _timeout(" for targets snapshotted now")] = None,
    parallel: Annotated[int, typer.Option("--parallel", metavar="N", help="Hosts snapshotted at once.", min=1)] = 32,
    accept_new_host_key: Annotated[bool, typer.Option("--accept-new-host-key", help="Trust and save the key of a host not yet in known_hosts.")] = False,
    config: ConfigOpt = None,
    store: StoreOpt = None,
) -> int:
    """Everything known to be wrong with a host, each with why, the fix and a public reference.

    A TARGET is snapshotted now (and stored); a REF is read from the store. One report per
    host. Exit 0 nothing found (notes aside), 2 known-bad states, 1 error.
    """
    from driftwatch.commands.doctor import run_doctor

    return run_doctor(
        targets, json_out=json_out, markdown=markdown, timeout=timeout, parallel=parallel,
        accept_new_host_key=accept_new_host_key, config_path=config, store_path=store,
    )


@app.command(cls=Command, short_help="Label a stored snapshot, e.g. as good.")
def label(
    ref: Annotated[str, typer.Argument(metavar="REF", help="The snapshot, e.g. gpu01@latest.")],
    name: Annotated[str, typer.Argument(metavar="LABEL", help="The label, e.g. good.")],
    remove: Annotated[bool, typer.Option("--remove", help="Remove the label instead of adding it.")] = False,
    config: ConfigOpt = None,
    store: StoreOpt = None,
) -> int:
    """Add (or --remove) a label on a stored snapshot, e.g. after confirming a run was good."""
    from driftwatch.commands.manage import run_label

    return run_label(ref, name, remove=remove, config_path=config, store_path=store)


@app.command(cls=Command, short_help="Delete old unlabelled snapshots.")
def prune(
    hosts: Annotated[Optional[list[str]], typer.Argument(metavar="HOST", help="Hosts to prune (default: all).", show_default=False)] = None,
    keep: Annotated[Optional[int], typer.Option("--keep", metavar="N", help="Keep the newest N snapshots per host.", min=1)] = None,
    keep_days: Annotated[Optional[float], typer.Option("--keep-days", metavar="D", help="Keep snapshots younger than D days.", callback=_days)] = None,
    json_out: JsonOpt = False,
    config: ConfigOpt = None,
    store: StoreOpt = None,
) -> int:
    """Delete old unlabelled snapshots. Labelled snapshots, each host's newest, and those a
    command named (HOST@<time>, HOST@~N) within the last day are never deleted."""
    from driftwatch.commands.manage import run_prune

    return run_prune(hosts or [], keep=keep, keep_days=keep_days, json_out=json_out, config_path=config, store_path=store)


def main(argv: list[str] | None = None) -> int:
    from driftwatch import interrupt

    command = _cli(sys.argv[1:] if argv is None else argv)
    try:
        with interrupt.handling_signals():
            result = command.main(args=argv, prog_name="driftwatch", standalone_mode=False)
    except interrupt.Interrupted as exc:
        print("driftwatch: interrupted", file=sys.stderr)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        print("driftwatch: interrupted", file=sys.stderr)
        return 130
    except TyperException as exc:  # usage errors are user mistakes: exit 1, not 2 (drift)
        show = getattr(exc, "show", None)
        if callable(show):  # usage, a hint and the error: several lines by design
            shown = io.StringIO()
            show(file=shown)
            _print_error(*shown.getvalue().rstrip("\n").split("\n"))
        else:
            _print_error(f"driftwatch: error: {exc}")
        # `driftwatch` alone prints the help: not a mistake.
        return EXIT_OK if type(exc).__name__ == "NoArgsIsHelpError" else EXIT_ERROR
    except DriftwatchError as exc:
        _print_error(f"driftwatch: error: {exc}")
        return EXIT_ERROR
    except OSError as exc:  # a store or file this user may not read: one line, never a traceback
        _print_error(f"driftwatch: error: {os_error_line(exc)}")
        return EXIT_ERROR
    return result if isinstance(result, int) else EXIT_OK


def _cli(words: list[str]) -> Any:
    """The click command for ``words``: the group with only the command they name, or with
    every command (the group's help, ``--version``, a mistyped name).

    typer builds each command from its function's signature and annotations: all twelve take
    ~45 ms, one ~5 ms, paid on every run before anything else (a snapshot is ~0.75 s).
    """
    named = [info for info in app.registered_commands
             if words and words[0] == (info.name or typer.main.get_command_name(info.callback.__name__))]
    if len(named) != 1:
        return typer.main.get_command(app)
    one = copy.copy(app)
    one.registered_commands = named
    return typer.main.get_command(one)


def os_error_line(exc: OSError) -> str:
    """``cannot access snapshots/.driftwatch-layout: Permission denied (owned by root; …)``."""
    import errno

    what = f"cannot access {exc.filename}" if exc.filename else "cannot access a file"
    line = f"{what}: {exc.strerror or exc}"
    if exc.errno in (errno.EACCES, errno.EPERM) and exc.filename:
        owner = _owner(str(exc.filename))
        line += (f" (owned by {owner}: " if owner else " (") + (
            "a store is private to the user who wrote it; run as that user, or --store one of your own)")
    return line


def _owner(path: str) -> str | None:
    import pwd

    for candidate in (path, os.path.dirname(path) or "."):
        try:
            uid = os.stat(candidate).st_uid
        except OSError:
            continue
        try:
            return pwd.getpwuid(uid).pw_name
        except KeyError:
            return f"uid {uid}"
    return None


def _print_error(*lines: str) -> None:
    """Error lines on stderr, each kept one line, with the control characters a label, a host
    name or a host's own text may hold shown as escapes (no retitled or cleared terminal)."""
    from driftwatch.report.safe import clean  # rich: only when there is an error to print

    for line in lines:
        print(clean(line), file=sys.stderr)


def run() -> None:
    """The console script: ``main()``, then a quick exit.

    Python's teardown of what a snapshot loaded (pydantic, paramiko, rich) takes ~40 ms,
    about a tenth of a whole snapshot of a host. By the time ``main`` returns every thread
    we started has finished and every file is closed, so exit handlers run and the output
    is flushed here, then the process leaves without the teardown. A flush that fails (the
    reader closed the pipe) leaves nothing to do but exit.
    """
    code = main()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
