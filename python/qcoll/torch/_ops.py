"""The torch ops of qcoll.torch:

    qcoll::quick_all_reduce(Tensor inp, int comm, int quant) -> Tensor
    qcoll::quick_all_reduce_out(Tensor inp, Tensor(a!) out, int comm, int quant) -> ()

``comm`` is a qcoll_comm_t as an integer (Comm.handle), ``quant`` a
qcoll.Quant value; the sum over the ranks is enqueued on the current stream
of inp's device (CUDA) or computed at once (a host communicator).  Both
have a fake (meta) kernel, so torch.compile traces them.

With the compiled extension the ops, and their CUDA, CPU and Meta kernels,
come from it (TORCH_LIBRARY in csrc/).  Without it they are defined here,
in Python, over the binding's lean all-reduce; the communicator is found
from its handle among the Comm objects registered by eager_call().
"""

import weakref

import torch

from .. import _torch_ext
from .._errors import InvalidArgumentError

_COMMS = weakref.WeakValueDictionary()  # handle -> Comm, for the Python ops
_defined = False


def _comm_of(handle):
    comm = _COMMS.get(handle)
    if comm is None or comm.closed:
        raise InvalidArgumentError(
            f"qcoll::quick_all_reduce: comm {handle:#x} is not a live communicator of this "
            f"process")
    return comm


def _check_capture_device(device):
    # torch.cuda.graph captures the current stream of the *current* device;
    # work enqueued on another device would be left out of the graph (and
    # run once, now), so refuse before enqueuing anything.
    current = torch.cuda.current_device()
    if current != device.index and torch.cuda.is_current_stream_capturing():
        raise RuntimeError(
            f"QuickAllReduce on {device}: a CUDA graph is being captured on "
            f"cuda:{current}, the current device, but this object enqueues on the "
            f"current stream of {device}; make {device} current "
            f"(torch.cuda.set_device) before capturing")


def python_quick_all_reduce(inp, out, handle, quant):
    """The op's kernel in Python: out (a new tensor when None) = the sum of
    inp over the ranks; returns out."""
    comm = _comm_of(handle)
    if inp.is_cuda:
        _check_capture_device(inp.device)
    if out is None:
        out = torch.empty_like(inp, memory_format=torch.contiguous_format)
    comm.all_reduce(inp, out, op="sum", quant=quant)
    return out


def _define_python_ops():
    @torch.library.custom_op("qcoll::quick_all_reduce", mutates_args=())
    def quick_all_reduce(inp: torch.Tensor, comm: int, quant: int) -> torch.Tensor:
        return python_quick_all_reduce(inp, None, comm, quant)

    @quick_all_reduce.register_fake
    def _(inp, comm, quant):
        return torch.empty_like(inp, memory_format=torch.contiguous_format)

    @torch.library.custom_op("qcoll::quick_all_reduce_out", mutates_args=("out",))
    def quick_all_reduce_out(inp: torch.Tensor, out: torch.Tensor, comm: int,
                             quant: int) -> None:
        python_quick_all_reduce(inp, out, comm, quant)

    @quick_all_reduce_out.register_fake
    def _(inp, out, comm, quant):
        return None


def ensure_defined():
    """Make torch.ops.qcoll.* exist: from the compiled extension when it
    loads, else from Python (once)."""
    global _defined
    if _defined:
        return
    if not _torch_ext.load().loaded:
        _define_python_ops()
    _defined = True


def eager_call(comm):
    """``fn(inp, out, handle, quant) -> out`` for eager calls on ``comm``:
    the extension's function (no dispatcher) or the Python kernel."""
    ensure_defined()
    _COMMS[comm.handle] = comm
    status = _torch_ext.load()
    if status.loaded:
        return status.module.quick_all_reduce
    return python_quick_all_reduce
