"""qcoll.torch: the torch.distributed backend "qcoll" (every op against
gloo, DDP training, device binding) and QuickAllReduce (eager, captured in
a CUDA graph, quantised).  Two ranks, started by qcoll-run; on a machine
with one GPU both ranks share it.  Skipped, with the reason, where torch or
CUDA is missing."""

import re
import socket
import sys

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


# The two implementations every case runs on: the compiled extension (built
# here once, before any rank starts, so ranks only load it) and the Python
# fallback, which is what a machine that cannot build the extension gets.
IMPLS = {
    "compiled": {"QCOLL_TORCH_EXT": "require", "QCOLL_TORCH_BACKEND": "compiled"},
    "python": {"QCOLL_TORCH_EXT": "off", "QCOLL_TORCH_BACKEND": "python"},
}


@pytest.fixture(scope="session")
def compiled_extension():
    """Build (or load from the cache) the compiled extension; a failure
    fails the compiled cases with the compiler's reason."""
    import os

    from qcoll import _torch_ext

    old = os.environ.get(_torch_ext.MODE_ENV)
    os.environ[_torch_ext.MODE_ENV] = "require"
    try:
        return _torch_ext.load()
    finally:
        if old is None:
            del os.environ[_torch_ext.MODE_ENV]
        else:
            os.environ[_torch_ext.MODE_ENV] = old


@pytest.fixture(params=list(IMPLS))
def impl(request):
    if request.param == "compiled":
        request.getfixturevalue("compiled_extension")
    return request.param


def run_case(qcoll_run, case, device, impl="compiled", timeout=240):
    # qcoll's own deadline is shorter than the job's, so a stuck collective
    # fails with the library's reason instead of being killed silently.
    env = dict(IMPLS[impl], QCOLL_TEST_IMPL=impl)
    proc = run_ranks(qcoll_run, RANKS, "worker_torch.py", case, device, timeout=timeout,
                     env=env,
                     launcher_args=["-x", f"MASTER_PORT={free_port()}",
                                    "-x", f"QCOLL_TIMEOUT={timeout // 4}"])
    if proc.returncode == 77:
        reasons = sorted(set(re.findall(r"SKIP: (.*)", proc.stdout)))
        pytest.skip("; ".join(reasons) or "skipped by the worker")
    if proc.returncode != 0:
        # Also at once, past pytest's capture: a session cut off by a time
        # limit never reaches pytest's summary, where the failure is shown.
        sys.__stderr__.write(f"--- {case} ({device}, {impl}): qcoll-run exited "
                             f"{proc.returncode}\n{proc.stdout}\n")
        sys.__stderr__.flush()
    assert proc.returncode == 0, f"qcoll-run exited {proc.returncode}:\n{proc.stdout}"
    for r in range(RANKS):
        assert re.search(rf"^\[{r}\] rank {r}: {case}\b.* ok", proc.stdout, re.M), \
            f"rank {r} did not finish {case}:\n{proc.stdout}"
    print(proc.stdout)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=NEEDS_CUDA)])
def test_backend_ops_match_gloo(qcoll_run, device, impl):
    run_case(qcoll_run, "ops", device, impl)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=NEEDS_CUDA)])
def test_ddp_trains_identically_on_both_ranks(qcoll_run, device, impl):
    run_case(qcoll_run, "ddp", device, impl)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=NEEDS_CUDA)])
def test_device_binding_and_barrier(qcoll_run, device, impl):
    run_case(qcoll_run, "binding", device, impl)


@NEEDS_CUDA
def test_mixed_backend_form(qcoll_run, impl):
    run_case(qcoll_run, "mixed", "cuda", impl)


@NEEDS_CUDA
def test_quick_all_reduce_eager(qcoll_run, impl):
    run_case(qcoll_run, "quick", "cuda", impl)


@NEEDS_CUDA
def test_quick_all_reduce_cuda_graph_replay(qcoll_run, impl):
    run_case(qcoll_run, "quick_graph", "cuda", impl)


@NEEDS_CUDA
def test_quick_all_reduce_quantised_within_bound(qcoll_run, impl):
    run_case(qcoll_run, "quick_quant", "cuda", impl)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=NEEDS_CUDA)])
def test_ops_inside_torch_compile(qcoll_run, device, impl):
    run_case(qcoll_run, "compile", device, impl, timeout=400)


def test_failed_build_falls_back_with_a_warning(tmp_path):
    """A header the compiler rejects: importing qcoll.torch warns with the
    compiler's message and serves "qcoll" from Python; with
    QCOLL_TORCH_EXT=require the import fails instead."""
    import subprocess

    from qcoll_testutil import rank_env

    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "qcoll.h").write_text("#error this qcoll.h is broken on purpose\n")
    env = rank_env({"QCOLL_INCLUDE": str(tmp_path / "include"),
                    "QCOLL_TORCH_EXT_DIR": str(tmp_path / "cache"), "QCOLL_TORCH_EXT": "auto"})
    probe = ("import qcoll.torch as q, torch.distributed as dist; "
             "s = q.extension_status(); "
             "print('loaded', s.loaded, 'creator', dist.Backend._plugins['QCOLL'].creator_fn)")
    proc = subprocess.run([sys.executable, "-c", probe], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout
    assert "loaded False" in proc.stdout, proc.stdout
    assert "could not be built" in proc.stdout and "broken on purpose" in proc.stdout, proc.stdout
    assert "falls back to its Python backend" in proc.stdout, proc.stdout
    env["QCOLL_TORCH_EXT"] = "require"
    proc = subprocess.run([sys.executable, "-c", probe], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600)
    assert proc.returncode != 0 and "ExtensionBuildError" in proc.stdout, proc.stdout


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
