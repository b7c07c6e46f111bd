#!/usr/bin/env python3
"""Run qcoll-perf under qcoll-run and check what it prints.

    perf_test.py QCOLL_RUN QCOLL_PERF CASE

Each case runs one or more benchmarks and asserts on the exit status and
the table: every row has the expected size and count, every checked #wrong
is 0, the bus bandwidth follows from the algorithm bandwidth by the
collective's factor, and the footer reports the outcome.  Bad-flag cases
assert the exit status 2 and the message.  Standard library only.
"""
import re
import subprocess
import sys

ELEM = {"i8": 1, "u8": 1, "i32": 4, "u32": 4, "i64": 8, "u64": 8,
        "f16": 2, "bf16": 2, "f32": 4, "f64": 8}
OPS = ["sum", "prod", "min", "max", "avg"]
GATHERED = {"all_gather", "reduce_scatter", "all_to_all"}
NO_IN_PLACE = {"all_to_all", "sendrecv", "barrier"}


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def run(cmd, timeout=120):
    print("$ " + " ".join(cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    print(p.stdout, end="")
    if p.stderr:
        print("--- stderr:\n" + p.stderr, end="")
    print("--- exit status %d" % p.returncode)
    return p


def busbw_factor(coll, n):
    if coll == "all_reduce":
        return 2.0 * (n - 1) / n
    if coll in GATHERED:
        return (n - 1) / n
    if coll == "barrier":
        return 0.0
    return 1.0


def sweep(minb, maxb, factor):
    sizes, s = [], minb
    while s <= maxb:
        sizes.append(s)
        s *= factor
    return sizes


def parse_rows(out):
    rows = []
    for line in out.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        f = line.split()
        check(len(f) == 13, "a table row does not have 13 columns: %r" % line)
        rows.append(f)
    return rows


def check_half(coll, nranks, f, checked, label):
    """One placement's four columns: time algbw busbw #wrong."""
    time_s, algbw, busbw, wrong = f
    if coll in NO_IN_PLACE and label == "in-place":
        check([time_s, algbw, busbw, wrong] == ["N/A"] * 4,
              "%s in-place columns should be N/A: %r" % (coll, f))
        return
    check(float(time_s) > 0, "%s time is not positive: %r" % (label, f))
    factor = busbw_factor(coll, nranks)
    want = float(algbw) * factor
    # Both columns are rounded to 2 decimals (at most 0.005 each).
    check(abs(float(busbw) - want) <= 0.005 * (factor + 1) + 1e-6,
          "%s busbw %s is not algbw %s x factor" % (label, busbw, algbw))
    if checked:
        check(wrong == "0", "%s #wrong is %s, expected 0" % (label, wrong))
    else:
        check(wrong == "N/A", "%s #wrong should be N/A without -c 1" % label)


def check_table(p, coll, nranks, sizes, dtypes, ops, root, checked=True):
    check(p.returncode == 0, "qcoll-perf exited %d, expected 0" % p.returncode)
    rows = parse_rows(p.stdout)
    want = [(s, d, o) for d in dtypes for o in ops for s in sizes]
    check(len(rows) == len(want),
          "%d table rows, expected %d" % (len(rows), len(want)))
    for f, (size, dtype, op) in zip(rows, want):
        es = ELEM[dtype]
        if coll == "barrier":
            count, shown = 0, 0
        elif coll in GATHERED:
            count = size // es // nranks
            shown = count * nranks * es
        else:
            count = size // es
            shown = count * es
        check(int(f[0]) == shown, "size column %s, expected %d" % (f[0], shown))
        check(int(f[1]) == count, "count column %s, expected %d" % (f[1], count))
        check(f[2] == dtype, "type column %s, expected %s" % (f[2], dtype))
        check(f[3] == op, "redop column %s, expected %s" % (f[3], op))
        check(int(f[4]) == root, "root column %s, expected %d" % (f[4], root))
        check_half(coll, nranks, f[5:9], checked, "out-of-place")
        check_half(coll, nranks, f[9:13], checked, "in-place")
    if checked:
        check("# Out of bounds values : 0 OK" in p.stdout, "footer does not say 0 OK")
    check(re.search(r"^# Avg bus bandwidth +: [0-9.e+-]+$", p.stdout, re.M),
          "no average bus bandwidth footer")
    check(re.search(r"^#  nranks %d " % nranks, p.stdout, re.M),
          "header does not name %d ranks" % nranks)
    ranks = re.findall(r"^#  Rank +(\d+) +Pid", p.stdout, re.M)
    check(ranks == [str(r) for r in range(nranks)], "rank table lists %r" % ranks)
    print("checked %d rows: sizes, counts, busbw factors%s" %
          (len(rows), ", #wrong 0" if checked else ""))


def case_all_reduce(run_, perf):
    # The reference sweep: 2 ranks, 8 B .. 64 KiB by 4, every result checked.
    p = run([run_, "-n", "2", perf, "-b", "8", "-e", "64K", "-f", "4", "-c", "1"])
    check_table(p, "all_reduce", 2, sweep(8, 65536, 4), ["f32"], ["sum"], -1)
    check(re.search(r"^# \[7/7\] 32 KiB f32 sum done$", p.stderr, re.M),
          "no progress line for the last size on stderr")


def case_all_dtypes_ops(run_, perf, coll, nranks):
    # Every dtype and op on an odd rank count (uneven splits, ring parity).
    has_op = coll in {"all_reduce", "reduce", "reduce_scatter"}
    has_root = coll in {"reduce", "broadcast"}
    args = [run_, "-n", str(nranks), perf, "-b", "8", "-e", "4K", "-f", "8",
            "-n", "2", "-w", "1", "-c", "1", "-d", "all"]
    if has_op:
        args += ["-o", "all"]
    root = -1
    if has_root:
        root = nranks - 1
        args += ["-r", str(root)]
    p = run(args + [coll])
    sizes = [8, 64, 512, 4096] if coll != "barrier" else [0]
    check_table(p, coll, nranks, sizes, list(ELEM), OPS if has_op else ["none"], root)


def case_unchecked(run_, perf):
    p = run([run_, "-n", "2", perf, "-b", "1K", "-e", "4K", "-f", "2", "-c", "0",
             "-d", "bf16"])
    check_table(p, "all_reduce", 2, [1024, 2048, 4096], ["bf16"], ["sum"], -1,
                checked=False)


def case_single_rank(run_, perf):
    # Without a launcher it runs alone.
    p = run([perf, "-b", "64", "-e", "256", "-f", "2", "-d", "i32", "-o", "max"])
    check_table(p, "all_reduce", 1, [64, 128, 256], ["i32"], ["max"], -1)


def case_bad_flags(run_, perf):
    bad = [
        (["-d", "f128"], "unknown datatype 'f128'"),
        (["-o", "xor"], "unknown op 'xor'"),
        (["-b", "1M", "-e", "1K"], "-b 1048576 is larger than -e 1024"),
        (["-b", "12Q"], "-b: bad size '12Q'"),
        (["-f", "1"], "-f needs a step factor greater than 1"),
        (["-f", "2", "-i", "8"], "-f and -i exclude each other"),
        (["-n", "0"], "-n needs an integer in 1.."),
        (["-c", "2"], "-c needs an integer in 0..1"),
        (["-m", "host", "-G", "1"], "-G (CUDA graph capture) needs GPU buffers"),
        (["-a", "fastest"], "unknown algorithm 'fastest'"),
        (["-m", "host", "-a", "oneshot"], "-a oneshot needs GPU buffers"),
        (["-q", "int3"], "unknown quantisation 'int3'"),
        (["-m", "disk"], "memory must be host or gpu"),
        (["-z"], "unknown option -z"),
        (["--bogus"], "unknown option '--bogus'"),
        (["-b"], "option -b needs an argument"),
        (["all_sum"], "unknown collective 'all_sum'"),
        (["-o", "sum", "broadcast"], "-o does not apply to broadcast"),
        (["-q", "int8", "all_gather"], "-a and -q apply to all_reduce only"),
    ]
    for args, msg in bad:
        p = run([run_, "-n", "2", perf] + args)
        check(p.returncode == 2, "%r: exit %d, expected 2" % (args, p.returncode))
        check(msg in p.stderr, "%r: stderr lacks %r" % (args, msg))
        # Only one rank explains; the launcher then names the failing rank.
        check(p.stderr.count("qcoll-perf: ") == 1,
              "%r: the message should be printed once" % (args,))
    # Checks that need the world size come after init, on every rank alike.
    p = run([run_, "-n", "2", perf, "-r", "2", "-b", "8", "-e", "8", "reduce"])
    check(p.returncode == 2, "-r 2 on 2 ranks: exit %d, expected 2" % p.returncode)
    check("-r 2: the root must be a rank in 0..1" in p.stderr, "-r 2: no clear message")
    p = run([perf, "-b", "8", "-e", "8", "sendrecv"])
    check(p.returncode == 2, "sendrecv on 1 rank: exit %d, expected 2" % p.returncode)
    check("sendrecv needs at least 2 ranks" in p.stderr, "sendrecv alone: no clear message")
    p = run([perf, "--help"])
    check(p.returncode == 0 and "Usage: qcoll-perf" in p.stdout, "--help prints no usage")


def main():
    run_, perf, case = sys.argv[1:4]
    cases = {
        "all_reduce": lambda: case_all_reduce(run_, perf),
        "unchecked": lambda: case_unchecked(run_, perf),
        "single_rank": lambda: case_single_rank(run_, perf),
        "bad_flags": lambda: case_bad_flags(run_, perf),
    }
    for coll in ["all_reduce", "reduce", "broadcast", "all_gather",
                 "reduce_scatter", "all_to_all", "sendrecv", "barrier"]:
        cases["every_dtype." + coll] = (lambda c=coll: case_all_dtypes_ops(run_, perf, c, 3))
    if case not in cases:
        print("unknown case %s; cases: %s" % (case, " ".join(sorted(cases))))
        return 2
    try:
        cases[case]()
    except Failure as e:
        print("FAIL [%s]: %s" % (case, e))
        return 1
    print("PASS [%s]" % case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
