"""The torch.distributed backend "qcoll": its creator, and the Python
implementation that serves where the compiled one (csrc/, a c10d::Backend
over the C library) is not available or QCOLL_TORCH_BACKEND=python asks
for it.  Both implement the same ops with the same placement and stream
rules.

PyTorch lets a pure-Python backend take part in torch.distributed by
subclassing ``ProcessGroup`` (its pybind trampoline forwards the C++ calls
that DDP and the c10d API make to the Python methods) and registering a
creator ``creator(store, rank, size, timeout)`` with
``Backend.register_backend``.  A creator that returns a ProcessGroup
becomes the whole group, so "cpu:gloo,cuda:qcoll" also lands here and qcoll
serves CPU tensors too (through its host back end).

Placement.  Every op runs on the device of its tensors: one qcoll
communicator per device (the host, or a CUDA index), created lazily by the
first op on that device, with the unique id passed through the group's
store.  The barrier runs on the device the group is bound to: the
``device_id`` of init_process_group, else the device of the first tensor
the group has seen, else the CPU.  Nothing is ever chosen from the current
CUDA device.

Streams.  A CUDA op of more than QCOLL_TORCH_INLINE_BYTES (default 1 MiB)
of tensors goes to an internal stream of the tensors' device, which first
waits for the caller's current stream of that device, so that it overlaps
the caller's later compute; outside graph capture its tensors are marked as
used on the internal stream, so the caching allocator does not hand their
memory out while the op runs.  A smaller op runs on the caller's current
stream itself (its time is the host's, and the stream switch, the start
wait and the allocator's bookkeeping would cost more than the collective).
The work object's event follows the op on its stream (for an inline op it
is recorded only when first needed: ``is_completed``, or ``wait()`` from
another stream), and ``wait()`` makes the caller's current stream wait on
it (nothing to do on the op's own stream; the host blocks only for
barrier).  CPU ops are synchronous and their work objects are complete at
once.
"""

import datetime
import os
import sys
import threading

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup as _ProcessGroup
from torch._C._distributed_c10d import Work as _Work

from .. import _torch_ext
from .._errors import InvalidArgumentError, UnsupportedError
from ..comm import Comm, get_unique_id

BACKEND_NAME = "qcoll"

_CPU = torch.device("cpu")

_OPS = (("SUM", "sum"), ("PRODUCT", "prod"), ("MIN", "min"), ("MAX", "max"), ("AVG", "avg"))


def _reduce_op(op):
    """qcoll's op for a torch ReduceOp (or RedOpType); None means SUM."""
    if op is None:
        return "sum"
    for torch_name, name in _OPS:
        ref = getattr(dist.ReduceOp, torch_name, None)
        if ref is not None and op == ref:
            return name
    raise UnsupportedError(
        f"qcoll backend: reduce op {op} is not supported (SUM, PRODUCT, MIN, MAX, AVG are)")


def _opt(opts, name, default=None):
    return getattr(opts, name, default) if opts is not None else default


def _op_of(opts):
    """The reduce op of an options object, or of a bare ReduceOp passed in
    its place."""
    if opts is None:
        return "sum"
    if isinstance(opts, (dist.ReduceOp, dist.ReduceOp.RedOpType)):
        return _reduce_op(opts)
    return _reduce_op(_opt(opts, "reduceOp"))


def _as_list(tensors):
    return [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)


def _flat(t):
    return t.view(-1) if t.is_contiguous() else t.reshape(-1)


def _check_contiguous(what, tensors):
    for t in tensors:
        if not t.is_contiguous():
            raise InvalidArgumentError(
                f"qcoll backend {what}: tensors must be contiguous (got shape "
                f"{tuple(t.shape)}, strides {t.stride()})")


def _inline_bytes():
    """QCOLL_TORCH_INLINE_BYTES: ops of at most this many bytes of tensors
    run on the caller's stream (see Streams above); 0 sends all to the
    internal stream.  The compiled backend reads the same variable."""
    raw = os.environ.get("QCOLL_TORCH_INLINE_BYTES", "")
    if raw.isdigit():
        return int(raw)
    return 1 << 20


_INLINE_BYTES = _inline_bytes()


def _tensor_bytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def _is_capturing(device):
    with torch.cuda.device(device):
        return torch.cuda.is_current_stream_capturing()


def _caller_device_id():
    """The ``device_id`` given to init_process_group / new_group.  torch
    hands it only to its built-in backends; the helper that calls a plugin's
    creator holds it in its ``device_id`` local, read here (None when the
    caller is not that helper)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_new_process_group_helper":
            device = frame.f_locals.get("device_id")
            return device if isinstance(device, torch.device) else None
        frame = frame.f_back
    return None


class QcollWork(_Work):
    """The handle of one op.  CPU ops are complete when created; CUDA ops
    know the stream they were enqueued on and carry an event recorded there
    after them, or record it when first needed (``event=None``): recorded
    late it also waits for what the stream received after the op, so a
    wait may last longer, never less."""

    def __init__(self, result, device=None, stream=None, event=None, blocking=False):
        super().__init__()
        self._result = result
        self._device = device
        self._stream = stream
        self._event = event
        self._blocking = blocking
        self._future = None

    def _done_event(self):
        if self._event is None:
            self._event = torch.cuda.Event()
            self._event.record(self._stream)
        return self._event

    def wait(self, timeout=None):
        """Make the caller's current stream (of the op's device) wait for the
        op; a barrier blocks the host until it completes."""
        if self._stream is not None:
            if self._blocking:
                self._done_event().synchronize()
            else:
                caller = torch.cuda.current_stream(self._device)
                if caller != self._stream:   # on its own stream the order is the stream's
                    caller.wait_event(self._done_event())
        return True

    def synchronize(self):
        self.wait()

    def is_completed(self):
        return self._stream is None or self._done_event().query()

    def is_success(self):
        return True

    def exception(self):
        return None

    def result(self):
        return self._result

    def get_future(self):
        """A future holding the op's output tensors.  For CUDA ops it is
        completed on the op's stream, so whoever waits on it (DDP's reducer
        does) is ordered after the op."""
        if self._future is None:
            if self._stream is None:
                fut = torch.futures.Future()
                fut.set_result(self._result)
            else:
                fut = torch.futures.Future(devices=[self._device])
                with torch.cuda.stream(self._stream):
                    fut.set_result(self._result)
            self._future = fut
        return self._future


class ProcessGroupQcoll(_ProcessGroup):
    """A torch.distributed process group whose collectives run on qcoll.

    All-reduces captured into a CUDA graph that take the two-shot have their
    tensors registered by qcoll at capture time, so replays run with no
    copy-in (the one-shot keeps its copy, which costs less there)."""

    # init_process_group(device_id=...) asks the device's backend whether
    # it can split communicators eagerly; this one cannot.
    supports_splitting = False

    def __init__(self, store, rank, size, timeout=None, device_id=None):
        try:
            super().__init__(rank, size)
        except TypeError:  # torch versions whose ProcessGroup also wants the store
            super().__init__(store, rank, size)
        self._store = store
        self._timeout = timeout
        self._comms = {}  # None: the host communicator; int: CUDA index
        self._comm_order = []  # creation order, which destroy follows
        self._created = {"cpu": 0, "cuda": 0}
        self._streams = {}
        self._lock = threading.RLock()
        self._bound_device = None
        self._first_device = None
        if device_id is not None:
            self.bind_device(device_id)

    # -- identity ----------------------------------------------------------

    def getBackendName(self):
        return BACKEND_NAME

    def __repr__(self):
        return f"<ProcessGroupQcoll rank {self.rank()} of {self.size()}>"

    @property
    def bound_device(self):
        """The device barrier runs on when no device_ids are given: the
        bound device, else the first device the group saw, else the CPU."""
        return self._bound_device or self._first_device or _CPU

    @property
    def bound_device_name(self):
        """bound_device as a string ("cpu", "cuda:N"), as the compiled backend
        reports it."""
        return str(self.bound_device)

    def comm_devices(self):
        """The devices holding a communicator, in creation order: -1 for the
        host, n for cuda:n (as the compiled backend reports them)."""
        with self._lock:
            return [-1 if key is None else key for key in self._comm_order]

    def bind_device(self, device):
        """Bind the group to ``device`` (what init_process_group's device_id
        does); barrier then runs there."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            raise InvalidArgumentError(
                "qcoll backend: bind_device needs a CUDA device with an index (cuda:N)")
        self._bound_device = device
        if device.type == "cuda":
            # torch's own record: barrier() and new_group() read it from here.
            self.bound_device_id = device

    def _get_backend(self, device):
        """This group is its own backend on every device.  torch asks for
        the backend of init_process_group's device_id right after creating
        the group, so a device with an index that arrives here before any
        other binding becomes the bound device."""
        device = torch.device(device)
        if self._bound_device is None and device.type == "cuda" and device.index is not None:
            self._bound_device = device
        return self

    # -- communicators and streams ------------------------------------------

    def _comm_for(self, device):
        key = None if device.type == "cpu" else device.index
        with self._lock:
            comm = self._comms.get(key)
            if comm is None:
                comm = self._create_comm(key)
            return comm

    def _create_comm(self, index):
        """Collective: every rank creates its n-th communicator of a kind
        (host or CUDA) at the same point, rank 0's unique id passed through
        the store under a key naming that n."""
        kind = "cpu" if index is None else "cuda"
        key = f"qcoll/unique_id/{kind}/{self._created[kind]}"
        self._created[kind] += 1
        if self.rank() == 0:
            unique_id = get_unique_id()
            self._store.set(key, unique_id)
        else:
            unique_id = bytes(self._store.get(key))
        timeout = self._timeout
        if isinstance(timeout, datetime.timedelta):
            timeout = timeout.total_seconds()
        comm = Comm.init_rank(self.size(), unique_id, self.rank(),
                              device="cpu" if index is None else index,
                              timeout=timeout or None)
        self._comms[index] = comm
        self._comm_order.append(index)
        return comm

    def _stream_for(self, device):
        stream = self._streams.get(device.index)
        if stream is None:
            stream = torch.cuda.Stream(device=device)
            self._streams[device.index] = stream
        return stream

    # -- running an op -------------------------------------------------------

    def _device_of(self, what, tensors):
        devices = {t.device for t in tensors}
        if not devices:
            raise InvalidArgumentError(f"qcoll backend {what}: no tensors")
        if len(devices) > 1:
            names = ", ".join(sorted(str(d) for d in devices))
            raise InvalidArgumentError(
                f"qcoll backend {what}: all tensors of one op must be on one device, "
                f"got {names}")
        device = devices.pop()
        if device.type not in ("cpu", "cuda"):
            raise InvalidArgumentError(
                f"qcoll backend {what}: tensors on {device} are not supported (cpu, cuda)")
        return device

    def _run(self, what, tensors, body, result, device=None, blocking=False):
        """Run ``body(comm, stream)`` on the device of ``tensors`` and return
        its work object.  On CUDA, body runs with the op's stream current
        (the caller's or the internal one, see Streams above), so tensors it
        allocates or copies belong to that stream."""
        if device is None:
            device = self._device_of(what, tensors)
        if self._first_device is None:
            self._first_device = device
        comm = self._comm_for(device)
        if device.type == "cpu":
            body(comm, None)
            return QcollWork(result)
        caller = torch.cuda.current_stream(device)
        if _tensor_bytes(tensors) <= _INLINE_BYTES:
            if device.index == torch.cuda.current_device():
                body(comm, caller)
            else:
                with torch.cuda.device(device):
                    body(comm, caller)
            event = None
            if blocking:
                event = torch.cuda.Event()
                event.record(caller)
            return QcollWork(result, device, caller, event, blocking)
        stream = self._stream_for(device)
        stream.wait_stream(caller)
        with torch.cuda.stream(stream):
            body(comm, stream)
        if not _is_capturing(device):
            for t in tensors:
                t.record_stream(stream)
        event = torch.cuda.Event()
        event.record(stream)
        return QcollWork(result, device, stream, event, blocking)

    # -- collectives ---------------------------------------------------------

    def _allreduce_each(self, what, tensors, opts):
        tensors = _as_list(tensors)
        _check_contiguous(what, tensors)
        op = _op_of(opts)

        def body(comm, stream):
            for t in tensors:
                comm.all_reduce(t, op=op, stream=stream)
        return self._run(what, tensors, body, tensors)

    def allreduce(self, tensors, opts=None):
        return self._allreduce_each("allreduce", tensors, opts)

    def allreduce_coalesced(self, tensors, opts=None):
        return self._allreduce_each("allreduce_coalesced", tensors, opts)

    def broadcast(self, tensors, opts=None):
        tensors = _as_list(tensors)
        _check_contiguous("broadcast", tensors)
        root = _opt(opts, "rootRank", 0)

        def body(comm, stream):
            for t in tensors:
                comm.broadcast(t, root=root, stream=stream)
        return self._run("broadcast", tensors, body, tensors)

    def reduce(self, tensors, opts=None):
        tensors = _as_list(tensors)
        _check_contiguous("reduce", tensors)
        root, op = _opt(opts, "rootRank", 0), _op_of(opts)

        def body(comm, stream):
            for t in tensors:
                comm.reduce(t, op=op, root=root, stream=stream)
        return self._run("reduce", tensors, body, tensors)

    def allgather(self, output_tensors, input_tensors, opts=None):
        """output_tensors[k][r] = input_tensors[k] of rank r."""
        inputs = _as_list(input_tensors)
        outputs = [list(outs) for outs in output_tensors]
        everything = inputs + [o for outs in outputs for o in outs]
        _check_contiguous("allgather", everything)
        for inp, outs in zip(inputs, outputs):
            self._check_blocks("allgather", inp, outs)

        def body(comm, stream):
            for inp, outs in zip(inputs, outputs):
                flat = torch.empty(len(outs) * inp.numel(), dtype=inp.dtype, device=inp.device)
                comm.all_gather(inp, flat, stream=stream)
                for r, out in enumerate(outs):
                    out.copy_(flat[r * inp.numel():(r + 1) * inp.numel()].view_as(out))
        return self._run("allgather", everything, body, outputs)

    def _allgather_base(self, output_tensor, input_tensor, opts=None):
        """output_tensor = the input tensors of all ranks, concatenated."""
        _check_contiguous("all_gather_into_tensor", [output_tensor, input_tensor])

        def body(comm, stream):
            comm.all_gather(input_tensor, output_tensor, stream=stream)
        return self._run("all_gather_into_tensor", [output_tensor, input_tensor], body,
                         [output_tensor])

    def allgather_into_tensor_coalesced(self, output_tensors, input_tensors, opts=None):
        outputs, inputs = list(output_tensors), list(input_tensors)
        _check_contiguous("allgather_into_tensor_coalesced", outputs + inputs)

        def body(comm, stream):
            for out, inp in zip(outputs, inputs):
                comm.all_gather(inp, out, stream=stream)
        return self._run("allgather_into_tensor_coalesced", outputs + inputs, body, outputs)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        """output_tensors[k] = op over ranks of input_tensors[k][rank]."""
        outputs = _as_list(output_tensors)
        inputs = [list(ins) for ins in input_tensors]
        everything = outputs + [i for ins in inputs for i in ins]
        _check_contiguous("reduce_scatter", everything)
        for out, ins in zip(outputs, inputs):
            self._check_blocks("reduce_scatter", out, ins)
        op = _op_of(opts)

        def body(comm, stream):
            for out, ins in zip(outputs, inputs):
                flat = torch.cat([_flat(i) for i in ins])
                comm.reduce_scatter(flat, out, op=op, stream=stream)
        return self._run("reduce_scatter", everything, body, outputs)

    def _reduce_scatter_base(self, output_tensor, input_tensor, opts=None):
        """output_tensor = op over ranks of block ``rank`` of input_tensor."""
        _check_contiguous("reduce_scatter_tensor", [output_tensor, input_tensor])
        op = _op_of(opts)

        def body(comm, stream):
            comm.reduce_scatter(input_tensor, output_tensor, op=op, stream=stream)
        return self._run("reduce_scatter_tensor", [output_tensor, input_tensor], body,
                         [output_tensor])

    def reduce_scatter_tensor_coalesced(self, output_tensors, input_tensors, opts=None):
        outputs, inputs = list(output_tensors), list(input_tensors)
        _check_contiguous("reduce_scatter_tensor_coalesced", outputs + inputs)
        op = _op_of(opts)

        def body(comm, stream):
            for out, inp in zip(outputs, inputs):
                comm.reduce_scatter(inp, out, op=op, stream=stream)
        return self._run("reduce_scatter_tensor_coalesced", outputs + inputs, body, outputs)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        """output_tensors[r] = input_tensors[rank] of rank r (sizes may differ)."""
        outputs, inputs = list(output_tensors), list(input_tensors)
        _check_contiguous("alltoall", outputs + inputs)
        if len(outputs) != self.size() or len(inputs) != self.size():
            raise InvalidArgumentError(
                f"qcoll backend alltoall: needs {self.size()} input and output tensors, "
                f"got {len(inputs)} and {len(outputs)}")

        def body(comm, stream):
            self._exchange(comm, stream, [_flat(i) for i in inputs], [_flat(o) for o in outputs])
        return self._run("alltoall", outputs + inputs, body, outputs)

    def alltoall_base(self, output_tensor, input_tensor, output_split_sizes,
                      input_split_sizes, opts=None):
        """all_to_all_single: equal blocks without split sizes, else blocks
        of the given numbers of rows (first dimension)."""
        _check_contiguous("all_to_all_single", [output_tensor, input_tensor])
        out_splits, in_splits = list(output_split_sizes), list(input_split_sizes)

        def body(comm, stream):
            if not out_splits and not in_splits:
                comm.all_to_all(input_tensor, output_tensor, stream=stream)
                return
            self._exchange(comm, stream, self._split(input_tensor, in_splits),
                           self._split(output_tensor, out_splits))
        return self._run("all_to_all_single", [output_tensor, input_tensor], body,
                         [output_tensor])

    def _split(self, t, rows):
        """t's flat storage cut into size blocks of ``rows`` rows each (equal
        blocks when rows is empty)."""
        flat = _flat(t)
        n = self.size()
        if not rows:
            return list(flat.chunk(n)) if flat.numel() else [flat] * n
        per_row = t.numel() // t.shape[0] if t.dim() and t.shape[0] else 1
        if len(rows) != n or sum(rows) * per_row != t.numel():
            raise InvalidArgumentError(
                f"qcoll backend all_to_all_single: split sizes {rows} do not cut a "
                f"tensor of shape {tuple(t.shape)} into {n} blocks")
        out, start = [], 0
        for r in rows:
            out.append(flat[start:start + r * per_row])
            start += r * per_row
        return out

    def _exchange(self, comm, stream, sends, recvs):
        """recvs[r] = sends[rank] of rank r, for blocks of any sizes: every
        block is padded to the largest block of the whole job (agreed on by
        an all-reduce of the local maxima), exchanged with one all-to-all,
        then cut back."""
        n = self.size()
        if all(s.numel() == sends[0].numel() for s in sends + recvs):
            send = torch.cat(sends) if n > 1 else sends[0].clone()
            recv = torch.empty_like(send)
            comm.all_to_all(send, recv, stream=stream)
            width = sends[0].numel()
        else:
            local = max(t.numel() for t in sends + recvs)
            widest = torch.tensor([local], dtype=torch.int64, device=sends[0].device)
            comm.all_reduce(widest, op="max", stream=stream)
            width = int(widest.item())
            send = torch.zeros((n, width), dtype=sends[0].dtype, device=sends[0].device)
            for r, s in enumerate(sends):
                send[r, :s.numel()] = s
            recv = torch.empty_like(send)
            comm.all_to_all(send, recv, stream=stream)
            recv = recv.view(-1)
        for r, out in enumerate(recvs):
            out.copy_(recv[r * width:r * width + out.numel()])

    def gather(self, output_tensors, input_tensors, opts=None):
        """On root, output_tensors[0][r] = input_tensors[0] of rank r."""
        root = _opt(opts, "rootRank", 0)
        inp = _as_list(input_tensors)[0]
        outs = list(output_tensors[0]) if self.rank() == root and output_tensors else []
        _check_contiguous("gather", [inp] + outs)
        if self.rank() == root:
            self._check_blocks("gather", inp, outs)

        def body(comm, stream):
            if self.rank() != root:
                comm.send(inp, root, stream=stream)
                return
            for r, out in enumerate(outs):
                if r == root:
                    out.copy_(inp)
                else:
                    comm.recv(out, r, stream=stream)
        return self._run("gather", [inp] + outs, body, [outs])

    def scatter(self, output_tensors, input_tensors, opts=None):
        """output_tensors[0] = input_tensors[0][rank] of the root."""
        root = _opt(opts, "rootRank", 0)
        out = _as_list(output_tensors)[0]
        ins = list(input_tensors[0]) if self.rank() == root and input_tensors else []
        _check_contiguous("scatter", [out] + ins)
        if self.rank() == root:
            self._check_blocks("scatter", out, ins)

        def body(comm, stream):
            if self.rank() != root:
                comm.recv(out, root, stream=stream)
                return
            for r, inp in enumerate(ins):
                if r == root:
                    out.copy_(inp)
                else:
                    comm.send(inp, r, stream=stream)
        return self._run("scatter", [out] + ins, body, [out])

    def send(self, tensors, dstRank, tag=0):
        """Send to group rank dstRank (qcoll orders the messages of a pair;
        the tag is not used)."""
        tensors = _as_list(tensors)
        _check_contiguous("send", tensors)

        def body(comm, stream):
            for t in tensors:
                comm.send(t, dstRank, stream=stream)
        return self._run("send", tensors, body, tensors)

    def recv(self, tensors, srcRank, tag=0):
        """Receive from group rank srcRank."""
        tensors = _as_list(tensors)
        _check_contiguous("recv", tensors)

        def body(comm, stream):
            for t in tensors:
                comm.recv(t, srcRank, stream=stream)
        return self._run("recv", tensors, body, tensors)

    def barrier(self, opts=None):
        """Every rank waits for all; on a CUDA device the wait also orders
        that device's streams and wait() blocks until it completes.  The
        device: opts.device_ids[0] when the caller names one, else the bound
        device (see bound_device)."""
        device_ids = list(_opt(opts, "device_ids", None) or [])
        device = torch.device("cuda", device_ids[0]) if device_ids else self.bound_device

        def body(comm, stream):
            comm.barrier(stream=stream)
        return self._run("barrier", [], body, [], device=device, blocking=True)

    def _check_blocks(self, what, one, blocks):
        if len(blocks) != self.size():
            raise InvalidArgumentError(
                f"qcoll backend {what}: needs {self.size()} tensors, got {len(blocks)}")
        for b in blocks:
            if b.numel() != one.numel() or b.dtype != one.dtype:
                raise InvalidArgumentError(
                    f"qcoll backend {what}: every tensor must match the {one.dtype} tensor "
                    f"of {one.numel()} elements, got {b.dtype} with {b.numel()}")

    # Names newer torch versions use for the same operations.
    all_gather_single = _allgather_base
    reduce_scatter_single = _reduce_scatter_base
    all_to_all_single = alltoall_base
    all_gather_single_coalesced = allgather_into_tensor_coalesced
    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced

    # -- lifecycle -------------------------------------------------------------

    def shutdown(self):
        """Destroy the communicators, in the order they were created (every
        rank does the same: destroy_process_group calls this)."""
        with self._lock:
            order, self._comm_order = self._comm_order, []
            comms = [self._comms.pop(key) for key in order]
        for comm in comms:
            comm.destroy()

    def abort(self):
        """Abort every communicator: waits in progress fail at once."""
        for comm in list(self._comms.values()):
            comm.abort()


BACKEND_ENV = "QCOLL_TORCH_BACKEND"
_CHOICES = ("auto", "compiled", "python")


def backend_choice():
    """Which implementation a new "qcoll" group gets, from
    QCOLL_TORCH_BACKEND (read when the group is created): auto (default:
    the compiled backend when the extension loaded, else this module's),
    compiled (an error when the extension did not load) or python."""
    value = os.environ.get(BACKEND_ENV, "auto").strip().lower() or "auto"
    if value not in _CHOICES:
        raise InvalidArgumentError(f"{BACKEND_ENV}={value!r} is not one of {', '.join(_CHOICES)}")
    return value


def _timeout_seconds(timeout):
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout or 0)


def _create(store, rank, size, timeout):
    """The creator torch.distributed calls for a "qcoll" group: the compiled
    c10d backend (registered by torch for each device of the group) when it
    is chosen and loaded, else a ProcessGroupQcoll (the whole group)."""
    device_id = _caller_device_id()
    choice = backend_choice()
    if choice != "python":
        status = _torch_ext.load()
        if status.loaded:
            index = device_id.index if device_id is not None and device_id.type == "cuda" else -1
            return status.module.QcollBackend(store, rank, size, _timeout_seconds(timeout),
                                              -1 if index is None else index)
        if choice == "compiled":
            raise UnsupportedError(f"{BACKEND_ENV}=compiled, but {status.reason}")
    return ProcessGroupQcoll(store, rank, size, timeout, device_id=device_id)


def backend_of(group=None, device=None):
    """The object serving ``group`` (default: the world) on ``device``: the
    compiled QcollBackend, or the ProcessGroupQcoll itself."""
    group = group if group is not None else dist.group.WORLD
    if isinstance(group, ProcessGroupQcoll):
        return group
    return group._get_backend(torch.device(device if device is not None else "cpu"))


def register_backend():
    """Register "qcoll" with torch.distributed (once; importing qcoll.torch
    does it)."""
    if BACKEND_NAME.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    dist.Backend.register_backend(BACKEND_NAME, _create, devices=["cpu", "cuda"])
