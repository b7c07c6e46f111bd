/*
 * qcoll-perf -J FILE: the run's results as one JSON document, for scripts
 * (scripts/perf-plot.py draws latency and bandwidth from it).  Rank 0
 * writes FILE.tmp as the rows come and renames it to FILE when the run has
 * ended, so FILE is always a complete document.
 *
 *   {"tool": "qcoll-perf", "version": "0.1.0", "library": "qcoll 0.1.0",
 *    "collective": "all_reduce", "nranks": 2, "memory": "host",
 *    "algo": "auto", "quant": "none", "average": "max", "iters": 20,
 *    "warmup_iters": 5, "agg_iters": 1, "rounds": 1, "graph_launches": 0, "registered": 0, "check": 1,
 *    "nccl": null | "NCCL 2.x ...",
 *    "rows": [{"size": 8, "count": 2, "type": "f32", "redop": "sum",
 *              "root": -1,
 *              "out_of_place": {"time_us": 3.1, "algbw": 0.0, "busbw": 0.0,
 *                               "wrong": 0},
 *              "in_place": {...} | null,
 *              "nccl": {"time_us": ..., "busbw": ..., "ratio": ...} | null}],
 *    "wrong": 0, "avg_busbw": 1.2}
 *
 * A placement that was not timed has "time_us": null (no in-place form, a
 * refused graph capture: "untimed" says why); "wrong" is null unchecked.
 */
#ifndef QCOLL_PERF_JSON_H
#define QCOLL_PERF_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What the header says about the run. */
typedef struct perf_json_run {
  const char *version, *library, *collective, *memory, *algo, *quant,
      *average;
  int nranks, iters, warmup_iters, agg_iters, graph_launches, check;
  int rounds; /* --rounds: timed loops per row, the median reported */
  int registered; /* --register */
  const char *nccl; /* NULL: no NCCL columns */
} perf_json_run_t;

/* One placement (out of place, in place) or NCCL's run of a row. */
typedef struct perf_json_result {
  bool present;        /* false: null (no in-place form, no NCCL) */
  const char *untimed; /* not NULL: not timed, and why ("nograph") */
  double sec, algbw, busbw;
  bool checked;
  int64_t wrong;
  double ratio; /* NCCL only: nccl_time / qcoll_time, 0 = none */
} perf_json_result_t;

typedef struct perf_json_row {
  size_t size, count;
  const char *type, *redop;
  int root;
  perf_json_result_t out_of_place, in_place, nccl;
} perf_json_row_t;

typedef struct perf_json {
  FILE *f;
  char *path, *tmp_path;
  int rows;
} perf_json_t;

/* Start writing; 0, or -1 with errno set (FILE.tmp cannot be created). */
int perf_json_open(perf_json_t *j, const char *path, const perf_json_run_t *run);
void perf_json_row(perf_json_t *j, const perf_json_row_t *row);
/* The totals, then FILE.tmp becomes FILE; 0, or -1 with errno set. */
int perf_json_close(perf_json_t *j, int64_t wrong, double avg_busbw);

#endif
