"""The node_exporter textfile: parseable, and no raw control character in a label value."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from driftwatch.cron.textfile import write_textfile
from tests.builders import snapshot


def test_label_values_carry_no_raw_control_characters(tmp_path: Path) -> None:
    host = "gpu01\x1b]0;pwned\x07\r"
    path = write_textfile(tmp_path, host, snapshot=snapshot(host), result=None, now=1.0)
    text = path.read_text()
    assert not any(ord(c) < 0x20 and c != "\n" for c in text)
    hosts = {s.labels["host"] for f in text_string_to_metric_families(text) for s in f.samples}
    assert hosts == {"gpu01\\x1b]0;pwned\\x07\\x0d"}
