#!/usr/bin/env python3
"""Tables and a plot from bench/host_vs_mpi.sh's runs.

Reads OUT/{qcoll,mpi}-n<N>-r<round>.{out,err,cmd}: each .out is a
qcoll-perf or mpi-perf table (size count type redop root | time algbw busbw
#wrong | time algbw busbw #wrong).  Per world size and per size it takes
the median time over the rounds of each library (out-of-place and
in-place) and the ratio mpi_time / qcoll_time (> 1: qcoll is faster), the
range of the per-round ratios (round k's qcoll against round k's MPI, run
back to back), and the geometric mean of the ratios over the sizes.
Refuses outputs whose check failed or whose sizes differ.  With --baseline,
OUT/base-n<N>-r<round>.* are a second qcoll build (an earlier revision)
measured in the same rounds: the table then also gives its ratio to MPI
("before"), so a change is judged against MPI run by run, not against
times taken at another moment on a shared machine.
"""
import argparse
import math
import os
import statistics
import sys

LIBS = ("qcoll", "mpi")
LABEL = {"qcoll": "qcoll host", "mpi": "MPI", "base": "qcoll baseline"}
# qcoll's host all-reduce is one-shot up to QCOLL_SHM_ONESHOT_BYTES (64 KiB
# by default) and reduce-scatter + all-gather above: the geometric means are
# also given on each side of it.
ONESHOT_BYTES = 64 * 1024


def parse_table(path):
    """{size: (out_of_place_us, in_place_us)} of one run; checks #wrong."""
    rows, footer_ok = {}, False
    with open(path) as f:
        for line in f:
            if line.startswith("# Out of bounds values"):
                footer_ok = line.split(":")[1].split() == ["0", "OK"]
            if line.startswith("#") or not line.strip():
                continue
            cols = line.split()
            if len(cols) != 13:
                sys.exit(f"{path}: unexpected row: {line.rstrip()}")
            size = int(cols[0])
            wrong = (cols[8], cols[12])
            if wrong != ("0", "0"):
                sys.exit(f"{path}: size {size}: #wrong {wrong[0]} / {wrong[1]}")
            rows[size] = (float(cols[5]), float(cols[9]))
    if not footer_ok:
        sys.exit(f"{path}: the footer does not say '0 OK'")
    if not rows:
        sys.exit(f"{path}: no rows")
    return rows


def load(d, n, rounds, libs):
    """runs[lib] = list over rounds of {size: (oop, ip)}."""
    runs = {lib: [parse_table(os.path.join(d, f"{lib}-n{n}-r{r}.out"))
                  for r in range(1, rounds + 1)] for lib in libs}
    sizes = sorted(runs["qcoll"][0])
    for lib in libs:
        for r, rows in enumerate(runs[lib], 1):
            if sorted(rows) != sizes:
                sys.exit(f"{lib} round {r} with {n} ranks measured other sizes")
    return sizes, runs


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def human(size):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def summarise(sizes, runs):
    """Per size: medians, ratios and the per-round ratio range."""
    rows = []
    for s in sizes:
        row = {"size": s}
        for place, k in (("oop", 0), ("ip", 1)):
            per = {lib: [run[s][k] for run in runs[lib]] for lib in LIBS}
            q, m = (statistics.median(per[lib]) for lib in LIBS)
            round_ratios = [mi / qi for qi, mi in zip(per["qcoll"], per["mpi"])]
            row[place] = {"qcoll": q, "mpi": m, "ratio": m / q,
                          "lo": min(round_ratios), "hi": max(round_ratios),
                          "q_lo": min(per["qcoll"]), "q_hi": max(per["qcoll"]),
                          "m_lo": min(per["mpi"]), "m_hi": max(per["mpi"])}
            if "base" in runs:
                b = [run[s][k] for run in runs["base"]]
                base_ratios = [mi / bi for bi, mi in zip(b, per["mpi"])]
                row[place].update(base=statistics.median(b),
                                  base_ratio=m / statistics.median(b),
                                  base_lo=min(base_ratios), base_hi=max(base_ratios))
        rows.append(row)
    return rows


def fmt_us(us):
    return f"{us:.0f}" if us >= 100 else f"{us:.2f}" if us < 10 else f"{us:.1f}"


def table_md(n, rows, rounds):
    with_base = "base" in rows[0]["oop"]
    base_head = ("| before (us) | before ratio | before round range " if with_base else "")
    base_rule = (" ---: | ---: | :---: |" if with_base else "")
    out = [f"### {n} ranks\n",
           f"Median over {rounds} rounds; ratio = MPI time / qcoll time (> 1: qcoll is faster); "
           "round range = the smallest and largest ratio of one round's back-to-back pair"
           + ("; before = the baseline build, in the same rounds" if with_base else "")
           + ".\n",
           "| size | qcoll (us) | MPI (us) | ratio | round range " + base_head
           + "| in-place qcoll (us) | in-place MPI (us) | in-place ratio |"
           + (" in-place before ratio |" if with_base else ""),
           "| ---: | ---: | ---: | ---: | :---: |" + base_rule + " ---: | ---: | ---: |"
           + (" ---: |" if with_base else "")]
    for r in rows:
        o, i = r["oop"], r["ip"]
        base_cells = (f"| {fmt_us(o['base'])} | {o['base_ratio']:.2f} "
                      f"| {o['base_lo']:.2f} – {o['base_hi']:.2f} " if with_base else "")
        out.append(f"| {human(r['size'])} | {fmt_us(o['qcoll'])} | {fmt_us(o['mpi'])} "
                   f"| **{o['ratio']:.2f}** | {o['lo']:.2f} – {o['hi']:.2f} " + base_cells
                   + f"| {fmt_us(i['qcoll'])} | {fmt_us(i['mpi'])} | {i['ratio']:.2f} |"
                   + (f" {i['base_ratio']:.2f} |" if with_base else ""))
    out.append("")
    for label, pick in (("all sizes", lambda s: True),
                        (f"<= {human(ONESHOT_BYTES)} (qcoll one-shot)",
                         lambda s: s <= ONESHOT_BYTES),
                        (f"> {human(ONESHOT_BYTES)} (qcoll reduce-scatter + all-gather)",
                         lambda s: s > ONESHOT_BYTES)):
        sel = [r for r in rows if pick(r["size"])]
        if not sel:
            continue
        g_oop = geomean([r["oop"]["ratio"] for r in sel])
        g_ip = geomean([r["ip"]["ratio"] for r in sel])
        before = ""
        if with_base:
            before = (f" (before: {geomean([r['oop']['base_ratio'] for r in sel]):.2f}"
                      f" and {geomean([r['ip']['base_ratio'] for r in sel]):.2f})")
        out.append(f"- geometric mean ratio, {label}, {len(sel)} sizes: "
                   f"**{g_oop:.2f}** out of place, {g_ip:.2f} in place{before}")
    out.append("")
    return "\n".join(out)


def plot(path, per_n):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ns = list(per_n)
    fig, axes = plt.subplots(2, len(ns), figsize=(6.2 * len(ns), 8.4), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 2]}, sharex=True)
    style = {"qcoll": dict(color="tab:blue", marker="o"),
             "mpi": dict(color="tab:orange", marker="s")}
    for col, n in enumerate(ns):
        rows = per_n[n]
        sizes = [r["size"] for r in rows]
        ax = axes[0][col]
        for lib, key in (("qcoll", "q"), ("mpi", "m")):
            med = [r["oop"][lib] for r in rows]
            ax.plot(sizes, med, label=f"{LABEL[lib]} (median)", ms=4, lw=1.6, **style[lib])
            ax.fill_between(sizes, [r["oop"][key + "_lo"] for r in rows],
                            [r["oop"][key + "_hi"] for r in rows],
                            color=style[lib]["color"], alpha=0.18, lw=0,
                            label=f"{LABEL[lib]} (min–max of rounds)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"all-reduce f32 sum, {n} ranks, out of place")
        ax.set_ylabel("time per call (us)")
        ax.grid(True, which="major", alpha=0.35)
        ax.legend(fontsize=8, loc="upper left")

        ax = axes[1][col]
        ax.plot(sizes, [r["oop"]["ratio"] for r in rows], color="k", marker="o", ms=4,
                label="median MPI / median qcoll")
        ax.fill_between(sizes, [r["oop"]["lo"] for r in rows], [r["oop"]["hi"] for r in rows],
                        color="grey", alpha=0.25, lw=0, label="per-round ratio range")
        ax.axhline(1.0, color="tab:red", lw=1, ls="--")
        ax.axvline(ONESHOT_BYTES, color="grey", lw=0.8, ls=":")
        ax.text(ONESHOT_BYTES * 1.15, 0.98, "qcoll one-shot | chunked", fontsize=7,
                color="grey", va="top", transform=ax.get_xaxis_transform())
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.set_ylabel("MPI time / qcoll time (>1: qcoll faster)")
        ax.set_xlabel("message size")
        ax.grid(True, which="major", alpha=0.35)
        ax.legend(fontsize=8, loc="lower right")
        ticks = [s for s in sizes if math.log2(s) % 3 == 0]
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([human(s).replace(" ", "") for s in ticks], rotation=45)
    fig.suptitle("qcoll host back end vs MPI (shared memory), one 2-core VM: "
                 "only the ratios are meaningful", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


PLACEMENT_LABEL = {
    "qcoll": "qcoll, as qcoll-run starts it (not bound)",
    "qcoll_pinned": "qcoll, each rank bound to one core",
    "qcoll_nospin": "qcoll, QCOLL_SPIN_US=0 (not bound)",
    "mpi": "MPI, as mpirun starts it (bound to cores)",
    "mpi_unbound": "MPI, --bind-to none",
}


def placement_md(d, variants, rounds):
    """Median (min - max) out-of-place time per size and variant."""
    runs = {v: [parse_table(os.path.join(d, f"place-{v}-r{r}.out"))
                for r in range(1, rounds + 1)] for v in variants}
    sizes = sorted(runs[variants[0]][0])
    out = ["### Placement, 2 ranks\n",
           f"Out-of-place time per call in us: median of {rounds} runs (smallest – largest).\n",
           "| variant | " + " | ".join(human(s) for s in sizes) + " |",
           "| :--- |" + " ---: |" * len(sizes)]
    for v in variants:
        cells = []
        for s in sizes:
            ts = [run[s][0] for run in runs[v]]
            cells.append(f"{fmt_us(statistics.median(ts))} ({fmt_us(min(ts))} – {fmt_us(max(ts))})")
        out.append(f"| {PLACEMENT_LABEL.get(v, v)} | " + " | ".join(cells) + " |")
    out.append("")
    return "\n".join(out)


def raw_run_md(base, title):
    with open(base + ".cmd") as f:
        cmd = f.read().strip()
    with open(base + ".load") as f:
        load = f.read().strip()
    with open(base + ".out") as f:
        text = f.read().rstrip()
    with open(base + ".err") as f:
        err = [l.rstrip() for l in f if l.strip() and not l.startswith("# [")]
    out = [f"<details><summary>{title}: <code>{cmd}</code></summary>\n",
           f"Load average before the run: {load}\n", "```\n" + text + "\n```"]
    if err:
        out.append("stderr (progress lines left out):\n\n```\n" + "\n".join(err) + "\n```")
    out.append("</details>\n")
    return "\n".join(out)


def round_order(libs, r):
    """The order bench/host_vs_mpi.sh ran the libraries in round r."""
    if len(libs) == 2:
        return libs if r % 2 == 1 else tuple(reversed(libs))
    k = (r - 1) % len(libs)
    return libs[k:] + libs[:k]


def raw_md(d, n, rounds, libs):
    out = [f"### {n} ranks\n"]
    for r in range(1, rounds + 1):
        for lib in round_order(libs, r):
            out.append(raw_run_md(os.path.join(d, f"{lib}-n{n}-r{r}"), f"round {r}, {LABEL[lib]}"))
    return "\n".join(out)


def raw_placement_md(d, variants, rounds):
    out = ["### Placement, 2 ranks\n"]
    for r in range(1, rounds + 1):
        for i in range(len(variants)):
            v = variants[(i + r - 1) % len(variants)]
            out.append(raw_run_md(os.path.join(d, f"place-{v}-r{r}"), f"round {r}, {v}"))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--ranks", required=True, help='world sizes, e.g. "2 4"')
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--plot", required=True)
    ap.add_argument("--summary", required=True)
    ap.add_argument("--raw", required=True)
    ap.add_argument("--placement", default="", help="variants of the placement runs")
    ap.add_argument("--placement-rounds", type=int, default=0)
    ap.add_argument("--baseline", action="store_true",
                    help="OUT/base-* runs of a baseline build are there too")
    ap.add_argument("--no-plot", action="store_true")
    a = ap.parse_args()
    libs = ("qcoll", "base", "mpi") if a.baseline else LIBS
    ns = [int(x) for x in a.ranks.split()]
    per_n, parts, raw = {}, [], []
    for n in ns:
        sizes, runs = load(a.dir, n, a.rounds, libs)
        per_n[n] = summarise(sizes, runs)
        parts.append(table_md(n, per_n[n], a.rounds))
        raw.append(raw_md(a.dir, n, a.rounds, libs))
    variants = a.placement.split()
    if variants:
        parts.append(placement_md(a.dir, variants, a.placement_rounds))
        raw.append(raw_placement_md(a.dir, variants, a.placement_rounds))
    with open(os.path.join(a.dir, "machine.txt")) as f:
        machine = f.read().rstrip()
    with open(a.summary, "w") as f:
        f.write("```\n" + machine + "\n```\n\n")
        total = len(libs) * len(ns) * a.rounds + len(variants) * a.placement_rounds
        f.write(f"Every run ({total} of them) reported #wrong 0 on every row.\n\n")
        loads = []
        for name in sorted(os.listdir(a.dir)):
            if name.endswith(".load"):
                with open(os.path.join(a.dir, name)) as lf:
                    loads.append(float(lf.read().split()[0]))
        if loads:
            f.write(f"1-minute load average before the runs: {min(loads):.2f} – "
                    f"{max(loads):.2f} (median {statistics.median(loads):.2f}).\n\n")
        f.write("\n".join(parts))
    with open(a.raw, "w") as f:
        f.write("\n".join(raw))
    if not a.no_plot:
        os.makedirs(os.path.dirname(a.plot) or ".", exist_ok=True)
        plot(a.plot, per_n)


if __name__ == "__main__":
    main()
