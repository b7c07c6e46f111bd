"""qcoll: collective communication for processes that own a GPU or only CPU
memory, from Python.

    import numpy as np, qcoll
    with qcoll.Comm.from_env() as comm:          # started by qcoll-run / torchrun
        x = np.full(4, comm.rank + 1, np.float32)
        comm.all_reduce(x)                       # in place: sum over ranks

The C library is the package's own copy (a wheel installs
qcoll/libqcoll.so.0), else QCOLL_LIB, the build*/ folders of a source
checkout (build/ first, never a sanitizer build), then the system loader.  PyTorch
integration lives in ``qcoll.torch`` (QuickAllReduce and the
torch.distributed backend "qcoll"); importing ``qcoll`` does not import
torch.
"""

from ._errors import (AbortedError, BootstrapError, CudaError, InternalError,
                      InvalidArgumentError, InvalidUsageError, LibraryNotFoundError,
                      MismatchError, NcclError, OutOfMemoryError, PeerFailureError,
                      QcollError, QcollTimeoutError, SystemCallError, UnsupportedError,
                      error_class)
from ._lib import QCOLL_DEVICE_CURRENT, QCOLL_DEVICE_NONE, QCOLL_UNIQUE_ID_BYTES, lib_path
from ._types import Algo, Dtype, Op, Quant
from .comm import (Comm, dtype_size, env_table, get_unique_id, selection_table,
                   status_string, unique_id_from_hex, unique_id_to_hex, version)

__version__ = "0.1.0"

UNIQUE_ID_BYTES = QCOLL_UNIQUE_ID_BYTES
DEVICE_CURRENT = QCOLL_DEVICE_CURRENT
DEVICE_NONE = QCOLL_DEVICE_NONE

__all__ = [
    "Comm", "get_unique_id", "unique_id_to_hex", "unique_id_from_hex", "version",
    "dtype_size", "env_table", "selection_table", "status_string", "lib_path",
    "Dtype", "Op", "Algo", "Quant", "UNIQUE_ID_BYTES", "DEVICE_CURRENT", "DEVICE_NONE",
    "QcollError", "InvalidArgumentError", "InvalidUsageError", "SystemCallError",
    "QcollTimeoutError", "PeerFailureError", "AbortedError", "UnsupportedError",
    "CudaError", "NcclError", "OutOfMemoryError", "MismatchError", "BootstrapError",
    "InternalError", "LibraryNotFoundError", "error_class",
]
