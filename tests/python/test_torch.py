"""qcoll.torch: the torch.distributed backend "qcoll" (every op against
gloo, DDP training, device binding) and QuickAllReduce (eager, captured in
a CUDA graph, quantised).  Two ranks, started by qcoll-run; on a machine
with one GPU both ranks share it.  Skipped, with the reason, where torch or
CUDA is missing."""

import re
import socket

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: qcoll.torch tests skipped")

from qcoll_testutil import REPO, run_ranks  # noqa: E402

NEEDS_CUDA = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="CUDA is not available: GPU tests of qcoll.torch skipped")
RANKS = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_case(qcoll_run, case, device, timeout=240):
    # qcoll's own deadline is shorter than the job's, so a stuck collective
    # fails with the library's reason instead of being killed silently.
    proc = run_ranks(qcoll_run, RANKS, "worker_torch.py", case, device, timeout=timeout,
                     launcher_args=["-x", f"MASTER_PORT={free_port()}",
                                    "-x", f"QCOLL_TIMEOUT={timeout // 4}"])
    if proc.returncode == 77:
        reasons = sorted(set(re.findall(r"SKIP: (.*)", proc.stdout)))
        pytest.skip("; ".join(reasons) or "skipped by the worker")
    assert proc.returncode == 0, f"qcoll-run exited {proc.returncode}:\n{proc.stdout}"
    for r in range(RANKS):
        assert re.search(rf"^\[{r}\] rank {r}: {case}\b.* ok", proc.stdout, re.M), \
            f"rank {r} did not finish {case}:\n{proc.stdout}"
    print(proc.stdout)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=NEEDS_CUDA)])
def test_backend_ops_match_gloo(qcoll_run, device):
    run_case(qcoll_run, "ops", device)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=NEEDS_CUDA)])
def test_ddp_trains_identically_on_both_ranks(qcoll_run, device):
    run_case(qcoll_run, "ddp", device)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=NEEDS_CUDA)])
def test_device_binding_and_barrier(qcoll_run, device):
    run_case(qcoll_run, "binding", device)


@NEEDS_CUDA
def test_mixed_backend_form(qcoll_run):
    run_case(qcoll_run, "mixed", "cuda")


@NEEDS_CUDA
def test_quick_all_reduce_eager(qcoll_run):
    run_case(qcoll_run, "quick", "cuda")


@NEEDS_CUDA
def test_quick_all_reduce_cuda_graph_replay(qcoll_run):
    run_case(qcoll_run, "quick_graph", "cuda")


@NEEDS_CUDA
def test_quick_all_reduce_quantised_within_bound(qcoll_run):
    run_case(qcoll_run, "quick_quant", "cuda")


def test_torch_ddp_example(qcoll_run):
    proc = run_ranks(qcoll_run, RANKS, REPO / "examples" / "torch_ddp.py", timeout=300)
    assert proc.returncode == 0, proc.stdout
    for r in range(RANKS):
        assert re.search(rf"^\[{r}\] rank {r} of {RANKS} on .*: final loss [0-9.]+, "
                         rf"parameters identical on all ranks: True$", proc.stdout, re.M), proc.stdout


@NEEDS_CUDA
def test_python_allreduce_example_on_cuda(qcoll_run):
    # The plain binding on torch CUDA tensors: Comm.from_env(device=...) and
    # the current stream of the tensor's device.
    proc = run_ranks(qcoll_run, RANKS, REPO / "examples" / "python_allreduce.py", "--cuda",
                     timeout=120)
    assert proc.returncode == 0, proc.stdout
    want = float(RANKS * (RANKS + 1) // 2)
    for r in range(RANKS):
        assert f"[{r}] rank {r} of {RANKS}: sum = [{want}, {want}, {want}, {want}] " \
               f"(expected {want})" in proc.stdout, proc.stdout


def test_quantization_names():
    import qcoll
    import qcoll.torch as qtorch

    assert qtorch.quantization_from_env("NONE") == qtorch.quantization_from_env("fp") \
        == qcoll.Quant.NONE
    assert qtorch.quantization_from_env("int4") == qcoll.Quant.INT4
    assert qtorch.quantization_from_env("int3") == qcoll.Quant.INT3
    assert qtorch.quantization_from_env("FP8") == qcoll.Quant.FP8
    with pytest.raises(qcoll.InvalidArgumentError, match="INT6"):
        qtorch.quantization_from_env("int5")


def test_backend_is_registered():
    import torch.distributed as dist

    import qcoll.torch  # noqa: F401

    assert dist.Backend.QCOLL == "qcoll"
    assert "QCOLL" in dist.Backend._plugins
