"""One rank of the qcoll.torch tests, started by qcoll-run (which sets
QCOLL_RANK / QCOLL_WORLD_SIZE / QCOLL_LOCAL_RANK; the test passes
MASTER_PORT for torch.distributed's own rendezvous).

    qcoll-run -n 2 -x MASTER_PORT=P python3 worker_torch.py CASE DEVICE

CASE: ops (every backend op against gloo), ddp, binding, mixed, quick,
quick_graph, quick_quant, compile.  QCOLL_TEST_IMPL (compiled, python)
names the implementation the groups must be served by.  DEVICE: cpu or cuda (rank r uses cuda:(local rank % device
count), so two ranks may share one GPU).  Prints "rank R: CASE ok" per rank;
exits 77 with "SKIP: reason" when the case cannot run here.
"""

import copy
import datetime
import faulthandler
import os
import sys
import time

import torch
import torch.distributed as dist

import qcoll
import qcoll.torch as qtorch

RANK = int(os.environ["QCOLL_RANK"])
WORLD = int(os.environ["QCOLL_WORLD_SIZE"])
LOCAL_RANK = int(os.environ.get("QCOLL_LOCAL_RANK", RANK))
SKIP = 77
faulthandler.enable()  # a crash in native code prints the Python stack that reached it


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(SKIP)


def pick_device(kind):
    if kind == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        skip("CUDA is not available")
    return torch.device("cuda", LOCAL_RANK % torch.cuda.device_count())


def init(backend, device_id=None):
    dist.init_process_group(backend=backend, init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}",
                            rank=RANK, world_size=WORLD, device_id=device_id,
                            timeout=datetime.timedelta(seconds=120))


def check_implementation(group, device):
    """The group is served by the implementation the test asked for
    (QCOLL_TEST_IMPL: compiled or python)."""
    want = {"compiled": "QcollBackend", "python": "ProcessGroupQcoll"}[
        os.environ.get("QCOLL_TEST_IMPL", "compiled")]
    got = type(qtorch.backend_of(group, device)).__name__
    assert got == want, f"rank {RANK}: the group is served by {got}, not {want}"


def check_equal(label, got, want):
    got, want = got.cpu(), want.cpu()
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        raise AssertionError(f"rank {RANK}: {label}: got {got.flatten()[:8].tolist()} "
                             f"({got.dtype}, {tuple(got.shape)}), want "
                             f"{want.flatten()[:8].tolist()} ({want.dtype}, {tuple(want.shape)})")


def ints(shape, seed, dtype, device, low=-4, high=5):
    """Small integers (exact in every dtype, and so are their sums),
    different on every rank through the seed."""
    g = torch.Generator().manual_seed(seed * 100 + RANK)
    t = torch.randint(low, high, shape, generator=g)
    if not dtype.is_floating_point and not dtype.is_signed:
        t = t.abs()
    return t.to(dtype).to(device)


# ---- every op against gloo -----------------------------------------------------

def wait_from_another_stream(device, gloo):
    """CUDA only: an async all_reduce's wait() called under another stream
    orders that stream after the op, both for an op small enough to run on
    the caller's stream (its event is recorded only then) and for one that
    runs on the internal stream; is_completed() turns true.  Returns the
    number of checks made."""
    if device.type != "cuda":
        return 0
    side = torch.cuda.Stream(device)
    checks = 0
    for n in (8, (1 << 20) // 4 + 4):  # 32 B on the caller's stream, 1 MiB + 16 B not
        x = ints((n,), 60 + checks, torch.float32, device)
        a = x.clone()
        work = dist.all_reduce(a, async_op=True)
        with torch.cuda.stream(side):
            work.wait()
            after = a * 1  # on the side stream, ordered after the op by wait()
        side.synchronize()
        deadline = time.monotonic() + 30
        while not work.is_completed():
            assert time.monotonic() < deadline, f"is_completed() still False after 30 s (n={n})"
        b = x.cpu().clone()
        dist.all_reduce(b, group=gloo)
        check_equal(f"all_reduce of {n} waited from another stream", after, b)
        checks += 1
    return checks


def case_ops(device):
    init("qcoll")
    gloo = dist.new_group(backend="gloo")
    world = dist.group.WORLD
    check_implementation(world, device)
    assert dist.get_backend() == "qcoll"
    dtypes = [torch.float32, torch.float64, torch.int32, torch.int64, torch.float16,
              torch.bfloat16, torch.uint8, torch.int8]
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT]
    checks = 0

    def both(fn, *tensors):
        """Run fn on device tensors with the qcoll group and on CPU copies
        with gloo; return both sets of tensors."""
        mine = [t.clone() for t in tensors]
        ref = [t.cpu().clone() for t in tensors]
        fn(mine, world)
        fn(ref, gloo)
        return mine, ref

    for seed, dtype in enumerate(dtypes):
        for op in ops:
            if op == dist.ReduceOp.PRODUCT:
                x = ints((37,), seed, dtype, device, low=1, high=3)
            else:
                x = ints((37,), seed, dtype, device)
            (a,), (b,) = both(lambda ts, g: dist.all_reduce(ts[0], op=op, group=g), x)
            check_equal(f"all_reduce {dtype} {op}", a, b)
            (a,), (b,) = both(lambda ts, g: dist.reduce(ts[0], dst=WORLD - 1, op=op, group=g), x)
            # Only the destination's result is defined (gloo may use the
            # others' tensors as scratch; qcoll leaves them alone).
            check_equal(f"reduce {dtype} {op}", a, b if RANK == WORLD - 1 else x)
            checks += 2
        # AVG: gloo has none; the exact value is the sum divided once.
        x = ints((16,), seed, dtype, device) * 2 * WORLD if dtype.is_floating_point else None
        if x is not None:
            a = x.clone()
            dist.all_reduce(a, op=dist.ReduceOp.AVG)
            s = x.cpu().clone()
            dist.all_reduce(s, group=gloo)
            check_equal(f"all_reduce avg {dtype}", a, s / WORLD)
            checks += 1

        x = ints((5, 3), seed, dtype, device)
        for root in range(WORLD):
            (a,), (b,) = both(lambda ts, g: dist.broadcast(ts[0], src=root, group=g), x)
            check_equal(f"broadcast {dtype} root {root}", a, b)
            checks += 1

        outs_q = [torch.zeros_like(x) for _ in range(WORLD)]
        outs_g = [torch.zeros_like(x.cpu()) for _ in range(WORLD)]
        dist.all_gather(outs_q, x)
        dist.all_gather(outs_g, x.cpu(), group=gloo)
        for q, g in zip(outs_q, outs_g):
            check_equal(f"all_gather {dtype}", q, g)
        big_q = torch.zeros((WORLD * 5, 3), dtype=dtype, device=device)
        dist.all_gather_into_tensor(big_q, x)
        check_equal(f"all_gather_into_tensor {dtype}", big_q, torch.cat(outs_g))
        checks += 2

        ins = [ints((4, 2), seed + 10 * r, dtype, device) for r in range(WORLD)]
        out_q = torch.zeros((4, 2), dtype=dtype, device=device)
        dist.reduce_scatter(out_q, ins, op=dist.ReduceOp.SUM)
        # gloo has no reduce_scatter: the reference is the all-reduce of the
        # concatenated input, block RANK.
        full = torch.cat([i.cpu() for i in ins])
        dist.all_reduce(full, group=gloo)
        check_equal(f"reduce_scatter {dtype}", out_q, full[RANK * 4:(RANK + 1) * 4])
        out_q = torch.zeros((4, 2), dtype=dtype, device=device)
        dist.reduce_scatter_tensor(out_q, torch.cat(ins), op=dist.ReduceOp.SUM)
        check_equal(f"reduce_scatter_tensor {dtype}", out_q, full[RANK * 4:(RANK + 1) * 4])
        checks += 2

        ins = [ints((3,), seed + 20 * r, dtype, device) for r in range(WORLD)]
        flat_in = torch.cat(ins)
        out_q = torch.zeros(3 * WORLD, dtype=dtype, device=device)
        out_g = torch.zeros(3 * WORLD, dtype=dtype)
        dist.all_to_all_single(out_q, flat_in)
        dist.all_to_all_single(out_g, flat_in.cpu(), group=gloo)
        check_equal(f"all_to_all_single {dtype}", out_q, out_g)
        # gloo has no list all_to_all: its all_to_all_single result, cut in
        # blocks, is the reference.
        outs_q = [torch.zeros(3, dtype=dtype, device=device) for _ in range(WORLD)]
        dist.all_to_all(outs_q, ins)
        for q, g in zip(outs_q, out_g.chunk(WORLD)):
            check_equal(f"all_to_all {dtype}", q, g)
        checks += 2

    # Uneven all-to-all: rank r sends (r + q + 1) rows of 2 to rank q.
    in_splits = [RANK + q + 1 for q in range(WORLD)]
    out_splits = [q + RANK + 1 for q in range(WORLD)]
    x = ints((sum(in_splits), 2), 99, torch.float32, device)
    out_q = torch.zeros((sum(out_splits), 2), device=device)
    out_g = torch.zeros((sum(out_splits), 2))
    dist.all_to_all_single(out_q, x, out_splits, in_splits)
    dist.all_to_all_single(out_g, x.cpu(), out_splits, in_splits, group=gloo)
    check_equal("all_to_all_single uneven", out_q, out_g)
    outs_q = [torch.zeros((s, 2), device=device) for s in out_splits]
    dist.all_to_all(outs_q, list(x.split(in_splits)))
    for q, g in zip(outs_q, out_g.split(out_splits)):
        check_equal("all_to_all uneven", q, g)
    checks += 2

    # gather / scatter to and from the last rank
    x = ints((6,), 7, torch.int64, device)
    root = WORLD - 1
    gq = [torch.zeros(6, dtype=torch.int64, device=device) for _ in range(WORLD)] if RANK == root else None
    gg = [torch.zeros(6, dtype=torch.int64) for _ in range(WORLD)] if RANK == root else None
    dist.gather(x, gq, dst=root)
    dist.gather(x.cpu(), gg, dst=root, group=gloo)
    if RANK == root:
        for q, g in zip(gq, gg):
            check_equal("gather", q, g)
    sq = [ints((4,), 30 + r, torch.float32, device) for r in range(WORLD)] if RANK == root else None
    out_q, out_g = torch.zeros(4, device=device), torch.zeros(4)
    dist.scatter(out_q, sq, src=root)
    dist.scatter(out_g, [s.cpu() for s in sq] if sq else None, src=root, group=gloo)
    check_equal("scatter", out_q, out_g)
    checks += 2

    # send / recv around a ring (even ranks send first)
    x = ints((10,), 40, torch.float32, device)
    got = torch.zeros(10, device=device)
    nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    if RANK % 2 == 0:
        dist.send(x, nxt)
        dist.recv(got, prv)
    else:
        dist.recv(got, prv)
        dist.send(x, nxt)
    g = torch.Generator().manual_seed(40 * 100 + prv)
    want = torch.randint(-4, 5, (10,), generator=g).float()
    check_equal("send/recv", got, want)
    checks += 1

    # async work objects, futures, barrier, object collectives
    x = ints((8,), 50, torch.float32, device)
    a = x.clone()
    work = dist.all_reduce(a, async_op=True)
    fut = work.get_future()
    work.wait()
    b = x.cpu().clone()
    dist.all_reduce(b, group=gloo)
    check_equal("async all_reduce", a, b)
    check_equal("future value", fut.wait()[0], b)
    checks += wait_from_another_stream(device, gloo)
    dist.barrier()
    objs = [{"rank": RANK}] if RANK == 0 else [None]
    dist.broadcast_object_list(objs, src=0)
    assert objs[0] == {"rank": 0}, objs
    gathered = [None] * WORLD
    dist.all_gather_object(gathered, ("r", RANK))
    assert gathered == [("r", r) for r in range(WORLD)], gathered
    checks += 4

    # a non-contiguous tensor is refused with a clear error
    try:
        dist.all_reduce(torch.zeros((4, 4), device=device)[:, 0])
    except ValueError as e:  # qcoll.InvalidArgumentError from Python, ValueError from C++
        assert "contiguous" in str(e), str(e)
        checks += 1
    else:
        raise AssertionError("non-contiguous all_reduce was not refused")

    dist.destroy_process_group()
    print(f"rank {RANK}: ops {device.type} ok ({checks} checks)", flush=True)


# ---- DDP -------------------------------------------------------------------------

class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                       torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                       torch.nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


def flat_grads(module):
    return torch.cat([p.grad.reshape(-1) for p in module.parameters()])


def flat_params(module):
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()])


def same_on_all_ranks(label, t, gloo):
    t = t.detach().cpu().contiguous()
    gathered = [torch.empty_like(t) for _ in range(WORLD)]
    dist.all_gather(gathered, t, group=gloo)
    for r, other in enumerate(gathered):
        if not torch.equal(other, t):
            raise AssertionError(f"rank {RANK}: {label} differs from rank {r}: max diff "
                                 f"{(other - t).abs().max().item()}")


def case_ddp(device):
    from torch.nn.parallel import DistributedDataParallel as DDP

    init("qcoll", device_id=device if device.type == "cuda" else None)
    check_implementation(dist.group.WORLD, device)
    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(1234 + RANK)  # different initial weights: DDP must broadcast rank 0's
    model = MLP().to(device)
    local = copy.deepcopy(model)  # same module without DDP, for the expected gradients
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    local.load_state_dict(ddp.module.state_dict())
    same_on_all_ranks("initial parameters", flat_params(ddp.module), gloo)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    local_opt = torch.optim.SGD(local.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(99 + RANK)  # each rank its own data
    first = last = None
    for step in range(20):
        x = torch.randn(8, 16, generator=g).to(device)
        y = torch.randn(8, 4, generator=g).to(device)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        # Expected gradient: the mean of every rank's local gradient, computed
        # as DDP does (each divided by the world size, then summed).
        local_opt.zero_grad()
        torch.nn.functional.mse_loss(local(x), y).backward()
        mine = (flat_grads(local) / WORLD).cpu()
        parts = [torch.empty_like(mine) for _ in range(WORLD)]
        dist.all_gather(parts, mine, group=gloo)
        want = torch.stack(parts).sum(0)
        got = flat_grads(ddp.module).cpu()
        if device.type == "cpu":
            check_equal(f"step {step} gradient", got, want)
        elif not torch.allclose(got, want, rtol=1e-5, atol=1e-7):
            raise AssertionError(f"step {step}: gradient off by {(got - want).abs().max().item()}")
        same_on_all_ranks(f"step {step} gradients", got, gloo)
        opt.step()
        with torch.no_grad():  # keep the reference model on the same weights
            for p, q in zip(local.parameters(), ddp.module.parameters()):
                p.copy_(q)
        same_on_all_ranks(f"step {step} parameters", flat_params(ddp.module), gloo)
        first = loss.item() if first is None else first
        last = loss.item()
    dist.destroy_process_group()
    print(f"rank {RANK}: ddp {device.type} ok (loss {first:.4f} -> {last:.4f})", flush=True)


# ---- device binding ---------------------------------------------------------------

def case_binding(device):
    init("qcoll")  # no device_id
    pg = qtorch.backend_of(dist.group.WORLD, device)
    check_implementation(dist.group.WORLD, device)
    assert pg.bound_device_name == "cpu", pg.bound_device_name  # nothing seen yet
    if device.type == "cpu":
        x = torch.ones(3)
        dist.all_reduce(x)
        dist.barrier()
        assert pg.bound_device_name == "cpu" and pg.comm_devices() == [-1], pg.comm_devices()
        dist.destroy_process_group()
        print(f"rank {RANK}: binding cpu ok", flush=True)
        return
    # Without device_id the group binds to the device of the first tensor it sees.
    y = torch.ones(3, device=device)
    dist.all_reduce(y)
    assert pg.bound_device_name == str(device), pg.bound_device_name
    dist.barrier()  # on that device's communicator: no other one is created
    assert pg.comm_devices() == [device.index], pg.comm_devices()
    x = torch.ones(3)
    dist.all_reduce(x)  # CPU tensors get their own host communicator
    assert pg.comm_devices() == [device.index, -1], pg.comm_devices()
    assert pg.bound_device_name == str(device)
    check_equal("cpu all_reduce", x, torch.full((3,), float(WORLD)))
    # With device_id the group is bound before any op.
    sub_group = dist.new_group(backend="qcoll", device_id=device)
    sub = qtorch.backend_of(sub_group, device)
    assert sub.bound_device_name == str(device), sub.bound_device_name
    dist.barrier(group=sub_group)
    assert sub.comm_devices() == [device.index], sub.comm_devices()
    # The op's stream belongs to the tensor's device and the caller's current
    # stream waits for it: run on a side stream and read the result there.
    s = torch.cuda.Stream(device=device)
    with torch.cuda.stream(s):
        z = torch.full((1024,), float(RANK + 1), device=device)
        dist.all_reduce(z, group=sub_group)
        total = z.sum().item()
    check_equal("all_reduce on a side stream", torch.tensor(total),
                torch.tensor(1024.0 * WORLD * (WORLD + 1) / 2))
    dist.destroy_process_group()
    print(f"rank {RANK}: binding cuda ok", flush=True)


def case_mixed(device):
    """The mixed form "cpu:gloo,cuda:qcoll": CPU and CUDA tensors both reduced
    correctly, and a barrier, on one default group."""
    if device.type != "cuda":
        skip("the mixed backend form names qcoll for CUDA tensors")
    init("cpu:gloo,cuda:qcoll", device_id=device)
    check_implementation(dist.group.WORLD, device)
    name = str(dist.get_backend())
    assert "qcoll" in name, f"backend of the default group: {name}"
    total = WORLD * (WORLD + 1) / 2
    x = torch.full((5,), float(RANK + 1))
    dist.all_reduce(x)
    check_equal("cpu all_reduce, mixed form", x, torch.full((5,), total))
    y = torch.full((1 << 16,), float(RANK + 1), device=device, dtype=torch.bfloat16)
    dist.all_reduce(y)
    check_equal("cuda all_reduce, mixed form", y, torch.full_like(y, total))
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {RANK}: mixed ok", flush=True)


# ---- QuickAllReduce -------------------------------------------------------------------

def quick_setup(device):
    init("gloo")
    return qtorch.QuickAllReduce(dist.group.WORLD, device, quantization="NONE")


def rank_values(n, dtype, device, seed, rank=RANK):
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    return torch.randint(-8, 9, (n,), generator=g).to(dtype).to(device)


def expected_sum(n, dtype, device, seed):
    total = sum(rank_values(n, torch.float64, "cpu", seed, r) for r in range(WORLD))
    return total.to(dtype).to(device)


def case_quick(device):
    if device.type != "cuda":
        skip("QuickAllReduce needs CUDA")
    qr = quick_setup(device)
    checks = 0
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        for n in (8, 1024, 64 * 1024 + 8, 4 * 1024 * 1024):
            inp = rank_values(n, dtype, device, n)
            assert qr.should_quick_allreduce(inp), (dtype, n)
            out = qr.quick_all_reduce(inp)
            check_equal(f"quick {dtype} n={n}", out, expected_sum(n, dtype, device, n))
            prealloc = torch.empty_like(inp)
            assert qr.quick_all_reduce(inp, prealloc) is prealloc
            check_equal(f"quick out= {dtype} n={n}", prealloc, expected_sum(n, dtype, device, n))
            checks += 2
    x = torch.zeros(64, device=device)
    assert not qr.should_quick_allreduce(x.to(torch.int32))
    assert not qr.should_quick_allreduce(torch.zeros(64))  # CPU
    assert not qr.should_quick_allreduce(torch.zeros((8, 8), device=device)[:, 0])
    assert not qr.should_quick_allreduce(torch.zeros(3, device=device))  # 12 bytes
    small = qtorch.QuickAllReduce(dist.group.WORLD, device, max_size_bytes=1024)
    assert not small.should_quick_allreduce(torch.zeros(512, device=device))
    assert small.should_quick_allreduce(torch.zeros(256, device=device))
    small.close()
    qr.close()
    assert not qr.should_quick_allreduce(x)
    dist.destroy_process_group()
    print(f"rank {RANK}: quick ok ({checks} checks)", flush=True)


def case_quick_graph(device):
    if device.type != "cuda":
        skip("CUDA graphs need CUDA")
    # Bound the way engines bind: set_device alone (torch.cuda.graph then
    # captures on this device's streams).
    torch.cuda.set_device(device)
    qr = quick_setup(device)
    replays = 12
    if torch.cuda.device_count() > 1:
        refuses_capture_on_another_device(qr, device)
    for dtype in (torch.bfloat16, torch.float16):
        for n in (4096, 2 * 1024 * 1024):
            static_in = torch.zeros(n, dtype=dtype, device=device)
            qr.quick_all_reduce(static_in)  # warm up outside capture
            torch.cuda.synchronize(device)
            print(f"rank {RANK}: {dtype} n={n}: warmed up", flush=True)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_out = qr.quick_all_reduce(static_in)
            print(f"rank {RANK}: {dtype} n={n}: captured", flush=True)
            for i in range(replays):
                static_in.copy_(rank_values(n, dtype, device, 7 + i))
                graph.replay()
                check_equal(f"graph replay {i} {dtype} n={n}", static_out,
                            expected_sum(n, dtype, device, 7 + i))
            # Eager calls between replays still work, and so do later replays.
            check_equal("eager after graph", qr.quick_all_reduce(static_in),
                        expected_sum(n, dtype, device, 7 + replays - 1))
            graph.replay()
            check_equal("replay after eager", static_out,
                        expected_sum(n, dtype, device, 7 + replays - 1))
    qr.close()
    dist.destroy_process_group()
    print(f"rank {RANK}: quick_graph ok ({replays} replays per shape)", flush=True)


def refuses_capture_on_another_device(qr, device):
    """A capture on another current device would leave the all-reduce out
    of the graph: QuickAllReduce refuses it before enqueuing anything, on
    every rank, and works on afterwards."""
    other = (device.index + 1) % torch.cuda.device_count()
    inp = torch.ones(1024, device=device)
    graph = torch.cuda.CUDAGraph()
    try:
        # An explicit stream: torch.cuda.graph's shared default capture
        # stream would otherwise be made on `other` and kept for later captures.
        with torch.cuda.graph(graph, stream=torch.cuda.Stream(other)):
            qr.quick_all_reduce(inp)
    except RuntimeError as e:
        assert f"being captured on cuda:{other}" in str(e), str(e)
    else:
        raise AssertionError(f"rank {RANK}: a capture on cuda:{other} was not refused")
    del graph
    check_equal("all-reduce after the refused capture", qr.quick_all_reduce(inp),
                torch.full_like(inp, float(WORLD)))
    print(f"rank {RANK}: capture on cuda:{other} refused", flush=True)


def case_compile(device):
    """The qcoll ops inside torch.compile'd code (fullgraph: no graph break),
    with fresh inputs on every call.  CPU: the ops on a host communicator,
    traced with the aot_eager backend (fake tensors through the meta
    kernel, functionalisation of the out= form).  CUDA: QuickAllReduce in
    code compiled by inductor, and under mode="reduce-overhead", which
    replays the compiled code as a CUDA graph."""
    init("gloo")
    quant = int(qcoll.Quant.NONE)
    if device.type == "cpu":
        obj = [qcoll.get_unique_id() if RANK == 0 else None]
        dist.broadcast_object_list(obj, src=0)
        comm = qcoll.Comm.init_rank(WORLD, obj[0], RANK, device="cpu")
        qtorch._ops.eager_call(comm)  # the Python ops find the communicator by handle
        handle = comm.handle

        def reduce_twice_plus_one(x):
            return torch.ops.qcoll.quick_all_reduce(x * 2, handle, quant) + 1

        def reduce_into(x, out):
            torch.ops.qcoll.quick_all_reduce_out(x, out, handle, quant)
            return out * 3

        compiled = [torch.compile(reduce_twice_plus_one, backend="aot_eager", fullgraph=True)]
        compiled_out = torch.compile(reduce_into, backend="aot_eager", fullgraph=True)
    else:
        torch.cuda.set_device(device)
        qr = qtorch.QuickAllReduce(dist.group.WORLD, device, quantization="NONE")
        comm = qr.comm

        def reduce_twice_plus_one(x):
            return qr.quick_all_reduce(x * 2) + 1

        def reduce_into(x, out):
            qr.quick_all_reduce(x, out)
            return out * 3

        compiled = [torch.compile(reduce_twice_plus_one, fullgraph=True),
                    torch.compile(reduce_twice_plus_one, fullgraph=True, mode="reduce-overhead")]
        compiled_out = torch.compile(reduce_into, fullgraph=True)
    calls = 0
    for dtype in (torch.float32, torch.bfloat16):
        for fn in compiled:
            for i in range(5):
                n = 4096
                x = rank_values(n, dtype, device, 60 + i)
                want = expected_sum(n, torch.float64, "cpu", 60 + i) * 2 + 1
                check_equal(f"compiled {dtype} call {i}", fn(x), want.to(dtype).to(device))
                calls += 1
        x = rank_values(1000, dtype, device, 70)
        out = torch.empty_like(x)
        got = compiled_out(x, out)
        want = expected_sum(1000, torch.float64, "cpu", 70)
        check_equal(f"compiled out= {dtype}", out, want.to(dtype).to(device))
        check_equal(f"compiled out= result {dtype}", got, (want * 3).to(dtype).to(device))
        calls += 1
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        qr.close()
    else:
        comm.destroy()
    dist.destroy_process_group()
    impl = "compiled" if qtorch.extension_status().loaded else "python"
    print(f"rank {RANK}: compile {device.type} ok ({calls} compiled calls, {impl} ops)",
          flush=True)


# Per quantised transfer: largest error as a fraction of the group's
# largest magnitude (half a step of the signed range; e4m3 keeps 3 mantissa
# bits).  The two-shot algorithm rounds each rank's input once and the
# reduced sum once.
QUANT_STEP = {"INT8": 0.5 / 127, "INT6": 0.5 / 31, "INT4": 0.5 / 7,
              "INT3": 0.5 / 3, "FP8": 2.0 ** -4}


def case_quick_quant(device):
    if device.type != "cuda":
        skip("QuickAllReduce needs CUDA")
    # Ranks sharing a GPU would run these sizes exact (the shared-GPU floors).
    os.environ["QCOLL_QUANT_SHARED_GPU_FLOORS"] = "0"
    init("gloo")
    n = 2 * 1024 * 1024  # 4 MB of 16-bit values: above the quantisation threshold
    ran = []
    for name, step in QUANT_STEP.items():
        qr = qtorch.QuickAllReduce(dist.group.WORLD, device, quantization=name)
        for dtype in (torch.float16, torch.bfloat16):
            g = torch.Generator().manual_seed(RANK)
            inp = (torch.randn(n, generator=g) * 3).to(dtype).to(device)
            try:
                out = qr.quick_all_reduce(inp)
            except qcoll.UnsupportedError as e:
                ran.append(f"{name}/{dtype}: unsupported ({e.message})")
                continue
            parts = [torch.empty(n) for _ in range(WORLD)]
            dist.all_gather(parts, inp.float().cpu())
            exact = torch.stack(parts).sum(0)
            amax_in = max(p.abs().max().item() for p in parts)
            amax_out = exact.abs().max().item()
            out_ulp = 2.0 ** -7 if dtype == torch.bfloat16 else 2.0 ** -10
            bound = WORLD * amax_in * step + amax_out * step + amax_out * out_ulp
            err = (out.float().cpu() - exact).abs().max().item()
            if not err <= bound:
                raise AssertionError(f"{name} {dtype}: max error {err} > bound {bound}")
            if err == 0:
                raise AssertionError(f"{name} {dtype}: exact results: nothing was quantised")
            ran.append(f"{name}/{dtype}: max error {err:.4g} <= {bound:.4g}")
        qr.close()
    dist.destroy_process_group()
    if all("unsupported" in r for r in ran):
        skip("quantised all-reduce is not supported by this build: " + ran[0])
    print(f"rank {RANK}: quick_quant ok ({'; '.join(ran)})", flush=True)


CASES = {"ops": case_ops, "ddp": case_ddp, "binding": case_binding, "mixed": case_mixed,
         "quick": case_quick, "quick_graph": case_quick_graph,
         "quick_quant": case_quick_quant, "compile": case_compile}

if __name__ == "__main__":
    CASES[sys.argv[1]](pick_device(sys.argv[2] if len(sys.argv) > 2 else "cpu"))
