"""Fleet facts of the serving engine: its version and what it reads, never where it is installed."""

from __future__ import annotations

from typing import Any

from tests.fleet.builders import Facts, fleet


def engine(host: int, version: str = "0.11.0", reads: bool = True) -> dict[str, Any]:
    root = f"/srv/gpu0{host}/venv"  # a venv per host: paths and RECORD digests differ by nature
    entry = {"version": version, "dist_info": f"{root}/lib/python3.12/site-packages/vllm-{version}.dist-info",
             "record_sha256": f"{host}" * 64, "package_dir": f"{root}/lib/python3.12/site-packages/vllm",
             "interpreter": f"{root}/bin/python", "names": {"VLLM_ATTENTION_BACKEND": reads}}
    return {"engines": {"vllm": entry}, "settings": ["VLLM_ATTENTION_BACKEND"], "interpreters": {}, "environments_error": None}


def with_engine(host: int, **kw: Any):  # type: ignore[no-untyped-def]
    def edit(facts: Facts) -> None:
        facts["engine"] = engine(host, **kw)
    return edit


def test_paths_and_digests_of_the_engine_are_never_outliers() -> None:
    assert fleet(3, {n: with_engine(n) for n in range(1, 4)}).findings == []


def test_an_engine_that_no_longer_reads_a_set_variable_is_the_odd_one_out() -> None:
    edits = {n: with_engine(n) for n in range(1, 4)}
    edits[2] = with_engine(2, version="0.21.0", reads=False)
    items = {(f.item, f.outliers) for f in fleet(3, edits).findings}
    assert ("vllm", (("gpu02", "0.21.0"),)) in items
    assert ("VLLM_ATTENTION_BACKEND", (("gpu02", False),)) in items
