"""Building and loading qcoll.torch's compiled extension.

The extension (python/qcoll/torch/csrc/) is a c10d backend and a custom op
over libqcoll; it must match the torch of the process exactly, so it is
built on first import of ``qcoll.torch`` with torch's own C++ extension
tools and cached: the build folder is named by a digest of the sources,
include/qcoll.h, the torch version and the build flags, so a later import
with the same torch loads it at once and a new torch or new sources build
anew.  Several processes importing at once build it once (torch's builder
locks the folder).

Nothing here imports torch at module level: ``plan()`` and ``status()``
work, and say why, where torch is absent.

Environment:
  QCOLL_TORCH_EXT      auto (default): build or load, and fall back to the
                       Python backend with a warning when that fails;
                       off: never build (the Python backend);
                       require: a failed build is an error
  QCOLL_TORCH_EXT_DIR  the cache folder (default ~/.cache/qcoll/torch_ext)
  QCOLL_INCLUDE        the folder holding qcoll.h (default: the package's
                       include/, else this source tree's include/)
  CXX                  the C++ compiler torch's builder uses (default c++);
                       when it does not fit this process, a compiler that
                       does (c++, g++ on PATH or in /usr/bin) is used
                       instead, with a note.  A compiler fits when it links
                       the libstdc++ this process has loaded and links it
                       as a shared library: code compiled against another
                       libstdc++'s headers, or a private copy of
                       libstdc++'s stream code pulled into the extension
                       from a static libstdc++ (a GCC installed beside the
                       system's, whose own library folder comes first, does
                       that), calls the loaded library's locale facets
                       wrongly and crashes the first time an error message
                       formats a number
"""

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional

MODE_ENV = "QCOLL_TORCH_EXT"
DIR_ENV = "QCOLL_TORCH_EXT_DIR"
INCLUDE_ENV = "QCOLL_INCLUDE"
MODES = ("auto", "off", "require")

_PACKAGE = Path(__file__).resolve().parent
CSRC = _PACKAGE / "torch" / "csrc"
SOURCES = ("qcoll_torch.cpp",)


class ExtensionBuildError(RuntimeError):
    """The compiled extension could not be built or loaded (QCOLL_TORCH_EXT=require)."""


@dataclass
class Plan:
    """What loading the extension would do here, and why."""
    build: bool
    reason: str
    mode: str = "auto"
    sources: List[Path] = field(default_factory=list)
    include_dir: Optional[Path] = None
    with_cuda: bool = False
    name: str = ""
    build_dir: Optional[Path] = None
    compiler: str = ""
    compiler_note: str = ""


@dataclass
class Status:
    """The outcome of load(): the module, or None with the reason."""
    module: Any
    reason: str
    plan: Optional[Plan] = None

    @property
    def loaded(self):
        return self.module is not None


def mode():
    value = os.environ.get(MODE_ENV, "auto").strip().lower() or "auto"
    if value not in MODES:
        raise ValueError(f"{MODE_ENV}={value!r} is not one of {', '.join(MODES)}")
    return value


def include_dir():
    """The folder holding qcoll.h: $QCOLL_INCLUDE, the package's include/
    (a wheel ships the header there), else the source tree's include/."""
    env = os.environ.get(INCLUDE_ENV)
    if env:
        return Path(env)
    for candidate in (_PACKAGE / "include", _PACKAGE.parent.parent / "include"):
        if (candidate / "qcoll.h").is_file():
            return candidate
    return None


def cache_root():
    env = os.environ.get(DIR_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "qcoll" / "torch_ext"


def _cuda_toolkit(torch_cuda_version):
    """True when torch was built with CUDA and the CUDA headers it needs to
    compile against are present (torch's own CUDA_HOME lookup)."""
    if not torch_cuda_version:
        return False
    from torch.utils.cpp_extension import CUDA_HOME  # torch is present here

    return bool(CUDA_HOME) and (Path(CUDA_HOME) / "include" / "cuda_runtime_api.h").is_file()


def build_key(texts, torch_version, with_cuda, compiler=""):
    """The digest naming one build: sources and header, torch, flags, Python,
    the compiler."""
    h = hashlib.sha256()
    for text in texts:
        h.update(text)
        h.update(b"\0")
    h.update(f"{torch_version}|cuda={with_cuda}|{sys.version_info[:2]}|{compiler}".encode())
    return h.hexdigest()[:16]


# ---- the compiler: one whose libstdc++ is the process's -------------------------

def loaded_libstdcxx(maps_text=None):
    """The real path of the libstdc++ this process has loaded (from
    /proc/self/maps, or the given text), or None."""
    if maps_text is None:
        try:
            with open("/proc/self/maps") as f:
                maps_text = f.read()
        except OSError:
            return None
    for line in maps_text.splitlines():
        fields = line.split(None, 5)  # address perms offset dev inode path
        path = fields[5].strip() if len(fields) == 6 else ""
        if os.path.basename(path).startswith("libstdc++.so"):
            return os.path.realpath(path)
    return None


def compiler_libstdcxx(cxx):
    """The real path of the libstdc++ the compiler cxx links against, or None."""
    try:
        out = subprocess.run([cxx, "-print-file-name=libstdc++.so.6"], capture_output=True,
                             text=True, timeout=30, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return os.path.realpath(out) if os.path.isabs(out) and os.path.exists(out) else None


# One instantiation libstdc++.so exports: a shared object that defines it
# itself carries a private copy of the stream code (std::ostream::_M_insert<long>).
_STREAM_SYMBOL = "_ZNSo9_M_insertIlEERSoT_"
_PROBE_SOURCE = ("#include <sstream>\n#include <string>\n"
                 "std::string qcoll_probe(long v) { std::ostringstream s; s << v; return s.str(); }\n")
_copies_known = {}


def compiler_copies_libstdcxx(cxx):
    """True when a shared object that cxx links carries its own copy of
    libstdc++'s stream code (a static libstdc++ came first on its library
    path), False when it takes it from the shared library, None when that
    cannot be told (the probe does not compile, or no nm).  A known answer
    is kept per compiler file (path, size, time), in this process and in
    the cache folder, so an import that finds the extension built pays no
    compile."""
    path = shutil.which(cxx)
    nm = shutil.which("nm")
    if path is None or nm is None:
        return None
    st = os.stat(path)
    key = f"{os.path.realpath(path)}|{st.st_size}|{st.st_mtime_ns}"
    if key not in _copies_known:
        _copies_known[key] = _remembered(key, lambda: _probe_copies(path, nm))
    return _copies_known[key]


def _remembered(key, probe):
    """probe()'s answer (True, False or None), kept in the cache folder
    under a digest of key; None is not kept (it may be a passing failure)."""
    note = cache_root() / "compiler-probe" / hashlib.sha256(key.encode()).hexdigest()[:16]
    try:
        return {"1": True, "0": False}[note.read_text().strip()]
    except (OSError, KeyError):
        pass
    answer = probe()
    if answer is not None:
        try:
            note.parent.mkdir(parents=True, exist_ok=True)
            note.write_text("1" if answer else "0")
        except OSError:
            pass  # an unwritable cache only costs the probe next time
    return answer


def _probe_copies(cxx, nm):
    with tempfile.TemporaryDirectory(prefix="qcoll-cxx-probe-") as d:
        src, lib = os.path.join(d, "probe.cpp"), os.path.join(d, "probe.so")
        with open(src, "w") as f:
            f.write(_PROBE_SOURCE)
        try:
            built = subprocess.run([cxx, "-shared", "-fPIC", "-O1", "-o", lib, src],
                                   capture_output=True, timeout=120, check=False)
            if built.returncode != 0:
                return None
            syms = subprocess.run([nm, "-D", "--defined-only", lib], capture_output=True,
                                  text=True, timeout=60, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        if syms.returncode != 0:
            return None
        return _STREAM_SYMBOL in syms.stdout.split()


def _misfit(cxx, loaded, libstdcxx_of, copies_of):
    """Why cxx does not fit a process that has `loaded` loaded ("" if it
    fits), and the libstdc++ it names."""
    mine = libstdcxx_of(cxx)
    if mine != loaded:
        return f"links {mine or 'a libstdc++ it does not name'}", mine
    if copies_of(cxx):
        return (f"links {mine} but copies its stream code into the extension (a static "
                f"libstdc++ comes first on its library path)"), mine
    return "", mine


def pick_compiler(default, loaded, candidates, libstdcxx_of=compiler_libstdcxx,
                  copies_of=compiler_copies_libstdcxx):
    """(compiler, note): the default when it fits (links the loaded
    libstdc++, as a shared library: see the module's CXX); else the first
    candidate that fits, with a note saying why; else the default, with a
    warning note when it is known not to fit (silent when it cannot name
    its libstdc++).  Nothing changes when the loaded libstdc++ is unknown."""
    if loaded is None:
        return default, ""
    why, mine = _misfit(default, loaded, libstdcxx_of, copies_of)
    if not why:
        return default, ""
    for cxx in candidates:
        if cxx != default and not _misfit(cxx, loaded, libstdcxx_of, copies_of)[0]:
            return cxx, (f"building with {cxx}: the default compiler {default} {why}, "
                         f"this process has {loaded} loaded")
    if mine is None:
        return default, ""
    return default, (f"the compiler {default} {why}, this process has {loaded} loaded, and "
                     f"no other compiler found fits: the extension may crash (set CXX to a "
                     f"compiler that links the loaded libstdc++ as a shared library)")


def _compiler_candidates():
    names = ["c++", "g++", "/usr/bin/c++", "/usr/bin/g++"]
    found = [shutil.which(n) for n in names]
    return [c for i, c in enumerate(found) if c and c not in found[:i]]


def _default_compiler():
    return os.environ.get("CXX", "c++")  # what torch's builder would use


def _choose_compiler():
    return pick_compiler(_default_compiler(), loaded_libstdcxx(), _compiler_candidates())


def plan():
    """Whether the extension can be built here, with the reason (no torch,
    QCOLL_TORCH_EXT=off, no qcoll.h...) and where it would go."""
    m = mode()
    if m == "off":
        return Plan(False, f"{MODE_ENV}=off: the compiled extension is not built", m)
    if importlib.util.find_spec("torch") is None:
        return Plan(False, "torch is not installed: the compiled extension is skipped", m)
    sources = [CSRC / s for s in SOURCES]
    missing = [str(s) for s in sources if not s.is_file()]
    if missing:
        return Plan(False, f"the extension's sources are missing ({', '.join(missing)})", m)
    inc = include_dir()
    if inc is None or not (inc / "qcoll.h").is_file():
        return Plan(False, f"qcoll.h not found (looked at {INCLUDE_ENV}, {_PACKAGE / 'include'}, "
                           f"{_PACKAGE.parent.parent / 'include'})", m)
    import torch

    with_cuda = _cuda_toolkit(torch.version.cuda)
    texts = [s.read_bytes() for s in sources] + [(inc / "qcoll.h").read_bytes()]
    cxx, note = _choose_compiler()
    key = build_key(texts, torch.__version__, with_cuda, cxx)
    name = f"qcoll_torch_ext_{key}"
    return Plan(True, "", m, sources, inc, with_cuda, name, cache_root() / name, cxx, note)


_status = None


def _compile(p):
    import torch.distributed  # noqa: F401  (registers c10d's types the module derives from)
    from torch.utils import cpp_extension

    p.build_dir.mkdir(parents=True, exist_ok=True)
    flags = ["-O2", "-std=c++17"] + (["-DQCOLL_TORCH_CUDA"] if p.with_cuda else [])
    # No CUDA source is compiled (the extension calls the CUDA runtime from
    # C++), so no GPU architecture is needed; naming one stops torch from
    # probing for a GPU the build machine may not have.
    cuda_flags = ["-arch=sm_90"] if p.with_cuda else None
    # Another compiler chosen is said when verbose; a mismatch that stays
    # (no compiler of the loaded libstdc++ found) is a warning.
    if p.compiler_note and p.compiler != _default_compiler():
        if os.environ.get("QCOLL_TORCH_EXT_VERBOSE") == "1":
            print(f"qcoll.torch: {p.compiler_note}", file=sys.stderr)
    elif p.compiler_note:
        warnings.warn(f"qcoll.torch: {p.compiler_note}", RuntimeWarning, stacklevel=3)
    saved = os.environ.get("CXX")
    if p.compiler:
        os.environ["CXX"] = p.compiler  # torch's builder reads it
    try:
        return cpp_extension.load(name=p.name, sources=[str(s) for s in p.sources],
                                  extra_include_paths=[str(p.include_dir)], extra_cflags=flags,
                                  extra_cuda_cflags=cuda_flags,
                                  build_directory=str(p.build_dir), with_cuda=p.with_cuda,
                                  verbose=os.environ.get("QCOLL_TORCH_EXT_VERBOSE") == "1")
    finally:
        if saved is None:
            os.environ.pop("CXX", None)
        else:
            os.environ["CXX"] = saved


def _shorten(text, errors=10, tail=10):
    """A compiler's log cut to what says why: its first lines naming an
    error, then its last lines."""
    lines = str(text).strip().splitlines()
    if len(lines) <= errors + tail:
        return "\n".join(lines)
    named = [i for i, line in enumerate(lines[:-tail]) if "error" in line.lower()][:errors]
    kept = [lines[i] for i in named] + ["..."] + lines[-tail:]
    return "\n".join(kept)


def load():
    """The compiled extension bound to the loaded libqcoll (built on first
    use), as a Status.  In mode auto a failure is a warning and the Status
    carries the reason; in mode require it raises ExtensionBuildError."""
    global _status
    if _status is not None:
        return _status
    p = plan()
    if not p.build:
        _status = Status(None, p.reason, p)
        return _status
    try:
        module = _compile(p)
        from ._lib import lib_path

        module.bind_library(lib_path())
        _status = Status(module, "", p)
    except Exception as e:  # a compiler's or loader's failure, reported as it is
        reason = (f"the compiled extension could not be built in {p.build_dir}: "
                  f"{type(e).__name__}: {_shorten(e)}")
        if p.mode == "require":
            raise ExtensionBuildError(reason) from e
        warnings.warn(f"qcoll.torch: {reason}\nqcoll.torch falls back to its Python backend "
                      f"and ctypes QuickAllReduce (set {MODE_ENV}=off to skip the build)",
                      RuntimeWarning, stacklevel=2)
        _status = Status(None, reason, p)
    return _status


def status():
    """The outcome of load() if it ran, else what it would do (without building)."""
    if _status is not None:
        return _status
    p = plan()
    return Status(None, p.reason or "not loaded yet (import qcoll.torch builds it)", p)
