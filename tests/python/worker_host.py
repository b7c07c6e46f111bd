"""One rank of the host-memory binding tests, started by qcoll-run.

    qcoll-run -n N python3 worker_host.py CASE

Every rank builds the inputs of *all* ranks from the same formulas, so it
knows the exact expected result of each collective.  The values are small
integers, exact in every dtype (bfloat16 included), and every reduction's
result is exact too, so results are compared for equality.  The rank exits
non-zero (and qcoll-run reports it) at the first wrong value; at the end it
prints "rank R: CASE ok (K checks)".
"""

import sys

import numpy as np

import qcoll
from qcoll_testutil import DTYPES, empty_array, make_array, values_of

SIGNED = {"int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"}
FLOATS = {"float16", "bfloat16", "float32", "float64"}
# Empty, one element, odd, and larger than the host back end's one-shot
# threshold (so the chunked reduce-scatter + all-gather path runs too).
SIZES = [0, 1, 13, 70001]
OPS = ["sum", "prod", "min", "max", "avg"]


class Checks:
    def __init__(self, comm, case):
        self.comm, self.case, self.count = comm, case, 0

    def equal(self, label, got, want):
        got = values_of(got)
        want = np.asarray(want)
        if got.shape != want.shape or not np.array_equal(got, want):
            bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1)) if got.size == want.size else []
            first = int(bad[0]) if len(bad) else None
            detail = (f"first difference at [{first}]: got {got.reshape(-1)[first]}, "
                      f"want {want.reshape(-1)[first]} ({len(bad)} wrong)"
                      if first is not None else f"shape {got.shape} != {want.shape}")
            raise AssertionError(f"rank {self.comm.rank}: {label}: {detail}")
        self.count += 1

    def raises(self, label, cls, fn, contains=None):
        try:
            fn()
        except cls as e:
            if contains and contains not in str(e):
                raise AssertionError(f"{label}: message {str(e)!r} lacks {contains!r}")
            self.count += 1
            return e
        raise AssertionError(f"{label}: {cls.__name__} was not raised")

    def done(self):
        print(f"rank {self.comm.rank}: {self.case} ok ({self.count} checks)", flush=True)


def idx(count):
    return np.arange(count, dtype=np.int64)


# ---- reductions ------------------------------------------------------------

def reduce_input(op, dtype, r, count):
    i = idx(count)
    if op == "sum":
        return (r + 1) * (i % 7 + 1)
    if op == "prod":
        return 1 + (r + i) % 2
    if op in ("min", "max"):
        return (r * 3 + i) % 5 - (2 if dtype in SIGNED else 0)
    # avg: the sum n(n+1)(i%3+1) is divisible by n and stays inside int8
    # for up to 6 ranks (the library may wrap the integer sum before dividing)
    return 2 * (r + 1) * (i % 3 + 1)


def combine(op, dtype, stack):
    n = stack.shape[0]
    if op == "sum":
        return stack.sum(0)
    if op == "prod":
        return stack.prod(0)
    if op == "min":
        return stack.min(0)
    if op == "max":
        return stack.max(0)
    s = stack.sum(0)
    if dtype in FLOATS:
        return s / n
    return np.sign(s) * (np.abs(s) // n)  # integers truncate toward zero


def expected_reduction(op, dtype, n, count, make=reduce_input):
    stack = np.stack([np.asarray(make(op, dtype, r, count), dtype=np.int64) for r in range(n)])
    return combine(op, dtype, stack)


def case_all_reduce(comm, ck):
    n, r = comm.size, comm.rank
    for dtype in DTYPES:
        for op in OPS:
            for count in SIZES:
                want = expected_reduction(op, dtype, n, count)
                send = make_array(dtype, reduce_input(op, dtype, r, count))
                recv = empty_array(dtype, count)
                out = comm.all_reduce(send, recv, op=op)
                assert out is recv
                ck.equal(f"all_reduce {dtype} {op} n={count}", recv, want)
                ck.equal(f"all_reduce {dtype} {op} n={count} input untouched", send,
                         reduce_input(op, dtype, r, count))
            # in place, and through the extended entry point on the host algorithm
            count = 1000
            want = expected_reduction(op, dtype, n, count)
            buf = make_array(dtype, reduce_input(op, dtype, r, count))
            comm.all_reduce(buf, op=op)
            ck.equal(f"all_reduce in place {dtype} {op}", buf, want)
            buf = make_array(dtype, reduce_input(op, dtype, r, count))
            comm.all_reduce_ex(buf, op=op, algo="host", quant="none")
            ck.equal(f"all_reduce_ex host {dtype} {op}", buf, want)
    # Integer averages truncate toward zero; sums wrap around.
    for dtype in ("int8", "int32", "int64", "uint8", "uint32", "uint64"):
        sign = -1 if dtype in SIGNED else 1
        buf = make_array(dtype, np.full(5, sign * r))
        comm.all_reduce(buf, op="avg")
        s = sign * n * (n - 1) // 2
        ck.equal(f"all_reduce avg truncation {dtype}", buf,
                 np.full(5, int(np.sign(s)) * (abs(s) // n)))
    buf = np.full(8, 200, dtype=np.uint8)
    comm.all_reduce(buf)
    ck.equal("all_reduce uint8 wraps", buf, np.full(8, (200 * n) % 256))
    buf = np.full(8, 100, dtype=np.int8)
    comm.all_reduce(buf)
    ck.equal("all_reduce int8 wraps", buf, np.full(8, (100 * n + 128) % 256 - 128))


def case_reduce(comm, ck):
    n, r = comm.size, comm.rank
    for dtype in DTYPES:
        for op in ("sum", "min", "max"):
            for count in (13, 70001):
                for root in sorted({0, n - 1}):
                    want = expected_reduction(op, dtype, n, count)
                    mine = reduce_input(op, dtype, r, count)
                    send = make_array(dtype, mine)
                    if r == root:
                        recv = empty_array(dtype, count)
                        comm.reduce(send, recv, op=op, root=root)
                        ck.equal(f"reduce {dtype} {op} root {root}", recv, want)
                    else:
                        comm.reduce(send, op=op, root=root)
                    ck.equal(f"reduce {dtype} {op} input untouched", send, mine)
                    # in place on the root
                    buf = make_array(dtype, mine)
                    comm.reduce(buf, op=op, root=root)
                    ck.equal(f"reduce in place {dtype} {op} root {root}", buf,
                             want if r == root else mine)


def scatter_input(op, dtype, r, count_per_rank, n):
    """sendbuf of rank r for reduce_scatter: n blocks; block b, element i."""
    b = np.repeat(np.arange(n), count_per_rank)
    i = np.tile(idx(count_per_rank), n)
    v = (r + 2 * b + i) % 5
    return v - (2 if dtype in SIGNED and op != "sum" else 0)


def case_reduce_scatter(comm, ck):
    n, r = comm.size, comm.rank
    for dtype in DTYPES:
        for op in ("sum", "min", "max"):
            for count in (1, 13, 20001):
                stack = np.stack([scatter_input(op, dtype, q, count, n) for q in range(n)])
                want = combine(op, dtype, stack)[r * count:(r + 1) * count]
                send = make_array(dtype, scatter_input(op, dtype, r, count, n))
                if dtype == "bfloat16":
                    recv = comm.reduce_scatter(send, empty_array(dtype, count), op=op)
                else:
                    recv = comm.reduce_scatter(send, op=op)  # allocates the output
                ck.equal(f"reduce_scatter {dtype} {op} n={count}", recv, want)
    # A (size, ...) input gives an output of the block's shape.
    send = np.stack([np.full((2, 3), q + r, dtype=np.float32) for q in range(n)])
    out = comm.reduce_scatter(send)
    ck.equal("reduce_scatter output shape", np.array(out.shape), np.array([2, 3]))
    ck.equal("reduce_scatter 2-d", out, np.full((2, 3), n * r + n * (n - 1) // 2))


def pattern(r, count, mod=13):
    return (r * 5 + idx(count) * 3) % mod


def case_broadcast(comm, ck):
    n, r = comm.size, comm.rank
    for dtype in DTYPES:
        for count in (1, 13, 70001):
            for root in sorted({0, n - 1}):
                want = pattern(root, count)
                buf = make_array(dtype, want) if r == root else empty_array(dtype, count)
                comm.broadcast(buf, root=root)
                ck.equal(f"broadcast in place {dtype} root {root} n={count}", buf, want)
                recv = empty_array(dtype, count)
                src = make_array(dtype, want) if r == root else None
                comm.broadcast(src, recv, root=root)
                ck.equal(f"broadcast {dtype} root {root} n={count}", recv, want)


def case_all_gather(comm, ck):
    n, r = comm.size, comm.rank
    for dtype in DTYPES:
        for count in (1, 13, 30001):
            want = np.concatenate([pattern(q, count) for q in range(n)])
            send = make_array(dtype, pattern(r, count))
            recv = empty_array(dtype, n * count)
            comm.all_gather(send, recv)
            ck.equal(f"all_gather {dtype} n={count}", recv, want)
            if dtype != "bfloat16":
                out = comm.all_gather(send)  # allocates (size, count)
                ck.equal(f"all_gather allocated {dtype}", out, want.reshape(n, count))
                # in place: sendbuf is this rank's slot of recvbuf
                recv = np.zeros(n * count, dtype=dtype)
                recv[r * count:(r + 1) * count] = pattern(r, count)
                comm.all_gather(recv[r * count:(r + 1) * count], recv)
                ck.equal(f"all_gather in place {dtype}", recv, want)


def case_all_to_all(comm, ck):
    n, r = comm.size, comm.rank
    for dtype in DTYPES:
        for count in (1, 13, 20001):
            i = np.tile(idx(count) % 2, n)
            blocks = np.repeat(np.arange(n), count)
            mine = r * 8 + blocks * 2 + i
            want = blocks * 8 + r * 2 + i  # block s comes from rank s
            send = make_array(dtype, mine)
            recv = empty_array(dtype, n * count)
            comm.all_to_all(send, recv)
            ck.equal(f"all_to_all {dtype} n={count}", recv, want)
            ck.equal(f"all_to_all {dtype} input untouched", send, mine)
            if dtype != "bfloat16":
                buf = make_array(dtype, mine)
                comm.all_to_all(buf)  # in place
                ck.equal(f"all_to_all in place {dtype}", buf, want)


def case_send_recv(comm, ck):
    n, r = comm.size, comm.rank
    nxt, prv = (r + 1) % n, (r - 1) % n
    # Even ranks send first and odd ranks receive first, so a ring of
    # messages larger than the pair buffer (which block until taken) moves.
    for dtype in DTYPES:
        for count in (1, 13, 300001):
            send = make_array(dtype, pattern(r, count, 17))
            recv = empty_array(dtype, count)
            if r % 2 == 0:
                comm.send(send, nxt)
                comm.recv(recv, prv)
            else:
                comm.recv(recv, prv)
                comm.send(send, nxt)
            ck.equal(f"send/recv {dtype} n={count}", recv, pattern(prv, count, 17))
    # Types qcoll cannot reduce still move, as bytes.
    flags = (idx(10) + r) % 3 == 0
    got = comm.all_gather(flags)
    ck.equal("all_gather bool", got, np.stack([(idx(10) + q) % 3 == 0 for q in range(n)]))
    z = (idx(6) * (r + 1)).astype(np.complex64) * 1j
    comm.broadcast(z, root=0)
    ck.equal("broadcast complex64", z.imag, idx(6).astype(np.float64))
    for _ in range(3):
        comm.barrier()
    ck.count += 1


def case_errors(comm, ck):
    n, r = comm.size, comm.rank
    x = np.ones(4, dtype=np.float32)
    # Refused by the library, with its message; the communicator stays usable.
    e = ck.raises("root out of range", qcoll.InvalidArgumentError,
                  lambda: comm.broadcast(x, root=n + 3), contains="qcoll_broadcast")
    assert f"root {n + 3} is out of range" in e.message, e.message
    assert e.status == -1 and e.status_name
    ck.raises("send to self", qcoll.InvalidArgumentError, lambda: comm.send(x, r),
              contains="this rank itself")
    ck.raises("forced GPU algorithm on host memory", qcoll.UnsupportedError,
              lambda: comm.all_reduce_ex(x, algo="oneshot"))
    # Refused by the binding before the library is called.
    ck.raises("complex reduction", qcoll.InvalidArgumentError,
              lambda: comm.all_reduce(np.ones(4, dtype=np.complex64)), contains="complex64")
    ck.raises("non-contiguous", qcoll.InvalidArgumentError,
              lambda: comm.all_reduce(np.ones((4, 4), np.float32)[:, 1]), contains="not contiguous")
    ck.raises("wrong size", qcoll.InvalidArgumentError,
              lambda: comm.all_gather(x, np.zeros(4 * n + 1, np.float32)), contains="recvbuf holds")
    ck.raises("dtype mismatch", qcoll.InvalidArgumentError,
              lambda: comm.all_reduce(x, np.zeros(4, np.float64)), contains="same dtype")
    ck.raises("bad op", qcoll.InvalidArgumentError, lambda: comm.all_reduce(x, op="xor"))
    ro = np.ones(4, np.float32)
    ro.flags.writeable = False
    ck.raises("read-only output", qcoll.InvalidArgumentError, lambda: comm.all_reduce(ro),
              contains="read-only")
    # Still usable after all of that.
    y = np.full(4, r + 1, dtype=np.float32)
    comm.all_reduce(y)
    ck.equal("usable after errors", y, np.full(4, n * (n + 1) // 2))


def case_mismatch(comm, ck):
    # Run with QCOLL_CHECK=1: the ranks compare each call's signature.
    r = comm.rank
    x = np.ones(4 + r, dtype=np.float32)
    e = ck.raises("count mismatch", qcoll.MismatchError, lambda: comm.all_reduce(x),
                  contains="QCOLL_CHECK")
    assert e.status == -11
    y = np.full(4, r + 1, dtype=np.int32)
    comm.all_reduce(y)
    ck.equal("usable after mismatch", y, np.full(4, comm.size * (comm.size + 1) // 2))


def case_peer_abort(comm, ck):
    # Rank 1 aborts and leaves; rank 0's collective must fail, not hang.
    if comm.rank == 1:
        comm.abort()
        ck.count += 1
        return
    ck.raises("peer aborted", (qcoll.PeerFailureError, qcoll.QcollTimeoutError),
              lambda: comm.all_reduce(np.ones(4, np.float32)))


def case_per_call_algo(comm, ck):
    """Every collective with algo='host' (and 'auto') gives the plain call's
    result; a GPU algorithm on host memory is refused with the function's
    name and nothing moves."""
    n, r = comm.size, comm.rank
    nxt, prv = (r + 1) % n, (r - 1) % n
    count = 37
    for algo in ("host", "auto"):
        x = make_array("int32", pattern(r, count))
        comm.all_reduce(x, algo=algo, quant="none")
        ck.equal(f"all_reduce algo={algo}", x, sum(pattern(q, count) for q in range(n)))
        x = make_array("float32", pattern(r, count))
        comm.reduce(x, op="max", root=n - 1, algo=algo)
        want = np.max([pattern(q, count) for q in range(n)], axis=0) if r == n - 1 \
            else pattern(r, count)
        ck.equal(f"reduce algo={algo}", x, want)
        x = make_array("int64", pattern(r, count))
        comm.broadcast(x, root=0, algo=algo)
        ck.equal(f"broadcast algo={algo}", x, pattern(0, count))
        got = comm.all_gather(make_array("uint8", pattern(r, count)), algo=algo)
        ck.equal(f"all_gather algo={algo}", got,
                 np.stack([pattern(q, count) for q in range(n)]))
        send = make_array("float64", np.arange(n * count) % 7 + r)
        got = comm.reduce_scatter(send, algo=algo)
        ck.equal(f"reduce_scatter algo={algo}", got,
                 n * (np.arange(r * count, (r + 1) * count) % 7) + n * (n - 1) // 2)
        blocks = np.repeat(np.arange(n), count)
        got = comm.all_to_all(make_array("int32", r * 8 + blocks), algo=algo)
        ck.equal(f"all_to_all algo={algo}", got, blocks * 8 + r)
        if n > 1:
            send, recv = make_array("int8", pattern(r, count)), empty_array("int8", count)
            if r % 2 == 0:
                comm.send(send, nxt, algo=algo)
                comm.recv(recv, prv, algo=algo)
            else:
                comm.recv(recv, prv, algo=algo)
                comm.send(send, nxt, algo=algo)
            ck.equal(f"send/recv algo={algo}", recv, pattern(prv, count))
    x = np.ones(4, np.float32)
    for fn, call in [("qcoll_reduce", lambda: comm.reduce(x, algo="ipc")),
                     ("qcoll_broadcast", lambda: comm.broadcast(x, algo="nccl")),
                     ("qcoll_all_gather", lambda: comm.all_gather(x, algo="ipc")),
                     ("qcoll_reduce_scatter",
                      lambda: comm.reduce_scatter(np.ones(4 * n, np.float32), algo="nccl")),
                     ("qcoll_all_to_all",
                      lambda: comm.all_to_all(np.ones(4 * n, np.float32), algo="ipc"))]:
        ck.raises(f"{fn} with a GPU algorithm on host memory", qcoll.UnsupportedError, call,
                  contains=f"{fn}: algorithm")
    ck.equal("refused calls left the input alone", x, np.ones(4))
    ck.raises("unknown algo name", qcoll.InvalidArgumentError,
              lambda: comm.broadcast(x, algo="fastest"))
    ck.raises("oneshot is an all-reduce algorithm", qcoll.UnsupportedError,
              lambda: comm.all_gather(x, algo="oneshot"),
              contains="qcoll_all_gather_ex: oneshot is an all_reduce algorithm")


CASES = {
    "all_reduce": case_all_reduce, "reduce": case_reduce,
    "reduce_scatter": case_reduce_scatter, "broadcast": case_broadcast,
    "all_gather": case_all_gather, "all_to_all": case_all_to_all,
    "send_recv": case_send_recv, "errors": case_errors, "mismatch": case_mismatch,
    "peer_abort": case_peer_abort, "per_call_algo": case_per_call_algo,
}


def main():
    names = sys.argv[1:] or [c for c in CASES if c not in ("mismatch", "peer_abort")]
    timeout = 15 if "peer_abort" in names else 60
    comm = qcoll.Comm.from_env(device="cpu", timeout=timeout)
    try:
        for name in names:
            ck = Checks(comm, name)
            CASES[name](comm, ck)
            ck.done()
    except BaseException:
        comm.abort()
        comm.destroy()
        raise
    if "peer_abort" in names:
        comm.abort()  # the peer is gone: do not wait for it in destroy
    comm.destroy()


if __name__ == "__main__":
    main()
