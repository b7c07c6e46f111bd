"""Host time per all-reduce call of the Python binding: the lean path
(prepared call, quick operand reading) beside the full path (every
argument parsed and checked, as before the lean path existed), on host
buffers, in one run.  Started by qcoll-run:

    qcoll-run -n 2 python3 bench/python_overhead.py [--calls 20000] [--rounds 5] [--kind torch]

The rounds alternate the two paths so that both see the same machine; the
median round of each is printed, with their ratio.  The sizes are small so
that the host back end's own copy is a minor part of the time.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
import qcoll  # noqa: E402


def per_call_us(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--bytes", type=int, nargs="*", default=[64, 4096])
    ap.add_argument("--kind", choices=["numpy", "torch"], default="numpy",
                    help="the arrays: numpy, or torch CPU tensors")
    args = ap.parse_args()
    with qcoll.Comm.from_env(device="cpu") as comm:
        for nbytes in args.bytes:
            x = np.ones(nbytes // 4, dtype=np.float32)
            ptr = x.ctypes.data
            if args.kind == "torch":
                import torch

                x = torch.ones(nbytes // 4, dtype=torch.float32)
                ptr = x.data_ptr()
            paths = {
                "full": lambda: comm._all_reduce_full(x, None, "sum", None, None, None),
                "lean": lambda: comm.all_reduce(x),
            }
            call = comm.prepare_all_reduce("float32")
            count = nbytes // 4
            paths["prepared"] = lambda: call(ptr, ptr, count, None)
            times = {name: [] for name in paths}
            for name, fn in paths.items():  # warm up, and check the lean path is taken
                per_call_us(fn, 100)
            for _ in range(args.rounds):
                for name, fn in paths.items():
                    comm.barrier()
                    times[name].append(per_call_us(fn, args.calls))
            med = {name: statistics.median(t) for name, t in times.items()}
            if comm.rank == 0:
                print(f"{comm.size} ranks, {nbytes} B float32 {args.kind}, host: "
                      + ", ".join(f"{name} {us:.2f} us" for name, us in med.items())
                      + f"; full/lean {med['full'] / med['lean']:.2f}x, "
                      f"full/prepared {med['full'] / med['prepared']:.2f}x", flush=True)


if __name__ == "__main__":
    main()
