"""Reading reprs without evaluating them: exact when whole, never wrong when cut short."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from driftwatch.logparse.pyrepr import (
    convert,
    json_safe,
    parse_call_kwargs,
    parse_dict_items,
    scan_items,
)


@dataclasses.dataclass
class ServerArgs:  # the real thing's repr is a dataclass repr
    model_path: str = "/models/it's, (odd) \"name\""
    mem_fraction_static: float = 0.8639842241317652
    tp_size: int = 8
    trust_remote_code: bool = True
    context_length: int | None = None
    additional_ports: list[int] = dataclasses.field(default_factory=lambda: [8001, 8002])
    json_model_override_args: str = '{"rope_scaling": {"type": "yarn"}}'
    lora_paths: dict[str, str] = dataclasses.field(default_factory=lambda: {"a": "/p,q", "b": "x)"})
    cuda_graph_bs: tuple[int, ...] = (1, 2, 4)
    random_seed: int = 827599081


def test_whole_repr_is_exact() -> None:
    args = ServerArgs()
    text = repr(args)
    values, truncated = parse_call_kwargs(text[len("ServerArgs(") :])
    assert not truncated
    assert values == json_safe(dataclasses.asdict(args))


def test_every_cut_gives_a_subset_never_a_wrong_value() -> None:
    text = repr(ServerArgs())[len("ServerArgs(") :]
    truth = json_safe(dataclasses.asdict(ServerArgs()))
    for cut in range(len(text)):
        values, truncated = parse_call_kwargs(text[:cut])
        assert truncated
        assert all(truth[key] == value for key, value in values.items()), text[:cut]


def test_dict_form_and_json_values() -> None:
    values, truncated = parse_dict_items("'a': 1, 'b': (1, 2), \"c\": {3, 1}, 'd': true, 'e': float('nan')}")
    assert not truncated
    assert values == {"a": 1, "b": [1, 2], "c": [1, 3], "d": True, "e": "float('nan')"}


def test_scan_items_respects_quotes_brackets_and_escapes() -> None:
    items, closed = scan_items("a='x,\\'y)', b=[1, (2, 3)], c={'k': ')'}) trailing, junk")
    assert closed and [item.strip() for item in items] == ["a='x,\\'y)'", "b=[1, (2, 3)]", "c={'k': ')'}"]


def test_hostile_values_do_not_crash() -> None:
    assert convert("[" * 10000) == "[" * 10000
    assert convert("9" * 10000) == "9" * 10000  # past Python's int-string limit
    assert convert("__import__('os').system('x')") == "__import__('os').system('x')"
    assert convert("1e999") == "inf"
    json.dumps([convert("1e999"), convert("b'x'"), convert("1j")], allow_nan=False)


literals = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
names = st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(names, literals, min_size=1, max_size=8))
def test_any_literal_kwargs_round_trip(kwargs: dict[str, Any]) -> None:
    text = ", ".join(f"{key}={value!r}" for key, value in kwargs.items()) + ")"
    values, truncated = parse_call_kwargs(text)
    assert not truncated and values == json_safe(kwargs)
    as_dict = ", ".join(f"{key!r}: {value!r}" for key, value in kwargs.items()) + "}"
    assert parse_dict_items(as_dict) == (json_safe(kwargs), False)


def test_odd_escapes_parse_quietly() -> None:
    import warnings

    from driftwatch.logparse.pyrepr import convert

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert convert(r"'C:\Bin\models'") == "C:\\Bin\\models"
