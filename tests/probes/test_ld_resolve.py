"""The target-side loader model (scripts/ld_resolve.py) against real files: ld.so.conf as
ldconfig parses it (includes, relative globs, loops), and ld.so's search order over real ELF
libraries compiled with their RPATH/RUNPATH."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from tests.elfs import build_library

SCRIPT = Path(__file__).resolve().parents[2] / "driftwatch" / "probes" / "scripts" / "ld_resolve.py"
ELF_SCRIPT = SCRIPT.with_name("elf_identity.py")


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LD = load(SCRIPT)
ELF = load(ELF_SCRIPT)


def test_ld_so_conf_with_includes_as_ldconfig_reads_it(tmp_path: Path) -> None:
    conf_d = tmp_path / "ld.so.conf.d"
    conf_d.mkdir()
    (tmp_path / "ld.so.conf").write_text("# comment\n/usr/local/lib\ninclude ld.so.conf.d/*.conf\n")
    (conf_d / "988_cuda-12.conf").write_text("/usr/local/cuda-12.1/targets/x86_64-linux/lib/  # toolkit\n")
    (conf_d / "000_cuda.conf").write_text("/usr/local/cuda/lib64\nhwcap 0 nosegneg\n/opt/old=libc6\n")
    conf = LD.LdConf(str(tmp_path / "ld.so.conf"))
    assert conf.dirs == [
        ("/usr/local/lib", str(tmp_path / "ld.so.conf")),
        ("/usr/local/cuda/lib64", str(conf_d / "000_cuda.conf")),
        ("/opt/old", str(conf_d / "000_cuda.conf")),
        ("/usr/local/cuda-12.1/targets/x86_64-linux/lib", str(conf_d / "988_cuda-12.conf")),
    ]
    assert conf.errors == []


def test_an_include_loop_is_an_error_not_a_hang(tmp_path: Path) -> None:
    (tmp_path / "a.conf").write_text(f"/opt/a\ninclude {tmp_path / 'b.conf'}\n")
    (tmp_path / "b.conf").write_text("/opt/b\ninclude a.conf\n")
    conf = LD.LdConf(str(tmp_path / "a.conf"))
    assert [d for d, _ in conf.dirs] == ["/opt/a", "/opt/b"]
    assert conf.errors == [f"include loop: {tmp_path / 'a.conf'} -> {tmp_path / 'b.conf'} -> {tmp_path / 'a.conf'}"]
    (tmp_path / "dir.conf").mkdir()
    (tmp_path / "c.conf").write_text(f"include {tmp_path / 'dir.conf'}\n")
    assert LD.LdConf(str(tmp_path / "c.conf")).errors == [f"{tmp_path / 'dir.conf'}: Is a directory"]
    assert LD.LdConf(str(tmp_path / "absent.conf")).errors == []  # no ld.so.conf is no error, as for ldconfig


def dynamic(path: Path) -> dict[str, object]:
    with open(path, "rb") as handle:
        result: dict[str, object] = ELF.elf_identity(handle)["dynamic"]
    return result


def test_search_order_runpath_rpath_and_ld_library_path(tmp_path: Path) -> None:
    wheel = build_library(tmp_path / "site" / "nvidia" / "nvjitlink" / "lib" / "libnvJitLink.so.12", "01",
                          soname="libnvJitLink.so.12")
    system = build_library(tmp_path / "cuda-12.1" / "lib64" / "libnvJitLink.so.12", "02", soname="libnvJitLink.so.12")
    runpath = build_library(tmp_path / "site" / "nvidia" / "cusparse" / "lib" / "libcusparse.so.12", "03",
                            link=[wheel], runpath="$ORIGIN/../../nvjitlink/lib")
    rpath = build_library(tmp_path / "old" / "lib" / "libcusparse.so.12", "04", link=[wheel],
                          rpath=str(wheel.parent))
    conf = LD.LdConf(str(tmp_path / "none.conf"))
    lib64 = str(system.parent)
    # RUNPATH comes after LD_LIBRARY_PATH: the toolkit's copy wins (pytorch #140797).
    found = LD.resolve("libnvJitLink.so.12", str(runpath), dynamic(runpath), lib64, conf)
    assert found == {"path": str(system), "via": "LD_LIBRARY_PATH", "dir": lib64}
    found = LD.resolve("libnvJitLink.so.12", str(runpath), dynamic(runpath), None, conf)
    assert found == {"path": str(wheel), "via": "RUNPATH", "dir": str(tmp_path / "site/nvidia/cusparse/lib/../../nvjitlink/lib")}
    # An old-style RPATH comes before LD_LIBRARY_PATH.
    found = LD.resolve("libnvJitLink.so.12", str(rpath), dynamic(rpath), lib64, conf)
    assert (found["path"], found["via"]) == (str(wheel), "RPATH")
    # No RUNPATH at all: ld.so.cache (the directories of ld.so.conf) finds the toolkit's.
    (tmp_path / "cuda.conf").write_text(lib64 + "\n")
    found = LD.resolve("libnvJitLink.so.12", str(tmp_path / "libx.so"), {}, "", LD.LdConf(str(tmp_path / "cuda.conf")))
    assert (found["path"], found["via"]) == (str(system), "ld.so.cache")
    assert LD.resolve("libnope.so.1", str(runpath), dynamic(runpath), lib64, conf)["path"] is None
