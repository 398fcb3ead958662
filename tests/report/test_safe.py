"""Host text rendered for each sink: one terminal line, one chat message of plain text."""

from __future__ import annotations

import pytest

from driftwatch.report.safe import chat_text, clean


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("new\nline.py", "new\\nline.py"),
        ("a\r\nb", "a\\x0d\\nb"),
        ("title\x1b]0;pwned\x07", "title\\x1b]0;pwned\\x07"),
        ("csi\x9b2J", "csi\\x9b2J"),
        ("admin\u202egnp.exe", "admin\\u202egnp.exe"),  # bidi override: reads as "exe.png"
        ("para\u2029graph", "para\\u2029graph"),
        ("tab\tand café [bold]", "tab\tand café [bold]"),
    ],
)
def test_clean_keeps_host_text_on_one_visible_line(text: str, shown: str) -> None:
    assert clean(text) == shown


def test_chat_text_is_plain_text_for_slack_and_mattermost() -> None:
    text = "torch 2.8.0 → <!channel> <https://evil.example|Re-authenticate> & <@U123>\n\x1b[2J"
    assert chat_text(text) == (
        "torch 2.8.0 → &lt;!channel&gt; &lt;https://evil.example|Re-authenticate&gt; &amp; &lt;@U123&gt;\\n\\x1b[2J"
    )
