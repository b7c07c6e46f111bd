"""Exceptions: one class per qcoll_status_t, all subclasses of QcollError.

A failed C call raises the class of its status with the library's own
message (qcoll_last_error / qcoll_comm_last_error), so what the user reads
is what the library recorded, naming the bad argument and value.  Checks
that only Python can make (dtype of a tensor, contiguity, buffer sizes)
raise the same classes with status INVALID_ARGUMENT.
"""

from typing import Optional

OK = 0
ERR_INVALID_ARGUMENT = -1
ERR_INVALID_USAGE = -2
ERR_SYSTEM = -3
ERR_TIMEOUT = -4
ERR_PEER_FAILURE = -5
ERR_ABORTED = -6
ERR_UNSUPPORTED = -7
ERR_CUDA = -8
ERR_NCCL = -9
ERR_OUT_OF_MEMORY = -10
ERR_MISMATCH = -11
ERR_BOOTSTRAP = -12
ERR_INTERNAL = -13

_STATUS_NAMES = {
    ERR_INVALID_ARGUMENT: "invalid argument",
    ERR_INVALID_USAGE: "invalid usage",
    ERR_SYSTEM: "system error",
    ERR_TIMEOUT: "timeout",
    ERR_PEER_FAILURE: "peer failure",
    ERR_ABORTED: "aborted",
    ERR_UNSUPPORTED: "unsupported",
    ERR_CUDA: "CUDA error",
    ERR_NCCL: "NCCL error",
    ERR_OUT_OF_MEMORY: "out of memory",
    ERR_MISMATCH: "mismatch between ranks",
    ERR_BOOTSTRAP: "bootstrap error",
    ERR_INTERNAL: "internal error",
}


class QcollError(RuntimeError):
    """A qcoll call failed.  ``status`` is the qcoll_status_t value (None
    when the library itself could not be loaded), ``message`` the reason."""

    status: Optional[int] = None

    def __init__(self, message, status=None, status_name=None):
        if status is not None:
            self.status = status
        self.message = message
        self.status_name = status_name or _STATUS_NAMES.get(self.status, "")
        text = f"{message} [{self.status_name}]" if self.status_name else message
        super().__init__(text)


class InvalidArgumentError(QcollError, ValueError):
    status = ERR_INVALID_ARGUMENT


class InvalidUsageError(QcollError):
    status = ERR_INVALID_USAGE


class SystemCallError(QcollError):
    status = ERR_SYSTEM


class QcollTimeoutError(QcollError):
    status = ERR_TIMEOUT


class PeerFailureError(QcollError):
    status = ERR_PEER_FAILURE


class AbortedError(QcollError):
    status = ERR_ABORTED


class UnsupportedError(QcollError, NotImplementedError):
    status = ERR_UNSUPPORTED


class CudaError(QcollError):
    status = ERR_CUDA


class NcclError(QcollError):
    status = ERR_NCCL


class OutOfMemoryError(QcollError):
    status = ERR_OUT_OF_MEMORY


class MismatchError(QcollError):
    status = ERR_MISMATCH


class BootstrapError(QcollError):
    status = ERR_BOOTSTRAP


class InternalError(QcollError):
    status = ERR_INTERNAL


class LibraryNotFoundError(QcollError):
    """libqcoll could not be found or loaded (the message lists where it
    looked)."""


_CLASS_BY_STATUS = {
    cls.status: cls
    for cls in (InvalidArgumentError, InvalidUsageError, SystemCallError,
                QcollTimeoutError, PeerFailureError, AbortedError,
                UnsupportedError, CudaError, NcclError, OutOfMemoryError,
                MismatchError, BootstrapError, InternalError)
}


def error_class(status):
    """The exception class for a qcoll_status_t value."""
    return _CLASS_BY_STATUS.get(status, QcollError)


def make_error(status, message, status_name=None):
    cls = error_class(status)
    if cls is QcollError:
        return QcollError(message, status=status, status_name=status_name)
    return cls(message, status_name=status_name)
