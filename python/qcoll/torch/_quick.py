"""QuickAllReduce: qcoll's intra-node GPU all-reduce behind the interface
inference engines use for custom all-reduces.

    qr = QuickAllReduce(cpu_group, torch.device("cuda", local_rank))
    if qr.should_quick_allreduce(x):
        y = qr.quick_all_reduce(x)

Set-up is collective over ``group``: rank 0 of the group creates a unique
id and broadcasts it through the group (as a Python object, on the CPU when
the group can, else on ``device``), then every rank joins a qcoll
communicator on ``device``.  ``quick_all_reduce`` only enqueues work on the
current stream of ``device``; it never synchronises, so it runs eagerly and
inside CUDA graph capture (the library keeps its per-call state in device
memory, so replays see fresh data).

The call is the custom op ``torch.ops.qcoll.quick_all_reduce`` (and
``quick_all_reduce_out`` for a given output), with a meta kernel, so it
traces into ``torch.compile``d code.  Eagerly the same kernel is called
without the dispatcher (a pybind function of the compiled extension).
Where the extension is not available the ops are defined in Python over the
binding's prepared all-reduce call (see _ops).

Environment:
  QCOLL_QUICK_REDUCE_QUANTIZATION  NONE (default) or FP: unquantised;
                                   FP8, INT8, INT6, INT4, INT3: quantised
                                   transfer; a +ROT suffix (INT8+ROT)
                                   rotates every group first
  QCOLL_QUICK_REDUCE_MAX_SIZE_BYTES_MB  largest message handled (default 2048)
"""

import os

import torch
import torch.distributed as dist

from .._errors import InvalidArgumentError
from .._types import Quant, quant_code
from ..comm import Comm, get_unique_id
from . import _ops

QUANTIZATION_ENV = "QCOLL_QUICK_REDUCE_QUANTIZATION"
MAX_SIZE_ENV = "QCOLL_QUICK_REDUCE_MAX_SIZE_BYTES_MB"
DEFAULT_MAX_SIZE_MB = 2048

_QUANT_BY_NAME = {
    "NONE": Quant.NONE, "FP": Quant.NONE, "FP8": Quant.FP8,
    "INT8": Quant.INT8, "INT6": Quant.INT6, "INT4": Quant.INT4,
    "INT3": Quant.INT3,
}

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def quantization_from_env(value=None):
    """The qcoll.Quant named by ``value`` or QCOLL_QUICK_REDUCE_QUANTIZATION
    (NONE, FP, FP8, INT8, INT6, INT4, INT3; NONE and FP mean unquantised)."""
    if value is None:
        value = os.environ.get(QUANTIZATION_ENV, "NONE")
    if isinstance(value, Quant):
        return value
    key = str(value).strip().upper()
    if key.endswith("+ROT") and key[:-4] in _QUANT_BY_NAME:
        # rotated groups: the int code (quant_code) carries the rotation
        return quant_code(_QUANT_BY_NAME[key[:-4]].name + "+rot")
    if key not in _QUANT_BY_NAME:
        raise InvalidArgumentError(
            f"{QUANTIZATION_ENV}={value!r} is not one of {', '.join(_QUANT_BY_NAME)}")
    return _QUANT_BY_NAME[key]


def _max_size_from_env():
    raw = os.environ.get(MAX_SIZE_ENV, str(DEFAULT_MAX_SIZE_MB))
    try:
        mb = float(raw)
    except ValueError:
        raise InvalidArgumentError(f"{MAX_SIZE_ENV}={raw!r} is not a number of MB") from None
    if mb <= 0:
        raise InvalidArgumentError(f"{MAX_SIZE_ENV}={raw!r} must be positive")
    return int(mb * 1024 * 1024)


def _cuda_device(device):
    """A torch.device('cuda', index) from an index, 'cuda:N' or a
    torch.device; a CUDA device without an index is refused, not guessed."""
    if isinstance(device, int):
        device = torch.device("cuda", device)
    device = torch.device(device)
    if device.type != "cuda" or device.index is None:
        raise InvalidArgumentError(
            f"QuickAllReduce needs a CUDA device with an index (cuda:N), not {device}")
    return device


def _object_device(group, device):
    """Where broadcast_object_list stages the id: the CPU when the group can
    run CPU collectives, else the explicit device (never the current one)."""
    backend = str(dist.get_backend(group)).lower()
    if backend in ("gloo", "mpi", "ucc", "qcoll") or "cpu:" in backend:
        return torch.device("cpu")
    return device


class QuickAllReduce:
    """All-reduce (sum) of CUDA tensors between the ranks of ``group``, each
    on its own ``device`` (several ranks may share one GPU).

    Inside CUDA graph capture, qcoll registers the tensors of each captured
    unquantised call that takes the two-shot with the communicator at
    capture time (every rank must capture the same calls, as graph-captured
    models do), so every replay reads the peers' tensors in place with no
    copy-in (``QCOLL_GRAPH_REGISTER=0`` stages them instead); the one-shot
    of smaller messages keeps its copy, which costs less there."""

    def __init__(self, group, device, quantization=None, max_size_bytes=None):
        self.disabled = True
        self.group = group if group is not None else dist.group.WORLD
        self.device = _cuda_device(device)
        self.quantization = quantization_from_env(quantization)
        self.max_size_bytes = int(max_size_bytes) if max_size_bytes else _max_size_from_env()
        self.rank = dist.get_rank(self.group)
        self.world_size = dist.get_world_size(self.group)
        unique_id = self._share_unique_id()
        self.comm = Comm.init_rank(self.world_size, unique_id, self.rank,
                                   device=self.device.index)
        self._handle = self.comm.handle
        self._quant = int(self.quantization)
        self._eager = _ops.eager_call(self.comm)
        self.disabled = False

    def _share_unique_id(self):
        obj = [get_unique_id() if self.rank == 0 else None]
        dist.broadcast_object_list(obj, src=dist.get_global_rank(self.group, 0),
                                   group=self.group,
                                   device=_object_device(self.group, self.device))
        return obj[0]

    def should_quick_allreduce(self, inp):
        """True when ``inp`` is a contiguous fp16/bf16/fp32 tensor on this
        object's device whose size is a positive multiple of 16 bytes and at
        most the size limit."""
        if self.disabled or not isinstance(inp, torch.Tensor):
            return False
        if inp.dtype not in _DTYPES or inp.device != self.device or not inp.is_contiguous():
            return False
        nbytes = inp.numel() * inp.element_size()
        return 0 < nbytes <= self.max_size_bytes and nbytes % 16 == 0

    def quick_all_reduce(self, inp, out=None):
        """Sum ``inp`` over the ranks into ``out`` (a new tensor when None),
        enqueued on the current stream of this object's device; returns out.
        Quantised formats round the transferred values (at most twice)."""
        if self.disabled:
            raise RuntimeError("QuickAllReduce is closed")
        if torch.compiler.is_compiling():  # traced: the op goes into the graph
            if out is None:
                return torch.ops.qcoll.quick_all_reduce(inp, self._handle, self._quant)
            torch.ops.qcoll.quick_all_reduce_out(inp, out, self._handle, self._quant)
            return out
        return self._eager(inp, out, self._handle, self._quant)

    def close(self):
        """Destroy the communicator (collective: every rank closes)."""
        if not self.disabled:
            self.disabled = True
            self.comm.destroy()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
