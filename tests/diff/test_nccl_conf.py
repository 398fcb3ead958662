"""NCCL configuration files diffed like environment variables."""

from __future__ import annotations

import copy
from typing import Any

from driftwatch.diff import Severity

from driftwatch.explain import diff_snapshots
from driftwatch.diff.change import Change
from tests.diff.builders import make_snapshot

ETC = "/etc/nccl.conf"


def conf(settings: dict[str, str] | None, sha: str = "a", **extra: Any) -> dict[str, Any]:
    return {"files": {ETC: {"path": ETC, "via": [], "exists": settings is not None, "error": None,
                            "settings": settings, "sha256": sha if settings is not None else None,
                            "truncated": False, "volatile": {"mtime": 1.0}, **extra},
                      "~/.nccl.conf": {"path": "/root/.nccl.conf", "via": [], "exists": False, "error": None,
                                       "settings": None, "sha256": None, "truncated": False,
                                       "volatile": {"mtime": None}}},
            "conf_file_error": None}


def changes(old: dict[str, Any], new: dict[str, Any], **probes: Any) -> list[Change]:
    return diff_snapshots(make_snapshot(nccl_conf=old, **probes),
                          make_snapshot(minutes=60, nccl_conf=new, **probes)).changes


def test_a_file_appearing_with_a_setting_names_the_setting_first() -> None:
    [change] = changes(conf(None), conf({"NCCL_IB_USE_INLINE": "1"}))
    assert (change.category, change.item, change.severity) == ("env", "NCCL_IB_USE_INLINE", Severity.high)
    assert change.explanation == "NCCL_IB_USE_INLINE=1 set in /etc/nccl.conf (was not set)"


def test_changed_and_removed_settings() -> None:
    got = {c.item: c.explanation for c in changes(conf({"NCCL_P2P_DISABLE": "0", "NCCL_DEBUG": "INFO"}),
                                                   conf({"NCCL_P2P_DISABLE": "1"}, sha="b"))}
    assert got["NCCL_DEBUG"] == "NCCL_DEBUG (was INFO) no longer set in /etc/nccl.conf"
    assert got["NCCL_P2P_DISABLE"].startswith("NCCL_P2P_DISABLE 0 → 1 in /etc/nccl.conf — known-bad state (predicted)")
    assert set(got) == {"NCCL_P2P_DISABLE", "NCCL_DEBUG"}


def test_edit_without_a_setting_changing_is_context() -> None:
    [change] = changes(conf({"NCCL_DEBUG": "INFO"}), conf({"NCCL_DEBUG": "INFO"}, sha="b"))
    assert change.severity is Severity.info and "settings NCCL reads from it are the same" in change.explanation
    assert change.context


def test_a_name_with_spaces_is_said_to_set_nothing_nccl_reads() -> None:
    [change] = changes(conf({}), conf({"NCCL_DEBUG ": " INFO"}, sha="b"))
    assert change.severity is Severity.low
    assert change.explanation.endswith("the name has spaces, so NCCL sets 'NCCL_DEBUG ', a variable nothing reads")


def test_a_setting_every_server_overrides_is_low() -> None:
    servers = {"servers": {"sglang.launch_server": {"env": {"NCCL_IB_USE_INLINE": "0"}}}, "login_env": {}}
    [change] = changes(conf(None), conf({"NCCL_IB_USE_INLINE": "1"}), processes=servers)
    assert change.severity is Severity.low and "every running server's environment sets it" in change.explanation


def test_unreadable_file_compares_no_settings() -> None:
    old = conf({"NCCL_DEBUG": "INFO"})
    new = copy.deepcopy(old)
    new["files"][ETC].update(error="Permission denied", settings=None)
    [change] = changes(old, new)
    assert change.explanation == "/etc/nccl.conf cannot be read: Permission denied; its settings are not compared"
