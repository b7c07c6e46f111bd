"""PyTorch integration of qcoll.

- ``QuickAllReduce(group, device)``: a fast intra-node all-reduce for
  fp16/bf16/fp32 CUDA tensors with optional quantised transfer, usable
  eagerly and inside CUDA graph capture.
- The torch.distributed backend ``"qcoll"``, registered when this module is
  imported::

      import qcoll.torch
      dist.init_process_group(backend="qcoll")               # CPU and CUDA
      dist.init_process_group(backend="cpu:gloo,cuda:qcoll")

Importing this module needs torch; importing ``qcoll`` alone does not.
"""

try:
    import torch  # noqa: F401  (the top-level torch package, not this module)
    import torch.distributed as _dist
except ImportError as e:  # pragma: no cover - exercised where torch is absent
    raise ImportError(f"qcoll.torch needs PyTorch with torch.distributed: {e}") from e

if not _dist.is_available():  # pragma: no cover
    raise ImportError("qcoll.torch needs torch.distributed, which this torch build lacks")

from ._backend import BACKEND_NAME, ProcessGroupQcoll, QcollWork, register_backend
from ._quick import QuickAllReduce, quantization_from_env

register_backend()

__all__ = ["QuickAllReduce", "quantization_from_env", "ProcessGroupQcoll", "QcollWork",
           "register_backend", "BACKEND_NAME"]
