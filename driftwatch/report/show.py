"""`driftwatch show`: the page someone reads first — the headline facts of one snapshot.

``sections`` is pure (snapshot in, titled rows of plain strings out) so tests read what a
person sees; ``print_show`` lays the rows out in aligned columns. Every string from the
host goes through ``clean`` at the edge.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from driftwatch.facts import fmt
from driftwatch.facts.read import as_dict, normalize_name
from driftwatch.facts.names import gpu_label
from driftwatch.logparse.headline import summarize_log
from driftwatch.model import ProbeStatus, Snapshot
from driftwatch.report.perf import show_rows
from driftwatch.report.canary import canary_rows
from driftwatch.report.safe import clean
from driftwatch.settings import DEFAULT_FOCUS
from driftwatch.store import Location

# Launch settings worth a glance, in this order (SGLang and vLLM names).
KEY_ARGS = (
    "model_path", "model", "tp_size", "tensor_parallel_size", "pp_size", "pipeline_parallel_size", "dp_size",
    "data_parallel_size", "ep_size", "mem_fraction_static", "gpu_memory_utilization", "max_total_tokens",
    "max_model_len", "context_length", "kv_cache_dtype", "quantization", "port",
)  # fmt: skip


@dataclass
class Section:
    title: str
    rows: list[list[str]] = field(default_factory=list)  # aligned columns
    notes: list[str] = field(default_factory=list)  # free lines under the rows


def sections(snapshot: Snapshot, focus: list[str] | None = None) -> list[Section]:
    found = [
        _problems(snapshot),
        _platform(snapshot),
        _python(snapshot, [normalize_name(n) for n in (focus or DEFAULT_FOCUS)]),
        _gpus(snapshot),
        _source(snapshot),
        _servers(snapshot),
        *_containers(snapshot, [normalize_name(n) for n in (focus or DEFAULT_FOCUS)]),
        _canary(snapshot),
        _logs(snapshot),
        *_stack(snapshot),
        _perf(snapshot),
    ]
    return [section for section in found if section.rows or section.notes]


def title_line(snapshot: Snapshot, path: Location) -> str:
    host = snapshot.host
    name = host.name if not host.hostname or host.hostname == host.name else f"{host.name} ({host.hostname})"
    labels = ", ".join(snapshot.labels) or "none"
    return (
        f"{name} — taken {snapshot.taken_at:%Y-%m-%d %H:%M:%S} UTC in {snapshot.duration_s:.2f}s; "
        f"labels: {labels}; {path}"
    )


def _facts(snapshot: Snapshot, probe: str) -> dict[str, Any]:
    record = snapshot.probes.get(probe)
    return record.facts if record is not None and record.status is ProbeStatus.ok else {}


def _problems(snapshot: Snapshot) -> Section:
    section = Section("Probes that failed")
    for name, record in snapshot.probes.items():
        if record.status in (ProbeStatus.error, ProbeStatus.timeout):
            section.rows.append([name, record.status.value, record.error or ""])
    return section


def _platform(snapshot: Snapshot) -> Section:
    system, gpu, cuda = _facts(snapshot, "system"), _facts(snapshot, "gpu"), _facts(snapshot, "cuda")
    section = Section("Driver and CUDA")
    if gpu:
        section.rows.append(["NVIDIA driver", f"{gpu.get('driver_version')} (supports CUDA {gpu.get('cuda_version')})"])
    layers = driver_layers(_facts(snapshot, "driver"))
    if layers:
        section.rows.append(["driver layers", layers])
    toolkit = as_dict(cuda.get("toolkit"))
    if toolkit.get("nvcc") or toolkit.get("cuda_link"):
        link = f" (/usr/local/cuda → {toolkit['cuda_link']})" if toolkit.get("cuda_link") else ""
        section.rows.append(["CUDA toolkit", f"nvcc {toolkit.get('nvcc') or 'not found'}{link}"])
    system_nccl = as_dict(as_dict(cuda.get("nccl")).get("system"))
    if system_nccl:
        section.rows.append(["system NCCL", ", ".join(f"{v or '?'} ({p})" for p, v in sorted(system_nccl.items()))])
    if system:
        section.rows.append(["OS", f"{system.get('os_release')}, kernel {system.get('kernel')}"])
    return section


def driver_layers(driver: dict[str, Any]) -> str:
    """``kernel module 570.86.15 (open), userspace 570.133.20: out of step; fabric manager …``
    (read without nvidia-smi: shown also when nvidia-smi failed)."""
    if not driver:
        return ""
    module, user = as_dict(driver.get("kernel_module")), as_dict(driver.get("userspace"))
    parts = [f"kernel module {module.get('version')} ({module.get('flavor') or '?'})" if module
             else "no kernel module loaded"]
    parts.append(f"userspace {user.get('version')}" if user.get("version") else "no userspace libraries")
    text = ", ".join(parts)
    if module.get("version") and user.get("version") and module["version"] != user["version"]:
        text += ": out of step"
    fm = as_dict(driver.get("fabric_manager"))
    if fm:
        state = fm.get("service") or ("running" if fm.get("running") else "not running")
        text += f"; fabric manager {fm.get('version') or fm.get('error') or '?'} ({state})"
    return text


def _python(snapshot: Snapshot, focus: list[str]) -> Section:
    section = Section("Python packages (focus)")
    torch_builds = as_dict(_facts(snapshot, "cuda").get("torch"))
    for key, entry in as_dict(_facts(snapshot, "python").get("interpreters")).items():
        interp = as_dict(entry)
        if interp.get("error"):
            section.rows.append([key, f"could not be read: {interp['error']}", ""])
            continue
        section.rows.append([key, f"Python {interp.get('version')}", str(interp.get("prefix") or "")])
        dists = as_dict(interp.get("distributions"))
        wanted = [n for n in focus if n in dists] + sorted(n for n in dists if n.startswith("nvidia-nccl-") and n not in focus)
        if not wanted:  # a lone interpreter line would read as "nothing was read"
            others = f"{fmt.plural(len(dists), 'other package')}; [watch] focus names the ones shown" if dists else ""
            section.rows.append(["", "  no focus packages installed", others])
        for name in wanted:
            dist = as_dict(dists[name])
            section.rows.append(["", f"  {name}", f"{dist.get('version')}{_origin(dist, name, torch_builds.get(key))}"])
    return section


def _origin(dist: dict[str, Any], name: str, torch: Any) -> str:
    notes = []
    if dist.get("editable"):
        commit = fmt.short(dist.get("source_commit"))
        notes.append(f"editable{' @ ' + commit if commit else ''}")
    if name == "torch" and as_dict(torch).get("cuda"):
        notes.append(f"built for CUDA {as_dict(torch)['cuda']}")
    return f"  ({', '.join(notes)})" if notes else ""


def _gpus(snapshot: Snapshot) -> Section:
    facts = _facts(snapshot, "gpu")
    gpus = sorted(as_dict(facts.get("gpus")).items(), key=lambda item: fmt.number(as_dict(item[1]).get("index")) or 0)
    section = Section(f"GPUs ({len(gpus)})" if gpus else "GPUs")
    if gpus:
        section.rows.append(["GPU", "memory used / total", "ECC uncorr/corr", "PCIe now (max)", "persistence", "MIG"])
    for uuid, entry in gpus:
        g = as_dict(entry)
        used, total = fmt.number(g.get("memory_used_mib")), fmt.number(g.get("memory_total_mib"))
        memory = f"{fmt.gib(used)} / {fmt.gib(total)}" if used is not None and total is not None else "?"
        ecc = f"{_dash(g.get('ecc_uncorrected_volatile'))}/{_dash(g.get('ecc_corrected_volatile'))}"
        pcie = f"Gen{_dash(g.get('pcie_gen'))} x{_dash(g.get('pcie_width'))} (Gen{_dash(g.get('pcie_gen_max'))} x{_dash(g.get('pcie_width_max'))})"
        section.rows.append([gpu_label(g, uuid), memory, ecc, pcie, _dash(g.get("persistence_mode")), _dash(g.get("mig_mode"))])
    processes = facts.get("processes")
    if processes is None and gpus:
        section.notes.append("compute processes: could not be listed")
    for proc in as_dict(processes).values():
        p = as_dict(proc)
        gpu = as_dict(as_dict(facts.get("gpus")).get(str(p.get("gpu_uuid"))))
        held = fmt.number(p.get("used_mib"))
        section.notes.append(
            f"pid {p.get('pid')} {p.get('name') or '?'} holds {fmt.gib(held) if held is not None else '?'} "
            f"on {gpu_label(gpu, str(p.get('gpu_uuid')))}"
        )
    return section


def _dash(value: Any) -> str:
    return "-" if value is None else str(value)


def _source(snapshot: Snapshot) -> Section:
    section = Section("Source trees")
    for key, entry in as_dict(_facts(snapshot, "git").get("repos")).items():
        repo = as_dict(entry)
        if repo.get("error"):
            section.rows.append([key, f"unreadable: {repo['error']}", ""])
            continue
        dirty = repo.get("dirty") or []
        state = f"{fmt.plural(len(dirty), 'uncommitted file')}" if dirty else "clean"
        where = f"{fmt.short(repo.get('head')) or '(no commit)'} on {repo.get('branch') or '(detached)'}"
        section.rows.append([key, where, f"{repo.get('describe') or ''}  {state}".strip()])
    return section


def _servers(snapshot: Snapshot) -> Section:
    facts = _facts(snapshot, "processes")
    section = Section("Running servers")
    if "processes" in snapshot.probes and facts and not as_dict(facts.get("servers")):
        section.notes.append("no watched server is running")
    for key, entry in as_dict(facts.get("servers")).items():
        server = as_dict(entry)
        args = as_dict(server.get("args"))
        shown = [f"--{k.replace('_', '-')} {fmt.value(args[k])}" for k in KEY_ARGS if k in args and k not in ("model", "model_path")]
        section.rows.append([key, str(server.get("model") or "?"), " ".join(shown)])
    return section


def _containers(snapshot: Snapshot, focus: list[str]) -> list[Section]:
    """Each containerised server: image, id, created, the focus packages inside it and its
    limits; and the limits of the host's own servers (/dev/shm, CPU quota, memlock)."""
    section, native = Section("Containers"), Section("Server limits")
    for key, entry in as_dict(_facts(snapshot, "containers").get("servers")).items():
        server = as_dict(entry)
        container = as_dict(server.get("container"))
        shm, cgroup = as_dict(server.get("shm")), as_dict(server.get("cgroup"))
        memlock = as_dict(as_dict(server.get("limits")).get("memlock")).get("soft")
        limits = ", ".join(part for part in (
            f"/dev/shm {fmt.size(shm['size'])}" if isinstance(shm.get("size"), int) else "",
            f"CPU quota {cgroup['cpu_limit']:g}" if isinstance(cgroup.get("cpu_limit"), (int, float)) else "",
            f"memlock {fmt.size(memlock) if isinstance(memlock, int) else memlock}" if memlock is not None else "",
        ) if part)
        if not container:
            if limits:
                native.rows.append([key, limits])
            continue
        image = as_dict(container.get("image"))
        created = str(image.get("created") or "")[:10]
        ident = f"{container.get('runtime')} {container.get('label') or container.get('name')} ({str(container.get('id') or '')[:12]})"
        what = f"{image.get('ref') or '?'} = {_image_id(image.get('id'))}" + (f", created {created}" if created else "")
        section.rows.append([key, ident, what])
        python = as_dict(server.get("python"))
        dists = as_dict(python.get("distributions"))
        inside = ", ".join(f"{name} {as_dict(dists[name]).get('version')}" for name in focus if name in dists)
        section.rows.append(["", "inside", python.get("error") and f"unreadable: {python['error']}" or inside or "(no focus package)"])
        if limits:
            section.rows.append(["", "limits", limits])
    return [section, native]


def _image_id(image_id: Any) -> str:
    text = str(image_id or "?")
    return text if len(text) <= 19 else text[:19] + "…"
def _canary(snapshot: Snapshot) -> Section:
    rows, notes = canary_rows(_facts(snapshot, "canary"))
    return Section("Output canary", rows, notes)


def _logs(snapshot: Snapshot) -> Section:
    section = Section("Server logs (newest per pattern)")
    for pattern, entry in as_dict(_facts(snapshot, "logs").get("logs")).items():
        log = as_dict(entry)
        lines = summarize_log(log) or ["(nothing parsed)"]
        where = str(log.get("path") or pattern)
        section.rows += [[where if i == 0 else "", line] for i, line in enumerate(lines)]
    return section


def _stack(snapshot: Snapshot) -> list[Section]:
    """Compile caches that exist, the settings NCCL reads from its files, the models."""
    caches = Section("Compile caches")
    for key, entry in as_dict(_facts(snapshot, "caches").get("caches")).items():
        cache = as_dict(entry)
        entries = [as_dict(e) for e in as_dict(cache.get("entries")).values()]
        if cache.get("error"):
            caches.rows.append([key, f"unreadable: {cache['error']}", ""])
        elif cache.get("exists"):
            files = sum(fmt.number(e.get("files")) or 0 for e in entries)
            size = sum(fmt.number(e.get("bytes")) or 0 for e in entries)
            names = ", ".join(sorted(as_dict(cache.get("entries"))))
            cut = f"; cut short ({cache['truncated']})" if cache.get("truncated") else ""
            caches.rows.append([key, f"{files:,.0f} files, {fmt.size(size)}{cut}", names])
    nccl = Section("NCCL configuration files")
    for path, entry in as_dict(_facts(snapshot, "nccl_conf").get("files")).items():
        conf = as_dict(entry)
        settings = as_dict(conf.get("settings"))
        if conf.get("error") or settings:
            shown = conf.get("error") and f"unreadable: {conf['error']}"
            nccl.rows.append([path, shown or ", ".join(f"{k}={v}" for k, v in settings.items())])
    models = Section("Models")
    for key, entry in as_dict(_facts(snapshot, "models").get("models")).items():
        model = as_dict(entry)
        state = model.get("error") or ("" if model.get("exists") else "not found")
        kind = f"{model.get('kind')}" + (f" @ {fmt.short(model.get('revision'))}" if model.get("revision") else "")
        counts = f"{fmt.plural(len(as_dict(model.get('files'))), 'file')}, {len(as_dict(model.get('weights')))} weights"
        models.rows.append([key, state or kind, "" if state else counts])
    return [caches, nccl, models]


def _perf(snapshot: Snapshot) -> Section:
    """What the host delivered (the opt-in perf probe), each figure with its status."""
    facts = _facts(snapshot, "perf")
    section = Section(f"Performance (perf probe v{facts.get('version')})" if facts else "Performance")
    if facts:
        section.rows, section.notes = show_rows(facts)
    return section


def print_show(console: Console, snapshot: Snapshot, path: Location, focus: list[str] | None = None) -> None:
    console.print(Text(clean(title_line(snapshot, path)), style="bold"))
    for section in sections(snapshot, focus):
        console.print()
        console.print(Text(section.title, style="bold underline"))
        if section.rows:
            table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 0))
            for _ in range(max(len(row) for row in section.rows)):
                table.add_column(overflow="fold")
            for row in section.rows:
                table.add_row(*(Text(clean(cell)) for cell in row))
            console.print(table)
        for note in section.notes:
            console.print(Text("  " + clean(note)))
