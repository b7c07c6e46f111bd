/*
 * Readings of this process for the soak tests (tests/reliability/rel_soak.c,
 * tests/gpu/gpu_soak.c): memory from /proc/self/status and the number of
 * open file descriptors, to show that long runs leak nothing.
 */
#ifndef QCOLL_TESTS_PROC_READINGS_H
#define QCOLL_TESTS_PROC_READINGS_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A field of /proc/self/status in KiB (VmRSS, VmHWM, RssShmem...), or -1. */
static inline long proc_status_kib(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  size_t n = strlen(field);
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, field, n) && line[n] == ':') {
      kib = strtol(line + n + 1, NULL, 10);
      break;
    }
  fclose(f);
  return kib;
}

/* Open file descriptors of this process. */
static inline int proc_open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* the directory stream's own descriptor */
}

#endif
