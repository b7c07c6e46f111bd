#!/usr/bin/env python3
"""Latency and bandwidth plots from qcoll-perf's JSON results (-J FILE).

    scripts/perf-plot.py RUN.json[=LABEL] [RUN2.json[=LABEL] ...] -o plot.png
        [--title TEXT] [--note TEXT] [--in-place]
    scripts/perf-plot.py RUN.json ... --table     # the series as text, no matplotlib

Draws two panels against the message size (log scales): the time per call
(us) and the bus bandwidth (GB/s).  Each file gives one qcoll series (out
of place, or in place with --in-place) and, when it was run with
--vs-nccl, a second series for NCCL on the same buffers: qcoll beside NCCL
from one run.  Rows whose check failed are refused; untimed rows (no
in-place form, a refused graph capture) are left out of the lines.  The
title names the collective, ranks, memory and data type of the runs; --note
adds a line under it (for example what the plot does and does not show).
"""
import argparse
import json
import sys


def load(spec):
    """(label, document) of one FILE[=LABEL] argument."""
    path, _, label = spec.partition("=")
    with open(path) as f:
        doc = json.load(f)
    if doc.get("tool") != "qcoll-perf" or "rows" not in doc:
        sys.exit(f"{path}: not a qcoll-perf JSON document (qcoll-perf -J FILE)")
    if doc.get("wrong"):
        sys.exit(f"{path}: {doc['wrong']} wrong values: a failed run is not plotted")
    if not label:
        label = f"qcoll {doc['memory']}, {doc['nranks']} ranks"
    return label, doc


def series(doc, key):
    """(sizes, times_us, busbws) of the timed rows of one placement."""
    sizes, times, bws = [], [], []
    for row in doc["rows"]:
        r = row.get(key)
        if not r or r.get("time_us") is None:
            continue
        sizes.append(row["size"])
        times.append(r["time_us"])
        bws.append(r["busbw"])
    return sizes, times, bws


def describe(docs):
    """The runs' common facts, for the title."""
    facts = []
    for key, fmt in (("collective", "{}"), ("nranks", "{} ranks"), ("memory", "{} memory")):
        values = sorted({str(d[key]) for d in docs})
        facts.append(fmt.format("/".join(values)))
    types = sorted({row["type"] for d in docs for row in d["rows"]})
    facts.append("/".join(types))
    return ", ".join(facts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", metavar="FILE[=LABEL]")
    ap.add_argument("-o", "--output", help="image to write (.png, .svg)")
    ap.add_argument("--table", action="store_true",
                    help="print the series that would be drawn instead of drawing them")
    ap.add_argument("--title", help="first title line (default: what the runs measured)")
    ap.add_argument("--note", help="a second title line")
    ap.add_argument("--in-place", action="store_true", help="plot the in-place placement")
    args = ap.parse_args()
    if not args.table and not args.output:
        ap.error("-o FILE is required (or --table)")

    runs = [load(spec) for spec in args.runs]
    placement = "in_place" if args.in_place else "out_of_place"
    lines = []  # (name, style, sizes, times, busbws)
    for label, doc in runs:
        for key, name, style in ((placement, label, "o-"), ("nccl", f"NCCL ({label})", "s--")):
            sizes, times, bws = series(doc, key)
            if sizes:
                lines.append((name, style, sizes, times, bws))
    if not lines:
        sys.exit("no timed rows to plot")
    if args.table:
        for name, _, sizes, times, bws in lines:
            print(f"# {name}: size time_us busbw")
            for row in zip(sizes, times, bws):
                print("%d %.6g %.6g" % row)
        print(f"{len(lines)} series")
        return

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_bw) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, style, sizes, times, bws in lines:
        ax_t.plot(sizes, times, style, label=name, markersize=4)
        ax_bw.plot(sizes, bws, style, label=name, markersize=4)
    drawn = len(lines)
    for ax, ylabel in ((ax_t, "time per call (us)"), (ax_bw, "bus bandwidth (GB/s)")):
        ax.set_xscale("log", base=2)
        if any(y > 0 for line in ax.get_lines() for y in line.get_ydata()):
            ax.set_yscale("log")  # (one rank moves no bus bytes: all zeros)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    title = args.title or describe([doc for _, doc in runs])
    title += f" ({placement.replace('_', ' ')})"
    if args.note:
        title += "\n" + args.note
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output}: {drawn} series")


if __name__ == "__main__":
    main()
