"""Defaults that moved under an unchanged command: the behaviour, named from one snapshot."""

from __future__ import annotations

from typing import Any

from tests.diff.builders import dist
from tests.rules.builders import VLLM, baseline, dists, found, make_snapshot, not_run, processes, server

RULE = "moved-default"


def host(vllm: str, argv: tuple[str, ...] = VLLM, generation: dict[str, Any] | None = None,
         tokenizer_class: str | None = None, transformers: str = "4.57.1") -> Any:
    facts = baseline()
    dists(facts)["vllm"] = dist("vllm", vllm)
    dists(facts)["transformers"]["version"] = transformers
    files = {"generation_config.json": {"values": generation if generation is not None else
                                        {"temperature": 0.6, "top_p": 0.95, "eos_token_id": "[151645]"}}}
    if tokenizer_class:
        files["tokenizer_config.json"] = {"values": {"tokenizer_class": tokenizer_class}}
    facts["models"] = {"models": {"/models/Llama-3.1-70B": {"kind": "local", "files": files}}, "servers_error": None}
    facts["processes"] = processes(server(*argv))
    return make_snapshot(**facts)


def test_vllm_0_8_applies_generation_config_that_sets_sampling() -> None:
    [finding] = found(RULE, host("0.8.4"))
    assert finding.why.startswith("vLLM 0.8.4 applies the served model's generation_config.json as its default "
                                  "sampling parameters")
    assert finding.why.endswith("(since 0.8.0); /models/Llama-3.1-70B's generation_config.json sets temperature 0.6, "
                                "top_p 0.95")
    assert finding.subjects == (("package", "vllm"),) and not finding.observed
    assert found(RULE, host("0.7.3")) == []  # before the default moved
    assert found(RULE, host("0.8.4", generation={"eos_token_id": "[2]"})) == []  # nothing to apply
    assert found(RULE, host("0.8.4", argv=(*VLLM, "--generation-config", "vllm"))) == []  # the old default kept


def test_transformers_5_rebuilding_a_declared_llama_tokenizer() -> None:
    [finding] = [f for f in found(RULE, host("0.7.3", tokenizer_class="LlamaTokenizerFast", transformers="5.3.0"))]
    assert finding.why.startswith("transformers 5.3.0 builds a tokenizer that declares LlamaTokenizerFast")
    assert found(RULE, host("0.7.3", tokenizer_class="Qwen2TokenizerFast", transformers="5.3.0")) == []


def test_without_model_files_it_says_nothing() -> None:
    assert "no models facts" in not_run(RULE, make_snapshot())
    empty = baseline()
    empty["models"] = {"models": {}, "servers_error": None}
    assert "no served or configured model" in not_run(RULE, make_snapshot(**empty))
