"""The tools a wheel carries, started from Python.

    python -m qcoll.run -n 4 python3 examples/python_allreduce.py
    qcoll-run -n 4 ...          # the same, as the wheel's console script

The wheel holds ``qcoll/bin/qcoll-run``, ``qcoll-perf`` and ``qcoll-info``
beside ``qcoll/libqcoll.so.0`` (their run path finds it there).  Each entry
point here replaces the Python process with the tool, so exit status and
signals are the tool's own.
"""

import os
import sys
from pathlib import Path
from typing import List, NoReturn, Optional

from ._errors import LibraryNotFoundError
from ._lib import package_dirs

TOOLS = ("qcoll-run", "qcoll-perf", "qcoll-info")


def tool_path(name: str) -> Path:
    """Path of one of the package's tools; LibraryNotFoundError when this
    package was not installed from a wheel (a source checkout: use
    build/tools/NAME/NAME)."""
    if name not in TOOLS:
        raise ValueError(f"unknown tool {name!r}; the package has {', '.join(TOOLS)}")
    for d in package_dirs():
        path = d / "bin" / name
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise LibraryNotFoundError(
        f"qcoll/bin/{name} is missing: this qcoll package was not installed from a wheel; "
        f"run build/tools/{name}/{name} of a CMake build, or `pip install ./python`")


def _exec(name: str, argv: Optional[List[str]] = None) -> NoReturn:
    args = sys.argv[1:] if argv is None else argv
    try:
        path = tool_path(name)
    except LibraryNotFoundError as e:
        sys.stderr.write(f"{name}: {e}\n")
        sys.exit(127)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(str(path), [name] + list(args))


def main(argv: Optional[List[str]] = None) -> NoReturn:
    """qcoll-run: start N ranks of a program on this host."""
    _exec("qcoll-run", argv)


def perf_main(argv: Optional[List[str]] = None) -> NoReturn:
    """qcoll-perf: bandwidth and latency of the collectives."""
    _exec("qcoll-perf", argv)


def info_main(argv: Optional[List[str]] = None) -> NoReturn:
    """qcoll-info: version, devices, selection table, variables."""
    _exec("qcoll-info", argv)


if __name__ == "__main__":
    main()
