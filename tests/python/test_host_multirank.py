"""The binding on host memory with several ranks: qcoll-run starts
worker_host.py, which checks every collective x dtype (x op) against exact
expected values; these tests check that every rank finished every case."""

import re
import sys

import pytest

from qcoll_testutil import REPO, run_ranks

ALL_CASES = ["all_reduce", "reduce", "reduce_scatter", "broadcast", "all_gather",
             "all_to_all", "send_recv", "errors", "per_call_algo"]


def assert_ranks_ok(proc, n, cases):
    out = proc.stdout
    assert proc.returncode == 0, f"qcoll-run exited {proc.returncode}:\n{out}"
    for case in cases:
        for r in range(n):
            assert re.search(rf"^\[{r}\] rank {r}: {case} ok \(\d+ checks\)$", out, re.M), \
                f"rank {r} did not finish {case}:\n{out}"


@pytest.mark.parametrize("n", [2, 3, 4])
def test_every_collective_every_dtype(qcoll_run, n):
    proc = run_ranks(qcoll_run, n, "worker_host.py", *ALL_CASES, timeout=120)
    assert_ranks_ok(proc, n, ALL_CASES)


def test_single_rank_job(qcoll_run):
    proc = run_ranks(qcoll_run, 1, "worker_host.py", "all_reduce", "all_gather", timeout=60)
    assert_ranks_ok(proc, 1, ["all_reduce", "all_gather"])


def test_mismatched_calls_raise_mismatch_error(qcoll_run):
    proc = run_ranks(qcoll_run, 2, "worker_host.py", "mismatch", timeout=60,
                     launcher_args=["-x", "QCOLL_CHECK=1"])
    assert_ranks_ok(proc, 2, ["mismatch"])


def test_peer_abort_fails_the_other_rank(qcoll_run):
    proc = run_ranks(qcoll_run, 2, "worker_host.py", "peer_abort", timeout=60)
    assert_ranks_ok(proc, 2, ["peer_abort"])


def test_python_allreduce_example(qcoll_run):
    proc = run_ranks(qcoll_run, 3, REPO / "examples" / "python_allreduce.py", timeout=60)
    assert proc.returncode == 0, proc.stdout
    for r in range(3):
        assert re.search(rf"^\[{r}\] rank {r} of 3: sum = \[6\.0, 6\.0, 6\.0, 6\.0\] "
                         rf"\(expected 6\.0\)$", proc.stdout, re.M), proc.stdout


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
