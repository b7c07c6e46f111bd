"""Which libqcoll the package loads: its own copy before QCOLL_LIB, and
never a sanitizer build of the checkout by accident.  Each case lays out a
small checkout in a temporary folder (the package's sources, build folders
holding copies of this build's library) and asks a fresh interpreter which
file it loaded."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qcoll_testutil import PYTHON_DIR

LIB = os.environ.get("QCOLL_LIB")
pytestmark = pytest.mark.skipif(not LIB or not Path(LIB).is_file(),
                                reason="QCOLL_LIB does not name this build's libqcoll.so")


def _checkout(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(PYTHON_DIR / "qcoll", repo / "python" / "qcoll",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so*", "bin"))
    return repo


def _build(repo, name, sanitize=""):
    build = repo / name
    build.mkdir()
    (build / "CMakeCache.txt").write_text(f"QCOLL_SANITIZE:STRING={sanitize}\n")
    shutil.copy(LIB, build / "libqcoll.so")
    return build / "libqcoll.so"


def _loaded(repo, qcoll_lib=None, installed_dir=None):
    """The file a fresh interpreter loads; installed_dir plays the folder an
    editable install puts first on the package's __path__."""
    env = {k: v for k, v in os.environ.items() if k not in ("QCOLL_LIB", "PYTHONPATH")}
    env["PYTHONPATH"] = str(repo / "python")
    if qcoll_lib:
        env["QCOLL_LIB"] = qcoll_lib
    code = "import qcoll\n"
    if installed_dir:
        code += f"qcoll.__path__.insert(0, {str(installed_dir)!r})\n"
    code += "print(qcoll.lib_path())"
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_sanitizer_build_is_never_picked(tmp_path):
    repo = _checkout(tmp_path)
    plain = _build(repo, "build-host")
    time.sleep(0.05)
    _build(repo, "build-asan", sanitize="address,undefined")  # the newest
    assert _loaded(repo) == str(plain)


def test_build_folder_comes_first(tmp_path):
    repo = _checkout(tmp_path)
    main = _build(repo, "build")
    time.sleep(0.05)
    _build(repo, "build-other")  # newer, but not the README's build
    assert _loaded(repo) == str(main)


def test_package_copy_wins_over_qcoll_lib(tmp_path):
    repo = _checkout(tmp_path)
    _build(repo, "build")
    own = repo / "python" / "qcoll" / "libqcoll.so.0"
    shutil.copy(LIB, own)
    assert _loaded(repo, qcoll_lib="/nonexistent/libqcoll.so") == str(own)


def test_qcoll_lib_without_a_package_copy(tmp_path):
    repo = _checkout(tmp_path)
    _build(repo, "build")
    other = tmp_path / "elsewhere" / "libqcoll.so"
    other.parent.mkdir()
    shutil.copy(LIB, other)
    assert _loaded(repo, qcoll_lib=str(other.parent)) == str(other)


def test_editable_install_copy_wins(tmp_path):
    repo = _checkout(tmp_path)
    _build(repo, "build")
    installed = tmp_path / "site-packages" / "qcoll"
    installed.mkdir(parents=True)
    shutil.copy(LIB, installed / "libqcoll.so.0")
    assert _loaded(repo, installed_dir=installed) == str(installed / "libqcoll.so.0")


def test_tools_without_a_wheel_say_so(tmp_path):
    # A checkout's package has no qcoll/bin: `python -m qcoll.run` names the
    # missing tool and where to find one, exit 127 (command not found).
    repo = _checkout(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(repo / "python")
    out = subprocess.run([sys.executable, "-m", "qcoll.run", "-n", "2", "true"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 127, out
    assert "qcoll/bin/qcoll-run is missing" in out.stderr
    assert "pip install ./python" in out.stderr


def test_tools_from_the_package_folder(tmp_path):
    # With qcoll/bin/qcoll-run in the package (as a wheel has it), the entry
    # point replaces itself with that program and passes the arguments on.
    repo = _checkout(tmp_path)
    tool = repo / "python" / "qcoll" / "bin" / "qcoll-run"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho \"fake qcoll-run $*\"\nexit 3\n")
    tool.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(repo / "python")
    out = subprocess.run([sys.executable, "-m", "qcoll.run", "-np", "2", "prog"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 3 and out.stdout == "fake qcoll-run -np 2 prog\n", out
