from __future__ import annotations

from typing import Any

from driftwatch.diff import Severity

from driftwatch.explain import diff_snapshots
from tests.diff.builders import GPU0, GPU1, baseline, diff_after, make_snapshot


def grab(
    f: dict[str, Any], uuid: str, mib: int, pid: int = 10291, name: str = "/root/tools/memhog"
) -> None:
    f["gpu"]["processes"][f"{uuid}:{pid}"] = {
        "gpu_uuid": uuid,
        "pid": pid,
        "name": name,
        "used_mib": mib,
    }
    gpu = f["gpu"]["gpus"][uuid]
    gpu["memory_used_mib"] += mib
    gpu["memory_free_mib"] -= mib


def test_process_grabbing_22_gib_names_gpu_pid_size_and_free_left() -> None:
    changes = diff_after(lambda f: grab(f, GPU0, 22528)).changes
    assert len(changes) == 1  # the free-memory drop is this process, reported once
    change = changes[0]
    assert (change.category, change.item, change.severity) == (
        "gpu-process",
        f"{GPU0}:10291",
        Severity.high,
    )
    assert change.explanation == (
        "pid 10291 (/root/tools/memhog) now holds 22.0 GiB on GPU 0 (H200, 00000000:83:00.0), "
        "leaving 118.4 GiB free of 140.4 GiB"
    )


def test_free_memory_drop_no_process_explains() -> None:
    changes = diff_after(
        lambda f: f["gpu"]["gpus"][GPU1].update(memory_free_mib=100000, memory_used_mib=43771)
    ).changes
    assert [(c.category, c.item, c.severity) for c in changes] == [("gpu", GPU1, Severity.high)]
    assert (
        "GPU 1 (H200, 00000000:84:00.0) has 42.7 GiB less free memory (140.4 GiB → 97.7 GiB free)"
        in changes[0].explanation
    )


def test_small_free_memory_moves_are_not_drift() -> None:
    assert (
        diff_after(
            lambda f: f["gpu"]["gpus"][GPU0].update(memory_free_mib=143000, memory_used_mib=771)
        ).changes
        == []
    )
    assert diff_after(lambda f: grab(f, GPU0, 500)).changes[0].severity is Severity.low


def test_driver_update_is_critical_and_first() -> None:
    def edit(f: dict[str, Any]) -> None:
        grab(f, GPU0, 22528)
        f["gpu"].update(driver_version="595.71.05", cuda_version="13.2")

    first = diff_after(edit).changes[0]
    assert (first.category, first.severity, first.old, first.new) == (
        "driver",
        Severity.critical,
        "590.48.01",
        "595.71.05",
    )
    assert "supports CUDA 13.1 → 13.2" in first.explanation


def test_missing_gpu_is_critical_and_not_a_field_list() -> None:
    changes = diff_after(lambda f: f["gpu"]["gpus"].pop(GPU1)).changes
    assert [(c.category, c.item, c.severity) for c in changes] == [("gpu", GPU1, Severity.critical)]
    assert "GPU 1 (H200, 00000000:84:00.0)" in changes[0].explanation and "missing" in changes[0].explanation


def test_uncorrected_ecc_rise_is_critical_and_reset_is_info() -> None:
    rise = diff_after(lambda f: f["gpu"]["gpus"][GPU0].update(ecc_uncorrected_volatile=3)).changes
    assert (
        rise[0].severity is Severity.critical
        and "3 new uncorrected ECC errors" in rise[0].explanation
    )
    facts = baseline()
    facts["gpu"]["gpus"][GPU0]["ecc_uncorrected_volatile"] = 3
    reset = diff_snapshots(make_snapshot(**facts), make_snapshot()).changes
    assert reset[0].severity is Severity.info


def test_pcie_link_down_is_high() -> None:
    change = diff_after(lambda f: f["gpu"]["gpus"][GPU0].update(pcie_gen=4, pcie_width=8)).changes[
        0
    ]
    assert (change.old, change.new, change.severity) == ("Gen5 x16", "Gen4 x8", Severity.high)


def test_modes_and_other_fields() -> None:
    def edit(f: dict[str, Any]) -> None:
        f["gpu"]["gpus"][GPU0].update(
            persistence_mode="Disabled", mig_mode="Enabled", compute_cap="9.1"
        )

    got = {(c.old, c.new): c.severity for c in diff_after(edit).changes}
    assert got == {
        ("Enabled", "Disabled"): Severity.medium,
        ("Disabled", "Enabled"): Severity.high,
        ("9.0", "9.1"): Severity.low,
    }


def test_volatile_readings_only_with_all() -> None:
    def edit(f: dict[str, Any]) -> None:
        f["gpu"]["gpus"][GPU0]["volatile"].update(temperature_c=64, power_draw_w=512.0)
        f["gpu"]["gpus"][GPU0].update(memory_free_mib=143500, memory_used_mib=271)
        f["system"]["volatile"]["uptime_s"] = 99999.0

    assert diff_after(edit).changes == []
    changes = diff_after(edit, include_volatile=True).changes
    assert len(changes) == 5  # temperature, power, free, used, uptime
    assert {c.severity for c in changes} == {Severity.info}
    assert any("volatile.temperature_c: 31 → 64" in c.explanation for c in changes)


def test_gpus_are_matched_by_index_across_hosts() -> None:
    other = baseline()
    other["system"].update(hostname="gpu02", machine_id="m-gpu02", boot_id="b-gpu02")
    other["gpu"]["gpus"] = {
        "GPU-aaaa": {**other["gpu"]["gpus"][GPU0]},
        "GPU-bbbb": {**other["gpu"]["gpus"][GPU1]},
    }
    result = diff_snapshots(make_snapshot(), make_snapshot(host="gpu02", **other))
    assert result.summary["different_hosts"] is True
    assert {c.severity for c in result.changes} == {Severity.info}  # identity only


def test_unknown_process_list_is_not_every_process_exiting() -> None:
    before = baseline()
    grab(before, GPU0, 22528)
    after = baseline()
    after["gpu"]["processes"] = None  # nvidia-smi could not list them
    after["gpu"]["gpus"][GPU0]["memory_free_mib"] -= 30000
    changes = diff_snapshots(make_snapshot(**before), make_snapshot(**after)).changes
    got = [(c.category, c.item, c.severity) for c in changes]
    assert got == [("gpu", GPU0, Severity.high), ("gpu-process", "(process list)", Severity.info)]
    assert "could not be listed" in changes[0].explanation


def test_pcie_generation_drop_alone_is_a_lead_not_an_alarm() -> None:
    # GeForce and L40S captures show Gen1 at idle and Gen4 under load on healthy cards.
    change = diff_after(lambda f: f["gpu"]["gpus"][GPU0].update(pcie_gen=1)).changes[0]
    assert (change.old, change.new, change.severity) == ("Gen5 x16", "Gen1 x16", Severity.medium)
    assert "idle" in change.explanation


def test_an_unread_topology_or_cuda_version_is_not_a_change() -> None:
    # `topo -m` or `nvidia-smi --version` failed this time: null is "unknown", not "gone".
    def edit(f: dict) -> None:
        f["gpu"]["topology"] = None
        f["gpu"]["cuda_version"] = None

    assert diff_after(edit).changes == []


def test_one_new_ecc_error_reads_singular_and_markdown_names_the_gpu() -> None:
    from driftwatch.report.diff import render_markdown

    def edit(f: dict) -> None:
        f["gpu"]["gpus"][GPU0]["ecc_uncorrected_volatile"] = 1
        grab(f, GPU0, 22528)

    result = diff_after(edit)
    ecc = result.changes[0]
    assert "GPU 0 (H200, 00000000:83:00.0) has 1 new uncorrected ECC error (0 → 1)" in ecc.explanation
    markdown = render_markdown(result)
    assert GPU0 not in markdown  # people read "GPU 0 (H200, bus)", not UUIDs
    assert "| GPU 0 (H200, 00000000:83:00.0) |" in markdown  # parentheses are text in Markdown: not escaped
    assert "| GPU 0 (H200, 00000000:83:00.0), pid 10291 |" in markdown


def test_cloned_images_share_a_machine_id_but_are_different_hosts() -> None:
    # Two hosts from one image: same /etc/machine-id, different hostnames and GPUs.
    other = baseline()
    other["system"].update(hostname="gpu02", boot_id="b-gpu02")  # machine_id stays m-gpu01
    other["gpu"]["gpus"] = {
        "GPU-aaaa": {**other["gpu"]["gpus"][GPU0]},
        "GPU-bbbb": {**other["gpu"]["gpus"][GPU1]},
    }
    result = diff_snapshots(make_snapshot(), make_snapshot(host="gpu02", **other))
    assert result.summary["different_hosts"] is True and result.summary["cloned_image"] is True
    assert not [c for c in result.changes if "missing" in c.explanation]  # not "GPUs fell off the bus"
    assert {c.severity for c in result.changes} == {Severity.info}


def test_a_row_remap_pending_is_a_high_change() -> None:
    def edit(f: dict) -> None:
        f["gpu"]["gpus"][GPU0]["remapped_rows_pending"] = "Yes"

    before = baseline()
    before["gpu"]["gpus"][GPU0]["remapped_rows_pending"] = "No"
    changes = diff_snapshots(make_snapshot(**before), make_snapshot(minutes=5, **dict(before, gpu=None) | {"gpu": before["gpu"]})).changes
    assert changes == []
    after = baseline()
    after["gpu"]["gpus"][GPU0]["remapped_rows_pending"] = "Yes"
    [change] = [c for c in diff_snapshots(make_snapshot(**before), make_snapshot(minutes=5, **after)).changes
                if c.category == "gpu"]
    assert change.severity.rank >= Severity.high.rank
    assert "row remapping pending No → Yes" in change.explanation
