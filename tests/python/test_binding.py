"""The ctypes binding in one process: library loading, enums against the
library, unique ids, every kind of array object, and errors raised as Python
exceptions carrying qcoll's message.  A one-rank communicator serves the
calls that need one."""

import re
import subprocess
import sys

import numpy as np
import pytest

import qcoll
from qcoll._lib import lib
from qcoll_testutil import DTYPES, REPO, BF16Array, make_array, rank_env, values_of

HEADER = (REPO / "include" / "qcoll.h").read_text()


@pytest.fixture
def comm():
    with qcoll.Comm.init_rank(1, qcoll.get_unique_id(), 0, device="cpu", timeout=30) as c:
        yield c


# ---- library and enums ------------------------------------------------------------

def test_version_matches_header():
    want = tuple(int(re.search(rf"#define QCOLL_VERSION_{part} (\d+)", HEADER).group(1))
                 for part in ("MAJOR", "MINOR", "PATCH"))
    assert qcoll.version() == want
    assert qcoll.__version__ == "%d.%d.%d" % want


def test_library_path_is_reported():
    path = qcoll.lib_path()
    assert "qcoll" in path


def test_every_header_status_has_its_exception_class():
    statuses = {name: int(v) for name, v in re.findall(r"QCOLL_ERR_(\w+) = (-\d+)", HEADER)}
    assert len(statuses) >= 13
    classes = set()
    for name, value in statuses.items():
        cls = qcoll.error_class(value)
        assert issubclass(cls, qcoll.QcollError) and cls is not qcoll.QcollError, name
        assert cls.status == value
        assert qcoll.status_string(value) and qcoll.status_string(value) != "unknown status"
        classes.add(cls)
    assert len(classes) == len(statuses)
    assert issubclass(qcoll.InvalidArgumentError, ValueError)


def test_enums_agree_with_the_library():
    L = lib()
    for d in qcoll.Dtype:
        name = L.qcoll_dtype_name(int(d)).decode()
        assert qcoll._types.as_dtype(name) is d, (d, name)
        assert qcoll.dtype_size(d) == d.itemsize
    for op in qcoll.Op:
        assert L.qcoll_op_name(int(op)).decode() == op.name.lower()
    for algo in qcoll.Algo:
        assert L.qcoll_algo_name(int(algo)).decode() == algo.name.lower()
    for q in qcoll.Quant:
        assert L.qcoll_quant_name(int(q)).decode() == q.name.lower()
    assert L.qcoll_dtype_name(len(qcoll.Dtype)).decode() == "invalid"


def test_env_table_lists_the_timeout():
    names = [name for name, _, _ in qcoll.env_table()]
    assert "QCOLL_TIMEOUT" in names and all(n.startswith("QCOLL_") for n in names)


def test_selection_table_is_text():
    table = qcoll.selection_table()
    assert isinstance(table, str) and "host" in table.lower()


def test_missing_library_is_a_clear_error():
    code = ("import qcoll\n"
            "try:\n    qcoll.version()\n"
            "except qcoll.LibraryNotFoundError as e:\n    print('ERR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=rank_env({"QCOLL_LIB": "/nonexistent/libqcoll.so"}), timeout=60)
    assert "ERR could not load libqcoll" in out.stdout, out.stdout + out.stderr
    assert "/nonexistent/libqcoll.so" in out.stdout
    assert "QCOLL_LIB" in out.stdout


# ---- unique ids -------------------------------------------------------------------

def test_unique_id_round_trip():
    a, b = qcoll.get_unique_id(), qcoll.get_unique_id()
    assert isinstance(a, bytes) and len(a) == qcoll.UNIQUE_ID_BYTES == 128
    assert a != b
    text = qcoll.unique_id_to_hex(a)
    assert len(text) == 256 and re.fullmatch(r"[0-9a-f]+", text)
    assert qcoll.unique_id_from_hex(text) == a


def test_bad_unique_ids_are_refused():
    with pytest.raises(qcoll.InvalidArgumentError):
        qcoll.unique_id_from_hex("xyz")
    with pytest.raises(qcoll.InvalidArgumentError, match="has 5 bytes"):
        qcoll.Comm.init_rank(1, b"short", 0, device="cpu")
    with pytest.raises(qcoll.InvalidArgumentError, match="must be bytes"):
        qcoll.Comm.init_rank(1, 12345, 0, device="cpu")


def test_init_from_hex_id_and_properties():
    uid = qcoll.unique_id_to_hex(qcoll.get_unique_id())
    with qcoll.Comm.init_rank(1, uid, 0, device="cpu", timeout=30) as c:
        assert (c.rank, c.size, c.device) == (0, 1, None)
        assert "rank 0 of 1" in repr(c)
        assert c.async_error() is None
    assert c.closed and "destroyed" in repr(c)


def test_init_refuses_rank_out_of_range():
    with pytest.raises(qcoll.InvalidArgumentError) as e:
        qcoll.Comm.init_rank(2, qcoll.get_unique_id(), 5, device="cpu", timeout=10)
    assert e.value.message  # the library's reason


def test_device_arguments():
    parse = qcoll.comm._device_arg
    assert parse(None) == qcoll.DEVICE_CURRENT
    assert parse("cpu") == parse("none") == qcoll.DEVICE_NONE
    assert parse(3) == parse("cuda:3") == 3
    with pytest.raises(qcoll.InvalidArgumentError, match="not a device"):
        parse("cuda")  # no index: refused, never guessed
    with pytest.raises(qcoll.InvalidArgumentError, match="must be positive"):
        qcoll.comm._timeout_seconds(-1)


# ---- array objects ----------------------------------------------------------------

class ArrayInterface:
    """Only __array_interface__, as a foreign host array would offer."""

    def __init__(self, arr):
        self.arr = arr
        self.__array_interface__ = arr.__array_interface__


class DLPackOnly:
    """Only the DLPack protocol, delegated to a numpy array."""

    def __init__(self, arr):
        self.arr = arr

    def __dlpack__(self, stream=None):
        return self.arr.__dlpack__()

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_round_trips_one_rank(comm, dtype):
    values = np.arange(1, 10)
    send = make_array(dtype, values)
    recv = make_array(dtype, np.zeros(9))
    comm.all_reduce(send, recv, op="max")
    assert np.array_equal(values_of(recv), values)
    out = BF16Array.from_float(np.zeros(9)) if dtype == "bfloat16" else np.zeros(9, dtype)
    comm.all_gather(send, out)
    assert np.array_equal(values_of(out), values)


def test_array_interface_dlpack_and_buffer_protocol(comm):
    a = np.arange(8, dtype=np.int32)
    out = np.zeros(8, dtype=np.int32)
    comm.all_reduce(ArrayInterface(a), ArrayInterface(out))
    assert np.array_equal(out, a)
    out[:] = 0
    comm.all_reduce(DLPackOnly(a), DLPackOnly(out))
    assert np.array_equal(out, a)
    raw = bytearray(b"abcdef")
    comm.broadcast(raw, root=0)
    assert raw == bytearray(b"abcdef")
    got = comm.all_gather(np.frombuffer(b"xyz", dtype=np.uint8))
    assert bytes(got.reshape(-1)) == b"xyz"


def test_one_rank_collectives(comm):
    x = np.arange(6, dtype=np.float32)
    assert comm.all_reduce(x.copy(), op="avg").tolist() == x.tolist()
    assert comm.reduce(x.copy(), root=0).tolist() == x.tolist()
    assert comm.reduce_scatter(x).tolist() == x.tolist()
    assert comm.all_to_all(x.copy()).tolist() == x.tolist()
    assert comm.all_gather(x).shape == (1, 6)
    y = x.copy()
    assert comm.all_reduce_ex(y, op=qcoll.Op.MIN, algo=qcoll.Algo.HOST,
                              quant=qcoll.Quant.NONE) is y
    comm.barrier()


def test_zero_elements(comm):
    e = np.zeros(0, dtype=np.float32)
    assert comm.all_reduce(e).size == 0
    assert comm.all_gather(e).shape == (1, 0)


# ---- errors --------------------------------------------------------------------------

def test_errors_from_the_library_carry_its_message(comm):
    x = np.ones(4, dtype=np.float32)
    with pytest.raises(qcoll.InvalidArgumentError) as e:
        comm.broadcast(x, root=1)
    assert "qcoll_broadcast" in str(e.value) and "root 1 is out of range" in str(e.value)
    assert e.value.status == -1
    with pytest.raises(qcoll.InvalidArgumentError, match="this rank itself"):
        comm.send(x, 0)
    with pytest.raises(qcoll.UnsupportedError) as e:
        comm.all_reduce_ex(x, algo="twoshot")
    assert e.value.message and isinstance(e.value, NotImplementedError)
    comm.all_reduce(x)  # still usable


def test_binding_checks(comm):
    x = np.ones(4, dtype=np.float32)
    with pytest.raises(qcoll.InvalidArgumentError, match="not contiguous"):
        comm.all_reduce(np.ones((4, 4), np.float32)[:, 0])
    with pytest.raises(qcoll.InvalidArgumentError, match="not contiguous"):
        comm.all_reduce(ArrayInterface(np.ones((4, 4), np.float32)[::2]))
    with pytest.raises(qcoll.InvalidArgumentError, match="cannot reduce"):
        comm.all_reduce(np.ones(4, dtype=np.complex64))
    with pytest.raises(qcoll.InvalidArgumentError, match="cannot reduce"):
        comm.all_reduce(np.ones(4, dtype=np.int16))
    with pytest.raises(qcoll.InvalidArgumentError, match="same dtype"):
        comm.all_reduce(x, np.zeros(4, np.int32))
    with pytest.raises(qcoll.InvalidArgumentError, match="recvbuf holds 3 elements"):
        comm.all_reduce(x, np.zeros(3, np.float32))
    with pytest.raises(qcoll.InvalidArgumentError, match="not an array"):
        comm.all_reduce(object())
    with pytest.raises(qcoll.InvalidArgumentError, match="op 'xor'"):
        comm.all_reduce(x, op="xor")
    with pytest.raises(qcoll.InvalidArgumentError, match="quant"):
        comm.all_reduce_ex(x, quant="int2")
    ro = np.ones(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(qcoll.InvalidArgumentError, match="read-only"):
        comm.all_reduce(ro)
    comm.all_reduce(ro, np.zeros(4, np.float32))  # a read-only input is fine


def test_destroyed_communicator(comm):
    comm.destroy()
    comm.destroy()  # again: nothing
    with pytest.raises(qcoll.InvalidUsageError, match="destroyed"):
        comm.all_reduce(np.ones(2, np.float32))
    comm.abort()  # nothing to abort


def test_context_manager_aborts_on_exception():
    with pytest.raises(KeyError):
        with qcoll.Comm.init_rank(1, qcoll.get_unique_id(), 0, device="cpu", timeout=30) as c:
            raise KeyError("boom")
    assert c.closed


def test_abort_makes_calls_fail(comm):
    comm.abort()
    with pytest.raises(qcoll.AbortedError) as e:
        comm.all_reduce(np.ones(2, np.float32))
    assert e.value.message


def test_qcoll_torch_needs_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="torch"):
            import qcoll.torch  # noqa: F401
    else:
        pytest.skip("torch is installed: the backend tests cover qcoll.torch")


def test_ctypes_declarations_cover_the_header():
    declared = set(qcoll._lib._SIGNATURES)
    in_header = set(re.findall(r"\b(qcoll_\w+)\(", HEADER))
    assert in_header - declared == set(), in_header - declared
    for name, (restype, argtypes) in qcoll._lib._SIGNATURES.items():
        fn = getattr(lib(), name)
        assert fn.restype is restype and list(fn.argtypes) == argtypes, name
