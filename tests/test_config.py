"""The config file: defaults, per-host overrides, groups, and one-line errors."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from driftwatch.config import load_config, parse_config, resolve_targets
from driftwatch.errors import UserError

EXAMPLE = """
store = "snaps"
timeout = 5

[watch]
python = ["python3"]
repos = ["~/sglang"]

[hosts.gpu01]
address = "root@10.1.230.174"
python = ["/root/ml-env/bin/python3"]

[hosts.gpu02]
address = "root@10.1.230.175"

[groups]
blackwell = ["gpu01", "gpu02"]
"""


def test_defaults_need_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    config = load_config()
    assert config.store == "snapshots" and config.timeout == 10
    [target] = resolve_targets(config, ["root@somehost:2222"])
    assert target.address == "root@somehost:2222" and target.watch.python == ["python3"]


def test_host_overrides_and_groups() -> None:
    config = parse_config(EXAMPLE)
    targets = resolve_targets(config, ["blackwell", "local", "gpu01"])
    # `local` is stored under this machine's hostname: nodes sharing a store never collide.
    assert [t.name for t in targets] == ["gpu01", "gpu02", socket.gethostname()]
    assert targets[0].address == "root@10.1.230.174"
    assert targets[0].watch.python == ["/root/ml-env/bin/python3"]
    assert targets[0].watch.repos == ["~/sglang"]
    assert targets[1].watch.python == ["python3"]
    assert targets[2].is_local


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("store = ", "not valid TOML"),
        ("timeout = 'soon'", "timeout"),
        ("timeout = inf", "timeout: Input should be a finite number"),
        ("timeout = nan", "timeout: Input should be a finite number"),
        ("connect_timeout = inf", "connect_timeout: Input should be a finite number"),
        ("connect_timeout = -1", "connect_timeout: Input should be greater than 0"),
        ("timeout = 1e9", "timeout: Input should be less than or equal to 86400"),
        ("timeout = 0.2", "timeout: Input should be greater than or equal to 1"),
        ("[watch]\nbogus = 1", "bogus"),
        ("[hosts.a]\npython = 3", "python"),
        ("[groups]\nrack = ['nope']", "unknown host"),
    ],
)
def test_bad_config_is_one_line_user_error(text: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        parse_config(text)


def test_explicit_missing_config_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="config file not found"):
        load_config(str(tmp_path / "none.toml"))


def test_the_cli_bounds_deadlines_as_the_config_does() -> None:
    from driftwatch import cli, config

    assert cli.MAX_SECONDS == config.MAX_SECONDS
    assert cli.MIN_TIMEOUT == config.MIN_TIMEOUT
    assert cli.DEFAULT_TIMEOUT_S == config.Config.model_fields["timeout"].default  # what --help says


def test_local_is_stored_under_the_configured_name() -> None:
    config = parse_config('local_name = "node-0417"\n')
    [target] = resolve_targets(config, ["local"])
    assert (target.name, target.address, target.is_local) == ("node-0417", "local", True)


def test_store_options_take_where_and_how_never_a_secret() -> None:
    config = parse_config(
        'store = "s3://fleet/driftwatch"\n[store_options]\nendpoint_url = "https://minio.lab:9000"\n'
        'region = "eu-west-1"\nprofile = "driftwatch"\n'
    )
    assert config.store_options.as_dict() == {
        "endpoint_url": "https://minio.lab:9000", "region": "eu-west-1", "profile": "driftwatch",
    }
    for key in ("key", "secret", "aws_secret_access_key", "session_token", "password"):
        with pytest.raises(UserError, match=rf"store_options\.{key}: no credentials in the config file") as info:
            parse_config(f'[store_options]\n{key} = "AKIA..."\n', source="dw.toml")
        assert "\n" not in str(info.value) and "AKIA" not in str(info.value)
    with pytest.raises(UserError, match="store_options.bucket"):
        parse_config('[store_options]\nbucket = "x"\n')


def test_hosts_local_sets_this_machines_watch_keys() -> None:
    config = parse_config('[hosts.local]\nrepos = ["/srv/sglang"]\n')
    [target] = resolve_targets(config, ["local"])
    assert target.is_local and target.watch.repos == ["/srv/sglang"]


@pytest.mark.parametrize(("text", "line"), [
    ('stroe = "x"\n', "stroe: unknown key; did you mean 'store'?"),
    ('[watch]\npyhton = ["python3"]\n', "watch.pyhton: unknown key; did you mean 'python'?"),
    ('[hosts.gpu01]\naddress = "a"\npyhton = ["python3"]\n', "hosts.gpu01.pyhton: unknown key; did you mean 'python'?"),
    ('[store_options]\nendpoint = "x"\n', "store_options.endpoint: unknown key; did you mean 'endpoint_url'?"),
])
def test_a_config_typo_names_its_place_and_the_likely_key(text: str, line: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_config(text, source="driftwatch.toml")
    assert str(caught.value) == f"driftwatch.toml: {line}"
    assert "Extra inputs are not permitted" not in str(caught.value)
