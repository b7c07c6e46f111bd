/*
 * Small helpers shared by the reliability programs (each started by
 * qcoll-run, one process per rank): a non-fatal check that counts failures,
 * a monotonic clock that every process of the host shares, and readings of
 * this process's memory and file descriptors.
 */
#ifndef QCOLL_TESTS_RELIABILITY_UTIL_H
#define QCOLL_TESTS_RELIABILITY_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../check.h"
#include "proc_readings.h"
#include "qcoll.h"

static int rel_rank = -1, rel_size = 0;

/* CLOCK_MONOTONIC: one clock for every process of the host, so a time
 * written by one rank can be compared with another rank's. */
static inline double rel_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Init from the launcher's environment (timeout from QCOLL_TIMEOUT unless
 * timeout_s > 0); exits the process when it fails. */
static inline qcoll_comm_t rel_init(double timeout_s) {
  qcoll_config_t cfg;
  qcoll_config_init(&cfg);
  cfg.device = QCOLL_DEVICE_NONE;
  cfg.timeout_s = timeout_s;
  qcoll_comm_t comm = NULL;
  qcoll_status_t st = qcoll_comm_init_env(&comm, &cfg);
  if (st != QCOLL_OK) {
    fprintf(stderr, "qcoll_comm_init_env: %s (%s)\n", qcoll_status_string(st),
            qcoll_last_error());
    exit(1);
  }
  qcoll_comm_rank(comm, &rel_rank);
  check_rank = rel_rank;
  qcoll_comm_size(comm, &rel_size);
  return comm;
}

static inline void rel_write_time(const char *path, double t) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  fprintf(f, "%.9f\n", t);
  fclose(f);
  rename(tmp, path); /* readers see the whole value or nothing */
}

static inline double rel_read_time(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  double t = -1;
  if (fscanf(f, "%lf", &t) != 1) t = -1;
  fclose(f);
  return t;
}

#endif
