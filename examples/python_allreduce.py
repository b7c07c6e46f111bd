"""All-reduce from Python with the qcoll binding.

    qcoll-run -n 4 python3 examples/python_allreduce.py            # host memory (numpy)
    qcoll-run -n 2 python3 examples/python_allreduce.py --cuda     # torch tensors on GPUs

Each rank contributes rank+1; every rank prints the sum n(n+1)/2.  The
launcher sets QCOLL_RANK, QCOLL_WORLD_SIZE and QCOLL_UNIQUE_ID, which
Comm.from_env() reads (torchrun's variables work too).  An installed
package (pip install ./python) loads its own libqcoll; from a checkout it is
found through QCOLL_LIB or the build/ folder.
"""

import argparse
import os
import sys
from pathlib import Path

try:
    import qcoll
except ImportError:  # running from a source checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
    import qcoll


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuda", action="store_true",
                        help="reduce a torch tensor on GPU LOCAL_RANK %% device count")
    args = parser.parse_args()

    if args.cuda:
        import torch
        local_rank = int(os.environ.get("QCOLL_LOCAL_RANK", os.environ.get("LOCAL_RANK", "0")))
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        comm = qcoll.Comm.from_env(device=device)
        x = torch.full((4,), float(comm.rank + 1), device=device)
    else:
        import numpy as np
        comm = qcoll.Comm.from_env(device="cpu")
        x = np.full(4, comm.rank + 1, dtype=np.float32)

    with comm:
        comm.all_reduce(x)  # in place, on the current stream of x's device
        values = x.tolist()
        expected = float(comm.size * (comm.size + 1) // 2)
        print(f"rank {comm.rank} of {comm.size}: sum = {values} (expected {expected})",
              flush=True)
        if any(v != expected for v in values):
            sys.exit(1)


if __name__ == "__main__":
    main()
