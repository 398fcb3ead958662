"""``[canary]`` in the config: what it accepts, what it refuses, and who turns the canary on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from driftwatch.config import canary_wanted, host_watch, parse_config
from driftwatch.errors import UserError

README = Path(__file__).parent.parent.parent / "README.md"


def test_the_readme_canary_table_is_a_valid_config() -> None:
    text = README.read_text()
    block = next(b for b in re.findall(r"```toml\n(.*?)```", text, re.S) if b.startswith("[canary]"))
    config = parse_config(block)
    assert config.canary.url == "http://127.0.0.1:30000" and config.canary.api_key_env == "OPENAI_API_KEY"
    assert [p.name for p in config.canary.prompts] == ["capital", "primes"]
    assert [p.kind for p in config.canary.prompts] == ["chat", "completion"]


@pytest.mark.parametrize(("toml", "says"), [
    ('[canary]\napi_key = "sk-live-abc"', "no API key in the config file"),
    ('[canary]\napi_key_env = "sk-live-0123456789"', "names an environment variable"),
    ('[canary]\ndeadline = 0', "canary.deadline"),
    ('[canary]\nurl = "127.0.0.1:30000"', "is not http://HOST:PORT"),
    ('[canary]\nurl = "http://user:pw@127.0.0.1:30000"', "is not http://HOST:PORT"),
    ('[[canary.prompts]]\nname = "x"', "give either messages (chat) or prompt (completion)"),
    ('[[canary.prompts]]\nname = "x"\nprompt = "a"\n[[canary.prompts]]\nname = "x"\nprompt = "b"', "unique"),
])
def test_mistakes_are_one_line_errors(toml: str, says: str) -> None:
    with pytest.raises(UserError, match=re.escape(says)) as caught:
        parse_config(toml)
    assert "sk-live-0123456789" not in str(caught.value) and "pw@" not in str(caught.value)  # no secret echoed


def test_who_turns_the_canary_on() -> None:
    config = parse_config('[canary]\nenabled = true\n[hosts.gpu02]\ncanary = false\n[hosts.gpu03]\naddress = "x"')
    assert canary_wanted(config, host_watch(config, "gpu03"))  # [canary] enabled
    assert not canary_wanted(config, host_watch(config, "gpu02"))  # the host says no
    assert canary_wanted(config, host_watch(config, "gpu02"), asked=True)  # --canary wins
    assert not canary_wanted(parse_config(""), host_watch(parse_config(""), "x"))  # opt-in


def test_a_bad_url_on_the_command_line_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    from driftwatch.cli import main

    assert main(["canary", "local", "--url", "notaurl:xx"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("driftwatch: error: --url 'notaurl:xx' is not http://HOST:PORT") and err.count("\n") == 1
