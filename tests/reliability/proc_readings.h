/*
 * Readings of this process for the soak tests (tests/reliability/rel_soak.c,
 * tests/gpu/gpu_soak.c): memory from /proc/self/status and the number of
 * open file descriptors, to show that long runs leak nothing; and the TCP
 * ports a process listens on (tests/reliability/rel_flood.c,
 * tests/bootstrap), found as any local process could find them.
 */
#ifndef QCOLL_TESTS_PROC_READINGS_H
#define QCOLL_TESTS_PROC_READINGS_H

#include <dirent.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>
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

/* The inodes of the sockets pid has open. */
static inline int proc_socket_inodes(pid_t pid, unsigned long *out, int cap) {
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < cap) {
    char path[320], link[64];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    ssize_t k = readlink(path, link, sizeof link - 1);
    if (k <= 0) continue;
    link[k] = '\0';
    unsigned long ino;
    if (sscanf(link, "socket:[%lu]", &ino) == 1) out[n++] = ino;
  }
  closedir(d);
  return n;
}

/* The ports pid listens on (state 0A in /proc/pid/net/tcp or tcp6, on one
 * of its own sockets). */
static inline int proc_listen_ports(pid_t pid, int *ports, int cap) {
  unsigned long inodes[256];
  int ni = proc_socket_inodes(pid, inodes, 256), n = 0;
  static const char *const tables[] = {"tcp", "tcp6"};
  for (int t = 0; t < 2; t++) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/net/%s", (int)pid, tables[t]);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    while (fgets(line, sizeof line, f) && n < cap) {
      char local[64];
      unsigned state;
      unsigned long ino;
      if (sscanf(line, " %*d: %63s %*s %x %*s %*s %*s %*s %*s %lu", local,
                 &state, &ino) != 3 ||
          state != 0x0A)
        continue;
      char *colon = strrchr(local, ':');
      for (int i = 0; i < ni; i++)
        if (inodes[i] == ino && colon)
          ports[n++] = (int)strtol(colon + 1, NULL, 16);
    }
    fclose(f);
  }
  return n;
}

#endif
