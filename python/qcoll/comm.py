"""Communicators and collectives over the C library.

A Comm wraps one qcoll_comm_t.  Collectives take array objects (numpy
arrays, torch tensors, CUDA array interface and DLPack objects); host
buffers run synchronously on the host back end, CUDA buffers are enqueued
on a stream: the one passed as ``stream=``, else the current torch stream
of the tensor's own device (or the stream a CUDA-array-interface producer
names).  Without an output argument a collective works in place where that
is meaningful (all_reduce, reduce, broadcast, all_to_all) and allocates the
output otherwise (all_gather, reduce_scatter).  Every collective returns its
output.
"""

from __future__ import annotations

import ctypes
import datetime
import sys
import threading
from typing import Any, List, Optional, Tuple, Union

from . import _errors, _lean
from ._buffer import as_buffer, default_stream, stream_handle
from ._errors import InvalidArgumentError, InvalidUsageError, make_error
from ._lib import (QCOLL_DEVICE_CURRENT, QCOLL_DEVICE_NONE, QCOLL_UNIQUE_ID_BYTES,
                   ConfigStruct, OptionsStruct, UniqueIdStruct, decode, lib)
from ._types import (SUPPORTED_DTYPES, Algo, Dtype, Op, Quant, as_algo, as_dtype, as_op,
                     as_quant, quant_code, set_quant_options)

# What the collectives accept (see the module docstring): any array object
# (numpy, torch, __cuda_array_interface__, DLPack, buffer protocol); a
# stream as a torch/CUDA stream object or a raw cudaStream_t integer.
Buffer = Any
Stream = Any
OpLike = Union[str, Op]
AlgoLike = Optional[Union[str, Algo]]
QuantLike = Optional[Union[str, Quant]]
# A device: None (the current one), "cpu", "cuda:N", an int or a torch.device.
DeviceLike = Any
Timeout = Optional[Union[float, datetime.timedelta]]

# ---- status handling ---------------------------------------------------------


def _raise(status, handle=None):
    """Raise the exception of a failed call, with the library's message."""
    L = lib()
    message = decode(L.qcoll_last_error())
    if not message and handle:
        message = decode(L.qcoll_comm_last_error(handle))
    name = decode(L.qcoll_status_string(status))
    raise make_error(status, message or name, status_name=name)


def _check(status, handle=None):
    if status != _errors.OK:
        _raise(status, handle)


def status_string(status: int) -> str:
    """The library's short description of a qcoll_status_t value."""
    return decode(lib().qcoll_status_string(int(status)))


# ---- module-level helpers ------------------------------------------------------


def version() -> Tuple[int, int, int]:
    """The library's run-time version as (major, minor, patch)."""
    v = ctypes.c_int()
    _check(lib().qcoll_get_version(ctypes.byref(v)))
    return (v.value // 10000, v.value // 100 % 100, v.value % 100)


def dtype_size(dtype: Union[int, Dtype]) -> int:
    """Bytes per element of a qcoll dtype, as the library reports it."""
    return int(lib().qcoll_dtype_size(int(dtype)))


def env_table() -> List[Tuple[str, str, str]]:
    """The library's QCOLL_* configuration variables: a list of
    (name, default, description)."""
    out, i = [], 0
    name, default, doc = ctypes.c_char_p(), ctypes.c_char_p(), ctypes.c_char_p()
    while lib().qcoll_env_describe(i, ctypes.byref(name), ctypes.byref(default),
                                   ctypes.byref(doc)) == _errors.OK:
        out.append((decode(name.value), decode(default.value), decode(doc.value)))
        i += 1
    return out


def selection_table() -> str:
    """The library's algorithm selection table (which path serves which
    call, with the thresholds in force), as text."""
    needed = ctypes.c_size_t()
    lib().qcoll_selection_table_format(None, 0, ctypes.byref(needed))
    buf = ctypes.create_string_buffer(max(needed.value, 1))
    _check(lib().qcoll_selection_table_format(buf, len(buf), None))
    return buf.value.decode("utf-8", "replace")


def get_unique_id() -> bytes:
    """A new unique id (128 bytes).  This starts the rendezvous service in
    the calling process, which must live until every rank has joined."""
    uid = UniqueIdStruct()
    _check(lib().qcoll_get_unique_id(ctypes.byref(uid)))
    return bytes(uid.bytes)


def unique_id_to_hex(unique_id: bytes) -> str:
    """The hex form (256 lowercase digits) of a unique id, as QCOLL_UNIQUE_ID
    carries it."""
    uid = _unique_id_struct(unique_id)
    out = ctypes.create_string_buffer(2 * QCOLL_UNIQUE_ID_BYTES + 1)
    _check(lib().qcoll_unique_id_to_hex(ctypes.byref(uid), out))
    return out.value.decode("ascii")


def unique_id_from_hex(text: str) -> bytes:
    """Parse the hex form of a unique id back into bytes."""
    uid = UniqueIdStruct()
    _check(lib().qcoll_unique_id_from_hex(str(text).encode("ascii", "replace"),
                                          ctypes.byref(uid)))
    return bytes(uid.bytes)


def _unique_id_struct(unique_id):
    if isinstance(unique_id, str):
        return UniqueIdStruct.from_buffer_copy(unique_id_from_hex(unique_id))
    try:
        if isinstance(unique_id, int):  # bytes(n) would make n zero bytes
            raise TypeError
        raw = bytes(unique_id)
    except TypeError:
        raise InvalidArgumentError(
            f"unique_id must be bytes (from qcoll.get_unique_id()) or its hex "
            f"string, not {type(unique_id).__name__}") from None
    if len(raw) != QCOLL_UNIQUE_ID_BYTES:
        raise InvalidArgumentError(
            f"unique_id has {len(raw)} bytes; a qcoll unique id has "
            f"{QCOLL_UNIQUE_ID_BYTES}")
    return UniqueIdStruct.from_buffer_copy(raw)


def _device_arg(device):
    """The config's device field from None (the CUDA device current at init,
    if any), "cpu"/"none" (host only), an index, "cuda:N" or a
    torch.device.  A CUDA device without an index is refused rather than
    guessed."""
    if device is None:
        return QCOLL_DEVICE_CURRENT
    if isinstance(device, bool):
        raise InvalidArgumentError(f"device {device!r} is not a device")
    if isinstance(device, int):
        return device
    text = str(device).strip().lower()  # torch.device prints as "cuda:1" / "cpu"
    if text in ("cpu", "none", "host"):
        return QCOLL_DEVICE_NONE
    if text == "current":
        return QCOLL_DEVICE_CURRENT
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    raise InvalidArgumentError(
        f"device {device!r} is not a device: pass an index, 'cuda:N', 'cpu' or "
        f"None (the CUDA device current at init)")


def _timeout_seconds(timeout):
    if timeout is None:
        return 0.0
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    timeout = float(timeout)
    if timeout <= 0:
        raise InvalidArgumentError(f"timeout {timeout} s must be positive")
    return timeout


def _config(device, timeout, host_id):
    cfg = ConfigStruct()
    _check(lib().qcoll_config_init(ctypes.byref(cfg)))
    cfg.device = _device_arg(device)
    cfg.timeout_s = _timeout_seconds(timeout)
    host = None
    if host_id is not None:
        host = str(host_id).encode()
        cfg.host_id = host
    return cfg, host


# ---- operands ------------------------------------------------------------------


def _empty_like(buf, shape, what):
    """A new output of ``shape`` with buf's dtype, on buf's device."""
    if buf.kind == "torch":
        t = buf.obj
        import torch
        return torch.empty(shape, dtype=t.dtype, device=t.device)
    if buf.kind in ("numpy", "array_interface", "buffer"):
        import numpy
        return numpy.empty(shape, dtype=numpy.asarray(buf.obj).dtype)
    raise InvalidArgumentError(
        f"{what}: cannot allocate an output for a {buf.kind} input; pass recvbuf")


def _copy_of(buf, what):
    if buf.kind == "torch":
        return buf.obj.clone()
    if buf.kind in ("numpy", "array_interface", "buffer"):
        import numpy
        return numpy.array(numpy.asarray(buf.obj), copy=True)
    raise InvalidArgumentError(
        f"{what}: cannot run in place on a {buf.kind} buffer; pass recvbuf")


def _element_type(what, bufs, reducing):
    """The qcoll dtype and element size shared by ``bufs`` (name, Buffer).
    Types qcoll cannot reduce are moved as bytes by the collectives that do
    not reduce."""
    first_name, first = bufs[0]
    for name, b in bufs[1:]:
        if b.dtype_name != first.dtype_name:
            raise InvalidArgumentError(
                f"{what}: {first_name} is {first.dtype_name} but {name} is "
                f"{b.dtype_name}; both must have the same dtype")
    if first.dtype is not None:
        return first.dtype, first.itemsize
    if reducing:
        raise InvalidArgumentError(
            f"{what}: {first_name} has dtype {first.dtype_name}, which qcoll cannot "
            f"reduce; qcoll reduces {SUPPORTED_DTYPES}")
    return Dtype.UINT8, 1


def _writable(what, name, buf):
    if buf.readonly:
        raise InvalidArgumentError(f"{what}: {name} is read-only ({buf.describe()})")


def _same_size(what, a_name, a, b_name, b, factor=1):
    if a.nbytes != b.nbytes * factor:
        times = f"{factor} x " if factor != 1 else ""
        raise InvalidArgumentError(
            f"{what}: {a_name} holds {a.count} elements ({a.describe()}) but must "
            f"hold {times}the {b.count} elements of {b_name} ({b.describe()})")


class _Operands:
    """Operands of one call: buffers, the element type, the stream."""

    def __init__(self, what, stream, reducing, **named):
        self.what = what
        explicit = stream_handle(stream)
        self.bufs = {}
        for name, obj in named.items():
            if obj is not None:
                self.bufs[name] = as_buffer(obj, what, name, explicit)
        present = list(self.bufs.items())
        if not present:
            raise InvalidArgumentError(f"{what}: no buffer given")
        self.dtype, self.elem = _element_type(what, present, reducing)
        if explicit is not None:
            self.stream = explicit
        else:
            self.stream = None
            for b in self.bufs.values():
                if b.is_cuda:
                    self.stream = default_stream(b)
                    break

    def __getitem__(self, name):
        return self.bufs.get(name)

    def ptr(self, name):
        b = self.bufs.get(name)
        return b.ptr if b is not None else None

    def count(self, name):
        return self.bufs[name].nbytes // self.elem


# ---- the communicator ------------------------------------------------------------


class Comm:
    """One rank's qcoll communicator.

    Create it with Comm.init_rank() or Comm.from_env(); use it as a context
    manager or call destroy() when done (destroy waits for the other ranks
    to destroy too, within the deadline).  One thread at a time may use a
    communicator; abort() may be called from any thread at any time.

    Every collective but barrier takes ``algo=``: None keeps the selection
    table's path (or QCOLL_ALGO's), a name ('host', 'nccl', 'ipc', and for
    all_reduce 'oneshot' and 'twoshot') forces this call's path; a path that
    cannot serve the call raises UnsupportedError and enqueues nothing.
    all_reduce also takes ``quant=``.  Every rank must pass the same, and a
    send and its recv the same algo.
    """

    def __init__(self, handle, host_id=None):
        self._handle = handle
        self._host_id = host_id  # keeps the string the config pointed at alive
        self._lock = threading.Lock()
        self._prepared = {}  # (dtype, op, algo, quant) -> all-reduce call
        self._rank = self._query("qcoll_comm_rank")
        self._size = self._query("qcoll_comm_size")
        device = self._query("qcoll_comm_device")
        self._device = None if device == QCOLL_DEVICE_NONE else device

    # -- creation ------------------------------------------------------------

    @classmethod
    def init_rank(cls, nranks: int, unique_id: bytes, rank: int, device: DeviceLike = None,
                  timeout: Timeout = None, host_id: Optional[str] = None) -> "Comm":
        """Join an ``nranks``-rank communicator as ``rank``, rendezvousing
        through ``unique_id`` (bytes from qcoll.get_unique_id() or its hex).
        ``device``: a CUDA index, 'cuda:N', a torch.device, 'cpu' (host
        only) or None (the CUDA device current now, if any).  ``timeout``:
        the deadline of every wait, in seconds or as a timedelta (None:
        QCOLL_TIMEOUT)."""
        uid = _unique_id_struct(unique_id)
        cfg, host = _config(device, timeout, host_id)
        handle = ctypes.c_void_p()
        _check(lib().qcoll_comm_init_rank(ctypes.byref(handle), int(nranks), ctypes.byref(uid),
                                          int(rank), ctypes.byref(cfg)))
        return cls(handle.value, host)

    @classmethod
    def from_env(cls, device: DeviceLike = None, timeout: Timeout = None,
                 host_id: Optional[str] = None) -> "Comm":
        """Create the communicator a launcher described in the environment
        (qcoll-run, torchrun, Open MPI, Slurm)."""
        cfg, host = _config(device, timeout, host_id)
        handle = ctypes.c_void_p()
        _check(lib().qcoll_comm_init_env(ctypes.byref(handle), ctypes.byref(cfg)))
        return cls(handle.value, host)

    # -- properties ------------------------------------------------------------

    def _query(self, fn):
        out = ctypes.c_int()
        _check(getattr(lib(), fn)(self._handle, ctypes.byref(out)), self._handle)
        return out.value

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def size(self) -> int:
        return self._size

    @property
    def device(self) -> Optional[int]:
        """The communicator's CUDA device index, or None for host only."""
        return self._device

    @property
    def handle(self) -> Optional[int]:
        """The qcoll_comm_t as an int (None once destroyed)."""
        return self._handle

    @property
    def closed(self) -> bool:
        return self._handle is None

    @property
    def last_error(self) -> str:
        """The library's reason for the last failure on this communicator."""
        if self._handle is None:
            return ""
        return decode(lib().qcoll_comm_last_error(self._handle))

    def async_error(self) -> Optional[_errors.QcollError]:
        """The error raised by asynchronous (GPU) work, as an exception
        object, or None when nothing went wrong."""
        h = self._live("async_error")
        st = ctypes.c_int()
        _check(lib().qcoll_comm_get_async_error(h, ctypes.byref(st)), h)
        if st.value == _errors.OK:
            return None
        name = decode(lib().qcoll_status_string(st.value))
        return make_error(st.value, self.last_error or name, status_name=name)

    def __repr__(self):
        if self._handle is None:
            return "<qcoll.Comm destroyed>"
        dev = "host" if self._device is None else f"cuda:{self._device}"
        return f"<qcoll.Comm rank {self._rank} of {self._size} on {dev}>"

    # -- lifecycle ---------------------------------------------------------------

    def _live(self, what):
        h = self._handle
        if h is None:
            raise InvalidUsageError(f"qcoll.Comm.{what}: the communicator was destroyed")
        return h

    def destroy(self) -> None:
        """Free the communicator after the other ranks reach destroy too.
        Calling it again does nothing."""
        with self._lock:
            h, self._handle = self._handle, None
            if h is not None:
                _check(lib().qcoll_comm_destroy(h))

    def abort(self) -> None:
        """Make every wait on this communicator, in any thread, fail at once
        with AbortedError (peers see PeerFailureError).  destroy() still
        frees it.  Never blocks."""
        h = self._handle
        if h is not None:
            _check(lib().qcoll_comm_abort(h), h)

    def __enter__(self) -> "Comm":
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.destroy()
            return False
        # A rank leaving on an exception aborts first so that peers stuck in
        # a collective with it fail promptly instead of waiting out the
        # deadline; the original exception is the one that propagates.
        try:
            self.abort()
            self.destroy()
        except _errors.QcollError:
            pass
        return False

    # -- collectives -------------------------------------------------------------

    def _run(self, fn, *args, algo=None, quant=None):
        """Call collective ``fn`` with ``args`` (its arguments but the
        communicator, which every collective takes just before the stream,
        its last argument).  With ``algo`` or ``quant`` its _ex form runs,
        with those as per-call options."""
        opts = None
        if algo is not None or quant is not None:
            opts = OptionsStruct()
            _check(lib().qcoll_options_init(ctypes.byref(opts)))
            opts.algo = int(as_algo("auto" if algo is None else algo))
            set_quant_options(opts, quant_code(quant))
        with self._lock:
            h = self._live(fn)
            if opts is None:
                _check(getattr(lib(), fn)(*args[:-1], h, args[-1]), h)
            else:
                _check(getattr(lib(), fn + "_ex")(*args[:-1], h, args[-1],
                                                   ctypes.byref(opts)), h)

    def all_reduce(self, sendbuf: Buffer, recvbuf: Buffer = None, op: OpLike = "sum",
                   stream: Stream = None, algo: AlgoLike = None,
                   quant: QuantLike = None) -> Buffer:
        """recvbuf = op over ranks of sendbuf (in place without recvbuf).

        ``algo`` forces the path of this call ('auto', 'host', 'oneshot',
        'twoshot', 'nccl', 'ipc'; None: the selection table, or
        QCOLL_ALGO), ``quant`` its transfer (None/'default', 'none'/'fp',
        'fp8', 'int8', 'int6', 'int4', 'int3').  Every rank must pass the
        same."""
        if self._lean_all_reduce(sendbuf, recvbuf, op, stream, algo, quant):
            return recvbuf if recvbuf is not None else sendbuf
        return self._all_reduce_full(sendbuf, recvbuf, op, stream, algo, quant)

    def _all_reduce_full(self, sendbuf, recvbuf, op, stream, algo, quant):
        """all_reduce of any array kind, every argument checked."""
        what = "qcoll.Comm.all_reduce"
        ops = _Operands(what, stream, True, sendbuf=sendbuf, recvbuf=recvbuf)
        out = self._reduce_out(ops, what)
        self._run("qcoll_all_reduce", ops.ptr("sendbuf"), out.ptr, ops.count("sendbuf"),
                  int(ops.dtype), int(as_op(op)), ops.stream, algo=algo, quant=quant)
        return recvbuf if recvbuf is not None else sendbuf

    def _lean_all_reduce(self, sendbuf, recvbuf, op, stream, algo, quant):
        """The all-reduce of contiguous torch tensors or numpy arrays through
        a prepared call (see _lean); False when the operands need the full
        path (other kinds, mismatches: the full path names the error)."""
        send = _lean.quick_operand(sendbuf)
        if send is None:
            return False
        recv = send if recvbuf is None else _lean.quick_operand(recvbuf)
        if recv is None or recv[1:] != send[1:]:
            return False
        try:
            call = self._prepared[(int(send[2]), op, algo, quant)]
        except (KeyError, TypeError):  # TypeError: an unhashable argument
            call = self.prepare_all_reduce(send[2], op, algo, quant)
        if stream is not None:
            stream = stream_handle(stream)
        elif send[3] is not None:
            stream = _lean.current_stream(sys.modules["torch"], send[3])
        call(send[0], recv[0], send[1], stream)
        return True

    def prepare_all_reduce(self, dtype: Any, op: OpLike = "sum", algo: AlgoLike = None,
                           quant: QuantLike = None) -> Any:
        """A function ``call(sendptr, recvptr, count, stream)`` running this
        communicator's all-reduce of ``count`` elements of ``dtype`` with
        ``op``, ``algo`` and ``quant`` fixed now: the call converts nothing
        but its four integers (stream None: the legacy default stream, or
        host memory).  For call sites that repeat one all-reduce on raw
        pointers; raises as all_reduce does."""
        dtype = as_dtype(dtype)
        key = (int(dtype), op, algo, quant)  # an int hashes faster than the enum
        try:
            call = self._prepared.get(key)
        except TypeError:
            key, call = None, None
        if call is not None:
            return call
        fixed = (int(dtype), int(as_op(op)))
        if algo is None and quant is None:
            call = _lean.prepare(self, "qcoll_all_reduce", fixed)
        else:
            opts = _lean.options(int(as_algo("auto" if algo is None else algo)),
                                 quant_code(quant))
            call = _lean.prepare(self, "qcoll_all_reduce_ex", fixed, opts)
        if key is not None:
            self._prepared[key] = call
        return call

    def all_reduce_ex(self, sendbuf: Buffer, recvbuf: Buffer = None, op: OpLike = "sum",
                      algo: AlgoLike = "auto", quant: QuantLike = None,
                      stream: Stream = None) -> Buffer:
        """all_reduce with a forced algorithm and quantisation (the same as
        ``all_reduce(..., algo=, quant=)``)."""
        return self.all_reduce(sendbuf, recvbuf, op=op, stream=stream, algo=algo,
                               quant=quant)

    def _reduce_out(self, ops, what):
        send = ops["sendbuf"]
        if send is None:
            raise InvalidArgumentError(f"{what}: sendbuf is required")
        out = ops["recvbuf"] or send
        _writable(what, "recvbuf" if ops["recvbuf"] else "sendbuf", out)
        _same_size(what, "recvbuf", out, "sendbuf", send)
        return out

    def reduce(self, sendbuf: Buffer, recvbuf: Buffer = None, op: OpLike = "sum",
               root: int = 0, stream: Stream = None, algo: AlgoLike = None) -> Buffer:
        """root's recvbuf = op over ranks of sendbuf (root's sendbuf in place
        without recvbuf; other ranks' buffers are left alone)."""
        what = "qcoll.Comm.reduce"
        ops = _Operands(what, stream, True, sendbuf=sendbuf, recvbuf=recvbuf)
        send = ops["sendbuf"]
        if send is None:
            raise InvalidArgumentError(f"{what}: sendbuf is required")
        out_ptr = None
        if self._rank == root:
            out = ops["recvbuf"] or send
            _writable(what, "recvbuf", out)
            _same_size(what, "recvbuf", out, "sendbuf", send)
            out_ptr = out.ptr
        elif ops["recvbuf"] is not None:
            out_ptr = ops["recvbuf"].ptr
        self._run("qcoll_reduce", send.ptr, out_ptr, ops.count("sendbuf"), int(ops.dtype),
                  int(as_op(op)), int(root), ops.stream, algo=algo)
        return recvbuf if recvbuf is not None else sendbuf

    def broadcast(self, buf: Buffer, recvbuf: Buffer = None, root: int = 0,
                  stream: Stream = None, algo: AlgoLike = None) -> Buffer:
        """Copy root's ``buf`` into every rank's ``recvbuf`` (into ``buf``
        itself without recvbuf).  On other ranks ``buf`` may be None when
        recvbuf is given."""
        what = "qcoll.Comm.broadcast"
        ops = _Operands(what, stream, False, buf=buf, recvbuf=recvbuf)
        out = ops["recvbuf"] or ops["buf"]
        _writable(what, "recvbuf" if ops["recvbuf"] else "buf", out)
        if self._rank == root:
            if ops["buf"] is None:
                raise InvalidArgumentError(f"{what}: root {root} must pass the data in buf")
            _same_size(what, "recvbuf", out, "buf", ops["buf"])
        count = out.nbytes // ops.elem
        self._run("qcoll_broadcast", ops.ptr("buf"), out.ptr, count, int(ops.dtype), int(root),
                  ops.stream, algo=algo)
        return recvbuf if recvbuf is not None else buf

    def all_gather(self, sendbuf: Buffer, recvbuf: Buffer = None, stream: Stream = None,
                   algo: AlgoLike = None) -> Buffer:
        """recvbuf[r] = sendbuf of rank r.  Without recvbuf a new array of
        shape (size, *sendbuf.shape) is returned."""
        what = "qcoll.Comm.all_gather"
        if recvbuf is None:
            send = as_buffer(sendbuf, what, "sendbuf")
            recvbuf = _empty_like(send, (self._size,) + tuple(send.shape), what)
        ops = _Operands(what, stream, False, sendbuf=sendbuf, recvbuf=recvbuf)
        _writable(what, "recvbuf", ops["recvbuf"])
        _same_size(what, "recvbuf", ops["recvbuf"], "sendbuf", ops["sendbuf"], self._size)
        self._run("qcoll_all_gather", ops.ptr("sendbuf"), ops.ptr("recvbuf"),
                  ops.count("sendbuf"), int(ops.dtype), ops.stream, algo=algo)
        return recvbuf

    def reduce_scatter(self, sendbuf: Buffer, recvbuf: Buffer = None, op: OpLike = "sum",
                       stream: Stream = None, algo: AlgoLike = None) -> Buffer:
        """recvbuf = op over ranks of block ``rank`` of sendbuf (sendbuf
        holds size blocks).  Without recvbuf a new array is returned: of
        shape sendbuf.shape[1:] when sendbuf is (size, ...) with two or more
        dimensions, else flat."""
        what = "qcoll.Comm.reduce_scatter"
        if recvbuf is None:
            send = as_buffer(sendbuf, what, "sendbuf")
            if send.count % self._size:
                raise InvalidArgumentError(
                    f"{what}: sendbuf holds {send.count} elements, not a multiple of "
                    f"the {self._size} ranks")
            shape = tuple(send.shape)
            if len(shape) >= 2 and shape[0] == self._size:
                out_shape = shape[1:]
            else:
                out_shape = (send.count // self._size,)
            recvbuf = _empty_like(send, out_shape, what)
        ops = _Operands(what, stream, True, sendbuf=sendbuf, recvbuf=recvbuf)
        _writable(what, "recvbuf", ops["recvbuf"])
        _same_size(what, "sendbuf", ops["sendbuf"], "recvbuf", ops["recvbuf"], self._size)
        self._run("qcoll_reduce_scatter", ops.ptr("sendbuf"), ops.ptr("recvbuf"),
                  ops.count("recvbuf"), int(ops.dtype), int(as_op(op)), ops.stream, algo=algo)
        return recvbuf

    def all_to_all(self, sendbuf: Buffer, recvbuf: Buffer = None, stream: Stream = None,
                   algo: AlgoLike = None) -> Buffer:
        """Block r of recvbuf = block ``rank`` of rank r's sendbuf (both hold
        size equal blocks).  Without recvbuf the exchange happens in place
        in sendbuf (through a temporary copy)."""
        what = "qcoll.Comm.all_to_all"
        in_place = recvbuf is None
        if in_place:
            recvbuf = sendbuf
            sendbuf = _copy_of(as_buffer(sendbuf, what, "sendbuf"), what)
        ops = _Operands(what, stream, False, sendbuf=sendbuf, recvbuf=recvbuf)
        send = ops["sendbuf"]
        _writable(what, "recvbuf", ops["recvbuf"])
        _same_size(what, "recvbuf", ops["recvbuf"], "sendbuf", send)
        total = ops.count("sendbuf")
        if total % self._size:
            raise InvalidArgumentError(
                f"{what}: sendbuf holds {total} elements, not a multiple of the "
                f"{self._size} ranks")
        self._run("qcoll_all_to_all", send.ptr, ops.ptr("recvbuf"), total // self._size,
                  int(ops.dtype), ops.stream, algo=algo)
        return recvbuf

    def send(self, buf: Buffer, peer: int, stream: Stream = None,
             algo: AlgoLike = None) -> Buffer:
        """Send ``buf`` to rank ``peer`` (which receives the same count and
        dtype)."""
        ops = _Operands("qcoll.Comm.send", stream, False, buf=buf)
        self._run("qcoll_send", ops.ptr("buf"), ops.count("buf"), int(ops.dtype), int(peer),
                  ops.stream, algo=algo)
        return buf

    def recv(self, buf: Buffer, peer: int, stream: Stream = None,
             algo: AlgoLike = None) -> Buffer:
        """Receive into ``buf`` from rank ``peer``."""
        what = "qcoll.Comm.recv"
        ops = _Operands(what, stream, False, buf=buf)
        _writable(what, "buf", ops["buf"])
        self._run("qcoll_recv", ops.ptr("buf"), ops.count("buf"), int(ops.dtype), int(peer),
                  ops.stream, algo=algo)
        return buf

    def register(self, buf: Buffer) -> "Registration":
        """Register the GPU allocation holding ``buf`` (a CUDA tensor or any
        GPU array) with the communicator, collectively: every rank calls
        it, in the same order, each with its own buffer.  The two-shot IPC
        all-reduce then reads (and writes) it in place with no copy-in (the
        one-shot keeps its copy, which costs less there).  Two-shot
        all-reduces captured into a CUDA graph register their buffers
        themselves (QCOLL_GRAPH_REGISTER), so this is for eager calls.  A no-op where
        the IPC kernels do not serve.  Returns a handle for
        :meth:`deregister`; keep ``buf`` alive until then."""
        what = "qcoll.Comm.register"
        b = as_buffer(buf, what, "buf")
        out = ctypes.c_void_p()
        with self._lock:
            h = self._live("register")
            _check(lib().qcoll_comm_register(h, b.ptr, b.nbytes, ctypes.byref(out)), h)
        return Registration(out.value, b.obj)

    def deregister(self, reg: "Registration") -> None:
        """Remove a registration (collectively; ``None`` on a rank with
        nothing to remove).  Waits for the device and every rank; graphs
        captured with the buffer stay valid and stage it from then on."""
        handle = reg.handle if reg is not None else None
        with self._lock:
            h = self._live("deregister")
            _check(lib().qcoll_comm_deregister(h, handle), h)
        if reg is not None:
            reg.handle = None

    def barrier(self, stream: Stream = None) -> None:
        """Wait until every rank has entered the barrier; with a stream on a
        GPU communicator the barrier is also ordered on that stream."""
        s = stream_handle(stream)
        with self._lock:
            h = self._live("barrier")
            _check(lib().qcoll_barrier(h, s), h)


class Registration:
    """A buffer registered with :meth:`Comm.register` (keeps it alive)."""

    def __init__(self, handle, obj):
        self.handle = handle
        self.obj = obj


__all__ = ["Comm", "Registration", "get_unique_id", "unique_id_to_hex", "unique_id_from_hex", "version",
           "dtype_size", "env_table", "selection_table", "status_string"]
