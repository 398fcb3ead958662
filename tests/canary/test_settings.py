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
    ('[[canary.prompts]]\nname = "x"', "give either messages (chat) or prompt (completion)"),
    ('[[canary.prompts]]\nname = "x"\nprompt = "a"\n[[canary.prompts]]\nname = "x"\nprompt = "b"', "unique"),
])
def test_mistakes_are_one_line_errors(toml: str, says: str) -> None:
    with pytest.raises(UserError, match=re.escape(says)) as caught:
        parse_config(toml)
    assert "sk-live-0123456789" not in str(caught.value)  # the mistaken key is not echoed


def test_who_turns_the_canary_on() -> None:
    config = parse_config('[canary]\nenabled = true\n[hosts.gpu02]\ncanary = false\n[hosts.gpu03]\naddress = "x"')
    assert canary_wanted(config, host_watch(config, "gpu03"))  # [canary] enabled
    assert not canary_wanted(config, host_watch(config, "gpu02"))  # the host says no
    assert canary_wanted(config, host_watch(config, "gpu02"), asked=True)  # --canary wins
    assert not canary_wanted(parse_config(""), host_watch(parse_config(""), "x"))  # opt-in
