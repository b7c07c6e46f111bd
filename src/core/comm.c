/*
 * Communicator lifecycle: init from a unique id or from a launcher's
 * environment, destroy, abort, accessors.
 */
#include "comm.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../backend/backend.h"
#include "../base/config.h"
#include "../bootstrap/bootstrap.h"
#include "../runtime/runtime.h"

#define QCOLL_MAX_RANKS 65536

/* ---- unique id ------------------------------------------------------ */

qcoll_status_t qcoll_get_unique_id(qcoll_unique_id_t *id) {
  if (!id)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll_get_unique_id: id is NULL");
  qcoll__config_t env;
  qcoll__config_read(&env);
  const char *addr = qcoll__env_str("QCOLL_ROOT_ADDR");
  return qcoll__bootstrap_root_start(
      addr && *addr ? addr : NULL, (int)env.root_port, NULL, env.timeout_s, id);
}

qcoll_status_t qcoll_unique_id_to_hex(const qcoll_unique_id_t *id, char *out) {
  if (!id || !out)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll_unique_id_to_hex: %s is NULL",
                        !id ? "id" : "out");
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < QCOLL_UNIQUE_ID_BYTES; i++) {
    out[2 * i] = digits[id->bytes[i] >> 4];
    out[2 * i + 1] = digits[id->bytes[i] & 15];
  }
  out[2 * QCOLL_UNIQUE_ID_BYTES] = '\0';
  return QCOLL_OK;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = (char)tolower((unsigned char)c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

qcoll_status_t qcoll_unique_id_from_hex(const char *hex,
                                        qcoll_unique_id_t *id) {
  if (!hex || !id)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll_unique_id_from_hex: %s is NULL",
                        !hex ? "hex" : "id");
  size_t len = strlen(hex);
  if (len != 2 * QCOLL_UNIQUE_ID_BYTES)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "unique id hex has %zu characters, expected %d", len,
                        2 * QCOLL_UNIQUE_ID_BYTES);
  /* Check every digit first: a refused id leaves *id as it was. */
  for (size_t i = 0; i < len; i++)
    if (hex_value(hex[i]) < 0)
      return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                          "unique id hex has a non-hex character at %zu", i);
  for (int i = 0; i < QCOLL_UNIQUE_ID_BYTES; i++)
    id->bytes[i] =
        (unsigned char)(hex_value(hex[2 * i]) << 4 | hex_value(hex[2 * i + 1]));
  return QCOLL_OK;
}

/* ---- config --------------------------------------------------------- */

qcoll_status_t qcoll_config_init(qcoll_config_t *config) {
  if (!config)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll_config_init: config is NULL");
  memset(config, 0, sizeof *config);
  config->size = sizeof *config;
  config->device = QCOLL_DEVICE_CURRENT;
  config->timeout_s = 0;
  config->host_id = NULL;
  return QCOLL_OK;
}

/* Copy the caller's config, accepting older (smaller) structs. */
static qcoll_status_t read_config(const qcoll_config_t *in,
                                  qcoll_config_t *out) {
  qcoll_config_init(out);
  if (!in) return QCOLL_OK;
  if (in->size < offsetof(qcoll_config_t, device) + sizeof(int) ||
      in->size > 4096)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "config->size is %zu: initialise the config with "
                        "qcoll_config_init() (expected %zu)",
                        in->size, sizeof *out);
  memcpy(out, in, QCOLL_MIN(in->size, sizeof *out));
  out->size = sizeof *out;
  if (out->device < QCOLL_DEVICE_NONE)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "config->device is %d: expected a device index, "
                        "QCOLL_DEVICE_CURRENT (-1) or QCOLL_DEVICE_NONE (-2)",
                        out->device);
  if (!(out->timeout_s >= 0))
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "config->timeout_s is %g: expected >= 0 (0 = default)",
                        out->timeout_s);
  return QCOLL_OK;
}

/* ---- live handles --------------------------------------------------- */
/* The communicators this process has made and not destroyed.  A destroyed
 * handle points at freed memory, so its own fields cannot say it is dead:
 * every public entry point asks this list instead. */

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static qcoll_comm_t *live_comms;
static size_t live_count, live_cap;

static bool live_add(qcoll_comm_t comm) {
  bool ok = true;
  pthread_mutex_lock(&live_lock);
  if (live_count == live_cap) {
    size_t cap = live_cap ? 2 * live_cap : 8;
    qcoll_comm_t *p = realloc(live_comms, cap * sizeof *p);
    if (p) {
      live_comms = p;
      live_cap = cap;
    }
  }
  if (live_count < live_cap)
    live_comms[live_count++] = comm;
  else
    ok = false;
  pthread_mutex_unlock(&live_lock);
  return ok;
}

static void live_remove(qcoll_comm_t comm) {
  pthread_mutex_lock(&live_lock);
  for (size_t i = 0; i < live_count; i++)
    if (live_comms[i] == comm) {
      live_comms[i] = live_comms[--live_count];
      break;
    }
  pthread_mutex_unlock(&live_lock);
}

bool qcoll__comm_is_live_handle(qcoll_comm_t comm) {
  bool found = false;
  pthread_mutex_lock(&live_lock);
  for (size_t i = 0; i < live_count && !found; i++)
    found = live_comms[i] == comm;
  pthread_mutex_unlock(&live_lock);
  return found;
}

qcoll_status_t qcoll__comm_check_handle(qcoll_comm_t comm, const char *fn) {
  if (!comm)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT, "%s: comm is NULL",
                        fn);
  if (!qcoll__comm_is_live_handle(comm))
    return qcoll__error(NULL, QCOLL_ERR_INVALID_USAGE,
                        "%s: comm is not a live communicator (destroyed, or "
                        "never returned by an init)",
                        fn);
  return QCOLL_OK;
}

/* ---- state ---------------------------------------------------------- */

qcoll_status_t qcoll__comm_check_usable(qcoll_comm_t comm, const char *fn) {
  qcoll_status_t st = qcoll__comm_check_handle(comm, fn);
  if (st != QCOLL_OK) return st;
  switch (atomic_load(&comm->ctx.state)) {
    case QCOLL_COMM_LIVE: return QCOLL_OK;
    case QCOLL_COMM_ABORTED:
      return qcoll__error(&comm->ctx, QCOLL_ERR_ABORTED,
                          "%s: the communicator was aborted", fn);
    case QCOLL_COMM_BROKEN:
      return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_USAGE,
                          "%s: the communicator is broken by an earlier "
                          "failure (a peer failed or a wait timed out); "
                          "destroy it and create a new one",
                          fn);
    default:
      return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_USAGE,
                          "%s: the communicator was destroyed", fn);
  }
}

const char *qcoll_comm_last_error(qcoll_comm_t comm) {
  if (!comm) return "invalid communicator (NULL)";
  if (!qcoll__comm_is_live_handle(comm)) return "destroyed communicator";
  return comm->ctx.last_error;
}

/* ---- init ----------------------------------------------------------- */

/* The index in [first, count) whose name() equals the variable's value;
 * fallback, with a warning, when none does. */
static int env_choice(const char *var, int first, int count,
                      const char *(*name)(int), int fallback) {
  const char *value = qcoll__env_str(var);
  for (int i = first; i < count; i++)
    if (!strcmp(value, name(i))) return i;
  char names[128] = "";
  for (int i = first; i < count; i++)
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
             i > first ? ", " : "", name(i));
  QLOG_WARN(NULL, INIT, "%s=%s is not one of %s: using %s", var, value, names,
            name(fallback));
  return fallback;
}

static const char *algo_name(int i) {
  return qcoll_algo_name((qcoll_algo_t)i);
}
static const char *quant_name(int i) {
  return qcoll_quant_name((qcoll_quant_t)i);
}

/* QCOLL_QUANT: a format name, optionally with "+rot" (rotated groups). */
#define QCOLL__QUANT_ROT_SUFFIX "+rot"
static void read_env_quant(qcoll_comm_t comm) {
  const char *value = qcoll__env_str("QCOLL_QUANT");
  size_t len = strlen(value), suffix = strlen(QCOLL__QUANT_ROT_SUFFIX);
  comm->env_quant_rotate =
      len > suffix &&
      !strcmp(value + len - suffix, QCOLL__QUANT_ROT_SUFFIX);
  char name[32];
  snprintf(name, sizeof name, "%.*s",
           (int)(comm->env_quant_rotate ? len - suffix : len), value);
  comm->env_quant = QCOLL_QUANT_NONE;
  for (int i = QCOLL_QUANT_NONE; i < QCOLL_QUANT_COUNT; i++)
    if (!strcmp(name, quant_name(i))) comm->env_quant = (qcoll_quant_t)i;
  if (comm->env_quant == QCOLL_QUANT_NONE && strcmp(name, "none")) {
    QLOG_WARN(NULL, INIT,
              "QCOLL_QUANT=%s is not one of none, fp8, int8, int6, int4, "
              "int3 (each optionally with %s): using none",
              value, QCOLL__QUANT_ROT_SUFFIX);
    comm->env_quant_rotate = false;
  }
}

static void resolve_host_id(qcoll_comm_t comm, const qcoll_config_t *config) {
  const char *id = config->host_id;
  if (!id || !*id) id = qcoll__env_str("QCOLL_HOST_ID");
  if (id && *id) {
    snprintf(comm->ctx.host_id, sizeof comm->ctx.host_id, "%s", id);
    return;
  }
  if (gethostname(comm->ctx.host_id, sizeof comm->ctx.host_id) != 0)
    snprintf(comm->ctx.host_id, sizeof comm->ctx.host_id, "localhost");
  comm->ctx.host_id[sizeof comm->ctx.host_id - 1] = '\0';
}

/* Learn which ranks share this host: ranks with equal host ids. */
static qcoll_status_t exchange_host_ids(qcoll_comm_t comm) {
  size_t n = (size_t)comm->ctx.nranks;
  char *ids = calloc(n, QCOLL_HOST_ID_MAX);
  int *host_of = calloc(n, sizeof(int));
  comm->ctx.local_ranks = calloc(n, sizeof(int));
  qcoll_status_t st = QCOLL_OK;
  if (!ids || !host_of || !comm->ctx.local_ranks) {
    st = qcoll__error(&comm->ctx, QCOLL_ERR_OUT_OF_MEMORY,
                      "cannot allocate the host table for %d ranks",
                      comm->ctx.nranks);
    goto out;
  }
  memcpy(ids + (size_t)comm->ctx.rank * QCOLL_HOST_ID_MAX, comm->ctx.host_id,
         QCOLL_HOST_ID_MAX);
  QCHECK(
      qcoll__bootstrap_allgather(comm->ctx.bootstrap, ids, QCOLL_HOST_ID_MAX));
  comm->ctx.nhosts = 0;
  for (size_t r = 0; r < n; r++) {
    ids[r * QCOLL_HOST_ID_MAX + QCOLL_HOST_ID_MAX - 1] = '\0';
    host_of[r] = -1;
    for (size_t q = 0; q < r; q++)
      if (!strcmp(ids + r * QCOLL_HOST_ID_MAX, ids + q * QCOLL_HOST_ID_MAX)) {
        host_of[r] = host_of[q];
        break;
      }
    if (host_of[r] < 0) host_of[r] = comm->ctx.nhosts++;
  }
  comm->ctx.host_index = host_of[comm->ctx.rank];
  comm->ctx.local_size = 0;
  for (size_t r = 0; r < n; r++)
    if (host_of[r] == comm->ctx.host_index) {
      if ((int)r == comm->ctx.rank) comm->ctx.local_rank = comm->ctx.local_size;
      comm->ctx.local_ranks[comm->ctx.local_size++] = (int)r;
    }
out:
  free(ids);
  free(host_of);
  return st;
}

static qcoll_status_t resolve_device(qcoll_comm_t comm,
                                     const qcoll_config_t *config) {
  const qcoll__runtime_t *rt = qcoll__runtime();
  comm->ctx.device = QCOLL_DEVICE_NONE;
  if (config->device == QCOLL_DEVICE_NONE || rt->device_count() == 0)
    return QCOLL_OK;
  if (config->device == QCOLL_DEVICE_CURRENT) {
    /* Asked of the driver, never remembered: the device current now. */
    return rt->get_device(&comm->ctx.device);
  }
  if (config->device >= rt->device_count())
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "config->device is %d but only %d device(s) are "
                        "visible",
                        config->device, rt->device_count());
  comm->ctx.device = config->device;
  return QCOLL_OK;
}

/* Every backend's collective set-up, in the list's order (host first). */
static qcoll_status_t init_backends(qcoll_comm_t comm) {
  for (int i = 0; i < QCOLL__BACKEND_COUNT; i++) {
    const qcoll__backend_t *b = qcoll__backends[i];
    if (!b->init) continue;
    qcoll_status_t st = b->init(&comm->ctx);
    if (st != QCOLL_OK) return st;
  }
  return QCOLL_OK;
}

/* Backwards: a backend may still use the ones before it while it stops. */
static void destroy_backends(qcoll_comm_t comm) {
  for (int i = QCOLL__BACKEND_COUNT - 1; i >= 0; i--)
    if (qcoll__backends[i]->destroy) qcoll__backends[i]->destroy(&comm->ctx);
}

static void free_comm(qcoll_comm_t comm) {
  if (!comm) return;
  live_remove(comm);
  destroy_backends(comm);
  if (comm->ctx.bootstrap) qcoll__bootstrap_destroy(comm->ctx.bootstrap);
  comm->ctx.bootstrap = NULL;
  free(comm->ctx.local_ranks);
  comm->magic = 0;
  atomic_store(&comm->ctx.state, QCOLL_COMM_DESTROYED);
  pthread_mutex_destroy(&comm->ctx.error_lock);
  free(comm);
}

static qcoll_status_t check_init_args(qcoll_comm_t *comm, int nranks,
                                      const qcoll_unique_id_t *id, int rank) {
  if (!comm)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll_comm_init_rank: comm is NULL");
  if (!id)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll_comm_init_rank: id is NULL");
  if (nranks < 1 || nranks > QCOLL_MAX_RANKS)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll_comm_init_rank: nranks is %d, expected 1..%d",
                        nranks, QCOLL_MAX_RANKS);
  if (rank < 0 || rank >= nranks)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll_comm_init_rank: rank %d is out of range [0, %d)",
                        rank, nranks);
  return QCOLL_OK;
}

qcoll_status_t qcoll_comm_init_rank(qcoll_comm_t *out, int nranks,
                                    const qcoll_unique_id_t *id, int rank,
                                    const qcoll_config_t *user_config) {
  qcoll_status_t st = check_init_args(out, nranks, id, rank);
  if (st != QCOLL_OK) return st;
  *out = NULL;
  qcoll_config_t config;
  st = read_config(user_config, &config);
  if (st != QCOLL_OK) return st;

  qcoll_comm_t comm = calloc(1, sizeof *comm);
  if (!comm)
    return qcoll__error(NULL, QCOLL_ERR_OUT_OF_MEMORY,
                        "cannot allocate a communicator");
  pthread_mutex_init(&comm->ctx.error_lock, NULL);
  comm->magic = QCOLL_COMM_MAGIC;
  comm->ctx.rank = rank;
  comm->ctx.nranks = nranks;
  qcoll__config_read(&comm->ctx.config);
  comm->ctx.timeout_s =
      config.timeout_s > 0 ? config.timeout_s : comm->ctx.config.timeout_s;
  comm->check_calls = comm->ctx.config.check;
  comm->env_algo =
      (qcoll_algo_t)env_choice("QCOLL_ALGO", QCOLL_ALGO_AUTO, QCOLL_ALGO_COUNT,
                               algo_name, QCOLL_ALGO_AUTO);
  read_env_quant(comm);
  atomic_init(&comm->ctx.state, QCOLL_COMM_LIVE);
  resolve_host_id(comm, &config);

  QCHECK(resolve_device(comm, &config));
  QCHECK(qcoll__bootstrap_init(&comm->ctx, id, &comm->ctx.bootstrap));
  QCHECK(exchange_host_ids(comm));
  QCHECK(init_backends(comm));
  QCHECK(qcoll__bootstrap_barrier(comm->ctx.bootstrap));
  QLOG_INFO(&comm->ctx, INIT,
            "communicator ready: rank %d of %d, %d rank(s) on host '%s' (%d "
            "host(s)), device %d, timeout %.1f s",
            rank, nranks, comm->ctx.local_size, comm->ctx.host_id, comm->ctx.nhosts,
            comm->ctx.device, comm->ctx.timeout_s);
  if (!live_add(comm)) {
    st = qcoll__error(NULL, QCOLL_ERR_OUT_OF_MEMORY,
                      "cannot record the new communicator");
    goto out;
  }
  *out = comm;
  return QCOLL_OK;
out:
  free_comm(comm);
  return st;
}

/* ---- init from a launcher's environment ---------------------------- */

typedef struct launch_env {
  int rank, size;
  bool single_host; /* the launcher says every rank is on this host */
  const char *launcher;
} launch_env_t;

static bool env_int(const char *name, int *out) {
  const char *v = getenv(name);
  if (!v || !*v) return false;
  char *end;
  long x = strtol(v, &end, 10);
  if (*end || x < 0 || x > QCOLL_MAX_RANKS) return false;
  *out = (int)x;
  return true;
}

static bool env_equals_int(const char *name, int value) {
  int x;
  return env_int(name, &x) && x == value;
}

static qcoll_status_t read_launch_env(launch_env_t *e) {
  static const struct {
    const char *rank, *size, *launcher;
  } schemes[] = {
      {"QCOLL_RANK", "QCOLL_WORLD_SIZE", "qcoll-run"},
      {"RANK", "WORLD_SIZE", "torchrun"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"},
      {"SLURM_PROCID", "SLURM_NTASKS", "Slurm"},
      {"PMI_RANK", "PMI_SIZE", "PMI"},
  };
  for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
    bool has_rank = getenv(schemes[i].rank) != NULL;
    bool has_size = getenv(schemes[i].size) != NULL;
    if (!has_rank && !has_size) continue;
    if (!env_int(schemes[i].rank, &e->rank) ||
        !env_int(schemes[i].size, &e->size))
      return qcoll__error(
          NULL, QCOLL_ERR_INVALID_ARGUMENT,
          "%s environment: %s='%s' and %s='%s' must both be "
          "non-negative integers",
          schemes[i].launcher, schemes[i].rank,
          getenv(schemes[i].rank) ? getenv(schemes[i].rank) : "",
          schemes[i].size,
          getenv(schemes[i].size) ? getenv(schemes[i].size) : "");
    e->launcher = schemes[i].launcher;
    e->single_host = i == 0 || env_equals_int("LOCAL_WORLD_SIZE", e->size) ||
                     env_equals_int("OMPI_COMM_WORLD_LOCAL_SIZE", e->size) ||
                     env_equals_int("SLURM_NNODES", 1) ||
                     env_equals_int("SLURM_JOB_NUM_NODES", 1);
    return QCOLL_OK;
  }
  return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                      "qcoll_comm_init_env: no launcher environment found "
                      "(expected QCOLL_RANK/QCOLL_WORLD_SIZE from qcoll-run, "
                      "RANK/WORLD_SIZE from torchrun, OMPI_COMM_WORLD_* from "
                      "Open MPI, or SLURM_PROCID/SLURM_NTASKS from Slurm)");
}

/* FNV-1a over the job's identifiers, stretched to 32 bytes.  Not secret
 * against anyone who can read the job's environment: QCOLL_SECRET is the
 * strong option and the documentation says so. */
static void derive_secret(const char *material, uint8_t secret[32]) {
  for (int word = 0; word < 4; word++) {
    uint64_t h =
        1469598103934665603ull ^ (uint64_t)(word * 0x9e3779b97f4a7c15ull);
    for (const char *p = material; *p; p++) {
      h ^= (unsigned char)*p;
      h *= 1099511628211ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    memcpy(secret + 8 * word, &h, 8);
  }
}

static const char *getenv_or(const char *name, const char *fallback) {
  const char *v = getenv(name);
  return v && *v ? v : fallback;
}

static void job_secret(const launch_env_t *e, uint8_t secret[32]) {
  char material[1024];
  const char *explicit_secret = getenv("QCOLL_SECRET");
  if (explicit_secret && *explicit_secret) {
    snprintf(material, sizeof material, "qcoll-secret:%s", explicit_secret);
  } else {
    snprintf(
        material, sizeof material, "qcoll-job:%s:%s:%s:%s:%s:%s:%d",
        getenv_or("TORCHELASTIC_RUN_ID", ""), getenv_or("SLURM_JOB_ID", ""),
        getenv_or("PMIX_NAMESPACE", ""), getenv_or("OMPI_MCA_orte_hnp_uri", ""),
        getenv_or("MASTER_ADDR", ""), getenv_or("MASTER_PORT", ""), e->size);
    QLOG_INFO(NULL, BOOT,
              "QCOLL_SECRET is not set: the bootstrap secret is "
              "derived from the job's identifiers");
  }
  derive_secret(material, secret);
}

static qcoll_status_t job_root(const launch_env_t *e,
                               const qcoll__config_t *env, const char **addr,
                               int *port) {
  *addr = getenv_or("QCOLL_ROOT_ADDR", getenv_or("MASTER_ADDR", NULL));
  if (!*addr) {
    if (!e->single_host)
      return qcoll__error(
          NULL, QCOLL_ERR_INVALID_ARGUMENT,
          "%s environment: ranks may span hosts, so set "
          "QCOLL_ROOT_ADDR (or MASTER_ADDR) to rank 0's address",
          e->launcher);
    *addr = "127.0.0.1";
  }
  int p = 0;
  if (env->root_port > 0) {
    *port = (int)env->root_port;
  } else if (env_int("MASTER_PORT", &p) && p > 0) {
    /* MASTER_PORT itself is usually taken by the launcher's own store. */
    *port = p + 1;
  } else {
    const char *job = getenv_or(
        "SLURM_JOB_ID",
        getenv_or("OMPI_MCA_orte_hnp_uri", getenv_or("PMIX_NAMESPACE", NULL)));
    if (!job)
      return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                          "%s environment: set QCOLL_ROOT_PORT (or "
                          "MASTER_PORT) for the rendezvous",
                          e->launcher);
    /* A port of [20000, 32767], below Linux's default ephemeral range
     * (32768-60999): there any local connection may hold it for a while,
     * and the root then could not listen (seen once in CI). */
    uint8_t h[32];
    derive_secret(job, h);
    *port = 20000 + (int)(((unsigned)h[0] << 8 | h[1]) % 12768u);
  }
  if (*port > 65535)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "rendezvous port %d is out of range", *port);
  return QCOLL_OK;
}

qcoll_status_t qcoll_comm_init_env(qcoll_comm_t *comm,
                                   const qcoll_config_t *config) {
  if (!comm)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll_comm_init_env: comm is NULL");
  launch_env_t e = {0};
  qcoll_status_t st = read_launch_env(&e);
  if (st != QCOLL_OK) return st;
  if (e.rank >= e.size)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s environment: rank %d is out of range [0, %d)",
                        e.launcher, e.rank, e.size);
  qcoll_unique_id_t id;
  const char *hex = getenv("QCOLL_UNIQUE_ID");
  if (hex && *hex) {
    st = qcoll_unique_id_from_hex(hex, &id);
    if (st != QCOLL_OK)
      return qcoll__error(NULL, st, "QCOLL_UNIQUE_ID: %s", qcoll_last_error());
    return qcoll_comm_init_rank(comm, e.size, &id, e.rank, config);
  }
  const char *addr = NULL;
  int port = 0;
  uint8_t secret[32];
  qcoll__config_t env;
  qcoll__config_read(&env);
  st = job_root(&e, &env, &addr, &port);
  if (st != QCOLL_OK) return st;
  job_secret(&e, secret);
  double timeout =
      config && config->timeout_s > 0 ? config->timeout_s : env.timeout_s;
  if (e.rank == 0)
    st = qcoll__bootstrap_root_start(addr, port, secret, timeout, &id);
  else
    st = qcoll__bootstrap_make_id(addr, port, secret, &id);
  if (st != QCOLL_OK) return st;
  return qcoll_comm_init_rank(comm, e.size, &id, e.rank, config);
}

/* ---- destroy, abort, accessors -------------------------------------- */

qcoll_status_t qcoll_comm_destroy(qcoll_comm_t comm) {
  if (!comm) return QCOLL_OK;
  qcoll_status_t handle = qcoll__comm_check_handle(comm, "qcoll_comm_destroy");
  if (handle != QCOLL_OK) return handle;
  qcoll_status_t st = QCOLL_OK;
  if (atomic_load(&comm->ctx.state) == QCOLL_COMM_LIVE) {
    /* Wait for the peers, so nobody frees memory a peer still reads. */
    st = qcoll__bootstrap_barrier(comm->ctx.bootstrap);
  }
  free_comm(comm);
  return st;
}

qcoll_status_t qcoll_comm_abort(qcoll_comm_t comm) {
  qcoll_status_t handle = qcoll__comm_check_handle(comm, "qcoll_comm_abort");
  if (handle != QCOLL_OK) return handle;
  int prev = atomic_exchange(&comm->ctx.state, QCOLL_COMM_ABORTED);
  if (prev == QCOLL_COMM_ABORTED) return QCOLL_OK;
  QLOG_WARN(&comm->ctx, INIT, "communicator aborted");
  for (int i = QCOLL__BACKEND_COUNT - 1; i >= 0; i--)
    if (qcoll__backends[i]->signal_abort)
      qcoll__backends[i]->signal_abort(&comm->ctx);
  if (comm->ctx.bootstrap) qcoll__bootstrap_abort(comm->ctx.bootstrap);
  return QCOLL_OK;
}

/* Queries answer on a live, broken or aborted communicator (so a failure
 * can be logged with the rank that saw it); a destroyed one is refused. */
#define ACCESSOR(fn, type, arg, expr)                            \
  qcoll_status_t fn(qcoll_comm_t comm, type *arg) {              \
    qcoll_status_t handle = qcoll__comm_check_handle(comm, #fn); \
    if (handle != QCOLL_OK) return handle;                       \
    if (!arg)                                                    \
      return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,      \
                          #fn ": " #arg " is NULL");             \
    *arg = (expr);                                               \
    return QCOLL_OK;                                             \
  }

ACCESSOR(qcoll_comm_rank, int, rank, comm->ctx.rank)
ACCESSOR(qcoll_comm_size, int, size, comm->ctx.nranks)
ACCESSOR(qcoll_comm_device, int, device, comm->ctx.device)

qcoll_status_t qcoll_comm_get_async_error(qcoll_comm_t comm,
                                          qcoll_status_t *status) {
  qcoll_status_t handle =
      qcoll__comm_check_handle(comm, "qcoll_comm_get_async_error");
  if (handle != QCOLL_OK) return handle;
  if (!status)
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll_comm_get_async_error: status is NULL");
  for (int i = 0; i < QCOLL__BACKEND_COUNT; i++)
    if (qcoll__backends[i]->poll_async_error &&
        comm->ctx.async_error == QCOLL_OK)
      comm->ctx.async_error = qcoll__backends[i]->poll_async_error(&comm->ctx);
  /* Work that failed on the device leaves the protocol half done. */
  if (comm->ctx.async_error != QCOLL_OK) qcoll__ctx_mark_broken(&comm->ctx);
  *status = comm->ctx.async_error;
  return QCOLL_OK;
}
