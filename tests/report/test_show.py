"""`driftwatch show`: the headline facts first, in aligned columns, host text escaped."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from driftwatch.report.show import print_show, sections
from tests.diff.builders import GPU0, baseline, dists, make_snapshot
from tests.diff.test_gpu import grab
from tests.diff.test_launch import SGLANG, logs, processes
from tests.seed import seed_log


def rendered(**facts: object) -> str:
    console = Console(width=160, record=True, file=open("/dev/null", "w"))
    print_show(console, make_snapshot(**facts), Path("snapshots/gpu01/20260219T100000.000000Z.json"))
    return console.export_text()


def incident() -> dict[str, object]:
    facts = baseline()
    grab(facts, GPU0, 22528)
    facts["processes"] = processes(*SGLANG, "--tp", "8", "--mem-fraction-static", "0.55")
    facts["logs"] = logs(seed_log(0.55, fails=True))
    return facts


def test_the_headline_facts_come_in_sections() -> None:
    titles = [s.title for s in sections(make_snapshot(**incident()))]
    assert titles == ["Driver and CUDA", "Python packages (focus)", "GPUs (2)", "Source trees",
                      "Running servers", "Server logs (newest per pattern)"]


def test_what_a_person_reads_first() -> None:
    text = rendered(**incident())
    assert text.splitlines()[0].startswith("gpu01 — taken 2026-02-19 10:00:00 UTC")
    assert "590.48.01 (supports CUDA 13.1)" in text
    for package, version in (("sglang", "0.5.6"), ("sgl-kernel", "0.3.16.post4"), ("torch", "2.8.0+cu128"),
                             ("flashinfer-python", "0.4.1"), ("nvidia-nccl-cu12", "2.27.3")):
        assert any(package in line and version in line for line in text.splitlines()), package
    assert "built for CUDA 12.8" in text
    assert "GPU 0 (H200, 00000000:83:00.0)  22.0 GiB / 140.4 GiB  0/0" in text
    assert "pid 10291 /root/tools/memhog holds 22.0 GiB on GPU 0" in text
    assert "9f1c2ab on main" in text and "clean" in text
    assert "--tp-size 8 --mem-fraction-static 0.55" in text
    assert "SGLang, model /models/DeepSeek-V3, TP 8" in text and "free after weights 21.7 GB" in text
    assert "not ready: kv-budget error (8×): RuntimeError: Not enough memory" in text


def test_a_failed_probe_is_listed_first() -> None:
    from driftwatch.model import ProbeStatus
    from tests.diff.builders import failed

    text = rendered(gpu=failed(ProbeStatus.timeout, "timed out after 10s"))
    assert text.index("Probes that failed") < text.index("Python packages")
    assert "gpu  timeout  timed out after 10s" in text
    assert "GPUs" not in text  # no GPU facts to show, not "0 GPUs"


def test_host_text_cannot_move_the_cursor() -> None:
    facts = baseline()
    dists(facts)["sglang"]["version"] = "0.5.6\x1b]0;pwned\x07\n[bold]x[/bold]"
    text = rendered(**facts)
    assert "\x1b" not in text and "\\x1b]0;pwned\\x07" in text and "[bold]x[/bold]" in text


def test_driver_layers_are_shown_even_when_nvidia_smi_failed() -> None:
    from driftwatch.model import ProbeStatus
    from tests.diff.builders import failed

    driver = {"kernel_module": {"version": "580.173.02", "flavor": "proprietary"},
              "userspace": {"version": "580.178.04", "libraries": {}},
              "fabric_manager": {"version": "580.173.02", "service": "failed", "running": False}}
    text = rendered(gpu=failed(ProbeStatus.error, "Failed to initialize NVML: Driver/library version mismatch"),
                    driver=driver)
    assert ("driver layers  kernel module 580.173.02 (proprietary), userspace 580.178.04: out of step; "
            "fabric manager 580.173.02 (failed)") in text


def test_containers_with_their_image_the_packages_inside_and_limits() -> None:
    from tests.diff.test_containers import in_container, limits

    hostile = in_container("sg-a")
    hostile["container"]["image"]["ref"] = "lmsysorg/sglang:latest\x1b[2J"
    containers = {"servers": {"sglang.launch_server@sg-a": hostile,
                              "train.py": {"container": None, **limits(shm=16 << 30, cpu=None)}}, "kernel": {}}
    text = rendered(containers=containers)
    assert ("Containers\nsglang.launch_server@sg-a  docker sg-a (aaaaaaaaaaaa)  "
            "lmsysorg/sglang:latest\\x1b[2J = sha256:59ef00000000…, created 2026-02-10") in text
    assert "inside                      sglang 0.5.6, sgl-kernel 0.3.16, torch 2.8.0+cu128" in text
    assert "limits                      /dev/shm 64.0 MiB, CPU quota 1.5, memlock 8.0 MiB" in text
    assert "Server limits\ntrain.py  /dev/shm 16.0 GiB, memlock 8.0 MiB" in text
    assert "\x1b" not in text


def test_an_interpreter_without_focus_packages_says_so() -> None:
    facts = baseline()
    interpreter = facts["python"]["interpreters"]["python3"]
    interpreter["distributions"] = {"requests": interpreter["distributions"]["requests"]}
    text = rendered(**facts)
    lines = text.splitlines()
    row = lines.index(next(line for line in lines if "Python 3.12.3" in line))
    assert lines[row + 1].split() == ["no", "focus", "packages", "installed", "1", "other", "package;", "[watch]", "focus",
                                      "names", "the", "ones", "shown"]
    interpreter["distributions"] = {}
    assert "no focus packages installed" in rendered(**facts)
