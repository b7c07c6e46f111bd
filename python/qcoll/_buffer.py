"""Turning array objects into (pointer, element count, dtype, device).

Accepted, in the order they are recognised:

- torch tensors (CPU and CUDA), read directly (data_ptr, dtype, device);
- numpy arrays (host memory);
- objects with ``__cuda_array_interface__`` (CuPy, Numba...);
- objects with ``__array_interface__`` (host memory);
- DLPack producers (``__dlpack__`` and ``__dlpack_device__``);
- anything exporting the buffer protocol (bytearray, array.array...).

Nothing here imports torch or numpy: a tensor can only exist if its
module is already imported, so ``sys.modules`` is consulted instead.  That
keeps ``import qcoll`` light and lets it run where torch is absent.

The device of a CUDA buffer decides the stream a collective is enqueued
on: for a torch tensor it is the current torch stream *of the tensor's own
device* (torch.cuda.current_stream(tensor.device)), never the current
device's.
"""

import ctypes
import sys
from dataclasses import dataclass
from typing import Any, Optional

from ._errors import InvalidArgumentError
from ._types import DTYPE_BY_NAME, Dtype


@dataclass
class Buffer:
    """One operand of a collective, as the C library sees it."""
    ptr: int
    nbytes: int
    itemsize: int
    dtype: Optional[Dtype]  # None: a type qcoll cannot reduce (moved as bytes)
    dtype_name: str
    is_cuda: bool
    device: Optional[int]  # CUDA ordinal when known
    readonly: bool
    kind: str  # "torch", "numpy", "cai", "array_interface", "dlpack", "buffer"
    obj: Any  # the object itself (kept alive while the call runs)
    shape: tuple = ()
    stream: Optional[int] = None  # producer stream (CUDA array interface)
    keepalive: Any = None

    @property
    def count(self):
        return self.nbytes // self.itemsize if self.itemsize else 0

    def describe(self):
        where = "host"
        if self.is_cuda:
            where = "cuda" if self.device is None else f"cuda:{self.device}"
        return f"{self.kind} {self.dtype_name} shape {tuple(self.shape)} on {where}"


def _module(name):
    return sys.modules.get(name)


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(strides))


def _is_compact(shape, strides_bytes, itemsize):
    """True when strides describe a C-contiguous layout (dimensions of size
    1 may carry any stride, as in numpy and torch)."""
    if strides_bytes is None:
        return True
    expected = _c_strides(shape, itemsize)
    return all(n == 1 or s == e for n, s, e in zip(shape, strides_bytes, expected))


def _not_contiguous(what, name, shape, strides):
    return InvalidArgumentError(
        f"{what}: {name} is not contiguous (shape {tuple(shape)}, strides "
        f"{tuple(strides) if strides is not None else None}); qcoll needs one "
        f"dense block of memory: pass a contiguous copy (e.g. "
        f"tensor.contiguous() / numpy.ascontiguousarray)")


# ---- torch ---------------------------------------------------------------

def _from_torch(t, what, name):
    dev = t.device
    if dev.type not in ("cpu", "cuda"):
        raise InvalidArgumentError(
            f"{what}: {name} is on device {dev}; qcoll takes CPU and CUDA tensors")
    if t.layout is not sys.modules["torch"].strided:
        raise InvalidArgumentError(f"{what}: {name} has layout {t.layout}; qcoll needs dense tensors")
    if not t.is_contiguous():
        raise _not_contiguous(what, name, t.shape, t.stride())
    if t.is_conj() or t.is_neg():
        raise InvalidArgumentError(
            f"{what}: {name} is a lazily conjugated/negated view; call "
            f"resolve_conj()/resolve_neg() first")
    dtype_name = str(t.dtype).replace("torch.", "")
    itemsize = t.element_size()
    return Buffer(
        ptr=t.data_ptr(), nbytes=t.numel() * itemsize, itemsize=itemsize,
        dtype=DTYPE_BY_NAME.get(dtype_name), dtype_name=dtype_name,
        is_cuda=dev.type == "cuda", device=dev.index if dev.type == "cuda" else None,
        readonly=False, kind="torch", obj=t, shape=tuple(t.shape))


# ---- numpy and the array interfaces --------------------------------------

def _from_numpy(a, what, name):
    if not a.flags.c_contiguous:
        raise _not_contiguous(what, name, a.shape, a.strides)
    dtype_name = a.dtype.name
    return Buffer(
        ptr=a.__array_interface__["data"][0], nbytes=a.nbytes, itemsize=a.itemsize,
        dtype=DTYPE_BY_NAME.get(dtype_name) if a.dtype.isnative else None,
        dtype_name=dtype_name, is_cuda=False, device=None,
        readonly=not a.flags.writeable, kind="numpy", obj=a, shape=a.shape)


# typestr without byte order -> dtype name
_TYPESTR = {
    "i1": "int8", "u1": "uint8", "i4": "int32", "u4": "uint32", "i8": "int64",
    "u8": "uint64", "f2": "float16", "f4": "float32", "f8": "float64",
    "b1": "bool", "c8": "complex64", "c16": "complex128", "i2": "int16", "u2": "uint16",
}


def _from_interface(iface, obj, what, name, is_cuda):
    shape = tuple(int(n) for n in iface["shape"])
    typestr = iface["typestr"]
    itemsize = int(typestr[2:])
    native = typestr[0] in "|=" or typestr[0] == ("<" if sys.byteorder == "little" else ">")
    dtype_name = _TYPESTR.get(typestr[1:], typestr)
    strides = iface.get("strides")
    if not _is_compact(shape, strides, itemsize):
        raise _not_contiguous(what, name, shape, strides)
    if iface.get("mask") is not None:
        raise InvalidArgumentError(f"{what}: {name} is a masked array; qcoll cannot use masks")
    ptr, readonly = iface["data"]
    count = 1
    for n in shape:
        count *= n
    stream = iface.get("stream") if is_cuda else None
    return Buffer(
        ptr=int(ptr or 0) + int(iface.get("offset", 0) or 0), nbytes=count * itemsize,
        itemsize=itemsize, dtype=DTYPE_BY_NAME.get(dtype_name) if native else None,
        dtype_name=dtype_name, is_cuda=is_cuda, device=None, readonly=bool(readonly),
        kind="cai" if is_cuda else "array_interface", obj=obj, shape=shape,
        stream=stream)


# ---- DLPack ----------------------------------------------------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_CODES = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool"}

_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _from_dlpack(obj, what, name, stream):
    dev_type, dev_id = obj.__dlpack_device__()
    dev_type, dev_id = int(dev_type), int(dev_id)
    if dev_type not in (_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED):
        raise InvalidArgumentError(
            f"{what}: {name} lives on DLPack device type {dev_type}; qcoll takes "
            f"CPU and CUDA memory")
    is_cuda = dev_type in (_DL_CUDA, _DL_CUDA_MANAGED)
    if is_cuda:
        if stream is None:
            stream = _torch_current_stream(dev_id)
        # The producer orders its pending work before the stream the
        # collective will run on (in DLPack, 1 is the legacy default stream).
        capsule = obj.__dlpack__(stream=stream if stream else 1)
    else:
        capsule = obj.__dlpack__()
    managed = _DLManagedTensor.from_address(_capsule_get_pointer(capsule, b"dltensor"))
    t = managed.dl_tensor
    shape = tuple(t.shape[i] for i in range(t.ndim))
    bits, lanes = t.dtype.bits, t.dtype.lanes
    itemsize = (bits * lanes + 7) // 8
    strides = None
    if t.strides:
        strides = tuple(t.strides[i] * itemsize for i in range(t.ndim))
    if not _is_compact(shape, strides, itemsize):
        raise _not_contiguous(what, name, shape, strides)
    dtype_name = f"{_DL_CODES.get(t.dtype.code, 'code%d' % t.dtype.code)}{bits}"
    if lanes != 1:
        dtype_name += f"x{lanes}"
    count = 1
    for n in shape:
        count *= n
    return Buffer(
        ptr=(t.data or 0) + t.byte_offset, nbytes=count * itemsize, itemsize=itemsize,
        dtype=DTYPE_BY_NAME.get(dtype_name) if lanes == 1 else None,
        dtype_name=dtype_name, is_cuda=is_cuda, device=dev_id if is_cuda else None,
        readonly=False, kind="dlpack", obj=obj, shape=shape,
        stream=stream if is_cuda else None, keepalive=capsule)


def _torch_current_stream(device):
    """torch's current stream of CUDA device ``device`` when torch has
    initialised CUDA in this process, else None (the legacy default)."""
    torch = _module("torch")
    if torch is not None and torch.cuda.is_initialized():
        return torch.cuda.current_stream(device).cuda_stream
    return None


# ---- entry point -------------------------------------------------------------

def as_buffer(obj, what, name, stream=None):
    """Describe ``obj`` as a Buffer; ``what`` and ``name`` (the calling
    function and the argument) go into error messages.  ``stream`` is the
    stream a DLPack producer must order its work before."""
    torch = _module("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return _from_torch(obj, what, name)
    np = _module("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        return _from_numpy(obj, what, name)
    iface = getattr(obj, "__cuda_array_interface__", None)
    if iface is not None:
        return _from_interface(iface, obj, what, name, is_cuda=True)
    iface = getattr(obj, "__array_interface__", None)
    if iface is not None:
        return _from_interface(iface, obj, what, name, is_cuda=False)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _from_dlpack(obj, what, name, stream)
    try:
        view = memoryview(obj)
    except TypeError:
        view = None
    if view is not None:
        return _from_buffer_protocol(obj, view, what, name)
    raise InvalidArgumentError(
        f"{what}: {name} of type {type(obj).__name__} is not an array: pass a "
        f"numpy array, a torch tensor, or an object with __cuda_array_interface__, "
        f"__array_interface__, DLPack or the buffer protocol")


def _from_buffer_protocol(obj, view, what, name):
    import numpy  # the buffer protocol is read through numpy, which shares the memory

    buf = _from_numpy(numpy.asarray(view), what, name)
    buf.keepalive, buf.obj, buf.kind = buf.obj, obj, "buffer"
    return buf


def stream_handle(stream):
    """A cudaStream_t (as int) from an int, a torch.cuda.Stream (cuda_stream),
    a CuPy stream (ptr) or anything int() accepts (cuda-python's CUstream)."""
    if stream is None:
        return None
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value
    try:
        return int(stream)
    except (TypeError, ValueError):
        raise InvalidArgumentError(
            f"stream {stream!r} is not a CUDA stream: pass a torch.cuda.Stream, a "
            f"CuPy stream or the handle as an int") from None


def default_stream(buf):
    """The stream a collective on ``buf`` runs on when the caller names none:
    the current torch stream of the tensor's own device, the producer's
    stream of a CUDA array interface, else the legacy default stream."""
    if not buf.is_cuda:
        return None
    if buf.kind == "torch":
        torch = sys.modules["torch"]
        return torch.cuda.current_stream(buf.obj.device).cuda_stream
    if buf.stream is not None:
        # The producer's stream (CUDA array interface) or the one given to
        # the DLPack producer.  1 is the legacy default stream (NULL), 2 the
        # per-thread default stream (cudaStreamPerThread, whose handle is 2).
        return None if buf.stream == 1 else int(buf.stream)
    return None
