"""One snapshot as the rules read it: each accessor returns facts or says why there are none.

A rule asks for what it needs (``host.gpus()``, ``host.servers()``); an accessor that has
nothing to give raises :class:`Missing` with the reason, and ``diagnose`` records the rule as
not run with that reason. So a rule never guesses from absent facts: a failed nvidia-smi
is not "no GPUs", an older snapshot without library facts is not "no shared files".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from driftwatch.facts.read import Facts, as_dict, normalize_name
from driftwatch.facts.launch import launch_settings
from driftwatch.model import ProbeStatus, Snapshot
from driftwatch.rules.versions import VersionRule
from driftwatch.settings import DEFAULT_FOCUS


class Missing(Exception):
    """The facts a rule needs are not in this snapshot."""


@dataclass(frozen=True)
class RuleOptions:
    focus: frozenset[str] = frozenset(normalize_name(n) for n in DEFAULT_FOCUS)
    version_rules: tuple[VersionRule, ...] = ()  # the config's [[rules]], after the shipped ones

    @classmethod
    def of(cls, focus: list[str], version_rules: Any = ()) -> RuleOptions:
        """From a ``[watch] focus`` list as written and the config's ``rules``."""
        return cls(frozenset(normalize_name(n) for n in focus), tuple(version_rules))


@dataclass(frozen=True)
class Source:
    """Where a setting was found: a server's environment, the login shell's, an NCCL file."""

    where: str  # "server sglang.launch_server", "login shell", "/etc/nccl.conf"
    values: dict[str, str]
    server: Facts | None = None  # the server's facts, when the source is its environment


_ARCH_IN_PATH = re.compile(r"/(x86_64|aarch64)-linux-gnu/")


@dataclass
class Host:
    snapshot: Snapshot
    options: RuleOptions = field(default_factory=RuleOptions)

    def facts(self, probe: str) -> Facts:
        record = self.snapshot.probes.get(probe)
        if record is None:
            raise Missing(f"no {probe} facts in this snapshot")
        if record.status is not ProbeStatus.ok:
            detail = f": {record.error}" if record.error else ""
            raise Missing(f"the {probe} probe {record.status.value}{detail}")
        return record.facts

    def has(self, probe: str) -> bool:
        record = self.snapshot.probes.get(probe)
        return record is not None and record.status is ProbeStatus.ok

    # -- python -------------------------------------------------------------------------
    def interpreters(self) -> dict[str, Facts]:
        """Interpreters whose distributions could be read, by their configured name."""
        found = {
            name: interp for name, interp in as_dict(self.facts("python").get("interpreters")).items()
            if isinstance(interp, dict) and not interp.get("error") and isinstance(interp.get("distributions"), dict)
        }
        if not found:
            raise Missing("no interpreter's distributions could be read")
        return found

    def distributions(self) -> Iterator[tuple[str, str, Facts]]:
        """(interpreter, name, distribution) over every readable interpreter."""
        for interp, facts in self.interpreters().items():
            for name, dist in as_dict(facts.get("distributions")).items():
                if isinstance(dist, dict):
                    yield interp, name, dist

    def focus(self, name: str) -> bool:
        """``name`` is normalized (a distribution key) or one of the focus list."""
        return name in self.options.focus or normalize_name(name) in self.options.focus

    # -- gpu ------------------------------------------------------------------------------
    def gpu(self) -> Facts:
        return self.facts("gpu")

    def gpus(self) -> dict[str, Facts]:
        gpus = {uuid: g for uuid, g in as_dict(self.gpu().get("gpus")).items() if isinstance(g, dict)}
        if not gpus:
            raise Missing("nvidia-smi listed no GPUs")
        return gpus

    # -- the running servers and their settings -------------------------------------------
    def servers(self) -> dict[str, Facts]:
        """Running servers; {} when the processes probe ran and found none."""
        return {k: s for k, s in as_dict(self.facts("processes").get("servers")).items() if isinstance(s, dict)}

    def logs(self) -> list[Facts]:
        """Server logs that could be read."""
        if not self.has("logs"):
            return []
        logs = as_dict(self.snapshot.probes["logs"].facts.get("logs")).values()
        return [log for log in logs if isinstance(log, dict) and not log.get("error")]

    def launch(self) -> dict[str, Any]:
        """The server's launch settings by the names it logs: argv over the log's values."""
        return {key: value for key, (value, _) in launch_settings(self.snapshot).items()}

    def server_kind(self) -> str | None:
        """sglang or vllm: the running server's kind, else the kind of server its log is from."""
        kinds = [s.get("kind") for s in self.servers().values()] if self.has("processes") else []
        kinds += [log.get("kind") for log in self.logs()]
        return next((k for k in kinds if isinstance(k, str)), None)

    def sources(self) -> list[Source]:
        """Every place a setting can come from: each running server's environment (what it
        runs with), the login shell's (what the next start gets) and NCCL's configuration
        files (NCCL applies them to every process that does not set the variable)."""
        found: list[Source] = []
        if self.has("processes"):
            facts = self.snapshot.probes["processes"].facts
            for key, server in sorted(as_dict(facts.get("servers")).items()):
                env = as_dict(server).get("env")
                if isinstance(env, dict):
                    found.append(Source(f"server {key}", _strings(env), as_dict(server)))
            login = facts.get("login_env")
            if isinstance(login, dict):
                found.append(Source("login shell", _strings(login)))
        if self.has("nccl_conf"):
            for path, conf in sorted(as_dict(self.snapshot.probes["nccl_conf"].facts.get("files")).items()):
                settings = as_dict(conf).get("settings")
                if isinstance(settings, dict):
                    found.append(Source(str(path), _strings(settings)))
        if not found:
            raise Missing("no server, login shell or NCCL configuration file environment was read")
        return found

    # -- the machine ----------------------------------------------------------------------
    def arch(self) -> str | None:
        """x86_64 or aarch64, from the driver's kernel module or a multiarch library path."""
        module = as_dict(as_dict(self.snapshot.facts("driver")).get("kernel_module"))
        if isinstance(module.get("arch"), str):
            return str(module["arch"])
        system_nccl = as_dict(as_dict(self.snapshot.facts("cuda").get("nccl")).get("system"))
        for path in system_nccl:
            match = _ARCH_IN_PATH.search(str(path))
            if match:
                return match.group(1)
        return None


def _strings(values: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in values.items() if v is not None}
