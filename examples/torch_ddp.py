"""Train a small MLP with DistributedDataParallel over the qcoll backend.

    torchrun --nproc-per-node 2 examples/torch_ddp.py
    qcoll-run -n 2 python3 examples/torch_ddp.py

With CUDA each rank uses GPU (local rank % device count), so several ranks
may share one GPU, and the group is bound to it with device_id; without
CUDA everything runs on the CPU.  Every rank trains on its own data; DDP
averages the gradients, so the parameters stay identical on every rank,
which the script checks at the end.
"""

import os
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

try:
    import qcoll.torch  # noqa: F401  (registers the "qcoll" backend)
except ImportError:  # running from a source checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
    import qcoll.torch  # noqa: F401

STEPS = 20


def env_int(*names, default=0):
    for name in names:
        if name in os.environ:
            return int(os.environ[name])
    return default


def init_process_group(rank, world, device):
    """torchrun sets MASTER_ADDR/MASTER_PORT; under qcoll-run the ranks meet
    in a file named after the job's unique id."""
    backend = "cpu:gloo,cuda:qcoll" if device.type == "cuda" else "qcoll"
    device_id = device if device.type == "cuda" else None
    if "MASTER_ADDR" in os.environ:
        dist.init_process_group(backend, rank=rank, world_size=world, device_id=device_id)
        return None
    job = os.environ.get("QCOLL_UNIQUE_ID", "local")[:16]
    path = os.path.join(tempfile.gettempdir(), f"qcoll-ddp-{job}")
    dist.init_process_group(backend, init_method=f"file://{path}", rank=rank,
                            world_size=world, device_id=device_id)
    return path


def main():
    rank = env_int("RANK", "QCOLL_RANK")
    world = env_int("WORLD_SIZE", "QCOLL_WORLD_SIZE", default=1)
    local_rank = env_int("LOCAL_RANK", "QCOLL_LOCAL_RANK", default=rank)
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
    else:
        device = torch.device("cpu")
    store_file = init_process_group(rank, world, device)

    torch.manual_seed(rank)  # different initial weights: DDP broadcasts rank 0's
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 1)).to(device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    target = torch.linspace(-1, 1, 16, device=device)
    data = torch.Generator().manual_seed(100 + rank)

    for step in range(STEPS):
        x = torch.randn(32, 16, generator=data).to(device)
        y = (x @ target).unsqueeze(1)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step:2d}: loss {loss.item():.4f}", flush=True)

    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    lowest, highest = flat.clone(), flat.clone()
    dist.all_reduce(lowest, op=dist.ReduceOp.MIN)
    dist.all_reduce(highest, op=dist.ReduceOp.MAX)
    identical = torch.equal(lowest, highest)
    print(f"rank {rank} of {world} on {device}: final loss {loss.item():.4f}, "
          f"parameters identical on all ranks: {identical}", flush=True)
    dist.destroy_process_group()
    if store_file and rank == 0 and os.path.exists(store_file):
        os.unlink(store_file)
    sys.exit(0 if identical else 1)


if __name__ == "__main__":
    main()
