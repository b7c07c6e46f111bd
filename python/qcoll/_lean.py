"""The lean path of the binding: what a repeated collective costs in Python.

A collective's arguments split into what is fixed for a given call site
(the function, the element type, the op, the per-call options, the
communicator) and what changes from call to call (the pointers, the count,
the stream).  ``prepare()`` binds the fixed part once into a small
function of the changing part; ``quick_operand()`` reads a contiguous
torch tensor or numpy array of a reducible type in a few attribute reads.
Anything it does not recognise (other array kinds, strided or read-only
arrays, types qcoll cannot reduce) returns None and goes through the full
path in comm.py, which also gives the errors.
"""

import ctypes
import sys

from ._errors import InvalidUsageError, make_error
from ._lib import OptionsStruct, decode, lib
from ._types import DTYPE_BY_NAME, set_quant_options

_TORCH_DTYPES = None  # torch.dtype -> Dtype, built on first use
_current_raw_stream = None


def _torch_dtypes(torch):
    global _TORCH_DTYPES
    if _TORCH_DTYPES is None:
        table = {}
        for name, dtype in DTYPE_BY_NAME.items():
            t = getattr(torch, name, None)
            if isinstance(t, torch.dtype):
                table[t] = dtype
        _TORCH_DTYPES = table
    return _TORCH_DTYPES


def current_stream(torch, device_index):
    """The raw handle of torch's current stream of a CUDA device (the
    C-level query where torch has it: the Python one costs microseconds)."""
    global _current_raw_stream
    if _current_raw_stream is None:
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _current_raw_stream = raw or (lambda i: torch.cuda.current_stream(i).cuda_stream)
    return _current_raw_stream(device_index)


def quick_operand(obj):
    """(ptr, count, dtype, cuda_index or None) of a writable contiguous torch
    tensor or numpy array of a type qcoll reduces; None for anything else."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        if obj.layout is not torch.strided or not obj.is_contiguous():
            return None
        dtype = _torch_dtypes(torch).get(obj.dtype)
        if dtype is None:
            return None
        if obj.is_cuda:
            return obj.data_ptr(), obj.numel(), dtype, obj.get_device()
        if obj.device.type != "cpu":
            return None
        return obj.data_ptr(), obj.numel(), dtype, None
    np = sys.modules.get("numpy")
    if np is not None and type(obj) is np.ndarray:
        flags = obj.flags
        dtype = _numpy_dtypes(np).get(obj.dtype)  # only native byte order is listed
        if dtype is None or not (flags.c_contiguous and flags.writeable) or not obj.size:
            return None
        # The buffer protocol gives the address faster than the array
        # interface or .ctypes, which build objects first.
        return _address(_c_char.from_buffer(obj)), obj.size, dtype, None
    return None


_c_char = ctypes.c_char
_address = ctypes.addressof
_NUMPY_DTYPES = None  # numpy.dtype -> Dtype


def _numpy_dtypes(np):
    global _NUMPY_DTYPES
    if _NUMPY_DTYPES is None:
        table = {}
        for name, dtype in DTYPE_BY_NAME.items():
            try:
                table[np.dtype(name)] = dtype
            except TypeError:  # a name numpy does not know (bfloat16, bf16...)
                pass
        _NUMPY_DTYPES = table
    return _NUMPY_DTYPES


def _fail(status, handle):
    L = lib()
    message = decode(L.qcoll_last_error()) or decode(L.qcoll_comm_last_error(handle))
    name = decode(L.qcoll_status_string(status))
    raise make_error(status, message or name, status_name=name)


def prepare(comm, name, fixed, options=None):
    """``call(*changing, stream)`` running C function ``name`` with
    ``changing`` (pointers and count), then ``fixed`` (dtype, op, root...),
    the communicator, the stream and, for an _ex function, ``options``
    (an OptionsStruct).  The communicator is read at each call, so a call
    after destroy() raises instead of using a freed handle."""
    fn = getattr(lib(), name)
    fixed = tuple(int(v) for v in fixed)
    lock = comm._lock
    what = name.replace("qcoll_", "qcoll.Comm.")
    tail = (ctypes.byref(options),) if options is not None else ()
    if len(fixed) == 2:  # the reductions: (dtype, op); the common case, unrolled
        a, b = fixed

        def call(send, recv, count, stream):
            with lock:
                h = comm._handle
                if h is None:
                    raise InvalidUsageError(f"{what}: the communicator was destroyed")
                status = fn(send, recv, count, a, b, h, stream, *tail)
            if status:
                _fail(status, h)
    else:
        def call(*args):
            with lock:
                h = comm._handle
                if h is None:
                    raise InvalidUsageError(f"{what}: the communicator was destroyed")
                status = fn(*args[:-1], *fixed, h, args[-1], *tail)
            if status:
                _fail(status, h)
    call.options = options  # keeps the struct alive with the function
    return call


def options(algo_code, quant_code):
    """A filled OptionsStruct (qcoll_options_init, then algo and quant)."""
    opts = OptionsStruct()
    status = lib().qcoll_options_init(ctypes.byref(opts))
    if status:
        _fail(status, None)
    opts.algo = algo_code
    set_quant_options(opts, quant_code)
    return opts
