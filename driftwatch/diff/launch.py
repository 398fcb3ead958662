"""How the server was launched: explicit flags (argv) and effective args (the log).

SGLang auto-detects some settings (``mem_fraction_static``) and prints the effective value
in its ``server_args`` log line, so "set explicitly to 0.55; the good run auto-detected
0.88" needs both the running server's argv and the log. Where both logs give the numbers,
the KV cache budget is computed the way SGLang sizes it:

    kv_budget = available_after_weights - total * (1 - mem_fraction_static)
"""

from __future__ import annotations

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.facts.launch import (
    FRACTIONS,
    MEMORY,
    PARALLEL,
    LaunchSide,
    Setting,
    as_number,
    avail_after_weights_gib,
    memory_failure,
    reached_ready,
    same,
    sglang_kv_budget,
    total_gib,
)
from driftwatch.diff.sides import sides
from driftwatch.model import Snapshot

def severity_of(key: str) -> Severity:
    if key in FRACTIONS:
        return Severity.critical
    return Severity.high if key in MEMORY or key in PARALLEL else Severity.medium


def flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def describe(key: str, old: Setting | None, new: Setting | None) -> str:
    if new is None:
        assert old is not None
        return f"{flag(key)} {fmt.value(old[0])} is no longer set"
    if old is None:
        return f"{flag(key)} is now {fmt.value(new[0])} (not set {sides().in_old})"
    (ov, osrc), (nv, nsrc) = old, new
    if nsrc == "explicit" and osrc == "log":
        return f"{flag(key)} set explicitly to {fmt.value(nv)}; {sides().old} auto-detected {fmt.value(ov)}"
    if nsrc == "log" and osrc == "explicit":
        return f"{flag(key)} no longer set explicitly ({fmt.value(ov)}); now {fmt.value(nv)}"
    return f"{flag(key)} {fmt.value(ov)} → {fmt.value(nv)}"


def diff_launch(old: Snapshot, new: Snapshot) -> list[Change]:
    a, b = LaunchSide.of(old), LaunchSide.of(new)
    fields = a.fields | b.fields
    # Compare only what both sides know: an unreadable log does not unset what it said,
    # and a server that stopped has no argv to compare (the processes rules say it stopped).
    logged = not (a.log_unknown or b.log_unknown)
    explicit = a.server_seen and b.server_seen
    before = a.settings(fields, logged=logged, explicit=explicit)
    after = b.settings(fields, logged=logged, explicit=explicit)
    if not before or not after:
        return []  # no server known on one side: the processes rules say it started or stopped
    changes: list[Change] = []
    for key in sorted(before.keys() | after.keys()):
        o, n = before.get(key), after.get(key)
        if o is not None and n is not None and same(o[0], n[0]):
            continue
        text = describe(key, o, n)
        if key == "mem_fraction_static" and o is not None and n is not None:
            text += kv_budget_sentence(old, new, as_number(o[0]), as_number(n[0]))
        changes.append(
            Change("launch-arg", key, o[0] if o else None, n[0] if n else None, severity_of(key), text,
                   magnitude=1.0 if key in FRACTIONS else 0.5)
        )
    return changes


def kv_budget_sentence(old: Snapshot, new: Snapshot, f_old: float | None, f_new: float | None) -> str:
    """SGLang's KV budget for both runs, computed from the logged numbers. Negative is a
    prediction (the server cannot start with it) until the new log shows the error."""
    t_old, t_new = total_gib(old), total_gib(new)
    a_old, a_new = avail_after_weights_gib(old), avail_after_weights_gib(new)
    assumed = a_new is None and a_old is not None
    a_old, a_new = a_old if a_old is not None else a_new, a_new if a_new is not None else a_old
    t_old, t_new = t_old if t_old is not None else t_new, t_new if t_new is not None else t_old
    if None in (f_old, f_new, a_old, a_new, t_old, t_new):
        return ""
    assert f_old is not None and f_new is not None and a_old is not None and a_new is not None
    assert t_old is not None and t_new is not None
    b_old, b_new = sglang_kv_budget(a_old, t_old, f_old), sglang_kv_budget(a_new, t_new, f_new)
    words = sides()
    text = (
        f". KV cache budget = free after weights − total × (1 − fraction): {words.old_label} "
        f"{a_old:.1f} − {t_old:.1f} × {1 - f_old:.2f} = {b_old:.1f} GiB; {words.new_label} "
        f"{a_new:.1f} − {t_new:.1f} × {1 - f_new:.2f} = {b_new:.1f} GiB"
    )
    if assumed:
        text += f" ({words.new} logged no free memory after weights: {words.old}'s is assumed)"
    if b_new >= 0 or b_old < 0:
        return text
    text += f" — the KV budget would be {b_new:.1f} GiB: SGLang cannot start with this"
    failure = memory_failure(new)
    if failure:
        text += f"; {words.new_log} shows it failed: {failure}"
    elif reached_ready(new):
        text += f"; yet {words.new_log} shows the server reached 'ready', so these numbers may be from another run"
    else:
        text += f" (predicted: {words.new_log} shows no such error)"
    return text + ". A higher fraction gives the KV cache more room, not less"
