/*
 * qcoll-info: what this installation of qcoll is and how it is configured.
 *
 * Prints the library's version, what a communicator on this machine would
 * run on (found by creating a one-rank communicator on the current CUDA
 * device, unless --no-probe), and the table of QCOLL_* environment
 * variables with their defaults, current values and one-line docs.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qcoll.h"

#define PROG_NAME "qcoll-info"
#define EXIT_USAGE 2

static void print_usage(FILE *f) {
  fprintf(f, "Usage: " PROG_NAME
             " [options]\n"
             "Print qcoll's version, the devices it can use and its QCOLL_* "
             "variables.\n"
             "\n"
             "  -e, --env        print only the table of QCOLL_* variables\n"
             "      --no-probe   do not create a test communicator\n"
             "  -h, --help       show this help\n"
             "      --version    print only the version\n");
}

static void print_version(void) {
  int v = -1;
  qcoll_status_t st = qcoll_get_version(&v);
  if (st != QCOLL_OK) {
    printf("qcoll version: unknown (%s)\n", qcoll_status_string(st));
    return;
  }
  printf("qcoll %d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
  /* A tool built against one header and run with another library. */
  if (v != QCOLL_VERSION_CODE)
    printf(" (this tool was built against %d.%d.%d)", QCOLL_VERSION_MAJOR,
           QCOLL_VERSION_MINOR, QCOLL_VERSION_PATCH);
  printf("\n");
}

/* What a communicator made here runs on: a one-rank communicator on the
 * current CUDA device reports its device (QCOLL_DEVICE_NONE without a
 * usable GPU). */
/* Print the text a library describe function writes, indented. */
static void print_text_block(qcoll_status_t (*describe)(char *, size_t,
                                                        size_t *)) {
  size_t needed = 0;
  describe(NULL, 0, &needed);
  char *buf = malloc(needed ? needed : 1);
  if (!buf || describe(buf, needed, NULL) != QCOLL_OK) {
    printf("  (unavailable: %s)\n", qcoll_last_error());
    free(buf);
    return;
  }
  for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
    printf("  %s\n", line);
  free(buf);
}

static void print_devices(bool probe) {
  printf("\nDevices\n");
  if (!probe) {
    printf("  GPU:   not probed (--no-probe)\n");
  } else {
    qcoll_unique_id_t id;
    qcoll_comm_t comm = NULL;
    qcoll_status_t st = qcoll_get_unique_id(&id);
    if (st == QCOLL_OK) st = qcoll_comm_init_rank(&comm, 1, &id, 0, NULL);
    int device = QCOLL_DEVICE_NONE;
    if (st == QCOLL_OK) st = qcoll_comm_device(comm, &device);
    if (st != QCOLL_OK)
      printf("  GPU:   unknown: a test communicator failed: %s: %s\n",
             qcoll_status_string(st),
             comm ? qcoll_comm_last_error(comm) : qcoll_last_error());
    else if (device >= 0)
      printf("  GPU:   usable: a communicator here runs on CUDA device %d\n",
             device);
    else
      printf(
          "  GPU:   none usable: communicators here run on host memory only\n");
    if (comm) qcoll_comm_destroy(comm);
  }
  print_text_block(qcoll_backends_describe);
  printf("\nSelection table (which path serves a call)\n");
  print_text_block(qcoll_selection_table_format);
}

static void print_env_table(void) {
  const char *name, *def, *doc;
  size_t w_name = strlen("VARIABLE"), w_def = strlen("DEFAULT"),
         w_cur = strlen("CURRENT");
  int n = 0;
  while (qcoll_env_describe(n, &name, &def, &doc) == QCOLL_OK) {
    const char *cur = getenv(name);
    if (strlen(name) > w_name) w_name = strlen(name);
    if (def && strlen(def) > w_def) w_def = strlen(def);
    if (cur && strlen(cur) <= 24 && strlen(cur) > w_cur) w_cur = strlen(cur);
    n++;
  }
  printf("\nEnvironment (%d variables; CURRENT is this process's value)\n", n);
  printf("  %-*s  %-*s  %-*s  %s\n", (int)w_name, "VARIABLE", (int)w_def,
         "DEFAULT", (int)w_cur, "CURRENT", "DESCRIPTION");
  for (int i = 0; i < n; i++) {
    qcoll_env_describe(i, &name, &def, &doc);
    const char *cur = getenv(name);
    char shown[32];
    if (!cur) {
      snprintf(shown, sizeof shown, "-");
    } else if (strlen(cur) > 24) { /* a unique id is 256 hex digits */
      snprintf(shown, sizeof shown, "%.20s...", cur);
    } else {
      snprintf(shown, sizeof shown, "%s", cur);
    }
    printf("  %-*s  %-*s  %-*s  %s\n", (int)w_name, name, (int)w_def,
           def && *def ? def : "\"\"", (int)w_cur, shown, doc ? doc : "");
  }
}

int main(int argc, char **argv) {
  static const struct option longopts[] = {{"env", no_argument, NULL, 'e'},
                                           {"no-probe", no_argument, NULL, 'P'},
                                           {"help", no_argument, NULL, 'h'},
                                           {"version", no_argument, NULL, 'V'},
                                           {NULL, 0, NULL, 0}};
  bool env_only = false, probe = true;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "eh", longopts, NULL)) != -1) {
    switch (c) {
      case 'e': env_only = true; break;
      case 'P': probe = false; break;
      case 'h': print_usage(stdout); return 0;
      case 'V': print_version(); return 0;
      default:
        fprintf(stderr, PROG_NAME ": unknown option '%s'\n", argv[optind - 1]);
        print_usage(stderr);
        return EXIT_USAGE;
    }
  }
  if (optind < argc) {
    fprintf(stderr, PROG_NAME ": unexpected argument '%s'\n", argv[optind]);
    print_usage(stderr);
    return EXIT_USAGE;
  }
  if (!env_only) {
    print_version();
    print_devices(probe);
  }
  print_env_table();
  return 0;
}
