"""[[ignore]] rules: validated at load, scoped to hosts and groups, counted, expiring loudly."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from driftwatch.config import parse_config
from driftwatch.diff import Change, Severity
from driftwatch.errors import UserError
from driftwatch.fleet import compare_fleet
from driftwatch.triage.apply import RuleUse, triage
from driftwatch.triage.fleet import ignore_findings
from driftwatch.triage.ignore import Ignoring, ignore_changes
from tests.diff.builders import baseline, diff_after, dists, make_snapshot

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
HOG = Change("gpu-process", "GPU-0:4242", None, "21.0 GiB", Severity.high, "python (pid 4242) holds 21.0 GiB on GPU 0")
ENV = Change("env", "NCCL_DEBUG", None, "INFO", Severity.medium, "NCCL_DEBUG set to INFO")
DRIVER = Change("driver", "driver", "590", "595", Severity.critical, "NVIDIA driver 590 → 595")


def rules(text: str) -> Ignoring:
    config = parse_config(text)
    return Ignoring(config.ignore, config.groups, NOW)


def test_a_rule_hides_what_it_names_and_nothing_else() -> None:
    ignoring = rules('[[ignore]]\ncategory = "gpu-process"\nreason = "notebooks on the dev box"\n')
    [hog, env, driver], used = ignore_changes([HOG, ENV, DRIVER], ignoring, "gpu01")
    assert hog.status == "ignored" and not hog.drift
    assert hog.waiver is not None and hog.waiver.rule == "[[ignore]] #1 (gpu-process *)"
    assert hog.waiver.reason == "notebooks on the dev box"
    assert env.drift and driver.drift and used == {1}


def test_hosts_and_groups_scope_a_rule() -> None:
    ignoring = rules(
        '[hosts.gpu01]\n[hosts.gpu02]\n[groups]\ndev = ["gpu02"]\n'
        '[[ignore]]\nitem = "NCCL_*"\nhosts = ["gpu0[13]"]\ngroups = ["dev"]\nreason = "debugging NCCL"\n'
    )
    for host, hidden in (("gpu01", True), ("gpu02", True), ("gpu03", True), ("gpu04", False)):
        [env], _ = ignore_changes([ENV], ignoring, host)
        assert (env.status == "ignored") is hidden, host
    assert ignoring.in_scope("gpu04") == []


def test_an_expired_rule_lets_the_change_count_and_says_why() -> None:
    ignoring = rules('[[ignore]]\ncategory = "driver"\nreason = "rollout week"\nuntil = 2026-11-30T18:00:00Z\n')
    [driver], used = ignore_changes([DRIVER], ignoring, "gpu01")
    assert driver.drift and used == {1}
    assert driver.lapsed == "ignore rule expired 2026-11-30 18:00 UTC: [[ignore]] #1 (driver *), rollout week"


def test_a_live_rule_wins_over_an_expired_one() -> None:
    ignoring = rules(
        '[[ignore]]\ncategory = "driver"\nreason = "old"\nuntil = 2026-01-01\n'
        '[[ignore]]\ncategory = "driver"\nreason = "new"\n'
    )
    [driver], _ = ignore_changes([DRIVER], ignoring, "gpu01")
    assert driver.waiver is not None and driver.waiver.reason == "new"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('category = "driver"', "reason: Field required"),
        ('category = "driver"\nreason = "  "', "say why"),
        ('reason = "x"', "would ignore every change"),
        ('category = "drivers"\nreason = "x"', "'drivers' names no category"),
        ('category = "driver"\nreason = "x"\nuntil = "7d"', "an age, which would move with every run"),
        ('category = "driver"\nreason = "x"\nuntil = "next week"', "'next week' is not a time"),
        ('category = "driver"\nreason = "x"\ngroups = ["nope"]', "names unknown group(s): nope"),
        ('category = "driver"\nreason = "x"\nhost = ["gpu01"]', "host: unknown key; did you mean 'hosts'?"),
    ],
)
def test_rules_are_validated_at_load_in_one_line(table: str, message: str) -> None:
    with pytest.raises(UserError) as error:
        parse_config(f"[[ignore]]\n{table}\n", source="dw.toml")
    text = str(error.value)
    assert text.startswith("dw.toml: [[ignore]] #1") and message in text and "\n" not in text


def test_until_reads_toml_dates_strings_and_times() -> None:
    ignoring = rules(
        '[[ignore]]\ncategory = "env"\nreason = "a"\nuntil = 2026-12-31\n'
        '[[ignore]]\ncategory = "env"\nreason = "b"\nuntil = "2026-12-31T18:00:00Z"\n'
        '[[ignore]]\ncategory = "env"\nreason = "c"\nuntil = 2026-12-31T18:00:00+01:00\n'
    )
    untils = [r.until for r in ignoring.rules]
    assert untils[1] == datetime(2026, 12, 31, 18, tzinfo=timezone.utc)
    assert untils[2] == datetime(2026, 12, 31, 17, tzinfo=timezone.utc)
    assert untils[0] is not None and untils[0] - untils[1] < timedelta(days=1, hours=12)


def test_triage_counts_ignored_and_reports_the_rules_that_named_nothing() -> None:
    def edit(facts: dict) -> None:
        dists(facts)["requests"]["version"] = "2.32.4"

    ignoring = rules(
        '[[ignore]]\nitem = "requests"\nreason = "not ours"\n'
        '[[ignore]]\ncategory = "gpu-process"\nreason = "dev box"\n'
        '[[ignore]]\ncategory = "env"\nhosts = ["gpu99"]\nreason = "elsewhere"\n'
    )
    use = RuleUse()
    result = triage(diff_after(edit), host="gpu01", ignoring=ignoring, use=use)
    assert result.summary["ignored"] == 1 and result.summary["total"] == 0 and not result.drift
    assert use.unused() == [2]  # rule 3 is for another host: not this run's business


def test_fleet_findings_are_ignored_only_for_every_host_they_name() -> None:
    old_nccl = baseline()
    dists(old_nccl)["nvidia-nccl-cu12"]["version"] = "2.21.5"
    snapshots = {h: make_snapshot(host=h) for h in ("gpu01", "gpu02")}
    snapshots["gpu03"] = make_snapshot(host="gpu03", python=old_nccl["python"])
    result = compare_fleet(snapshots)
    assert result.findings and not result.agree
    for hosts, hidden in (('["gpu03"]', True), ('["gpu01"]', False)):
        ignoring = rules(f'[[ignore]]\nitem = "nvidia-nccl-*"\nhosts = {hosts}\nreason = "canary"\n')
        triaged = ignore_findings(result, ignoring)
        named = [f for f in triaged.findings if f.item == "nvidia-nccl-cu12"]
        assert (not named) is hidden
        if hidden:
            assert triaged.summary["ignored"] >= 1 and triaged.ignored[0][1].reason == "canary"

