#!/usr/bin/env python3
"""Markdown tables from qcoll-perf logs, for the pages under docs/results/.

    scripts/perf-table.py [--col NAME] LABEL=LOG [LABEL=LOG ...]

One row per message size, one column per log: the chosen column of that
log's data rows.  Columns (as qcoll-perf prints them): time (out-of-place
us, the default), busbw, algbw, wrong, ip_time (in-place us), nccl_time,
nccl_busbw, ratio.  A log that has no row for a size shows "-"; a log
whose #wrong is not 0 on a row marks that cell with "!".
"""
import argparse
import sys

# Data-row fields of qcoll-perf: size count type redop root, then
# out-of-place time algbw busbw #wrong, in-place time algbw busbw #wrong,
# and with --vs-nccl: nccl_time nccl_busbw ratio.
FIELDS = {
    "time": 5, "algbw": 6, "busbw": 7, "wrong": 8,
    "ip_time": 9, "nccl_time": 13, "nccl_busbw": 14, "ratio": 15,
}


def human(size):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= div and size % div == 0:
            return f"{size // div} {unit}"
    return f"{size} B"


def read_rows(path, col):
    rows = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 13 or not parts[0].isdigit():
                continue
            if col >= len(parts):
                continue
            cell = parts[col]
            if parts[8] != "0" or parts[12] not in ("0", "N/A"):  # N/A: no in-place run
                cell += " !"
            rows[int(parts[0])] = cell
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--col", default="time", choices=sorted(FIELDS))
    ap.add_argument("logs", nargs="+", metavar="LABEL=LOG")
    args = ap.parse_args()
    labels, tables = [], []
    for spec in args.logs:
        label, sep, path = spec.partition("=")
        if not sep:
            sys.exit(f"perf-table: '{spec}' is not LABEL=LOG")
        labels.append(label)
        tables.append(read_rows(path, FIELDS[args.col]))
    sizes = sorted(set().union(*tables))
    print("| size | " + " | ".join(labels) + " |")
    print("| ---: |" + " ---: |" * len(labels))
    for s in sizes:
        cells = [t.get(s, "-") for t in tables]
        print(f"| {human(s)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
