"""The build-or-skip logic of qcoll.torch's compiled extension
(qcoll._torch_ext), which runs without torch: where the extension would be
built and why not, the cache key, and the fallback when a build fails (the
compiler replaced by a stand-in that fails or succeeds).  Also the lean
all-reduce path of the binding, which the Python backend and the Python
QuickAllReduce op use."""

import os
import shutil
import warnings

import numpy as np
import pytest

import qcoll
from qcoll import _lean, _torch_ext


@pytest.fixture(autouse=True)
def fresh_status(monkeypatch):
    """Each test sees load() as not yet run, and leaves it so."""
    monkeypatch.setattr(_torch_ext, "_status", None)
    for name in (_torch_ext.MODE_ENV, _torch_ext.INCLUDE_ENV, _torch_ext.DIR_ENV):
        monkeypatch.delenv(name, raising=False)
    yield
    _torch_ext._status = None


def no_torch(monkeypatch):
    real = _torch_ext.importlib.util.find_spec
    monkeypatch.setattr(_torch_ext.importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))


def test_without_torch_the_extension_is_skipped_with_the_reason(monkeypatch):
    no_torch(monkeypatch)
    p = _torch_ext.plan()
    assert not p.build and p.reason == "torch is not installed: the compiled extension is skipped"
    s = _torch_ext.load()
    assert not s.loaded and s.module is None and s.reason == p.reason


def test_off_skips_the_build(monkeypatch):
    monkeypatch.setenv(_torch_ext.MODE_ENV, "off")
    monkeypatch.setattr(_torch_ext, "_compile", lambda p: pytest.fail("compiled with off"))
    s = _torch_ext.load()
    assert not s.loaded and "QCOLL_TORCH_EXT=off" in s.reason


def test_an_unknown_mode_is_refused(monkeypatch):
    monkeypatch.setenv(_torch_ext.MODE_ENV, "sometimes")
    with pytest.raises(ValueError, match="QCOLL_TORCH_EXT='sometimes' is not one of auto, off"):
        _torch_ext.plan()


def test_header_lookup(monkeypatch, tmp_path):
    # The source tree's include/ by default, QCOLL_INCLUDE when set.
    assert (_torch_ext.include_dir() / "qcoll.h").is_file()
    monkeypatch.setenv(_torch_ext.INCLUDE_ENV, str(tmp_path))
    assert _torch_ext.include_dir() == tmp_path


def test_missing_header_is_a_reason_not_a_build(monkeypatch, tmp_path):
    monkeypatch.setattr(_torch_ext, "include_dir", lambda: tmp_path)
    monkeypatch.setattr(_torch_ext.importlib.util, "find_spec", lambda name, *a: object())
    p = _torch_ext.plan()
    assert not p.build and p.reason.startswith("qcoll.h not found"), p.reason


def test_build_key_names_sources_torch_and_flags():
    base = _torch_ext.build_key([b"source", b"header"], "2.11.0", True)
    assert base == _torch_ext.build_key([b"source", b"header"], "2.11.0", True)
    others = {_torch_ext.build_key([b"source2", b"header"], "2.11.0", True),
              _torch_ext.build_key([b"source", b"header2"], "2.11.0", True),
              _torch_ext.build_key([b"source", b"header"], "2.12.0", True),
              _torch_ext.build_key([b"source", b"header"], "2.11.0", False),
              _torch_ext.build_key([b"source", b"header"], "2.11.0", True, "/opt/gcc/bin/g++")}
    assert base not in others and len(others) == 5


MAPS = """00420000-00703000 r-xp 00020000 fe:00 79246     /usr/bin/python3.12
7fb0bbc9d000-7fb0bbde5000 r-xp 0009d000 fe:00 107370    /usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.33
7fb0bc274000-7fb0bc2d6000 r-xp 0001e000 fe:00 107368    /usr/lib/x86_64-linux-gnu/libssl.so.3
"""


def test_the_loaded_libstdcxx_is_read_from_the_maps():
    assert _torch_ext.loaded_libstdcxx(MAPS) == os.path.realpath(
        "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.33")
    assert _torch_ext.loaded_libstdcxx("00420000-00703000 r-xp 0 fe:00 1 /usr/bin/python3\n") is None
    # this very process: a path that exists, or None where no libstdc++ is loaded
    mine = _torch_ext.loaded_libstdcxx()
    assert mine is None or os.path.exists(mine)


def test_a_compiler_of_another_libstdcxx_is_replaced():
    """A compiler whose headers belong to another libstdc++ than the loaded
    one builds an extension that crashes formatting a number: a fitting
    compiler is chosen, with a note; with none, the default stays and the
    note warns."""
    links = {"/opt/gcc/bin/g++": "/opt/gcc/lib64/libstdc++.so.6.0.34",
             "/usr/bin/g++": "/usr/lib/libstdc++.so.6.0.33"}
    of = links.get
    shared = lambda cxx: False  # noqa: E731  (every compiler links libstdc++ shared)
    loaded = "/usr/lib/libstdc++.so.6.0.33"
    cxx, note = _torch_ext.pick_compiler("/opt/gcc/bin/g++", loaded,
                                         ["/opt/gcc/bin/g++", "/usr/bin/g++"], of, shared)
    assert cxx == "/usr/bin/g++" and note.startswith("building with /usr/bin/g++"), note
    assert _torch_ext.pick_compiler("/usr/bin/g++", loaded, ["/opt/gcc/bin/g++"], of, shared) == \
        ("/usr/bin/g++", "")
    cxx, note = _torch_ext.pick_compiler("/opt/gcc/bin/g++", loaded, ["/opt/gcc/bin/g++"], of,
                                         shared)
    assert cxx == "/opt/gcc/bin/g++" and "set CXX" in note, note
    # nothing known of the process: the default, silently
    assert _torch_ext.pick_compiler("c++", None, ["/usr/bin/g++"], of, shared) == ("c++", "")
    # a compiler that cannot name its libstdc++: a compiler of the loaded one is chosen
    cxx, note = _torch_ext.pick_compiler("cc-unknown", loaded, ["/usr/bin/g++"], of, shared)
    assert cxx == "/usr/bin/g++" and "does not name" in note, note
    # ... and with none, the default stays, silently
    assert _torch_ext.pick_compiler("cc-unknown", loaded, ["/opt/gcc/bin/g++"], of, shared) == \
        ("cc-unknown", "")


def test_a_compiler_that_copies_libstdcxx_is_replaced():
    """The GPU machine's case: a GCC beside the system's, of the same
    libstdc++ (it names the loaded one), whose own library folder holds a
    static libstdc++ that the linker finds first.  The extension it built
    carried its own std::ostream::_M_insert<long> and crashed in the first
    error message that formatted a number.  A compiler that links the
    shared library is chosen instead; with none, the note warns."""
    loaded = "/usr/lib/libstdc++.so.6.0.33"
    same = lambda cxx: loaded  # noqa: E731
    copies = {"/opt/gcc/bin/g++": True, "/usr/bin/g++": False}.get
    cxx, note = _torch_ext.pick_compiler("/opt/gcc/bin/g++", loaded,
                                         ["/opt/gcc/bin/g++", "/usr/bin/g++"], same, copies)
    assert cxx == "/usr/bin/g++", (cxx, note)
    assert "copies its stream code" in note and note.startswith("building with"), note
    cxx, note = _torch_ext.pick_compiler("/opt/gcc/bin/g++", loaded, [], same, copies)
    assert cxx == "/opt/gcc/bin/g++" and "set CXX" in note and "copies" in note, note
    # a probe that could not tell (None) does not replace a compiler
    assert _torch_ext.pick_compiler("/usr/bin/g++", loaded, ["/opt/gcc/bin/g++"], same,
                                    lambda cxx: None) == ("/usr/bin/g++", "")


@pytest.mark.skipif(shutil.which("c++") is None or shutil.which("nm") is None,
                    reason="no c++ or nm on PATH: the libstdc++ copy probe cannot run")
def test_the_copy_probe_tells_a_static_libstdcxx(tmp_path, monkeypatch):
    """The real probe: this machine's c++ links libstdc++ shared (False);
    the same compiler with -static-libstdc++, as a wrapper script, copies
    the stream code (True), or cannot link a shared object that way (None,
    where the static library is not position independent).  The answer is
    remembered in the cache folder."""
    monkeypatch.setenv(_torch_ext.DIR_ENV, str(tmp_path / "cache"))
    # this process may have probed c++ already (another test's build)
    monkeypatch.setattr(_torch_ext, "_copies_known", {})
    assert _torch_ext.compiler_copies_libstdcxx("c++") is False
    wrapper = tmp_path / "static-c++"
    wrapper.write_text(f'#!/bin/sh\nexec {shutil.which("c++")} -static-libstdc++ "$@"\n')
    wrapper.chmod(0o755)
    got = _torch_ext.compiler_copies_libstdcxx(str(wrapper))
    assert got in (True, None), got
    notes = list((tmp_path / "cache" / "compiler-probe").iterdir())
    assert len(notes) == (2 if got else 1), notes
    assert _torch_ext.compiler_copies_libstdcxx("/nonexistent/c++") is None


def test_the_real_compiler_query_answers_a_path_or_none():
    got = _torch_ext.compiler_libstdcxx("c++")
    assert got is None or os.path.exists(got)
    assert _torch_ext.compiler_libstdcxx("/nonexistent/c++") is None


def test_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv(_torch_ext.DIR_ENV, str(tmp_path))
    assert _torch_ext.cache_root() == tmp_path
    monkeypatch.delenv(_torch_ext.DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _torch_ext.cache_root() == tmp_path / "xdg" / "qcoll" / "torch_ext"


def buildable_plan(tmp_path, mode="auto"):
    return _torch_ext.Plan(True, "", mode, [tmp_path / "x.cpp"], tmp_path, False, "qcoll_x",
                           tmp_path / "qcoll_x")


def test_failed_build_warns_and_falls_back(monkeypatch, tmp_path):
    monkeypatch.setattr(_torch_ext, "plan", lambda: buildable_plan(tmp_path))

    def failing(p):
        raise RuntimeError("Error building extension 'qcoll_x':\n" +
                           "\n".join(f"line {i}" for i in range(40)) + "\nx.cpp:1: error: boom")
    monkeypatch.setattr(_torch_ext, "_compile", failing)
    with pytest.warns(RuntimeWarning, match="falls back to its Python backend") as caught:
        s = _torch_ext.load()
    assert not s.loaded
    text = str(caught[0].message)
    assert "could not be built in" in text and "error: boom" in text
    # Shortened to the lines naming an error and the end of the log.
    assert "Error building extension 'qcoll_x'" in text and "line 39" in text
    assert "line 5\n" not in text
    # Once decided, later calls neither build again nor warn again.
    monkeypatch.setattr(_torch_ext, "_compile", lambda p: pytest.fail("built twice"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _torch_ext.load() is s


def test_failed_build_is_an_error_when_required(monkeypatch, tmp_path):
    monkeypatch.setattr(_torch_ext, "plan", lambda: buildable_plan(tmp_path, "require"))
    monkeypatch.setattr(_torch_ext, "_compile",
                        lambda p: (_ for _ in ()).throw(OSError("no compiler")))
    with pytest.raises(_torch_ext.ExtensionBuildError, match="OSError: no compiler"):
        _torch_ext.load()


def test_a_built_module_is_bound_to_the_loaded_library(monkeypatch, tmp_path):
    bound = []

    class Module:
        def bind_library(self, path):
            bound.append(path)

    monkeypatch.setattr(_torch_ext, "plan", lambda: buildable_plan(tmp_path))
    monkeypatch.setattr(_torch_ext, "_compile", lambda p: Module())
    s = _torch_ext.load()
    assert s.loaded and bound == [qcoll.lib_path()]


# ---- the lean path ------------------------------------------------------------------

def test_quick_operand_reads_plain_arrays_and_passes_on_the_rest():
    x = np.arange(6, dtype=np.float32)
    ptr, count, dtype, device = _lean.quick_operand(x)
    assert (ptr, count, dtype, device) == (x.__array_interface__["data"][0], 6,
                                           qcoll.Dtype.FLOAT32, None)
    assert _lean.quick_operand(x.reshape(2, 3)[:, 0]) is None  # strided
    ro = x.copy()
    ro.flags.writeable = False
    assert _lean.quick_operand(ro) is None
    assert _lean.quick_operand(x.astype(">f4")) is None  # foreign byte order
    assert _lean.quick_operand(x.astype(np.complex64)) is None
    assert _lean.quick_operand(np.zeros(0, np.float32)) is None
    assert _lean.quick_operand(bytearray(8)) is None


def test_prepared_all_reduce_and_lean_path_on_one_rank():
    with qcoll.Comm.init_rank(1, qcoll.get_unique_id(), 0, device="cpu") as comm:
        x = np.arange(8, dtype=np.int32)
        out = np.zeros(8, dtype=np.int32)
        call = comm.prepare_all_reduce("int32", op="max")
        assert comm.prepare_all_reduce("int32", op="max") is call  # bound once
        call(x.ctypes.data, out.ctypes.data, 8, None)
        assert out.tolist() == list(range(8))
        y = np.full(5, 3.0, dtype=np.float64)
        assert comm.all_reduce(y, op="sum") is y and y.tolist() == [3.0] * 5
        # Mismatched operands go through the full path, which names them.
        with pytest.raises(qcoll.InvalidArgumentError, match="recvbuf"):
            comm.all_reduce(np.zeros(4, np.float32), np.zeros(3, np.float32))
        with pytest.raises(qcoll.InvalidArgumentError, match="op 'median'"):
            comm.all_reduce(np.zeros(4, np.float32), op="median")
    with pytest.raises(qcoll.InvalidUsageError, match="destroyed"):
        call(x.ctypes.data, out.ctypes.data, 8, None)
