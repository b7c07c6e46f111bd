"""Host time per call of qcoll's PyTorch paths, beside PyTorch's own NCCL
backend, and a DDP step with each backend.

Every rank runs each path `--calls` times on one tensor (zeros, so repeated
in-place sums stay exact), the timer stopping after a synchronize; the
largest per-call time over the ranks is printed.  Where the GPU work of a
call takes longer than its host work (8 ranks sharing one GPU), that time
is the GPU's, so a second line gives the host's alone: bursts of 200 calls
timed without a synchronize.  Paths:

  quick            QuickAllReduce.quick_all_reduce (the compiled op when the
                   extension is built, else the Python op), CUDA only
  quick-python     the Python op's kernel on the same communicator
  qcoll-compiled   dist.all_reduce on a "qcoll" group, compiled backend
  qcoll-python     dist.all_reduce on a "qcoll" group, Python backend
  nccl             dist.all_reduce on an "nccl" group (CUDA; left out with
                   the reason where NCCL refuses the ranks)
  gloo             dist.all_reduce on a "gloo" group (--device cpu)

Started by torchrun or qcoll-run (one GPU shared by the ranks under MPS is
fine: rank r uses cuda:(local rank % device count)):

    qcoll-run -n 2 -x MASTER_PORT=29531 python3 bench/torch_overhead.py
    torchrun --nproc-per-node 8 bench/torch_overhead.py --ddp
    # PyTorch's NCCL beside it where ranks share a GPU: a newer NCCL that
    # accepts them, loaded in place of torch's
    LD_PRELOAD=/path/to/libnccl.so.2 NCCL_MULTI_RANK_GPU_ENABLE=1 qcoll-run -n 2 ...
    qcoll-run -n 2 -x MASTER_PORT=29531 python3 bench/torch_overhead.py --device cpu
"""

import argparse
import ctypes
import datetime
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
import qcoll.torch as qtorch  # noqa: E402
from qcoll.torch import _ops  # noqa: E402


def env_int(*names, default=None):
    for name in names:
        if name in os.environ:
            return int(os.environ[name])
    return default


RANK = env_int("RANK", "QCOLL_RANK")
WORLD = env_int("WORLD_SIZE", "QCOLL_WORLD_SIZE")
LOCAL_RANK = env_int("LOCAL_RANK", "QCOLL_LOCAL_RANK", default=RANK)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def host_us(fn, calls, device, gloo):
    """Largest per-call host time over the ranks, in microseconds."""
    for _ in range(min(50, calls)):
        fn()
    sync(device)
    dist.barrier(group=gloo)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync(device)
    us = torch.tensor([(time.perf_counter() - start) / calls * 1e6], dtype=torch.float64)
    dist.all_reduce(us, op=dist.ReduceOp.MAX, group=gloo)
    return us.item()


def enqueue_us(fn, device, gloo, burst=200, rounds=5):
    """Host time per call alone: bursts of `burst` calls timed without a
    synchronize (far fewer than the launch queue holds, so no call waits for
    the GPU), the median of `rounds` bursts; the largest over the ranks."""
    times = []
    for _ in range(rounds):
        sync(device)
        dist.barrier(group=gloo)
        start = time.perf_counter()
        for _ in range(burst):
            fn()
        times.append((time.perf_counter() - start) / burst * 1e6)
    sync(device)
    us = torch.tensor([sorted(times)[len(times) // 2]], dtype=torch.float64)
    dist.all_reduce(us, op=dist.ReduceOp.MAX, group=gloo)
    return us.item()


def new_qcoll_group(impl, device):
    os.environ[qtorch.BACKEND_ENV] = impl
    try:
        return dist.new_group(backend="qcoll",
                              device_id=device if device.type == "cuda" else None)
    finally:
        del os.environ[qtorch.BACKEND_ENV]


def nccl_version(lib):
    """ncclGetVersion of a ctypes library, as "2.32.6", or None."""
    try:
        v = ctypes.c_int(0)
        if lib.ncclGetVersion(ctypes.byref(v)) != 0:
            return None
    except AttributeError:
        return None
    return f"{v.value // 10000}.{v.value // 100 % 100}.{v.value % 100}"


def loaded_nccl():
    """The NCCL this process's calls reach: ncclGetVersion as the process's
    global symbol lookup finds it (a library in LD_PRELOAD comes first, so
    this is the one torch's calls bind to), then every NCCL library mapped
    into the process with its own version.  torch's version call reports
    the NCCL it was built with, which LD_PRELOAD does not change."""
    used = nccl_version(ctypes.CDLL(None)) or "none"
    with open("/proc/self/maps") as maps:
        paths = sorted({line.split()[-1] for line in maps if "libnccl.so" in line})
    mapped = []
    for path in paths:
        try:
            mapped.append(f"{path} {nccl_version(ctypes.CDLL(path)) or '?'}")
        except OSError:
            mapped.append(f"{path} ?")
    return f"{used} (mapped: {', '.join(mapped) or 'none'})"


def try_group(name, device, gloo):
    """A group of backend `name` that completed one all-reduce on every
    rank, or the reason it did not (the ranks agree on the outcome)."""
    try:
        group = dist.new_group(backend=name)
        probe = torch.zeros(16, device=device)
        dist.all_reduce(probe, group=group)
        sync(device)
        ok, reason = 1, ""
    except Exception as e:  # NCCL refusing ranks that share a GPU, for one
        group, ok, reason = None, 0, f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    flag = torch.tensor([ok])
    dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=gloo)
    if flag.item() == 0:
        return None, reason or "refused on another rank"
    return group, ""


class MLP(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                       torch.nn.Linear(width, width), torch.nn.ReLU(),
                                       torch.nn.Linear(width, 16))

    def forward(self, x):
        return self.net(x)


def ddp_step_us(group, device, gloo, steps):
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = DDP(MLP(256).to(device), process_group=group,
                device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 256, device=device)
    y = torch.randn(32, 16, device=device)

    def step():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return host_us(step, steps, device, gloo)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--bytes", type=int, nargs="*", default=[4096, 1 << 20])
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--ddp", action="store_true", help="also time DDP steps of a small MLP")
    ap.add_argument("--ddp-steps", type=int, default=200)
    ap.add_argument("--nccl-max-bytes", type=int, default=None,
                    help="leave NCCL out above this many bytes (messages and DDP "
                         "gradients): with many ranks sharing a GPU it may never complete")
    args = ap.parse_args()
    if args.device == "cuda":
        device = torch.device("cuda", LOCAL_RANK % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(1)  # ranks share the cores: no intra-op threads on top
    dtype = getattr(torch, args.dtype)
    port = os.environ.get("MASTER_PORT", "29531")
    addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=RANK,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=300))
    gloo = dist.group.WORLD
    status = qtorch.extension_status()
    if RANK == 0:
        nccl = ".".join(map(str, torch.cuda.nccl.version())) if args.device == "cuda" else "-"
        print(f"bench: torch {torch.__version__} (NCCL {nccl}), {WORLD} ranks on {args.device}, "
              f"extension {'loaded' if status.loaded else 'not loaded: ' + status.reason}",
              flush=True)
    groups = {}
    if status.loaded:
        groups["qcoll-compiled"] = new_qcoll_group("compiled", device)
    groups["qcoll-python"] = new_qcoll_group("python", device)
    other = "nccl" if device.type == "cuda" else "gloo"
    group, reason = try_group(other, device, gloo)
    if group is not None:
        groups[other] = group
    elif RANK == 0:
        print(f"bench: {other} left out: {reason}", flush=True)
    if other == "nccl" and group is not None and RANK == 0:
        print(f"bench: NCCL in use: {loaded_nccl()}", flush=True)
    cap = args.nccl_max_bytes

    def serves(name, nbytes):
        return not (name == "nccl" and cap is not None and nbytes > cap)
    qr = None
    if device.type == "cuda":
        qr = qtorch.QuickAllReduce(gloo, device, quantization="NONE")

    for nbytes in args.bytes:
        x = torch.zeros(nbytes // torch.tensor([], dtype=dtype).element_size(), dtype=dtype,
                        device=device)
        calls = {}
        if qr is not None:
            out = torch.empty_like(x)
            calls["quick"] = lambda: qr.quick_all_reduce(x, out)
            calls["quick-python"] = lambda: _ops.python_quick_all_reduce(x, out, qr._handle,
                                                                         qr._quant)
        for name, group in groups.items():
            if serves(name, nbytes):
                calls[name] = lambda group=group: dist.all_reduce(x, group=group)
            elif RANK == 0:
                print(f"bench: {name} left out at {nbytes} B (--nccl-max-bytes {cap})",
                      flush=True)
        results = {k: host_us(fn, args.calls, device, gloo) for k, fn in calls.items()}
        if RANK == 0:
            print(f"bench: {WORLD} ranks, {args.device}, {args.dtype}, {nbytes} B, host us/call "
                  f"over {args.calls} calls: "
                  + ", ".join(f"{k} {v:.1f}" for k, v in results.items()), flush=True)
        enqueued = {k: enqueue_us(fn, device, gloo) for k, fn in calls.items()}
        if RANK == 0:
            print(f"bench: {WORLD} ranks, {args.device}, {args.dtype}, {nbytes} B, host us/call "
                  f"without a synchronize (median of 5 bursts of 200): "
                  + ", ".join(f"{k} {v:.1f}" for k, v in enqueued.items()), flush=True)
    if args.ddp:
        grad_bytes = sum(p.numel() * p.element_size() for p in MLP(256).parameters())
        ddp_groups = {name: g for name, g in groups.items() if serves(name, grad_bytes)}
        if RANK == 0:
            for name in groups.keys() - ddp_groups.keys():
                print(f"bench: {name} left out of DDP ({grad_bytes} B of gradients, "
                      f"--nccl-max-bytes {cap})", flush=True)
        results = {name: ddp_step_us(g, device, gloo, args.ddp_steps)
                   for name, g in ddp_groups.items()}
        if RANK == 0:
            print(f"bench: {WORLD} ranks, {args.device}, DDP step of a 3-layer MLP (256 wide, "
                  f"batch 32), host us/step over {args.ddp_steps} steps: "
                  + ", ".join(f"{k} {v:.1f}" for k, v in results.items()), flush=True)
    if qr is not None:
        qr.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
