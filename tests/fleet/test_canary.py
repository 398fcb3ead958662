"""fleet and the canary: hosts serving the same model whose greedy answers differ from the
majority's are the odd ones out; a host serving another model is not, answer by answer."""

from __future__ import annotations

from driftwatch.fleet.compare import compare_fleet
from tests.canary.test_classify import flipped
from tests.diff.builders import make_snapshot
from tests.diff.test_canary import answer, canary, server


def test_the_host_whose_answer_differs_is_the_odd_one_out() -> None:
    capital = answer("chat_capital.json", "chat")
    good = canary(server(capital=[capital]))
    odd = canary(server(capital=[flipped(capital, 5, " Lyon", -0.4, -1.5) | {"text": "The capital is Lyon."}]))
    other_model = canary(server(capital=[capital]) | {"model": "qwen3-8b"})
    snapshots = {
        "gpu01": make_snapshot(host="gpu01", canary=good),
        "gpu02": make_snapshot(host="gpu02", canary=good),
        "gpu03": make_snapshot(host="gpu03", canary=odd),
        "gpu04": make_snapshot(host="gpu04", canary=good),
        "gpu05": make_snapshot(host="gpu05", canary=other_model),
    }
    result = compare_fleet(snapshots)
    answers = [f for f in result.findings if f.category == "canary" and "canary prompt 'capital'" in f.explanation]
    [finding] = [f for f in answers if f.item == "smollm2"]
    assert [host for host, _ in finding.outliers] == ["gpu03"]
    assert finding.majority is not None and finding.majority[1] == 3
    assert "'The capital is Lyon.'" in str(finding.outliers[0][1])
    assert all("gpu05" not in [h for h, _ in f.outliers] for f in answers)
