/*
 * qcoll-run: start N ranks of a program on this host.
 *
 *   qcoll-run -n N [options] prog args...
 *
 * The launcher creates one unique id (which starts the rendezvous root as a
 * thread of this process, so the launcher stays alive for the whole job),
 * then fork/execs N copies of prog with QCOLL_RANK, QCOLL_WORLD_SIZE,
 * QCOLL_LOCAL_RANK, QCOLL_LOCAL_SIZE and QCOLL_UNIQUE_ID set, which is what
 * qcoll_comm_init_env() reads.
 *
 * Placement: with no more ranks than CPUs this process may use, rank r is
 * bound to the r-th of them (--bind-to core), as mpirun binds its ranks;
 * with more, or with --bind-to none, ranks run where the scheduler puts
 * them.  Unbound ranks of a small job were seen sharing one CPU on a busy
 * host while the other stood idle, so every barrier cost a context switch
 * (docs/results/host-vs-mpi.md).
 *
 * Failure handling: the first rank that fails (non-zero exit, or killed by a
 * signal) is reported on stderr, every other rank gets SIGTERM and, after a
 * short grace, SIGKILL; the launcher exits with the failing rank's status
 * (128+signal for a signal).  A rank that exits 77 ("skipped", as CTest
 * counts it) is not a failure: when every rank skips the job exits 77; ranks
 * still running a few seconds after a skip are stopped, because they are
 * most likely waiting for the rank that left.
 *
 * Each rank runs in its own process group, so stopping a rank also stops
 * whatever it started (a shell's children would otherwise keep the job and
 * its output pipes alive).  Because the terminal's SIGINT then reaches only
 * the launcher, SIGINT/SIGTERM/SIGHUP are forwarded to every rank; a second
 * SIGINT kills at once.  Ranks also get SIGKILL if the launcher itself dies
 * (PR_SET_PDEATHSIG), so nothing outlives a killed job.  Ranks read stdin
 * from /dev/null: they are not in the terminal's foreground group.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "qcoll.h"

extern char **environ;

#define PROG_NAME "qcoll-run"
#define MAX_RANKS 1024
/* Seconds between SIGTERM and SIGKILL when stopping ranks. */
#define KILL_GRACE_S 2.0
/* Seconds the other ranks may keep running after one rank skipped (77). */
#define SKIP_GRACE_S 3.0
/* Seconds to keep reading tagged output after the last rank was reaped
 * (something the rank started may still hold the pipe). */
#define DRAIN_GRACE_S 0.5
/* A tagged line longer than this is split (with a newline inserted). */
#define LINE_BYTES 65536
#define EXIT_SKIP 77
#define EXIT_USAGE 2
#define EXIT_TIMEOUT 124

/* Variables the launcher sets for every rank; -x cannot override them. */
static const char *const launcher_vars[] = {
    "QCOLL_RANK", "QCOLL_WORLD_SIZE", "QCOLL_LOCAL_RANK", "QCOLL_LOCAL_SIZE",
    "QCOLL_UNIQUE_ID"};
#define N_LAUNCHER_VARS (sizeof launcher_vars / sizeof launcher_vars[0])

/* A malloc'ed "NAME=value", or NULL when out of memory. */
static char *format_entry(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static char *format_entry(const char *fmt, ...) {
  char *s = NULL;
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(&s, fmt, ap) < 0) s = NULL;
  va_end(ap);
  return s;
}

/* ---- options ------------------------------------------------------ */

/* --bind-to: core, none, or (without the option) core when ranks fit. */
typedef enum bind_policy { BIND_AUTO, BIND_CORE, BIND_NONE } bind_policy_t;

typedef struct options {
  int nranks;
  bool tag_output;
  bind_policy_t bind;
  double timeout_s; /* 0 = none */
  char **extra_env; /* "NAME=VALUE" strings from -x */
  int n_extra_env;
  char **prog_argv; /* NULL-terminated, prog first */
} options_t;

static void print_usage(FILE *f) {
  fprintf(
      f,
      "Usage: " PROG_NAME
      " -n N [options] prog [args...]\n"
      "Start N ranks of prog on this host, ready for qcoll_comm_init_env().\n"
      "\n"
      "  -n, -np, --np N       number of ranks, 1..%d (required)\n"
      "  -t, --tag-output      prefix every output line with \"[rank] \"\n"
      "      --timeout SECONDS stop the whole job after SECONDS (exit %d)\n"
      "  -x NAME=VALUE         set NAME in every rank's environment\n"
      "  -x NAME               pass NAME's current value on (repeatable)\n"
      "      --bind-to core|none bind rank r to the r-th usable CPU, or not;\n"
      "                        default: core when ranks <= usable CPUs\n"
      "  -h, --help            show this help\n"
      "      --version         show the version\n"
      "\n"
      "Every rank gets QCOLL_RANK, QCOLL_WORLD_SIZE, QCOLL_LOCAL_RANK,\n"
      "QCOLL_LOCAL_SIZE and QCOLL_UNIQUE_ID; stdin is /dev/null.  When a\n"
      "rank fails, the others are stopped and " PROG_NAME
      " exits with the\n"
      "failing rank's status (128+signal when killed).  Exit 0 only when\n"
      "every rank exits 0; %d when ranks skipped (exit %d) and none failed.\n",
      MAX_RANKS, EXIT_TIMEOUT, EXIT_SKIP, EXIT_SKIP);
}

static void usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));
static void usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, PROG_NAME ": ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  fprintf(stderr, "Usage: " PROG_NAME
                  " -n N [options] prog [args...]\n"
                  "Run '" PROG_NAME " --help' for the options.\n");
  exit(EXIT_USAGE);
}

static void print_version(void) {
  int v = 0;
  qcoll_get_version(&v);
  printf(PROG_NAME " (qcoll) %d.%d.%d\n", v / 10000, (v / 100) % 100, v % 100);
}

static bool valid_env_name(const char *s, size_t len) {
  if (len == 0 || (s[0] >= '0' && s[0] <= '9')) return false;
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
          (c >= '0' && c <= '9')))
      return false;
  }
  return true;
}

static bool is_launcher_var(const char *name, size_t len) {
  for (size_t i = 0; i < N_LAUNCHER_VARS; i++)
    if (strlen(launcher_vars[i]) == len &&
        strncmp(launcher_vars[i], name, len) == 0)
      return true;
  return false;
}

/* -x NAME=VALUE, or -x NAME meaning "NAME's value here". */
static char *parse_extra_env(const char *arg) {
  const char *eq = strchr(arg, '=');
  size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
  if (!valid_env_name(arg, name_len))
    usage_error(
        "-x needs NAME=VALUE with a variable name of letters, digits "
        "and '_', got '%s'",
        arg);
  if (is_launcher_var(arg, name_len))
    usage_error("-x %.*s: this variable is set by " PROG_NAME " for each rank",
                (int)name_len, arg);
  const char *value = eq ? NULL : getenv(arg);
  if (!eq && !value)
    usage_error("-x %s: the variable is not set here (use -x %s=VALUE)", arg,
                arg);
  char *s = eq ? strdup(arg) : format_entry("%s=%s", arg, value);
  if (!s) {
    perror(PROG_NAME);
    exit(1);
  }
  return s;
}

/* mpirun spells the rank count "-np N" (one dash); getopt would read it as
 * -n with the argument "p".  Before parsing, each "-np" (or "-np=N") among
 * the launcher's own options becomes "--np": only up to the program, whose
 * arguments are its own. */
static void accept_mpirun_np(int argc, char **argv) {
  static char long_np[] = "--np";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0 || a[0] != '-' || a[1] == 0) return; /* prog */
    if (strcmp(a, "-np") == 0) {
      argv[i] = long_np;
    } else if (strncmp(a, "-np=", 4) == 0) { /* "-np=N" -> "--np=N" */
      char *copy = malloc(strlen(a) + 2);
      if (!copy) {
        perror(PROG_NAME);
        exit(1);
      }
      copy[0] = '-';
      strcpy(copy + 1, a);
      argv[i] = copy;
    }
    /* Skip the argument of the options that take one as a separate word. */
    if (strcmp(argv[i], "-n") == 0 || strcmp(argv[i], "--np") == 0 ||
        strcmp(argv[i], "-x") == 0 || strcmp(argv[i], "--timeout") == 0)
      i++;
  }
}

static void parse_options(int argc, char **argv, options_t *o) {
  static const struct option longopts[] = {
      {"np", required_argument, NULL, 'n'},
      {"tag-output", no_argument, NULL, 't'},
      {"timeout", required_argument, NULL, 'T'},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {"bind-to", required_argument, NULL, 'B'},
      {NULL, 0, NULL, 0}};
  memset(o, 0, sizeof *o);
  o->extra_env = calloc((size_t)argc, sizeof(char *));
  if (!o->extra_env) {
    perror(PROG_NAME);
    exit(1);
  }
  opterr = 0; /* our own messages, each followed by the usage */
  accept_mpirun_np(argc, argv);
  int c;
  /* '+': stop at the first non-option, which is the program. */
  while ((c = getopt_long(argc, argv, "+:n:tx:h", longopts, NULL)) != -1) {
    switch (c) {
      case 'n': {
        char *end = NULL;
        errno = 0;
        long n = strtol(optarg, &end, 10);
        if (errno || end == optarg || *end || n < 1 || n > MAX_RANKS)
          usage_error("-n needs a number of ranks in 1..%d, got '%s'",
                      MAX_RANKS, optarg);
        o->nranks = (int)n;
        break;
      }
      case 't': o->tag_output = true; break;
      case 'T': {
        char *end = NULL;
        errno = 0;
        double t = strtod(optarg, &end);
        if (errno || end == optarg || *end || !(t > 0) || !isfinite(t))
          usage_error("--timeout needs a positive number of seconds, got '%s'",
                      optarg);
        o->timeout_s = t;
        break;
      }
      case 'x': o->extra_env[o->n_extra_env++] = parse_extra_env(optarg); break;
      case 'B':
        if (strcmp(optarg, "core") == 0)
          o->bind = BIND_CORE;
        else if (strcmp(optarg, "none") == 0)
          o->bind = BIND_NONE;
        else
          usage_error("--bind-to takes core or none, got '%s'", optarg);
        break;
      case 'h': print_usage(stdout); exit(0);
      case 'V': print_version(); exit(0);
      case ':': /* optopt is the short name, or a long option's code */
        if (optopt == 'n' || optopt == 'x')
          usage_error("option -%c needs an argument", optopt);
        usage_error("option '%s' needs an argument", argv[optind - 1]);
      default:
        if (optopt && strchr("ntxh", optopt) == NULL)
          usage_error("unknown option -%c", optopt);
        usage_error("unknown option '%s'", argv[optind - 1]);
    }
  }
  if (o->nranks == 0) usage_error("the number of ranks (-n N) is required");
  if (optind >= argc) usage_error("no program to run");
  o->prog_argv = argv + optind;
}

/* ---- finding the program ------------------------------------------ */

static bool is_executable_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* The PATH the ranks will see: -x PATH=... wins over ours. */
static const char *rank_path(const options_t *o) {
  for (int i = 0; i < o->n_extra_env; i++)
    if (strncmp(o->extra_env[i], "PATH=", 5) == 0) return o->extra_env[i] + 5;
  const char *p = getenv("PATH");
  return p ? p : "/usr/local/bin:/usr/bin:/bin";
}

/* Resolve prog as execvp would, before any rank starts, so a typo is one
 * clear message rather than N failed ranks.  Returns 0, or the exit code
 * (126 not executable, 127 not found) after printing why. */
static int resolve_program(const char *prog, const char *path, char *out,
                           size_t out_len) {
  if (strchr(prog, '/')) {
    struct stat st;
    if (stat(prog, &st) != 0) {
      fprintf(stderr, PROG_NAME ": cannot run program '%s': %s\n", prog,
              strerror(errno));
      return 127;
    }
    if (!S_ISREG(st.st_mode) || access(prog, X_OK) != 0) {
      fprintf(stderr,
              PROG_NAME ": cannot run program '%s': not an executable file\n",
              prog);
      return 126;
    }
    snprintf(out, out_len, "%s", prog);
    return 0;
  }
  const char *p = path;
  for (;;) {
    const char *colon = strchr(p, ':');
    size_t dir_len = colon ? (size_t)(colon - p) : strlen(p);
    /* An empty PATH entry means the current directory. */
    int n = dir_len ? snprintf(out, out_len, "%.*s/%s", (int)dir_len, p, prog)
                    : snprintf(out, out_len, "./%s", prog);
    if (n > 0 && (size_t)n < out_len && is_executable_file(out)) return 0;
    if (!colon) break;
    p = colon + 1;
  }
  fprintf(stderr,
          PROG_NAME ": cannot run program '%s': not found in PATH (%s)\n", prog,
          path);
  return 127;
}

/* ---- rank environments -------------------------------------------- */

static bool env_entry_overridden(const char *entry, const options_t *o) {
  const char *eq = strchr(entry, '=');
  size_t len = eq ? (size_t)(eq - entry) : strlen(entry);
  if (is_launcher_var(entry, len)) return true;
  for (int i = 0; i < o->n_extra_env; i++)
    if (strncmp(o->extra_env[i], entry, len) == 0 &&
        o->extra_env[i][len] == '=')
      return true;
  return false;
}

/* Built before fork: after fork only async-signal-safe calls are allowed,
 * and this process has threads (the rendezvous root). */
static char **build_rank_env(const options_t *o, int rank, const char *id_hex) {
  size_t n_env = 0;
  while (environ[n_env]) n_env++;
  char **env = calloc(n_env + (size_t)o->n_extra_env + N_LAUNCHER_VARS + 1,
                      sizeof(char *));
  if (!env) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n_env; i++)
    if (!env_entry_overridden(environ[i], o)) env[k++] = environ[i];
  for (int i = 0; i < o->n_extra_env; i++) env[k++] = o->extra_env[i];
  /* All ranks run on this host: local rank = rank, local size = world. */
  char *v[N_LAUNCHER_VARS] = {format_entry("QCOLL_RANK=%d", rank),
                              format_entry("QCOLL_WORLD_SIZE=%d", o->nranks),
                              format_entry("QCOLL_LOCAL_RANK=%d", rank),
                              format_entry("QCOLL_LOCAL_SIZE=%d", o->nranks),
                              format_entry("QCOLL_UNIQUE_ID=%s", id_hex)};
  bool ok = true;
  for (size_t i = 0; i < N_LAUNCHER_VARS; i++) ok = ok && v[i];
  if (!ok) {
    for (size_t i = 0; i < N_LAUNCHER_VARS; i++) free(v[i]);
    free(env);
    return NULL;
  }
  for (size_t i = 0; i < N_LAUNCHER_VARS; i++) env[k++] = v[i];
  env[k] = NULL;
  return env;
}

/* The launcher's own strings are the last N_LAUNCHER_VARS entries; the
 * others belong to environ and -x. */
static void free_rank_env(char **env) {
  if (!env) return;
  size_t n = 0;
  while (env[n]) n++;
  for (size_t i = n - N_LAUNCHER_VARS; i < n; i++) free(env[i]);
  free(env);
}

static void free_options(options_t *o) {
  for (int i = 0; i < o->n_extra_env; i++) free(o->extra_env[i]);
  free(o->extra_env);
}

/* ---- time ---------------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- signals: the self-pipe wakes the poll loop -------------------- */

static int wake_pipe[2] = {-1, -1};
static volatile sig_atomic_t got_sigchld;
static volatile sig_atomic_t got_stop_signal; /* last SIGINT/SIGTERM/SIGHUP */
static volatile sig_atomic_t n_stop_signals;

static void on_signal(int sig) {
  int saved = errno;
  if (sig == SIGCHLD) {
    got_sigchld = 1;
  } else {
    got_stop_signal = sig;
    n_stop_signals++;
  }
  ssize_t r =
      write(wake_pipe[1], "", 1); /* full pipe: a wake-up is pending anyway */
  (void)r;
  errno = saved;
}

static const int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define N_FORWARDED (sizeof forwarded_signals / sizeof forwarded_signals[0])

static int install_signal_handlers(void) {
  if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  if (sigaction(SIGCHLD, &sa, NULL) != 0) return -1;
  for (size_t i = 0; i < N_FORWARDED; i++)
    if (sigaction(forwarded_signals[i], &sa, NULL) != 0) return -1;
  /* A closed stdout must not kill the launcher and orphan the job. */
  signal(SIGPIPE, SIG_IGN);
  return 0;
}

/* ---- tagged output --------------------------------------------------- */

typedef struct stream {
  int fd;      /* read end of the rank's pipe, -1 once closed */
  int dest_fd; /* 1 or 2 */
  char *buf;
  size_t len;
} stream_t;

static void write_all(int fd, struct iovec *iov, int n) {
  while (n > 0) {
    ssize_t w = writev(fd, iov, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return; /* EPIPE and friends: nobody is listening, drop the output */
    }
    while (n > 0 && (size_t)w >= iov->iov_len) {
      w -= (ssize_t)iov->iov_len;
      iov++;
      n--;
    }
    if (n > 0) {
      iov->iov_base = (char *)iov->iov_base + w;
      iov->iov_len -= (size_t)w;
    }
  }
}

static void emit_line(int rank, int dest_fd, const char *line, size_t len,
                      bool add_newline) {
  char prefix[24];
  int plen = snprintf(prefix, sizeof prefix, "[%d] ", rank);
  struct iovec iov[3] = {
      {prefix, (size_t)plen}, {(void *)line, len}, {"\n", 1}};
  write_all(dest_fd, iov, add_newline ? 3 : 2);
}

/* Read what is there; print complete lines.  At EOF print the partial line
 * (with a newline added) and close. */
static void pump_stream(stream_t *s, int rank, int *open_streams) {
  for (;;) {
    ssize_t r = read(s->fd, s->buf + s->len, LINE_BYTES - s->len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (r <= 0) {
      if (s->len) emit_line(rank, s->dest_fd, s->buf, s->len, true);
      s->len = 0;
      close(s->fd);
      s->fd = -1;
      (*open_streams)--;
      return;
    }
    s->len += (size_t)r;
    size_t start = 0;
    for (;;) {
      char *nl = memchr(s->buf + start, '\n', s->len - start);
      if (!nl) break;
      size_t end = (size_t)(nl - s->buf) + 1;
      emit_line(rank, s->dest_fd, s->buf + start, end - start, false);
      start = end;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
    if (s->len == LINE_BYTES) { /* an endless line: split it */
      emit_line(rank, s->dest_fd, s->buf, s->len, true);
      s->len = 0;
    }
  }
}

/* ---- the job ---------------------------------------------------------- */

typedef struct rank_proc {
  pid_t pid;        /* 0 when never started */
  bool running;     /* started and not yet reaped */
  bool exec_failed; /* already reported by the spawner */
  int wait_status;
  stream_t out, err; /* tagged output only */
} rank_proc_t;

typedef struct job {
  const options_t *opt;
  rank_proc_t *ranks;
  int *cpus; /* per rank: the CPU it is bound to, -1 for none */
  int n_running;
  int open_streams;
  bool stopping;       /* SIGTERM sent; later exits are not reported */
  double kill_at;      /* SIGKILL time, INFINITY when not pending */
  double skip_stop_at; /* stop the rest after a skip, INFINITY if none */
  double deadline;     /* --timeout, INFINITY when none */
  int failure_code;    /* first failure's exit code, 0 if none */
  bool any_skipped;
  bool timed_out;
  int interrupt_signal;
} job_t;

static void signal_ranks(job_t *job, int sig) {
  for (int r = 0; r < job->opt->nranks; r++) {
    rank_proc_t *p = &job->ranks[r];
    if (!p->running) continue;
    /* The whole process group: also what the rank started. */
    if (kill(-p->pid, sig) != 0) kill(p->pid, sig);
  }
}

static void stop_job(job_t *job, int sig) {
  if (job->n_running > 0) signal_ranks(job, sig);
  if (!job->stopping) {
    job->stopping = true;
    job->kill_at = now_s() + KILL_GRACE_S;
  }
}

static int rank_of_pid(const job_t *job, pid_t pid) {
  for (int r = 0; r < job->opt->nranks; r++)
    if (job->ranks[r].pid == pid) return r;
  return -1;
}

static void on_rank_exit(job_t *job, int rank) {
  rank_proc_t *p = &job->ranks[rank];
  int st = p->wait_status;
  if (p->exec_failed || job->stopping) return;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return;
  if (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_SKIP) {
    job->any_skipped = true;
    if (job->n_running > 0 && !isfinite(job->skip_stop_at))
      job->skip_stop_at = now_s() + SKIP_GRACE_S;
    return;
  }
  if (WIFEXITED(st)) {
    fprintf(stderr, PROG_NAME ": rank %d (pid %d) exited with status %d\n",
            rank, (int)p->pid, WEXITSTATUS(st));
    job->failure_code = WEXITSTATUS(st);
  } else {
    int sig = WTERMSIG(st);
    fprintf(stderr,
            PROG_NAME ": rank %d (pid %d) was killed by signal %d (%s)%s\n",
            rank, (int)p->pid, sig, strsignal(sig),
            WCOREDUMP(st) ? ", core dumped" : "");
    job->failure_code = 128 + sig;
  }
  if (job->n_running > 0) {
    fprintf(stderr, PROG_NAME ": stopping the other %d running rank%s\n",
            job->n_running, job->n_running == 1 ? "" : "s");
    stop_job(job, SIGTERM);
  }
}

/* A rank killed by a signal is more likely the origin of a failure than
 * one that exited with an error (typically after noticing the other). */
static bool killed_by_signal(const job_t *job, int r) {
  return WIFSIGNALED(job->ranks[r].wait_status);
}

/* Reap every rank that has ended, then report them killed-by-signal first:
 * when the launcher was descheduled while ranks ended (a loaded machine),
 * waitpid returns them in creation order, not in the order they ended, and
 * the survivor that exited because of a dead peer would be blamed. */
static void reap_children(job_t *job) {
  int nranks = job->opt->nranks;
  int *ended = malloc((size_t)nranks * sizeof *ended);
  int n = 0;
  for (;;) {
    int st;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) break;
    int r = rank_of_pid(job, pid);
    if (r < 0) continue;
    job->ranks[r].running = false;
    job->ranks[r].wait_status = st;
    job->n_running--;
    if (ended && n < nranks) {
      ended[n++] = r;
    } else {
      on_rank_exit(job, r);
      if (job->stopping) kill(-pid, SIGKILL);
    }
  }
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < n; i++) {
      int r = ended[i];
      if (killed_by_signal(job, r) != (pass == 0)) continue;
      on_rank_exit(job, r);
      /* When stopping, also end what the rank left behind in its group (a
       * shell's background job ignores SIGINT).  The group id cannot have
       * been reused this soon after the leader was reaped. */
      if (job->stopping) kill(-job->ranks[r].pid, SIGKILL);
    }
  free(ended);
}

static void handle_stop_signal(job_t *job) {
  int sig = got_stop_signal;
  got_stop_signal = 0;
  if (!sig) return;
  if (!job->interrupt_signal) job->interrupt_signal = sig;
  if (job->n_running == 0) return;
  if (n_stop_signals > 1 && sig == SIGINT) {
    fprintf(stderr, PROG_NAME ": second interrupt: killing %d rank%s\n",
            job->n_running, job->n_running == 1 ? "" : "s");
    signal_ranks(job, SIGKILL);
    return;
  }
  fprintf(stderr,
          PROG_NAME ": got signal %d (%s), forwarding it to %d rank%s\n", sig,
          strsignal(sig), job->n_running, job->n_running == 1 ? "" : "s");
  stop_job(job, sig);
}

static void check_timers(job_t *job, double now) {
  if (now >= job->deadline && !job->timed_out) {
    job->timed_out = true;
    job->deadline = INFINITY;
    if (job->n_running > 0) {
      fprintf(stderr,
              PROG_NAME
              ": job timed out after %g s (--timeout); stopping %d rank%s\n",
              job->opt->timeout_s, job->n_running,
              job->n_running == 1 ? "" : "s");
      stop_job(job, SIGTERM);
    }
  }
  if (now >= job->skip_stop_at) {
    job->skip_stop_at = INFINITY;
    if (job->n_running > 0 && !job->stopping) {
      fprintf(
          stderr,
          PROG_NAME
          ": a rank skipped (exit %d) but %d rank%s still running after %g s; "
          "stopping them\n",
          EXIT_SKIP, job->n_running, job->n_running == 1 ? " is" : "s are",
          SKIP_GRACE_S);
      stop_job(job, SIGTERM);
    }
  }
  if (now >= job->kill_at) {
    job->kill_at = INFINITY;
    if (job->n_running > 0) {
      fprintf(stderr,
              PROG_NAME
              ": %d rank%s still running %g s after SIGTERM; sending SIGKILL\n",
              job->n_running, job->n_running == 1 ? "" : "s", KILL_GRACE_S);
      signal_ranks(job, SIGKILL);
    }
  }
}

static int poll_timeout_ms(const job_t *job, double now, double drain_until) {
  double next = fmin(fmin(job->deadline, job->kill_at),
                     fmin(job->skip_stop_at, drain_until));
  if (!isfinite(next)) return -1;
  double ms = ceil((next - now) * 1e3);
  return ms < 0 ? 0 : ms > INT_MAX ? INT_MAX : (int)ms;
}

/* Wait for every rank (and its tagged output) while handling signals,
 * failures and deadlines. */
static void run_event_loop(job_t *job) {
  int nranks = job->opt->nranks;
  struct pollfd *fds = calloc(1 + 2 * (size_t)nranks, sizeof *fds);
  stream_t **streams = calloc(1 + 2 * (size_t)nranks, sizeof *streams);
  int *stream_rank = calloc(1 + 2 * (size_t)nranks, sizeof *stream_rank);
  if (!fds || !streams || !stream_rank) {
    perror(PROG_NAME);
    exit(1);
  }
  double drain_until = INFINITY;
  for (;;) {
    reap_children(job);
    handle_stop_signal(job);
    double now = now_s();
    check_timers(job, now);
    if (job->n_running == 0) {
      if (job->open_streams == 0) break;
      if (!isfinite(drain_until)) drain_until = now + DRAIN_GRACE_S;
      if (now >= drain_until) break;
    }
    int n = 0;
    fds[n++] = (struct pollfd){.fd = wake_pipe[0], .events = POLLIN};
    for (int r = 0; r < nranks; r++) {
      stream_t *two[2] = {&job->ranks[r].out, &job->ranks[r].err};
      for (int k = 0; k < 2; k++) {
        if (two[k]->fd < 0) continue;
        streams[n] = two[k];
        stream_rank[n] = r;
        fds[n++] = (struct pollfd){.fd = two[k]->fd, .events = POLLIN};
      }
    }
    int ready = poll(fds, (nfds_t)n, poll_timeout_ms(job, now, drain_until));
    if (ready < 0) {
      if (errno == EINTR) continue;
      perror(PROG_NAME ": poll");
      exit(1);
    }
    if (fds[0].revents) {
      char junk[256];
      while (read(wake_pipe[0], junk, sizeof junk) > 0) {
      }
    }
    for (int i = 1; i < n; i++)
      if (fds[i].revents)
        pump_stream(streams[i], stream_rank[i], &job->open_streams);
  }
  /* Whatever is still open belongs to something that outlived its rank. */
  for (int r = 0; r < nranks; r++) {
    stream_t *two[2] = {&job->ranks[r].out, &job->ranks[r].err};
    for (int k = 0; k < 2; k++) {
      if (two[k]->fd < 0) continue;
      if (two[k]->len)
        emit_line(r, two[k]->dest_fd, two[k]->buf, two[k]->len, true);
      close(two[k]->fd);
      two[k]->fd = -1;
    }
  }
  free(fds);
  free(streams);
  free(stream_rank);
}

/* ---- starting ranks --------------------------------------------------- */

/* In the child, between fork and exec: async-signal-safe calls only. */
static void exec_rank(const char *path, char **argv, char **envp, pid_t parent,
                      int cpu, int out_fd, int err_fd, int status_fd) {
  if (cpu >= 0) {
    /* A hint: a rank the system will not bind still runs, unbound. */
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    (void)sched_setaffinity(0, sizeof one, &one);
  }
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &dfl, NULL);
  sigaction(SIGPIPE, &dfl, NULL);
  for (size_t i = 0; i < N_FORWARDED; i++)
    sigaction(forwarded_signals[i], &dfl, NULL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1); /* the launcher died before prctl */
  int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0 && null_fd != 0) {
    dup2(null_fd, 0);
    close(null_fd);
  }
  if (out_fd >= 0) dup2(out_fd, 1);
  if (err_fd >= 0) dup2(err_fd, 2);
  execve(path, argv, envp);
  int e = errno;
  ssize_t w = write(status_fd, &e, sizeof e);
  (void)w;
  _exit(127);
}

static int make_output_pipe(stream_t *s, int dest_fd, int *write_end) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  s->fd = p[0];
  s->dest_fd = dest_fd;
  s->buf = malloc(LINE_BYTES);
  s->len = 0;
  *write_end = p[1];
  return s->buf ? 0 : -1;
}

/* Start rank r.  Returns 0, or an exit code after printing why. */
static int spawn_rank(job_t *job, int r, const char *path, char **envp) {
  rank_proc_t *p = &job->ranks[r];
  int out_w = -1, err_w = -1;
  if (job->opt->tag_output) {
    if (make_output_pipe(&p->out, 1, &out_w) != 0 ||
        make_output_pipe(&p->err, 2, &err_w) != 0) {
      fprintf(stderr,
              PROG_NAME ": cannot create output pipes for rank %d: %s\n", r,
              strerror(errno));
      return 1;
    }
    job->open_streams += 2;
  }
  /* exec reports its errno through a close-on-exec pipe: EOF = it ran. */
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) {
    fprintf(stderr, PROG_NAME ": pipe: %s\n", strerror(errno));
    return 1;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    close(status_pipe[0]);
    exec_rank(path, job->opt->prog_argv, envp, parent, job->cpus[r], out_w,
              err_w, status_pipe[1]);
  }
  int saved_errno = errno;
  close(status_pipe[1]);
  if (out_w >= 0) close(out_w);
  if (err_w >= 0) close(err_w);
  if (pid < 0) {
    close(status_pipe[0]);
    fprintf(stderr, PROG_NAME ": cannot start rank %d: fork: %s\n", r,
            strerror(saved_errno));
    return 1;
  }
  setpgid(pid, pid); /* also here, so the group exists before we signal it */
  p->pid = pid;
  p->running = true;
  job->n_running++;
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(status_pipe[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  close(status_pipe[0]);
  if (n == (ssize_t)sizeof child_errno) {
    p->exec_failed = true;
    fprintf(stderr, PROG_NAME ": rank %d: cannot execute '%s': %s\n", r, path,
            strerror(child_errno));
    return child_errno == ENOENT ? 127 : 126;
  }
  return 0;
}

/* The CPU each rank is bound to (-1: not bound), by the --bind-to policy
 * over the CPUs this process may use; NULL when out of memory. */
static int *rank_cpus(const options_t *opt) {
  int *cpus = malloc((size_t)opt->nranks * sizeof *cpus);
  if (!cpus) return NULL;
  cpu_set_t allowed;
  int usable[CPU_SETSIZE], n = 0;
  if (opt->bind != BIND_NONE &&
      sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &allowed)) usable[n++] = c;
  bool bind = n > 0 && (opt->bind == BIND_CORE ||
                        (opt->bind == BIND_AUTO && opt->nranks <= n));
  if (opt->bind == BIND_CORE && opt->nranks > n && n > 0)
    fprintf(stderr,
            PROG_NAME ": --bind-to core with %d ranks on %d usable CPUs: "
            "ranks share CPUs round-robin\n",
            opt->nranks, n);
  for (int r = 0; r < opt->nranks; r++) cpus[r] = bind ? usable[r % n] : -1;
  return cpus;
}

/* Everything after the command line; returns the job's exit status. */
static int launch(const options_t *opt) {
  char path[PATH_MAX];
  int rc =
      resolve_program(opt->prog_argv[0], rank_path(opt), path, sizeof path);
  if (rc) return rc;

  /* Tagged output holds two pipes per rank: 1024 ranks need more than the
   * usual soft limit of descriptors. */
  struct rlimit nofile;
  if (opt->tag_output && getrlimit(RLIMIT_NOFILE, &nofile) == 0 &&
      nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }

  if (install_signal_handlers() != 0) {
    perror(PROG_NAME ": signal setup");
    return 1;
  }

  /* Starts the rendezvous root thread in this process. */
  qcoll_unique_id_t id;
  qcoll_status_t st = qcoll_get_unique_id(&id);
  char id_hex[2 * QCOLL_UNIQUE_ID_BYTES + 1];
  if (st == QCOLL_OK) st = qcoll_unique_id_to_hex(&id, id_hex);
  if (st != QCOLL_OK) {
    fprintf(stderr, PROG_NAME ": cannot create the job's unique id: %s: %s\n",
            qcoll_status_string(st), qcoll_last_error());
    return 1;
  }

  job_t job = {
      .opt = opt,
      .kill_at = INFINITY,
      .skip_stop_at = INFINITY,
      .deadline = opt->timeout_s > 0 ? now_s() + opt->timeout_s : INFINITY};
  job.ranks = calloc((size_t)opt->nranks, sizeof *job.ranks);
  char ***envs = calloc((size_t)opt->nranks, sizeof *envs);
  if (!job.ranks || !envs) {
    perror(PROG_NAME);
    return 1;
  }
  for (int r = 0; r < opt->nranks; r++) {
    job.ranks[r].out.fd = job.ranks[r].err.fd = -1;
    envs[r] = build_rank_env(opt, r, id_hex);
    if (!envs[r]) {
      perror(PROG_NAME);
      return 1;
    }
  }
  job.cpus = rank_cpus(opt);
  if (!job.cpus) {
    perror(PROG_NAME);
    return 1;
  }
  fflush(NULL); /* nothing buffered may be written twice by the children */

  for (int r = 0; r < opt->nranks && !job.stopping; r++) {
    /* A user signal or a failed rank during the start stops the start. */
    reap_children(&job);
    handle_stop_signal(&job);
    if (job.stopping) break;
    rc = spawn_rank(&job, r, path, envs[r]);
    if (rc) {
      job.failure_code = rc;
      stop_job(&job, SIGTERM);
    }
  }

  run_event_loop(&job);

  for (int r = 0; r < opt->nranks; r++) {
    free_rank_env(envs[r]);
    free(job.ranks[r].out.buf);
    free(job.ranks[r].err.buf);
  }
  free(envs);
  free(job.ranks);
  free(job.cpus);

  if (job.failure_code) return job.failure_code;
  if (job.timed_out) return EXIT_TIMEOUT;
  if (job.interrupt_signal) return 128 + job.interrupt_signal;
  if (job.any_skipped) return EXIT_SKIP;
  return 0;
}

int main(int argc, char **argv) {
  options_t opt;
  parse_options(argc, argv, &opt);
  int rc = launch(&opt);
  free_options(&opt);
  return rc;
}
