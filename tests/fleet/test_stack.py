"""Fleet comparison of the loaded stack: caches differ by nature, settings and models do not."""

from __future__ import annotations

from typing import Any

from driftwatch.diff import Severity
from tests.fleet.builders import Facts, fleet

FI = "~/.cache/flashinfer"


def stack(facts: Facts, n: int) -> None:
    """Host n's stack: its cache built at its own time, the same config and model."""
    facts["caches"] = {"caches": {FI: {"path": "/root/.cache/flashinfer", "layout": "flashinfer", "via": [],
                                       "exists": True, "error": None, "truncated": None, "same_as": None,
                                       "entries": {"0.4.1": {"files": 60 + n, "newest": 1000.0 * n, "digest": f"d{n}",
                                                             "objects": {"a.o": [1, 1000.0 * n]}}}}},
                       "locations_error": None, "volatile": {"walked": n}}
    facts["nccl_conf"] = {"files": {"/etc/nccl.conf": {"path": "/etc/nccl.conf", "exists": True, "error": None,
                                                       "settings": {"NCCL_DEBUG": "WARN"}, "sha256": "s"}},
                          "conf_file_error": None}
    model: dict[str, Any] = {"kind": "hub", "exists": True, "error": None, "revision": "r1",
                             "files": {"generation_config.json": {"blob": "g1", "values": {"temperature": 0.6}}},
                             "weights": {"model.safetensors": {"blob": "w1", "size": 10}}}
    facts["models"] = {"models": {"Qwen/Qwen3-8B": model}, "servers_error": None}


def hosts(count: int, edit: int | None = None, change: Any = None) -> Any:
    def make(n: int) -> Any:
        def apply(facts: Facts) -> None:
            stack(facts, n)
            if n == edit:
                change(facts)
        return apply
    return fleet(count, {n: make(n) for n in range(1, count + 1)})


def test_caches_built_at_different_times_agree() -> None:
    assert hosts(3).findings == []


def test_a_setting_in_one_hosts_nccl_conf_stands_out() -> None:
    result = hosts(3, 2, lambda f: f["nccl_conf"]["files"]["/etc/nccl.conf"]["settings"].update(NCCL_P2P_DISABLE="1"))
    [finding] = result.findings
    assert (finding.category, finding.item, finding.severity) == ("env", "NCCL_P2P_DISABLE", Severity.high)
    assert finding.outliers == (("gpu02", "1"),)


def test_a_host_serving_another_revision_stands_out() -> None:
    def newer(facts: Facts) -> None:
        model = facts["models"]["models"]["Qwen/Qwen3-8B"]
        model["revision"] = "r2"
        model["files"]["generation_config.json"]["blob"] = "g2"
    items = {f.item for f in hosts(3, 3, newer).findings}
    assert items == {"Qwen/Qwen3-8B", "Qwen/Qwen3-8B/generation_config.json"}
