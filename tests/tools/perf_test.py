#!/usr/bin/env python3
"""Run qcoll-perf under qcoll-run and check what it prints.

    perf_test.py QCOLL_RUN QCOLL_PERF CASE

Each case runs one or more benchmarks and asserts on the exit status and
the table: every row has the expected size and count, every checked #wrong
is 0, the bus bandwidth follows from the algorithm bandwidth by the
collective's factor, and the footer reports the outcome.  Bad-flag cases
assert the exit status 2 and the message.  Standard library only.

The gpu.* cases run on GPU buffers.  They first ask qcoll-perf itself
whether it can use a GPU here, and exit 77 (skipped), saying why, when it
cannot: no device, QCOLL_DISABLE_CUDA, or a build without CUDA.
"""
import math
import os
import re
import subprocess
import sys

ELEM = {"i8": 1, "u8": 1, "i32": 4, "u32": 4, "i64": 8, "u64": 8,
        "f16": 2, "bf16": 2, "f32": 4, "f64": 8}
OPS = ["sum", "prod", "min", "max", "avg"]
GATHERED = {"all_gather", "reduce_scatter", "all_to_all"}
NO_IN_PLACE = {"all_to_all", "sendrecv", "barrier"}
SKIP = 77
# A line NCCL logs itself (NCCL_DEBUG=INFO/WARN), not a row of the table.
NCCL_LOG = re.compile(r"^\S+:\d+:\d+ \[\d+\] NCCL ")


class Failure(Exception):
    pass


class Skip(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def run(cmd, timeout=120, env=None):
    print("$ " + " ".join(cmd))
    full_env = None
    if env:
        full_env = dict(os.environ)
        full_env.update(env)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout, env=full_env)
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


def parse_rows(out, ncols=13):
    rows = []
    for line in out.splitlines():
        if not line.strip() or line.startswith("#") or NCCL_LOG.match(line):
            continue
        f = line.split()
        check(len(f) == ncols, "a table row does not have %d columns: %r" % (ncols, line))
        rows.append(f)
    return rows


def time_resolution(shown):
    """Half the last printed digit of a time column (us)."""
    t = float(shown)
    return 0.005 if t < 100 else 0.05 if t < 10000 else 0.5


def check_half(coll, nranks, f, checked, label, allow_nograph=False):
    """One placement's four columns: time algbw busbw #wrong."""
    time_s, algbw, busbw, wrong = f
    if coll in NO_IN_PLACE and label == "in-place":
        check([time_s, algbw, busbw, wrong] == ["N/A"] * 4,
              "%s in-place columns should be N/A: %r" % (coll, f))
        return
    if checked:
        check(wrong == "0", "%s #wrong is %s, expected 0" % (label, wrong))
    else:
        check(wrong == "N/A", "%s #wrong should be N/A without -c 1" % label)
    if time_s == "nograph":
        check(allow_nograph, "%s was not captured into a CUDA graph: %r" % (label, f))
        check([algbw, busbw] == ["N/A", "N/A"], "%s nograph row has bandwidths: %r" % (label, f))
        return
    check(float(time_s) > 0, "%s time is not positive: %r" % (label, f))
    factor = busbw_factor(coll, nranks)
    want = float(algbw) * factor
    # Both columns are rounded to 2 decimals (at most 0.005 each).
    check(abs(float(busbw) - want) <= 0.005 * (factor + 1) + 1e-6,
          "%s busbw %s is not algbw %s x factor" % (label, busbw, algbw))


def check_nccl(coll, nranks, size, qcoll_time, f, allow_nograph=False):
    """The NCCL columns: nccl_time nccl_busbw ratio."""
    t, busbw, ratio = f
    if coll == "barrier":
        check(f == ["N/A"] * 3, "barrier NCCL columns should be N/A: %r" % f)
        return
    if t == "nograph":
        check(allow_nograph, "NCCL was not captured into a CUDA graph: %r" % f)
        return
    check(float(t) > 0, "nccl_time is not positive: %r" % f)
    # busbw = size / time x factor, from the printed (rounded) time.
    factor = busbw_factor(coll, nranks)
    lo = size / ((float(t) + time_resolution(t)) * 1e3) * factor
    hi = size / max(float(t) - time_resolution(t), 1e-9) / 1e3 * factor
    check(lo - 0.006 <= float(busbw) <= hi + 0.006,
          "nccl_busbw %s does not follow from size %d and time %s" % (busbw, size, t))
    if qcoll_time in ("nograph", "N/A"):
        check(ratio == "N/A", "ratio %s without a qcoll time" % ratio)
        return
    tq, tn = float(qcoll_time), float(t)
    want = tn / tq
    slack = want * (time_resolution(qcoll_time) / tq + time_resolution(t) / tn) * 1.05 + 0.006
    check(abs(float(ratio) - want) <= slack,
          "ratio %s is not nccl_time %s / qcoll_time %s" % (ratio, t, qcoll_time))


def check_table(p, coll, nranks, sizes, dtypes, ops, root, checked=True, nccl=False,
                allow_nograph=False, allow_nccl_nograph=False, memory=None):
    check(p.returncode == 0, "qcoll-perf exited %d, expected 0" % p.returncode)
    rows = parse_rows(p.stdout, 16 if nccl else 13)
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
        check_half(coll, nranks, f[5:9], checked, "out-of-place", allow_nograph)
        check_half(coll, nranks, f[9:13], checked, "in-place", allow_nograph)
        if nccl:
            check_nccl(coll, nranks, shown, f[5], f[13:16], allow_nccl_nograph)
    if checked:
        check("# Out of bounds values : 0 OK" in p.stdout, "footer does not say 0 OK")
    check(re.search(r"^# Avg bus bandwidth +: [0-9.e+-]+$", p.stdout, re.M),
          "no average bus bandwidth footer")
    check(re.search(r"^#  nranks %d " % nranks, p.stdout, re.M),
          "header does not name %d ranks" % nranks)
    ranks = re.findall(r"^#  Rank +(\d+) +Pid", p.stdout, re.M)
    check(ranks == [str(r) for r in range(nranks)], "rank table lists %r" % ranks)
    if memory:
        check(re.search(r"^#  memory: %s " % memory, p.stdout, re.M),
              "header does not say memory: %s" % memory)
    print("checked %d rows: sizes, counts, busbw factors%s%s" %
          (len(rows), ", #wrong 0" if checked else "", ", NCCL columns" if nccl else ""))
    return rows


def case_all_reduce(run_, perf):
    # The reference sweep: 2 ranks, 8 B .. 64 KiB by 4, every result checked.
    p = run([run_, "-n", "2", perf, "--mem", "host", "-b", "8", "-e", "64K", "-f", "4", "-c", "1"])
    check_table(p, "all_reduce", 2, sweep(8, 65536, 4), ["f32"], ["sum"], -1, memory="host")
    check("timing: wall clock" in p.stdout, "host memory is not timed by the wall clock")
    check(re.search(r"^# \[7/7\] 32 KiB f32 sum done$", p.stderr, re.M),
          "no progress line for the last size on stderr")


def case_all_dtypes_ops(run_, perf, coll, nranks):
    # Every dtype and op on an odd rank count (uneven splits, ring parity).
    has_op = coll in {"all_reduce", "reduce", "reduce_scatter"}
    has_root = coll in {"reduce", "broadcast"}
    args = [run_, "-n", str(nranks), perf, "--mem", "host", "-b", "8", "-e", "4K", "-f", "8",
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
    p = run([run_, "-n", "2", perf, "--mem", "host", "-b", "1K", "-e", "4K", "-f", "2", "-c", "0",
             "-d", "bf16"])
    check_table(p, "all_reduce", 2, [1024, 2048, 4096], ["bf16"], ["sum"], -1,
                checked=False)


def case_single_rank(run_, perf):
    # Without a launcher it runs alone; without a usable GPU (here: CUDA
    # disabled) the default memory is host.
    p = run([perf, "-b", "64", "-e", "256", "-f", "2", "-d", "i32", "-o", "max"],
            env={"QCOLL_DISABLE_CUDA": "1"})
    check_table(p, "all_reduce", 1, [64, 128, 256], ["i32"], ["max"], -1, memory="host")


def case_json(run_, perf):
    # -J FILE: the same rows as the table, as JSON; -a and -m as the usual
    # tests have them (here the mean of the ranks, 2 calls per iteration);
    # --rounds 3: the median of three timed loops, in the header and JSON.
    import json
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "results.json")
        p = run([run_, "-n", "3", perf, "--mem", "host", "-b", "8", "-e", "4K", "-f", "8",
                 "-n", "3", "-w", "1", "-a", "1", "-m", "2", "--rounds", "3", "-J", path])
        rows = check_table(p, "all_reduce", 3, [8, 64, 512, 4096], ["f32"], ["sum"], -1,
                           memory="host")
        check("time: mean of ranks  agg iters: 2  rounds: 3 (median)" in p.stdout,
              "header does not say how the times were combined")
        check(not os.path.exists(path + ".tmp"), "the temporary file was left behind")
        with open(path) as f:
            doc = json.load(f)
    for key, want in [("tool", "qcoll-perf"), ("collective", "all_reduce"), ("nranks", 3),
                      ("memory", "host"), ("average", "mean"), ("agg_iters", 2), ("rounds", 3),
                      ("iters", 3), ("check", 1), ("nccl", None), ("wrong", 0)]:
        check(doc.get(key) == want, "JSON %s is %r, expected %r" % (key, doc.get(key), want))
    check(len(doc["rows"]) == len(rows), "JSON has %d rows, the table %d"
          % (len(doc["rows"]), len(rows)))
    for f, r in zip(rows, doc["rows"]):
        check(r["size"] == int(f[0]) and r["count"] == int(f[1]) and r["type"] == f[2],
              "JSON row %r does not match table row %r" % (r, f))
        for half, col in (("out_of_place", 5), ("in_place", 9)):
            t = r[half]["time_us"]
            check(abs(t - float(f[col])) <= time_resolution(f[col]) + 1e-9,
                  "JSON %s time %r is not the table's %s" % (half, t, f[col]))
            check(r[half]["wrong"] == 0, "JSON %s wrong is %r" % (half, r[half]["wrong"]))
        check(r["nccl"] is None, "JSON has NCCL results without --vs-nccl")
    # Every -a mode runs and says so in the header.
    for mode, name in [("0", "rank0"), ("2", "min"), ("3", "max")]:
        p = run([run_, "-n", "2", perf, "--mem", "host", "-b", "64", "-e", "64", "-n", "2",
                 "-w", "0", "-a", mode])
        check_table(p, "all_reduce", 2, [64], ["f32"], ["sum"], -1)
        check("time: %s of ranks" % name in p.stdout, "-a %s: header lacks %s" % (mode, name))
    print("JSON rows match the table; -a 0..3, -m 2 and --rounds 3 run")


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
        (["--mem", "host", "-G", "1"], "-G (CUDA graph capture) needs GPU buffers"),
        (["--mem", "host", "--vs-nccl"], "--vs-nccl needs GPU buffers"),
        (["--vs-nccl=1"], "unknown option '--vs-nccl=1'"),
        (["--algo", "fastest"], "unknown algorithm 'fastest'"),
        (["--mem", "host", "--algo", "oneshot"], "--algo oneshot needs GPU buffers"),
        (["-q", "int2"], "unknown quantisation 'int2'"),
        (["--mem", "disk"], "memory must be host or gpu"),
        # The usual tests' -a (averaging) and -m (aggregated calls): numbers,
        # and the older spellings point to the long options.
        (["-a", "oneshot"], "-a takes 0|1|2|3 (the time reported: rank 0, mean, min, max "
                            "over ranks); the algorithm is --algo oneshot"),
        (["-a", "4"], "-a needs an integer in 0..3"),
        (["-m", "host"], "-m takes a number of calls per timed iteration; buffer memory "
                         "is --mem host"),
        (["-m", "0"], "-m needs an integer in 1.."),
        (["--rounds", "0"], "--rounds needs an integer in 1..1000"),
        (["--rounds", "x"], "--rounds needs an integer in 1..1000, got 'x'"),
        (["-R", "1"], "unknown option -R"),
        (["-z"], "unknown option -z"),
        (["--bogus"], "unknown option '--bogus'"),
        (["-b"], "option -b needs an argument"),
        (["all_sum"], "unknown collective 'all_sum'"),
        (["-o", "sum", "broadcast"], "-o does not apply to broadcast"),
        (["-q", "int8", "all_gather"], "-q applies to all_reduce only"),
        (["--algo", "oneshot", "broadcast"], "--algo oneshot is an all_reduce algorithm"),
        (["--algo", "ipc", "barrier"], "--algo does not apply to barrier"),
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
    check("--vs-nccl" in p.stdout, "--help does not document --vs-nccl")
    # GPU flags when GPU buffers cannot be had: refused, saying why.
    p = run([perf, "--mem", "gpu", "-b", "8", "-e", "8"], env={"QCOLL_DISABLE_CUDA": "1"})
    check(p.returncode == 2, "--mem gpu with QCOLL_DISABLE_CUDA=1: exit %d, expected 2"
          % p.returncode)
    check("--mem gpu: " in p.stderr, "--mem gpu refused without a clear message")
    p = run([perf, "--version"])
    check(p.returncode == 0 and re.match(r"qcoll-perf \d+\.\d+\.\d+ \(library qcoll ", p.stdout),
          "--version: %r" % p.stdout)
    p = run([perf, "-G", "1", "-b", "8", "-e", "8"], env={"QCOLL_DISABLE_CUDA": "1"})
    check(p.returncode == 2 and "-G (CUDA graph capture) needs GPU buffers; this run uses "
          "host memory, as " in p.stderr, "-G without a GPU: no clear message")


# ---- GPU buffers --------------------------------------------------------------

GPU_SKIP_MARKS = ["--mem gpu: no usable CUDA device", "--mem gpu: QCOLL_DISABLE_CUDA is set",
                  "built without CUDA"]


def require_gpu(perf):
    """Skip unless qcoll-perf can use GPU buffers here (it says why not)."""
    p = run([perf, "--mem", "gpu", "-b", "8", "-e", "8", "-n", "1", "-w", "0", "-c", "0"])
    for mark in GPU_SKIP_MARKS:
        if p.returncode == 2 and mark in p.stderr:
            raise Skip(p.stderr.strip().splitlines()[0])
    check(p.returncode == 0, "qcoll-perf --mem gpu on one rank exited %d" % p.returncode)


def gpu_sweep(run_, perf, nranks, extra, coll="all_reduce", minb=8, maxb=1 << 20, factor=4,
              **table):
    args = [run_, "-n", str(nranks), perf, "--mem", "gpu", "-b", str(minb), "-e", str(maxb),
            "-f", str(factor), "-c", "1"] + extra + [coll]
    p = run(args, timeout=280)
    dtype = extra[extra.index("-d") + 1] if "-d" in extra else "f32"
    op = "sum" if coll in {"all_reduce", "reduce", "reduce_scatter"} else "none"
    root = 0 if coll in {"reduce", "broadcast"} else -1
    rows = check_table(p, coll, nranks, sweep(minb, maxb, factor), [dtype], [op], root,
                       memory="gpu", **table)
    return p, rows


def case_gpu_all_reduce(run_, perf):
    # With a usable GPU the default memory is gpu.
    p = run([perf, "-b", "8", "-e", "8", "-n", "1", "-w", "0"])
    check(p.returncode == 0 and re.search(r"^#  memory: gpu ", p.stdout, re.M),
          "the default memory is not gpu although a GPU is usable")
    p, _ = gpu_sweep(run_, perf, 2, [])
    check("timing: CUDA events on the stream" in p.stdout, "header does not name the timer")
    check(re.search(r"^#  Rank +1 +Pid.* device \d+ ", p.stdout, re.M),
          "rank table does not name rank 1's device")


def case_gpu_graph(run_, perf):
    # The library's IPC all-reduce is graph-safe: every row must be timed
    # from graph launches (no nograph), and the out-of-place check replays
    # the captured graph on fresh inputs.
    for dtype in ["f32", "bf16"]:
        p, _ = gpu_sweep(run_, perf, 2, ["-G", "1", "-d", dtype])
        check("timing: CUDA events around graph launches" in p.stdout,
              "header does not say graph launches are timed")
        check("graph: 1" in p.stdout, "header does not give -G 1")


def case_gpu_algo(run_, perf, algo):
    p, _ = gpu_sweep(run_, perf, 2, ["--algo", algo])
    check("algo: %s" % algo in p.stdout, "header does not name algorithm %s" % algo)


def case_gpu_per_call(run_, perf):
    # --algo forces every call's path through the collective's _ex form: ipc
    # and host (staged) for collectives other than all-reduce, checked.
    for coll in ["broadcast", "reduce_scatter", "sendrecv"]:
        for algo in ["ipc", "host"]:
            p, _ = gpu_sweep(run_, perf, 2, ["--algo", algo], coll=coll, maxb=64 << 10)
            check("algo: %s" % algo in p.stdout,
                  "%s header does not name algorithm %s" % (coll, algo))


def quant_sweep(run_, perf, quant, env=None):
    """A 2-rank quantised sweep at 256 KiB-4 MiB: (max error, allowed, stdout)."""
    args = [run_, "-n", "2", perf, "--mem", "gpu", "-b", str(256 << 10), "-e", str(4 << 20),
            "-f", "4", "-c", "1", "--algo", "twoshot", "-q", quant, "-d", "bf16", "all_reduce"]
    p = run(args, timeout=280, env=env)
    check(p.returncode == 0, "-q %s sweep failed" % quant)
    m = re.search(r"^# Max abs error +: ([0-9.e+-]+) \(quantised transfer (\w+); "
                  r"allowed ([0-9.e+-]+)\)$", p.stdout, re.M)
    check(m, "no max-error footer for -q %s" % quant)
    check(m.group(2) == quant, "footer names quantisation %s, expected %s" % (m.group(2), quant))
    return float(m.group(1)), float(m.group(3)), p.stdout


def case_gpu_quant(run_, perf):
    # Sizes on both sides of QCOLL_QUANT_MIN_BYTES (1M), the shared-GPU floors
    # off: results within the stated tolerance, and above it the transfer
    # must really round.
    for quant in ["int8", "int4", "fp8"]:
        err, allowed, _ = quant_sweep(run_, perf, quant, {"QCOLL_QUANT_SHARED_GPU_FLOORS": "0"})
        check(err <= allowed, "max error %g above the allowed %g" % (err, allowed))
        check(err > 0, "-q %s gave exact results at 1 MiB and 4 MiB: nothing was quantised"
              % quant)
        print("-q %s: max abs error %g, allowed %g" % (quant, err, allowed))
    # With the floors (the default), two ranks on one GPU run INT4 exact
    # below 32 MiB, and the header says from where each format is quantised.
    err, _, out = quant_sweep(run_, perf, "int4")
    m = re.search(r"^#  quantised where all ranks share a GPU \(QCOLL_QUANT_SHARED_GPU_FLOORS=1\), "
                  r"from: 2 per GPU: .*int4 (\d+) ", out, re.M)
    check(m and int(m.group(1)) == 32 << 20, "no shared-GPU floors line naming int4's 32 MiB")
    shared = re.findall(r"^#  Rank +\d+ +Pid.* device (\d+) ", out, re.M)
    if len(shared) == 2 and shared[0] == shared[1]:
        check(err == 0, "-q int4 below its shared-GPU floor was not exact (max error %g)" % err)
        print("-q int4 below the shared-GPU floor: exact")


def case_gpu_collectives(run_, perf):
    # Every collective and dtype on GPU buffers, 3 ranks (uneven splits).
    for coll in ["all_reduce", "reduce", "broadcast", "all_gather", "reduce_scatter",
                 "all_to_all", "sendrecv", "barrier"]:
        args = [run_, "-n", "3", perf, "--mem", "gpu", "-b", "8", "-e", "4K", "-f", "8",
                "-n", "2", "-w", "1", "-c", "1", "-d", "all", coll]
        p = run(args, timeout=280)
        sizes = [8, 64, 512, 4096] if coll != "barrier" else [0]
        op = "sum" if coll in {"all_reduce", "reduce", "reduce_scatter"} else "none"
        root = 0 if coll in {"reduce", "broadcast"} else -1
        check_table(p, coll, 3, sizes, list(ELEM), [op], root, memory="gpu")


def case_gpu_graph_refused(run_, perf):
    # all_gather on ranks that share a GPU runs through host memory, which
    # the library cannot capture: the run must go on, mark the rows, print
    # the library's reason once, and still check every result.
    p = run([run_, "-n", "2", perf, "--mem", "gpu", "-G", "1", "-b", "1K", "-e", "8K", "-f", "2",
             "-c", "1", "all_gather"], timeout=280)
    rows = check_table(p, "all_gather", 2, [1024, 2048, 4096, 8192], ["f32"], ["none"], -1,
                       allow_nograph=True, memory="gpu")
    marked = sum(f[5] == "nograph" for f in rows) + sum(f[9] == "nograph" for f in rows)
    if marked:
        check(p.stderr.count("did not capture") == 1,
              "the refusal should be printed once, got %d" % p.stderr.count("did not capture"))
        m = re.search(r"^# Not captured +: (\d+) placement\(s\) of qcoll \(nograph\): (.+)$",
                      p.stdout, re.M)
        check(m, "no 'Not captured' footer")
        check(int(m.group(1)) == marked, "footer counts %s, the table %d" % (m.group(1), marked))
        check(len(m.group(2)) > 10, "the footer gives no reason")
    else:
        check("did not capture" not in p.stderr, "a refusal was printed, no row is marked")
    print("%d placement(s) not captured" % marked)


def nccl_or_skip(p):
    m = re.search(r"^# NCCL refused: (.*)$", p.stdout, re.M)
    if m and "cannot load" in m.group(1):
        raise Skip("NCCL is not installed here: " + m.group(1))
    return m


def case_gpu_vs_nccl(run_, perf, graph, maxb=1 << 20):
    # One rank, without a launcher: NCCL accepts one rank on one GPU.
    args = [perf, "--mem", "gpu", "--vs-nccl", "-b", "8", "-e", str(maxb), "-f", "4", "-c", "1"]
    if graph:
        args += ["-G", "1"]
    p = run(args, timeout=280)
    refused = nccl_or_skip(p)
    check(not refused, "NCCL refused one rank: %s" % (refused.group(1) if refused else ""))
    check(re.search(r"^#  NCCL \d+\.\d+\.\d+ .*on the same buffers", p.stdout, re.M),
          "header does not name the NCCL version")
    check(re.search(r"nccl_time +nccl_busbw +ratio$", p.stdout, re.M), "no NCCL column titles")
    # One rank's own all-reduce may run through host memory and then cannot
    # be captured; NCCL's must be.
    rows = check_table(p, "all_reduce", 1, sweep(8, maxb, 4), ["f32"], ["sum"], -1,
                       nccl=True, allow_nograph=graph)
    check(re.search(r"^# Avg NCCL bus bandwidth : [0-9.e+-]+$", p.stdout, re.M),
          "no NCCL bandwidth footer")
    check_geomean(p, rows)


def check_geomean(p, rows):
    timed = [f for f in rows if f[15] not in ("N/A",)]
    m = re.search(r"^# Geomean ratio +: ([0-9.]+) \(nccl_time / qcoll_time over (\d+) rows\)$",
                  p.stdout, re.M)
    if not timed:
        check(not m, "a geomean ratio without any ratio")
        return
    check(m and int(m.group(2)) == len(timed), "no geomean ratio over %d rows" % len(timed))
    # The rows' ratios are rounded to 2 decimals: compare in log space.
    want = math.exp(sum(math.log(max(float(f[15]), 0.005)) for f in timed) / len(timed))
    check(abs(float(m.group(1)) - want) <= 0.05 * want + 0.01,
          "geomean ratio %s, the rows give %.3f" % (m.group(1), want))


def case_gpu_vs_nccl_refused(run_, perf, fake=False):
    # Two ranks: on one GPU NCCL refuses ("Duplicate GPU detected"); the run
    # must say so in one line and go on without the NCCL columns.
    p = run([run_, "-n", "2", perf, "--mem", "gpu", "--vs-nccl", "-b", "1K", "-e", "4K", "-f", "4",
             "-c", "1"], timeout=280)
    refused = nccl_or_skip(p)
    if fake:
        shared = True
    else:
        gpus = re.findall(r"^#  Rank +\d+ +Pid.* device \d+ +.*\[([0-9A-Fa-f:.]+)\]$",
                          p.stdout, re.M)
        check(len(gpus) == 2, "rank table does not give both ranks' GPUs: %r" % gpus)
        shared = gpus[0] == gpus[1]
    if shared and not os.environ.get("NCCL_MULTI_RANK_GPU_ENABLE"):
        check(refused, "both ranks on one GPU, yet NCCL did not refuse")
    if refused:
        check(len(refused.group(1)) > 10, "NCCL refused without a reason")
        check(p.stdout.count("NCCL refused") == 1, "the refusal should be one line")
    check_table(p, "all_reduce", 2, [1024, 4096], ["f32"], ["sum"], -1, nccl=not refused)
    print("ranks on %s; NCCL %s" % ("one GPU" if shared else "two GPUs",
                                             "refused" if refused else "ran"))


def case_capture_refused_everywhere(run_, perf):
    # Every capture fails (FAKE_CAPTURE_FAIL): every timed placement of
    # qcoll and of NCCL says nograph, each engine's reason is printed once,
    # the footers count them, and the results are still checked.
    p = run([run_, "-n", "2", perf, "--mem", "gpu", "-G", "1", "-b", "1K", "-e", "8K", "-f", "2",
             "-c", "1"])
    rows = check_table(p, "all_reduce", 2, [1024, 2048, 4096, 8192], ["f32"], ["sum"], -1,
                       allow_nograph=True)
    check(all(f[5] == f[9] == "nograph" for f in rows), "a row was timed without its graph")
    check(p.stderr.count("qcoll did not capture") == 1, "qcoll's refusal not printed once")
    check(re.search(r"^# Not captured +: 8 placement\(s\) of qcoll \(nograph\): .*fake",
                    p.stdout, re.M), "no footer counting 8 placements with the reason")
    p = run([perf, "--mem", "gpu", "-G", "1", "--vs-nccl", "-b", "1K", "-e", "4K", "-f", "4",
             "-c", "1"])
    rows = check_table(p, "all_reduce", 1, [1024, 4096], ["f32"], ["sum"], -1, nccl=True,
                       allow_nograph=True, allow_nccl_nograph=True)
    check(all(f[13] == "nograph" and f[15] == "N/A" for f in rows),
          "NCCL timed without its graph: %r" % rows)
    check(p.stderr.count("NCCL did not capture") == 1, "NCCL's refusal not printed once")
    check(re.search(r"^# Not captured +: 2 placement\(s\) of NCCL \(nograph\)", p.stdout,
                    re.M), "no footer counting NCCL's placements")
    check_geomean(p, rows)


def case_plot(perf):
    # -J on the pretend GPU with the fake NCCL, then scripts/perf-plot.py
    # takes a qcoll and an NCCL series from it, with every size of the
    # sweep and the JSON's times; and draws them where matplotlib is
    # installed.
    import importlib.util
    import json
    import tempfile
    plot = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                        "perf-plot.py")
    with tempfile.TemporaryDirectory() as d:
        js, png = os.path.join(d, "run.json"), os.path.join(d, "run.png")
        p = run([perf, "--mem", "gpu", "--vs-nccl", "-b", "8", "-e", "64K", "-f", "8", "-n", "2",
                 "-w", "1", "-J", js])
        check(p.returncode == 0, "qcoll-perf -J exited %d" % p.returncode)
        with open(js) as f:
            doc = json.load(f)
        p = run([sys.executable, plot, js + "=fake GPU", "--table"])
        check(p.returncode == 0 and p.stdout.rstrip().endswith("2 series"),
              "perf-plot.py --table failed")
        want = ["%d %.6g" % (r["size"], r[key]["time_us"]) for key in ("out_of_place", "nccl")
                for r in doc["rows"]]
        got = [" ".join(line.split()[:2]) for line in p.stdout.splitlines()
               if line and line[0].isdigit() and not line.endswith("series")]
        check(got == want, "perf-plot.py's series %r are not the JSON's %r" % (got, want))
        if importlib.util.find_spec("matplotlib") is None:
            print("matplotlib is not installed: the series were checked, not drawn")
            return
        p = run([sys.executable, plot, js + "=fake GPU", "-o", png, "--note", "test"])
        check(p.returncode == 0 and "2 series" in p.stdout, "perf-plot.py failed")
        check(os.path.getsize(png) > 1000, "the plot is empty")


def main():
    run_, perf, case = sys.argv[1:4]
    print("perf_test.py: %s" % case)
    cases = {
        "all_reduce": lambda: case_all_reduce(run_, perf),
        "unchecked": lambda: case_unchecked(run_, perf),
        "single_rank": lambda: case_single_rank(run_, perf),
        "bad_flags": lambda: case_bad_flags(run_, perf),
        "json": lambda: case_json(run_, perf),
    }
    for coll in ["all_reduce", "reduce", "broadcast", "all_gather",
                 "reduce_scatter", "all_to_all", "sendrecv", "barrier"]:
        cases["every_dtype." + coll] = (lambda c=coll: case_all_dtypes_ops(run_, perf, c, 3))
    gpu_cases = {
        "gpu.all_reduce": lambda: case_gpu_all_reduce(run_, perf),
        "gpu.graph": lambda: case_gpu_graph(run_, perf),
        "gpu.oneshot": lambda: case_gpu_algo(run_, perf, "oneshot"),
        "gpu.twoshot": lambda: case_gpu_algo(run_, perf, "twoshot"),
        "gpu.quant": lambda: case_gpu_quant(run_, perf),
        "gpu.per_call": lambda: case_gpu_per_call(run_, perf),
        "gpu.collectives": lambda: case_gpu_collectives(run_, perf),
        "gpu.graph_refused": lambda: case_gpu_graph_refused(run_, perf),
        "gpu.vs_nccl": lambda: case_gpu_vs_nccl(run_, perf, False),
        "gpu.vs_nccl_graph": lambda: case_gpu_vs_nccl(run_, perf, True),
        "gpu.vs_nccl_refused": lambda: case_gpu_vs_nccl_refused(run_, perf),
    }
    for name, fn in gpu_cases.items():
        cases[name] = (lambda f=fn: (require_gpu(perf), f()))
    # The same control flow on a pretend GPU (host memory; see
    # perf_mem_fakegpu.c) with a fake NCCL: runs anywhere.
    fake_cases = {
        "fakegpu.vs_nccl": lambda: case_gpu_vs_nccl(run_, perf, False, maxb=64 << 10),
        "fakegpu.nccl_refused": lambda: case_gpu_vs_nccl_refused(run_, perf, fake=True),
        "fakegpu.capture_refused": lambda: case_capture_refused_everywhere(run_, perf),
        "fakegpu.plot": lambda: case_plot(perf),
    }
    cases.update(fake_cases)
    if case in fake_cases:
        check(len(sys.argv) == 5, "fakegpu cases need the fake NCCL library as 4th argument")
        os.environ["QCOLL_NCCL_LIB"] = sys.argv[4]
        os.environ["QCOLL_DISABLE_CUDA"] = "1"  # the library stays on host memory
    if case not in cases:
        print("unknown case %s; cases: %s" % (case, " ".join(sorted(cases))))
        return 2
    try:
        cases[case]()
    except Skip as e:
        print("SKIP [%s]: %s" % (case, e))
        return SKIP
    except Failure as e:
        print("FAIL [%s]: %s" % (case, e))
        return 1
    print("PASS [%s]" % case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
