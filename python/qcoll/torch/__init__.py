"""PyTorch integration of qcoll.

- ``QuickAllReduce(group, device)``: a fast intra-node all-reduce for
  fp16/bf16/fp32 CUDA tensors with optional quantised transfer, usable
  eagerly and inside CUDA graph capture.
- The torch.distributed backend ``"qcoll"``, registered when this module is
  imported::

      import qcoll.torch
      dist.init_process_group(backend="qcoll")               # CPU and CUDA
      dist.init_process_group(backend="cpu:gloo,cuda:qcoll")

Both run compiled where they can: importing this module builds (once, then
from a cache) a C++ extension against the torch in use, holding a
c10d::Backend for "qcoll" and the custom op ``torch.ops.qcoll.
quick_all_reduce``.  Where it cannot be built (no compiler, no qcoll.h,
``QCOLL_TORCH_EXT=off``) a warning says why and the Python backend and ops
serve instead; ``extension_status()`` tells which.  ``QCOLL_TORCH_BACKEND``
(auto, compiled, python) picks the backend per group created.

Importing this module needs torch; importing ``qcoll`` alone does not.
"""

try:
    import torch  # noqa: F401  (the top-level torch package, not this module)
    import torch.distributed as _dist
except ImportError as e:  # pragma: no cover - exercised where torch is absent
    raise ImportError(f"qcoll.torch needs PyTorch with torch.distributed: {e}") from e

if not _dist.is_available():  # pragma: no cover
    raise ImportError("qcoll.torch needs torch.distributed, which this torch build lacks")

from .. import _torch_ext
from ._backend import (BACKEND_ENV, BACKEND_NAME, ProcessGroupQcoll, QcollWork, backend_choice,
                       backend_of, register_backend)
from ._ops import ensure_defined as _ensure_ops
from ._quick import QuickAllReduce, quantization_from_env


def extension_status():
    """Whether the compiled extension is in use (``.loaded``), and if not,
    why (``.reason``)."""
    return _torch_ext.load()


_ensure_ops()
register_backend()

__all__ = ["QuickAllReduce", "quantization_from_env", "ProcessGroupQcoll", "QcollWork",
           "register_backend", "backend_of", "backend_choice", "extension_status",
           "BACKEND_NAME", "BACKEND_ENV"]
