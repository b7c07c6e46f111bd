"""The binding's table of statuses (python/qcoll/_errors.py) against the
library's one list (src/base/status.h, through qcoll_status_string): the
same statuses, values and descriptions, so an exception names its status
as the C library does."""

import re

from qcoll import _errors
from qcoll._lib import lib
from qcoll_testutil import REPO

HEADER = (REPO / "include" / "qcoll.h").read_text()


def library_statuses():
    """value -> description for every status of the public header."""
    values = [int(v) for v in re.findall(r"QCOLL_(?:OK|ERR_\w+) = (-?\d+)", HEADER)]
    assert 0 in values and len(values) >= 14
    return {v: lib().qcoll_status_string(v).decode() for v in values}


def test_binding_constants_match_the_header():
    header = {name: int(v) for name, v in re.findall(r"QCOLL_(OK|ERR_\w+) = (-?\d+)", HEADER)}
    for name, value in header.items():
        assert getattr(_errors, name) == value, name


def test_binding_names_match_the_library():
    lib_names = library_statuses()
    errors = {v: d for v, d in lib_names.items() if v != 0}
    assert all(d != "unknown status" for d in lib_names.values())
    assert _errors._STATUS_NAMES == errors
