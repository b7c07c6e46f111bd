/*
 * Logging to stderr.  Level and subsystems are read from QCOLL_DEBUG and
 * QCOLL_DEBUG_SUBSYS once per process.  Each line names host, pid, rank and
 * device so interleaved output of many ranks can be told apart.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"
#include "context.h"

static qcoll__log_level_t log_level = QCOLL_LOG_WARN;
static unsigned log_subsys = QCOLL_SUBSYS_ALL;
static char log_host[64] = "?";
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

/* A bad value, under config.h's policy.  Logging is not set up yet while
 * its own variables are read, so this writes to stderr itself. */
static void warn_bad_value(const char *name, const char *value,
                           const char *expected, const char *used) {
  fprintf(stderr, "qcoll WARN INIT %s=%s is not %s; using %s\n", name, value,
          expected, used);
}

static qcoll__log_level_t parse_level(const char *s) {
  if (!strcasecmp(s, "NONE")) return QCOLL_LOG_NONE;
  if (!strcasecmp(s, "INFO")) return QCOLL_LOG_INFO;
  if (!strcasecmp(s, "TRACE")) return QCOLL_LOG_TRACE;
  if (strcasecmp(s, "WARN") != 0)
    warn_bad_value("QCOLL_DEBUG", s, "one of NONE, WARN, INFO, TRACE",
                   "the default WARN");
  return QCOLL_LOG_WARN;
}

static unsigned parse_subsys(const char *s) {
  static const struct {
    const char *name;
    unsigned bit;
  } names[] = {{"INIT", QCOLL_SUBSYS_INIT}, {"BOOT", QCOLL_SUBSYS_BOOT},
               {"SHM", QCOLL_SUBSYS_SHM},   {"COLL", QCOLL_SUBSYS_COLL},
               {"CUDA", QCOLL_SUBSYS_CUDA}, {"NCCL", QCOLL_SUBSYS_NCCL},
               {"ALL", QCOLL_SUBSYS_ALL}};
  unsigned mask = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  bool bad = false;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    unsigned bit = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
      if (!strcasecmp(tok, names[i].name)) bit = names[i].bit;
    bad |= bit == 0;
    mask |= bit;
  }
  if (bad || !mask)
    warn_bad_value("QCOLL_DEBUG_SUBSYS", s,
                   "a list of INIT, BOOT, SHM, COLL, CUDA, NCCL or ALL",
                   mask ? "only its known names" : "the default ALL");
  return mask ? mask : QCOLL_SUBSYS_ALL;
}

static void log_init(void) {
  log_level = parse_level(qcoll__env_str("QCOLL_DEBUG"));
  log_subsys = parse_subsys(qcoll__env_str("QCOLL_DEBUG_SUBSYS"));
  if (gethostname(log_host, sizeof log_host) != 0)
    snprintf(log_host, sizeof log_host, "?");
  log_host[sizeof log_host - 1] = '\0';
}

bool qcoll__log_enabled(qcoll__log_level_t level, unsigned subsys) {
  pthread_once(&log_once, log_init);
  return level != QCOLL_LOG_NONE && level <= log_level &&
         (subsys & log_subsys) != 0;
}

void qcoll__log(const qcoll__ctx_t *ctx, qcoll__log_level_t level,
                unsigned subsys, const char *fmt, ...) {
  if (!qcoll__log_enabled(level, subsys)) return;
  static const char *level_names[] = {"NONE", "WARN", "INFO", "TRACE"};
  char msg[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char who[64];
  if (ctx)
    snprintf(who, sizeof who, "rank %d dev %d", ctx->rank, ctx->device);
  else
    snprintf(who, sizeof who, "rank ? dev ?");
  /* One fprintf per line so lines from threads do not interleave. */
  fprintf(stderr, "%s:%d [%s] qcoll %s %s\n", log_host, (int)getpid(), who,
          level_names[level], msg);
}
