"""Engine settings that stopped meaning anything between two snapshots (the ``engine`` probe).

A variable set on both sides that the old engine read and the new one does not: the command
did not change, the engine under it did. ``VLLM_ATTENTION_BACKEND=FLASHINFER is still set but
vLLM 0.21 no longer reads it: the default attention backend now runs``.
"""

from __future__ import annotations

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.facts.read import Facts, as_dict
from driftwatch.engines import ENGINES, engine_of, read_by, retired_settings

KEYS = frozenset({"engines", "settings"})


def diff_engine(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    old_engines, new_engines = as_dict(old.get("engines")), as_dict(new.get("engines"))
    old_set, new_set = as_dict(old.get("settings")), as_dict(new.get("settings"))
    changes = []
    for name in sorted(old_set.keys() & new_set.keys()):
        engine = engine_of(name)
        o, n = as_dict(old_engines.get(engine)), as_dict(new_engines.get(engine))
        if not o or not n or engine is None:
            continue
        (was, _), (now, why) = read_by(engine, o, name), read_by(engine, n, name)
        if was is not True or now is not False:
            continue
        label, version = ENGINES[engine].label, n.get("version")
        retired = retired_settings().get((engine, name))
        text = (f"{name}={fmt.value(_value(ctx, name))} is still set but {label} {version} no longer reads it "
                f"({why}): {retired.instead if retired else 'its own default applies'}")
        text += _backend(ctx, engine, name)
        if retired:
            text += f" (use {retired.replacement})"
        changes.append(Change("env", name, f"read by {label} {o.get('version')}", f"not read by {label} {version}",
                              Severity.high, text, magnitude=1.0))
    return changes


def _value(ctx: DiffContext, name: str) -> object:
    _, processes = ctx.facts_of("processes")
    sources = [as_dict(s).get("env") for s in as_dict(processes.get("servers")).values()] + [processes.get("login_env")]
    return next((env[name] for env in sources if isinstance(env, dict) and name in env), None)


def _backend(ctx: DiffContext, engine: str, name: str) -> str:
    """What the logs say the engine chose, when the setting picks an attention backend."""
    if "ATTENTION_BACKEND" not in name:
        return ""
    sides = [[str(log.get("attention_backend")) for log in as_dict(logs.get("logs")).values()
              if isinstance(log, dict) and log.get("kind") == engine and log.get("attention_backend")]
             for logs in ctx.facts_of("logs")]
    if sides[0] and sides[1] and sides[0][0] != sides[1][0]:
        return f"; its log shows the {sides[1][0]} backend (was {sides[0][0]})"
    return f"; its log shows the {sides[1][0]} backend" if sides[1] else ""
