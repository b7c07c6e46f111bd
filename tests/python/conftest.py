"""pytest set-up for the Python tests: this checkout's python/ and this
folder go first on sys.path, so the binding under test is the one in the
tree (libqcoll itself is found through QCOLL_LIB or build*/)."""

import sys

import pytest

from qcoll_testutil import HERE, PYTHON_DIR, find_qcoll_run

for path in (str(PYTHON_DIR), str(HERE)):
    if path not in sys.path:
        sys.path.insert(0, path)


@pytest.fixture(scope="session")
def qcoll_run():
    """Path of the qcoll-run launcher ($QCOLL_RUN or build*/)."""
    path = find_qcoll_run()
    if path is None or not path.is_file():
        pytest.skip("qcoll-run not found: set QCOLL_RUN or build the tree "
                    "(cmake --build build)")
    return path
