"""Settings that cost throughput or break features, wherever they are set."""

from __future__ import annotations

from driftwatch.severity import Severity
from tests.rules.builders import SGLANG, VLLM, found, make_snapshot, nccl_conf, not_run, processes, server

P2P = "nccl-p2p-disabled"


def test_p2p_disabled_in_the_servers_environment() -> None:
    snap = make_snapshot(processes=processes(server(*SGLANG, env={"NCCL_P2P_DISABLE": "1", "NCCL_DEBUG": "INFO"})))
    [finding] = found(P2P, snap)
    assert finding.severity is Severity.high and finding.subjects == (("env", "NCCL_P2P_DISABLE"),)
    assert finding.why.startswith("NCCL_P2P_DISABLE=1 (server sglang.launch_server): NCCL stops using NVLink")
    assert finding.reference.endswith("env.html#nccl-p2p-disable")


def test_p2p_disabled_in_the_login_shell_and_an_nccl_file_names_both() -> None:
    snap = make_snapshot(processes=processes(login={"NCCL_P2P_DISABLE": "1"}), nccl_conf=nccl_conf({"NCCL_P2P_DISABLE": "1"}))
    [finding] = found(P2P, snap)
    assert "(login shell, /etc/nccl.conf)" in finding.why and "unset NCCL_P2P_DISABLE (login shell, /etc/nccl.conf)" in finding.fix


def test_switches_set_to_zero_or_absent_say_nothing() -> None:
    snap = make_snapshot(processes=processes(server(*SGLANG, env={"NCCL_P2P_DISABLE": "0"}), login={}))
    for rule in (P2P, "nccl-ib-disabled", "nccl-shm-disabled", "cuda-launch-blocking"):
        assert found(rule, snap) == []


def test_launch_blocking_and_ib_disabled() -> None:
    env = {"CUDA_LAUNCH_BLOCKING": "1", "NCCL_IB_DISABLE": "1"}
    one_node = make_snapshot(processes=processes(server(*SGLANG, env=env)))
    [blocking] = found("cuda-launch-blocking", one_node)
    assert blocking.severity is Severity.high and "throughput collapses" in blocking.why
    [ib] = found("nccl-ib-disabled", one_node)
    assert ib.severity is Severity.medium and "RoCE" in ib.why
    two_nodes = make_snapshot(processes=processes(server(*SGLANG, "--nnodes", "2", env=env)))
    assert found("nccl-ib-disabled", two_nodes)[0].severity is Severity.high


def test_a_cuda_variable_in_an_nccl_file_is_not_read_by_cuda() -> None:
    snap = make_snapshot(processes=processes(), nccl_conf=nccl_conf({"CUDA_LAUNCH_BLOCKING": "1"}))
    assert found("cuda-launch-blocking", snap) == []


def test_nccl_debug_unset_is_a_note() -> None:
    [note] = found("nccl-debug-unset", make_snapshot(processes=processes(server(*SGLANG, env={}))))
    assert note.severity is Severity.info and "NCCL_DEBUG=VERSION" in note.fix
    assert found("nccl-debug-unset", make_snapshot(processes=processes(server(*SGLANG, env={"NCCL_DEBUG": "WARN"})))) == []
    assert not_run("nccl-debug-unset", make_snapshot(processes=processes())) == "no running server's environment was read"


def test_expandable_segments_with_tensor_parallelism() -> None:
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    [finding] = found("expandable-segments-custom-allreduce", make_snapshot(processes=processes(server(*VLLM, "-tp", "8", env=env))))
    assert finding.severity is Severity.high and "cudaIpcGetMemHandle" in finding.why
    assert finding.reference == "https://github.com/vllm-project/vllm/issues/42609"
    fallback = server(*VLLM, "-tp", "8", "--disable-custom-all-reduce", env=env)
    assert found("expandable-segments-custom-allreduce", make_snapshot(processes=processes(fallback))) == []
    single = server(*VLLM, env=env)
    assert "tensor-parallel size is not known" in not_run("expandable-segments-custom-allreduce",
                                                          make_snapshot(processes=processes(single)))
    assert found("expandable-segments-custom-allreduce",
                 make_snapshot(processes=processes(server(*VLLM, "-tp", "1", env=env)))) == []


def test_visible_devices_below_the_servers_parallelism() -> None:
    snap = make_snapshot(processes=processes(server(*SGLANG, "--tp", "8", env={"CUDA_VISIBLE_DEVICES": "0,1"})))
    [finding] = found("visible-devices-below-parallelism", snap)
    assert finding.severity is Severity.critical
    assert finding.why.startswith("CUDA_VISIBLE_DEVICES=0,1 (server sglang.launch_server) exposes 2 GPUs, but the server's parallelism needs 8")
    enough = make_snapshot(processes=processes(server(*SGLANG, "--tp", "2", env={"CUDA_VISIBLE_DEVICES": "0,1"})))
    assert found("visible-devices-below-parallelism", enough) == []
    no_tp = make_snapshot(processes=processes(server(*SGLANG, env={"CUDA_VISIBLE_DEVICES": "0"})))
    assert "parallel sizes are not known" in not_run("visible-devices-below-parallelism", no_tp)


def test_without_any_environment_the_rules_say_nothing() -> None:
    assert not_run(P2P, make_snapshot()) == "no server, login shell or NCCL configuration file environment was read"
