"""Shared pieces of the Python tests: locating the build, starting ranks with
qcoll-run, and host arrays of every qcoll dtype (bfloat16 through DLPack,
since numpy has no bfloat16 of its own)."""

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PYTHON_DIR = REPO / "python"

DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64",
          "float16", "bfloat16", "float32", "float64"]


# ---- build artefacts -------------------------------------------------------------

def _newest(paths):
    paths = [p for p in paths if p.is_file()]
    return max(paths, key=lambda p: p.stat().st_mtime) if paths else None


def find_qcoll_run():
    """$QCOLL_RUN (set by the CTest registration), else the qcoll-run built
    beside the library the binding loads (so launcher and library match),
    else the newest build*/tools/qcoll-run/qcoll-run of this checkout."""
    env = os.environ.get("QCOLL_RUN")
    if env:
        return Path(env)
    try:
        import qcoll
        beside = Path(qcoll.lib_path()).resolve().parent / "tools" / "qcoll-run" / "qcoll-run"
        if beside.is_file():
            return beside
    except Exception:  # the library itself is missing: the tests will say so
        pass
    return _newest(list(REPO.glob("build*/tools/qcoll-run/qcoll-run")))


def rank_env(extra=None):
    """Environment for ranks: this checkout's python/ first on PYTHONPATH;
    QCOLL_LIB passed on when set."""
    env = dict(os.environ)
    path = [str(PYTHON_DIR), str(HERE)]
    if env.get("PYTHONPATH"):
        path.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(path)
    env["PYTHONUNBUFFERED"] = "1"
    if extra:
        env.update(extra)
    return env


def run_ranks(qcoll_run, n, script, *args, timeout=120, env=None, launcher_args=()):
    """Run ``qcoll-run -n N --tag-output python3 script args`` and return
    the CompletedProcess (stdout and stderr merged into stdout)."""
    cmd = [str(qcoll_run), "-n", str(n), "--tag-output", "--timeout", str(timeout),
           *launcher_args, sys.executable, str(HERE / script), *map(str, args)]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=rank_env(env), timeout=timeout + 30,
                          stdin=subprocess.DEVNULL)


# ---- bfloat16 ------------------------------------------------------------------

def f32_to_bf16_bits(values):
    """Round float32 values to bfloat16 (nearest, ties to even); the bits."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_CAPSULE_NAME = b"dltensor"  # must outlive every capsule: a module constant


class BF16Array:
    """bfloat16 values held in a uint16 numpy array and exported through
    DLPack as bfloat16 (code 4, 16 bits), the way a framework would."""

    def __init__(self, bits):
        self.bits = np.ascontiguousarray(bits, dtype=np.uint16)
        self.shape = self.bits.shape
        self._shape = (ctypes.c_int64 * max(self.bits.ndim, 1))(*self.bits.shape)
        self._managed = _DLManagedTensor()
        t = self._managed.dl_tensor
        t.data = self.bits.ctypes.data
        t.device = _DLDevice(1, 0)
        t.ndim = self.bits.ndim
        t.dtype = _DLDataType(4, 16, 1)
        t.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        t.byte_offset = 0

    @classmethod
    def from_float(cls, values):
        return cls(f32_to_bf16_bits(values))

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, stream=None):
        return _capsule_new(ctypes.addressof(self._managed), _CAPSULE_NAME, None)

    def to_float(self):
        return bf16_bits_to_f32(self.bits)


def make_array(dtype, values):
    """An array of qcoll dtype ``dtype`` holding ``values`` (exact small
    numbers); bfloat16 as a BF16Array."""
    if dtype == "bfloat16":
        return BF16Array.from_float(np.asarray(values, dtype=np.float32))
    return np.asarray(values).astype(dtype)


def empty_array(dtype, count):
    if dtype == "bfloat16":
        return BF16Array(np.zeros(count, dtype=np.uint16))
    return np.zeros(count, dtype=dtype)


def values_of(arr):
    """The values of an array from make_array as float64 or int64 numpy."""
    if isinstance(arr, BF16Array):
        return arr.to_float().astype(np.float64)
    a = np.asarray(arr)
    return a.astype(np.float64) if a.dtype.kind == "f" else a.astype(np.int64)
