"""NCCL configuration files: parsed as NCCL's setEnvFile does, found where NCCL looks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from driftwatch.collect import run_probe
from driftwatch.model import ProbeRecord, ProbeStatus
from driftwatch.probes.base import ProbeContext
from driftwatch.probes.nccl_conf import NcclConfProbe, parse_nccl_conf
from driftwatch.settings import WatchSettings
from driftwatch.transport.local import LocalTransport

# As images ship it (a DGX base image's /etc/nccl.conf), with the mistakes people make.
ETC_NCCL_CONF = (
    "# NCCL settings for this image\n"
    "NCCL_IB_USE_INLINE=1\n"
    "NCCL_SOCKET_IFNAME=^docker0,lo\n"
    "  # NCCL_ALGO=Tree: an indented comment is not a comment to NCCL\n"
    "NCCL_DEBUG = INFO\n"
    "NCCL_IB_HCA=mlx5_0:1,mlx5_1:1\r\n"
    "NCCL_IB_USE_INLINE=0\n"
    "not a setting\n"
    "=orphan value\n"
    "NCCL_TOPO_FILE=/etc/topo.xml=v2\n"
    "NCCL_EMPTY="
)


def test_parsed_as_nccl_sets_it() -> None:
    assert parse_nccl_conf(ETC_NCCL_CONF) == {
        "NCCL_IB_USE_INLINE": "1",  # the first setting wins: setenv(..., 0) never overwrites
        "NCCL_SOCKET_IFNAME": "^docker0,lo",
        "  # NCCL_ALGO": "Tree: an indented comment is not a comment to NCCL",
        "NCCL_DEBUG ": " INFO",
        "NCCL_IB_HCA": "mlx5_0:1,mlx5_1:1",
        "NCCL_TOPO_FILE": "/etc/topo.xml=v2",
        "NCCL_EMPTY": "",
    }


def test_long_names_and_values_are_cut_where_nccl_cuts_them() -> None:
    parsed = parse_nccl_conf("N" * 2000 + "=" + "v" * 2000 + "\n")
    [(name, value)] = parsed.items()
    assert len(name) == len(value) == 1023


def record(etc: Path) -> ProbeRecord:
    settings = WatchSettings(processes=[], nccl_conf=[str(etc), "~/.nccl.conf"])
    result = run_probe(NcclConfProbe(), ProbeContext(transport=LocalTransport(), watch=settings, timeout=30))
    assert result.status is ProbeStatus.ok, result.error
    return result


def test_files_where_nccl_looks_including_the_one_nccl_conf_file_names(home: Path) -> None:
    etc = home.parent / "etc" / "nccl.conf"
    etc.parent.mkdir()
    etc.write_text(ETC_NCCL_CONF)
    (home / ".nccl.conf").write_text("NCCL_P2P_DISABLE=1\nNCCL_TOKEN_SECRET=hunter2\n")
    custom = home.parent / "team.conf"
    custom.write_text("NCCL_ALGO=Ring\n")
    (home / ".profile").write_text(f"export NCCL_CONF_FILE={custom}\n")
    facts = record(etc).facts
    files: dict[str, Any] = facts["files"]
    assert list(files) == [str(etc), "~/.nccl.conf", str(custom)] and facts["conf_file_error"] is None
    assert files[str(etc)]["settings"]["NCCL_IB_USE_INLINE"] == "1" and files[str(etc)]["exists"] is True
    assert files["~/.nccl.conf"]["path"] == str(home / ".nccl.conf")
    assert files["~/.nccl.conf"]["settings"] == {"NCCL_P2P_DISABLE": "1", "NCCL_TOKEN_SECRET": "<redacted>"}
    assert files[str(custom)]["via"] == ["NCCL_CONF_FILE (login env)"]
    assert files[str(custom)]["settings"] == {"NCCL_ALGO": "Ring"}
    assert "hunter2" not in str(facts)


def test_missing_file_directory_and_relative_conf_file_are_data(home: Path) -> None:
    etc = home.parent / "etc" / "nccl.conf"
    etc.mkdir(parents=True)  # a directory where the file should be
    (home / ".profile").write_text("export NCCL_CONF_FILE=conf/nccl.conf\n")
    files = record(etc).facts["files"]
    assert files[str(etc)]["error"] == "not a regular file" and files[str(etc)]["settings"] is None
    assert files["~/.nccl.conf"] == {**files["~/.nccl.conf"], "exists": False, "error": None, "settings": None}
    relative = files["conf/nccl.conf"]
    assert relative["via"] == ["NCCL_CONF_FILE (login env)"] and relative["error"].startswith("relative path")


def test_a_file_over_the_bound_is_read_to_the_bound_and_says_so(home: Path) -> None:
    etc = home.parent / "nccl.conf"
    etc.write_text("NCCL_DEBUG=WARN\n" + "# padding\n" * 10000)
    file = record(etc).facts["files"][str(etc)]
    assert file["truncated"] is True and file["settings"] == {"NCCL_DEBUG": "WARN"}
