"""Loading libqcoll and declaring the C API to ctypes.

The shared library is looked up, in order, at:

1. the package folder: the copy a wheel installs beside this file
   (``qcoll/libqcoll.so.0``; in an editable install, the folder the build
   installed it into), so an installed package always runs the library it
   was built with;
2. the path in the environment variable ``QCOLL_LIB`` (a file, or a folder
   holding ``libqcoll.so``), for a package without its own copy (a source
   checkout on ``PYTHONPATH``, an editable install); when it is set and
   the package has no copy, nothing else is tried, so a wrong value is
   reported instead of silently loading another build;
3. the ``build*/`` folders of the source tree this package sits in,
   ``build/`` first (the README's build), then the others newest first,
   leaving out sanitizer builds (``QCOLL_SANITIZE`` set in their
   ``CMakeCache.txt``): an instrumented library cannot be loaded into an
   uninstrumented Python;
4. the system loader (``libqcoll.so.0``, ``libqcoll.so``, ldconfig).

Every function of include/qcoll.h is declared with its argument and result
types, so ctypes converts and checks arguments instead of guessing.  ctypes
releases the GIL while a C function runs, so a blocking collective in one
thread does not stop another thread from calling ``abort()``.
"""

import ctypes
import ctypes.util
import os
import sys
import threading
import warnings
from pathlib import Path

from ._errors import LibraryNotFoundError, UnsupportedError

QCOLL_UNIQUE_ID_BYTES = 128
QCOLL_DEVICE_CURRENT = -1
QCOLL_DEVICE_NONE = -2

_LIB_NAMES = ("libqcoll.so", "libqcoll.so.0")


class UniqueIdStruct(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_ubyte * QCOLL_UNIQUE_ID_BYTES)]


class ConfigStruct(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("device", ctypes.c_int),
        ("timeout_s", ctypes.c_double),
        ("host_id", ctypes.c_char_p),
    ]


class OptionsStruct(ctypes.Structure):
    """qcoll_options_t: per-call options of the *_ex collectives."""
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("algo", ctypes.c_int),
        ("quant", ctypes.c_int),
        ("quant_rotate", ctypes.c_int),
    ]


_status = ctypes.c_int  # qcoll_status_t and the other enums are int-sized
_comm = ctypes.c_void_p
_int_p = ctypes.POINTER(ctypes.c_int)
_str_p = ctypes.POINTER(ctypes.c_char_p)
_size = ctypes.c_size_t
_ptr = ctypes.c_void_p
_int = ctypes.c_int
_opts_p = ctypes.POINTER(OptionsStruct)

# name: (restype, argtypes) for every function of include/qcoll.h.
_SIGNATURES = {
    "qcoll_status_string": (ctypes.c_char_p, [_status]),
    "qcoll_get_version": (_status, [_int_p]),
    "qcoll_last_error": (ctypes.c_char_p, []),
    "qcoll_dtype_size": (_size, [_int]),
    "qcoll_dtype_name": (ctypes.c_char_p, [_int]),
    "qcoll_op_name": (ctypes.c_char_p, [_int]),
    "qcoll_algo_name": (ctypes.c_char_p, [_int]),
    "qcoll_quant_name": (ctypes.c_char_p, [_int]),
    "qcoll_config_init": (_status, [ctypes.POINTER(ConfigStruct)]),
    "qcoll_get_unique_id": (_status, [ctypes.POINTER(UniqueIdStruct)]),
    "qcoll_unique_id_to_hex": (_status, [ctypes.POINTER(UniqueIdStruct), ctypes.c_char_p]),
    "qcoll_unique_id_from_hex": (_status, [ctypes.c_char_p, ctypes.POINTER(UniqueIdStruct)]),
    "qcoll_comm_init_rank": (
        _status,
        [ctypes.POINTER(_comm), _int, ctypes.POINTER(UniqueIdStruct), _int,
         ctypes.POINTER(ConfigStruct)],
    ),
    "qcoll_comm_init_env": (_status, [ctypes.POINTER(_comm), ctypes.POINTER(ConfigStruct)]),
    "qcoll_comm_destroy": (_status, [_comm]),
    "qcoll_comm_abort": (_status, [_comm]),
    "qcoll_comm_rank": (_status, [_comm, _int_p]),
    "qcoll_comm_size": (_status, [_comm, _int_p]),
    "qcoll_comm_device": (_status, [_comm, _int_p]),
    "qcoll_comm_last_error": (ctypes.c_char_p, [_comm]),
    "qcoll_comm_get_async_error": (_status, [_comm, _int_p]),
    "qcoll_comm_register": (_status, [_comm, _ptr, _size, ctypes.POINTER(_ptr)]),
    "qcoll_comm_deregister": (_status, [_comm, _ptr]),
    "qcoll_all_reduce": (_status, [_ptr, _ptr, _size, _int, _int, _comm, _ptr]),
    "qcoll_reduce": (_status, [_ptr, _ptr, _size, _int, _int, _int, _comm, _ptr]),
    "qcoll_broadcast": (_status, [_ptr, _ptr, _size, _int, _int, _comm, _ptr]),
    "qcoll_all_gather": (_status, [_ptr, _ptr, _size, _int, _comm, _ptr]),
    "qcoll_reduce_scatter": (_status, [_ptr, _ptr, _size, _int, _int, _comm, _ptr]),
    "qcoll_all_to_all": (_status, [_ptr, _ptr, _size, _int, _comm, _ptr]),
    "qcoll_send": (_status, [_ptr, _size, _int, _int, _comm, _ptr]),
    "qcoll_recv": (_status, [_ptr, _size, _int, _int, _comm, _ptr]),
    "qcoll_barrier": (_status, [_comm, _ptr]),
    "qcoll_options_init": (_status, [_opts_p]),
    "qcoll_all_reduce_options_init": (_status, [_opts_p]),
    "qcoll_all_reduce_ex": (_status, [_ptr, _ptr, _size, _int, _int, _comm, _ptr, _opts_p]),
    "qcoll_reduce_ex": (_status, [_ptr, _ptr, _size, _int, _int, _int, _comm, _ptr, _opts_p]),
    "qcoll_broadcast_ex": (_status, [_ptr, _ptr, _size, _int, _int, _comm, _ptr, _opts_p]),
    "qcoll_all_gather_ex": (_status, [_ptr, _ptr, _size, _int, _comm, _ptr, _opts_p]),
    "qcoll_reduce_scatter_ex": (_status, [_ptr, _ptr, _size, _int, _int, _comm, _ptr, _opts_p]),
    "qcoll_all_to_all_ex": (_status, [_ptr, _ptr, _size, _int, _comm, _ptr, _opts_p]),
    "qcoll_send_ex": (_status, [_ptr, _size, _int, _int, _comm, _ptr, _opts_p]),
    "qcoll_recv_ex": (_status, [_ptr, _size, _int, _int, _comm, _ptr, _opts_p]),
    "qcoll_env_describe": (_status, [_int, _str_p, _str_p, _str_p]),
    "qcoll_selection_table_format": (_status, [ctypes.c_char_p, _size, ctypes.POINTER(_size)]),
    "qcoll_backends_describe": (_status, [ctypes.c_char_p, _size, ctypes.POINTER(_size)]),
}

# Without these a file is not taken for libqcoll at all; any other missing
# function (a library built from older sources) fails only when called.
_REQUIRED = ("qcoll_get_version", "qcoll_comm_init_rank", "qcoll_all_reduce")

_lock = threading.Lock()
_lib = None
_lib_path = None


def _package_dir():
    return Path(__file__).resolve().parent


def package_dirs():
    """The folders of the qcoll package: this file's, and in an editable
    install also the one the build installed libqcoll and the tools into
    (the package's __path__ lists both, the installed one first)."""
    pkg = sys.modules.get(__package__)
    dirs = [Path(d) for d in getattr(pkg, "__path__", [])]
    return dirs or [_package_dir()]


def _is_sanitizer_build(build):
    """True when build/CMakeCache.txt sets QCOLL_SANITIZE (address, thread...)."""
    try:
        cache = (build / "CMakeCache.txt").read_text(errors="replace")
    except OSError:
        return False
    for line in cache.splitlines():
        if line.startswith("QCOLL_SANITIZE:"):
            return line.partition("=")[2].strip() != ""
    return False


def _source_tree_candidates():
    """libqcoll.so in the build*/ folders of the checkout holding this
    package: build/ first, then the others newest first; sanitizer builds
    left out."""
    root = _package_dir().parent.parent  # python/qcoll -> python -> repository
    found = []
    for build in root.glob("build*"):
        if not build.is_dir() or _is_sanitizer_build(build):
            continue
        for name in _LIB_NAMES:
            lib = build / name
            if lib.is_file():
                found.append(lib)
                break
    found.sort(key=lambda p: (p.parent.name != "build", -p.stat().st_mtime))
    return found


def _candidates():
    """(description, path-or-name) pairs in search order."""
    own = [("package folder", str(d / name)) for d in package_dirs() for name in _LIB_NAMES]
    own = [c for c in own if os.path.exists(c[1])]
    if own:
        if os.environ.get("QCOLL_LIB"):
            warnings.warn(f"QCOLL_LIB is ignored: this qcoll package carries its own "
                          f"library ({own[0][1]})", RuntimeWarning, stacklevel=4)
        return own[:1]
    env = os.environ.get("QCOLL_LIB")
    if env:
        path = Path(env)
        if path.is_dir():
            path = path / "libqcoll.so"
        return [("QCOLL_LIB", str(path))]
    out = []
    for lib in _source_tree_candidates():
        out.append(("source tree build", str(lib)))
    for name in ("libqcoll.so.0", "libqcoll.so"):
        out.append(("system loader", name))
    found = ctypes.util.find_library("qcoll")
    if found:
        out.append(("system loader (ldconfig)", found))
    return out


def _missing_function(path, name):
    def missing(*args):
        raise UnsupportedError(f"{path} has no {name}: it was built from older sources; "
                               f"rebuild libqcoll")
    return missing


def _declare(lib, path):
    for name in _REQUIRED:
        getattr(lib, name)  # AttributeError: not a qcoll library
    for name, (restype, argtypes) in _SIGNATURES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            setattr(lib, name, _missing_function(path, name))
            continue
        fn.restype = restype
        fn.argtypes = argtypes


def _load():
    tried = []
    for where, path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"  {where}: {path} (no such file)")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"  {where}: {path} ({e})")
            continue
        try:
            _declare(lib, path)
        except AttributeError as e:
            tried.append(f"  {where}: {path} (not a complete qcoll library: {e})")
            continue
        return lib, path
    raise LibraryNotFoundError(
        "could not load libqcoll; looked at:\n" + "\n".join(tried) +
        "\nset QCOLL_LIB to the path of libqcoll.so (for example "
        "build/libqcoll.so after `cmake --build build`)")


def lib():
    """The loaded library, with every function declared (loaded once)."""
    global _lib, _lib_path
    if _lib is None:
        with _lock:
            if _lib is None:
                _lib, _lib_path = _load()
    return _lib


def lib_path():
    """Path (or loader name) of the loaded library."""
    lib()
    return _lib_path


def decode(raw):
    """A C string from the library as str ('' for NULL)."""
    return raw.decode("utf-8", "replace") if raw else ""
