/*
 * qcoll.h - the public C API of qcoll.
 *
 * qcoll is a collective-communication library for processes that each own a
 * GPU or only CPU memory.  The API is shaped like NCCL's with C naming:
 * opaque communicators, one status enum, collectives that take
 * (sendbuf, recvbuf, count, dtype, [op], [root|peer], comm, stream).
 *
 * Buffers decide where a collective runs.  Host (CPU) buffers use the host
 * back end (shared memory between the ranks of one host) and the call is
 * synchronous: when it returns, recvbuf holds the result.  GPU buffers run
 * on the GPU the buffers live on, which must be the communicator's device;
 * GPU work is enqueued on `stream` (a cudaStream_t; NULL is the legacy
 * default stream) and completes asynchronously.
 *
 * Every call returns a qcoll_status_t.  QCOLL_OK is 0; every error is
 * negative.  qcoll_comm_last_error() gives the human-readable reason of the
 * last failure on a communicator, qcoll_last_error() the last failure of the
 * calling thread (useful when init fails and there is no communicator).
 *
 * Thread safety: different communicators may be used concurrently from
 * different threads.  One communicator must be used by one thread at a time,
 * except qcoll_comm_abort(), which may be called from any thread at any time.
 */
#ifndef QCOLL_H
#define QCOLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility; everything declared in this
 * header is its exported interface. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* ------------------------------------------------------------------ */
/* Version                                                             */
/* ------------------------------------------------------------------ */

#define QCOLL_VERSION_MAJOR 0
#define QCOLL_VERSION_MINOR 1
#define QCOLL_VERSION_PATCH 0
/** Single integer version: major*10000 + minor*100 + patch. */
#define QCOLL_VERSION_CODE                                   \
  (QCOLL_VERSION_MAJOR * 10000 + QCOLL_VERSION_MINOR * 100 + \
   QCOLL_VERSION_PATCH)

/* ------------------------------------------------------------------ */
/* Status                                                              */
/* ------------------------------------------------------------------ */

typedef enum qcoll_status {
  QCOLL_OK = 0,
  /** An argument is invalid (NULL pointer, bad enum, count overflow, rank
   *  out of range, buffer on the wrong device...).  Nothing was enqueued and
   *  the communicator stays usable. */
  QCOLL_ERR_INVALID_ARGUMENT = -1,
  /** The call is not valid in the communicator's current state: destroyed
   *  (or a pointer no init returned), or broken by an earlier failure.  An
   *  aborted communicator answers QCOLL_ERR_ABORTED instead. */
  QCOLL_ERR_INVALID_USAGE = -2,
  /** An operating-system call failed (socket, shared memory, fork...). */
  QCOLL_ERR_SYSTEM = -3,
  /** A wait passed its deadline (QCOLL_TIMEOUT). */
  QCOLL_ERR_TIMEOUT = -4,
  /** A peer rank died, left, or reported an error. */
  QCOLL_ERR_PEER_FAILURE = -5,
  /** The communicator was aborted with qcoll_comm_abort(). */
  QCOLL_ERR_ABORTED = -6,
  /** The request is valid but not supported by this build or setup. */
  QCOLL_ERR_UNSUPPORTED = -7,
  /** A CUDA call failed. */
  QCOLL_ERR_CUDA = -8,
  /** An NCCL call failed. */
  QCOLL_ERR_NCCL = -9,
  /** Memory could not be allocated. */
  QCOLL_ERR_OUT_OF_MEMORY = -10,
  /** Ranks disagree about a call (count, dtype, op, root) or about the
   *  communicator (world size, duplicate rank). */
  QCOLL_ERR_MISMATCH = -11,
  /** The bootstrap could not authenticate or understand a peer. */
  QCOLL_ERR_BOOTSTRAP = -12,
  /** A bug in qcoll. */
  QCOLL_ERR_INTERNAL = -13,
} qcoll_status_t;

/** Short constant description of a status ("invalid argument", ...).
 *  Never NULL, also for unknown values. */
const char *qcoll_status_string(qcoll_status_t status);

/** Version at run time, as QCOLL_VERSION_CODE.  Returns QCOLL_OK, or
 *  QCOLL_ERR_INVALID_ARGUMENT when version is NULL. */
qcoll_status_t qcoll_get_version(int *version);

/** The last error message recorded by the calling thread (any
 *  communicator, or none).  Empty string when there was none. */
const char *qcoll_last_error(void);

/* ------------------------------------------------------------------ */
/* Types                                                               */
/* ------------------------------------------------------------------ */

/** Opaque communicator. */
typedef struct qcoll_comm *qcoll_comm_t;

/** Size of a unique id in bytes. */
#define QCOLL_UNIQUE_ID_BYTES 128

/** The rendezvous ticket of one communicator: plain bytes, so it can be
 *  carried by any channel (a file, an environment variable as hex, a
 *  key-value store).  It holds the root's address and a random secret of
 *  256 bits; whoever holds it can join the job, so treat it as a
 *  credential. */
typedef struct qcoll_unique_id {
  unsigned char bytes[QCOLL_UNIQUE_ID_BYTES];
} qcoll_unique_id_t;

typedef enum qcoll_dtype {
  QCOLL_I8 = 0,
  QCOLL_U8 = 1,
  QCOLL_I32 = 2,
  QCOLL_U32 = 3,
  QCOLL_I64 = 4,
  QCOLL_U64 = 5,
  QCOLL_F16 = 6,  /**< IEEE binary16; reductions accumulate in f32. */
  QCOLL_BF16 = 7, /**< bfloat16; reductions accumulate in f32. */
  QCOLL_F32 = 8,
  QCOLL_F64 = 9,
  QCOLL_DTYPE_COUNT = 10
} qcoll_dtype_t;

/** Reduction operators.  Integers wrap around on overflow (two's
 *  complement); AVG divides the sum by the world size (integers truncate
 *  toward zero; floats divide once, after the sum, in the accumulation
 *  type). */
typedef enum qcoll_op {
  QCOLL_SUM = 0,
  QCOLL_PROD = 1,
  QCOLL_MIN = 2,
  QCOLL_MAX = 3,
  QCOLL_AVG = 4,
  QCOLL_OP_COUNT = 5
} qcoll_op_t;

/** Size in bytes of one element of dtype, or 0 for an invalid dtype. */
size_t qcoll_dtype_size(qcoll_dtype_t dtype);
/** Name of a dtype ("f32"...), or "invalid". */
const char *qcoll_dtype_name(qcoll_dtype_t dtype);
/** Name of an op ("sum"...), or "invalid". */
const char *qcoll_op_name(qcoll_op_t op);

/* ------------------------------------------------------------------ */
/* Communicator configuration                                          */
/* ------------------------------------------------------------------ */

/** Use the CUDA device current at init (if there is a GPU). */
#define QCOLL_DEVICE_CURRENT (-1)
/** Host only: never touch a GPU. */
#define QCOLL_DEVICE_NONE (-2)

/** Per-communicator settings.  Always initialise with qcoll_config_init()
 *  first: it sets `size` so the struct can grow in later versions. */
typedef struct qcoll_config {
  size_t size;         /**< sizeof(qcoll_config_t), set by qcoll_config_init */
  int device;          /**< CUDA device, QCOLL_DEVICE_CURRENT (default) or
                            QCOLL_DEVICE_NONE */
  double timeout_s;    /**< deadline of every wait in seconds, the
                            rendezvous included (each rank tells the root
                            its deadline; the root keeps the smallest); 0 =
                            the QCOLL_TIMEOUT environment variable (default
                            300) */
  const char *host_id; /**< identity of this host; NULL = QCOLL_HOST_ID or
                            the hostname.  Ranks with equal ids share memory */
} qcoll_config_t;

/** Fill config with defaults.  Returns QCOLL_ERR_INVALID_ARGUMENT for NULL. */
qcoll_status_t qcoll_config_init(qcoll_config_t *config);

/* ------------------------------------------------------------------ */
/* Communicator lifecycle                                              */
/* ------------------------------------------------------------------ */

/** Create a new unique id.  This starts a rendezvous service in the calling
 *  process (a background thread listening on a TCP port), which serves one
 *  communicator's initialisation and then exits; the calling process must
 *  therefore live until every rank has called qcoll_comm_init_rank() with
 *  this id.  The address advertised is QCOLL_ROOT_ADDR if set, else this
 *  host's first non-loopback IPv4 address, else 127.0.0.1.  Its deadline
 *  for the ranks to arrive is the smallest timeout the ranks declare
 *  (qcoll_config_t.timeout_s, else their QCOLL_TIMEOUT), counted from the
 *  first rank's arrival, so a missing rank is named before any rank gives
 *  up waiting. */
qcoll_status_t qcoll_get_unique_id(qcoll_unique_id_t *id);

/** Write id as 2*QCOLL_UNIQUE_ID_BYTES lowercase hex digits plus a NUL into
 *  out (which must have room for 2*QCOLL_UNIQUE_ID_BYTES+1 bytes). */
qcoll_status_t qcoll_unique_id_to_hex(const qcoll_unique_id_t *id, char *out);
/** Parse the hex form written by qcoll_unique_id_to_hex().  Input of the
 *  wrong length or with a non-hex digit is QCOLL_ERR_INVALID_ARGUMENT and
 *  leaves *id unchanged. */
qcoll_status_t qcoll_unique_id_from_hex(const char *hex, qcoll_unique_id_t *id);

/** Create this rank's communicator.  Collective over nranks processes that
 *  each call it with the same id, the same nranks and a distinct rank in
 *  [0, nranks).  config may be NULL (defaults).  A wrong world size, a
 *  duplicate rank, a rank out of range or a rank that never arrives makes
 *  every rank that is up fail with a message naming the problem, within the
 *  deadline. */
qcoll_status_t qcoll_comm_init_rank(qcoll_comm_t *comm, int nranks,
                                    const qcoll_unique_id_t *id, int rank,
                                    const qcoll_config_t *config);

/** Create a communicator from the environment set by a launcher:
 *  - qcoll-run: QCOLL_RANK, QCOLL_WORLD_SIZE, QCOLL_UNIQUE_ID (hex);
 *  - torchrun: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT;
 *  - Open MPI: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, ..._LOCAL_RANK;
 *  - Slurm: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID.
 *  Without QCOLL_UNIQUE_ID, rank 0 serves the rendezvous at
 *  QCOLL_ROOT_ADDR / MASTER_ADDR (127.0.0.1 when all ranks share a host)
 *  on port QCOLL_ROOT_PORT, else MASTER_PORT+1, else a port derived from
 *  the job id; the secret is QCOLL_SECRET, else derived from the job's
 *  identifiers (weaker: set QCOLL_SECRET on shared machines). */
qcoll_status_t qcoll_comm_init_env(qcoll_comm_t *comm,
                                   const qcoll_config_t *config);

/** Destroy a communicator: waits (within the deadline) for the other ranks
 *  to reach destroy too, then frees every resource.  Safe on an aborted
 *  communicator.  NULL is accepted and ignored. */
qcoll_status_t qcoll_comm_destroy(qcoll_comm_t comm);

/** Abort a communicator: every wait in progress on it, in any thread,
 *  returns QCOLL_ERR_ABORTED promptly, and every later collective, send,
 *  recv and barrier fails the same way.  The queries (qcoll_comm_rank,
 *  _size, _device, _last_error, _get_async_error) still answer, so the
 *  failure can be logged with the rank that saw it; abort again is
 *  QCOLL_OK.  Peers waiting on this rank see QCOLL_ERR_PEER_FAILURE.  Call
 *  qcoll_comm_destroy() afterwards to free the resources.  Never blocks. */
qcoll_status_t qcoll_comm_abort(qcoll_comm_t comm);

/* The queries below answer on a live, broken or aborted communicator.  A
 * NULL comm is QCOLL_ERR_INVALID_ARGUMENT; a destroyed one (or any pointer
 * that no init returned) is QCOLL_ERR_INVALID_USAGE, as for every call that
 * takes a communicator.  A NULL output pointer is
 * QCOLL_ERR_INVALID_ARGUMENT. */

/** This rank's index in [0, size). */
qcoll_status_t qcoll_comm_rank(qcoll_comm_t comm, int *rank);
/** Number of ranks. */
qcoll_status_t qcoll_comm_size(qcoll_comm_t comm, int *size);
/** The communicator's CUDA device, or QCOLL_DEVICE_NONE for host only. */
qcoll_status_t qcoll_comm_device(qcoll_comm_t comm, int *device);

/** Human-readable reason of the last failure on comm ("" if none).  The
 *  pointer stays valid until the next call on comm.  Never NULL: a NULL or
 *  destroyed comm gives a constant text saying so. */
const char *qcoll_comm_last_error(qcoll_comm_t comm);

/** Error raised by asynchronous work (GPU kernels whose peer never
 *  arrived, ...).  *status is QCOLL_OK when nothing went wrong. */
qcoll_status_t qcoll_comm_get_async_error(qcoll_comm_t comm,
                                          qcoll_status_t *status);

/* ------------------------------------------------------------------ */
/* Buffer registration                                                 */
/* ------------------------------------------------------------------ */
/* A registered GPU buffer is read (and, for all-reduce outputs, written)
 * in place by the peers' kernels: the two-shot IPC all-reduce then copies
 * nothing into its own buffers (peers read registered inputs, and when
 * every rank's output is registered each rank writes its reduced part
 * straight into every rank's output).  The one-shot keeps its copy of the
 * input (reading peers' inputs in place needs one more cross-GPU trip,
 * which costs more than the copy at the sizes it serves), and the push
 * one-shot and quantised all-reduce do not use registrations.
 * What is registered is the whole device allocation that holds the buffer
 * (cudaMalloc, or a caching allocator's segment), so every buffer inside it
 * is served.  Unregistered buffers are staged (copied) as before, and ranks
 * may differ: a rank whose buffer is not registered stages it while the
 * others go on in place, with results bit for bit the same.
 *
 * Registration and deregistration are collective: every rank calls them,
 * in the same order relative to each other and to its collectives, each
 * with its own buffer.  A rank with nothing to register passes buf NULL
 * and bytes 0 (it takes part and gets QCOLL_ERR_INVALID_ARGUMENT; its
 * peers are unaffected).  Every rank takes part in the exchange even when
 * its own buffer is refused, so a refusal never leaves a peer waiting.
 *
 * All-reduces captured into a CUDA graph register their buffers on their
 * own (QCOLL_GRAPH_REGISTER, on by default) when they take the two-shot:
 * at capture time, every rank
 * exchanges its buffers' handles (so every rank must capture the same
 * calls), and every replay then runs in place.  Such registrations last
 * until the communicator is destroyed; an allocation freed and another made
 * at the same address is recognised at the next capture and registered
 * anew.
 *
 * Only the CUDA IPC paths use registrations.  On a host-only communicator,
 * or where the IPC kernels do not serve (ranks on several hosts, NCCL as
 * the engine), registration is a no-op that succeeds. */

/** A registration made by qcoll_comm_register. */
typedef struct qcoll_reg *qcoll_reg_t;

/** Register the device allocation holding [buf, buf + bytes) with comm
 *  (collective).  *handle receives the registration, for
 *  qcoll_comm_deregister.  Registering an allocation again returns a new
 *  handle to the same registration (each must be deregistered).  Errors,
 *  with the reason in qcoll_comm_last_error: QCOLL_ERR_INVALID_ARGUMENT
 *  (buf NULL, bytes 0, handle NULL, not device memory, on another device
 *  than comm's, running past its allocation); QCOLL_ERR_UNSUPPORTED (managed
 *  memory, or memory that cannot be shared with other processes: cuMemCreate,
 *  cudaMallocAsync pools, expandable segments; or every registration slot
 *  taken).  A refused buffer simply stays staged.  Nothing is enqueued.
 *  Do not free the buffer before deregistering it. */
qcoll_status_t qcoll_comm_register(qcoll_comm_t comm, void *buf, size_t bytes,
                                   qcoll_reg_t *handle);

/** Remove a registration (collective; handle NULL on a rank that has none
 *  to remove: it still takes part).  Waits for the device's work to finish
 *  and for every rank to reach the call, then closes the peers' mappings:
 *  when it returns no kernel reads the buffer any more and it may be freed.
 *  A graph captured while the buffer was registered stays valid: its
 *  replays stage the buffer (results are the same).  Frees the handle.
 *  Must not be called while a stream of comm's device is capturing. */
qcoll_status_t qcoll_comm_deregister(qcoll_comm_t comm, qcoll_reg_t handle);

/* ------------------------------------------------------------------ */
/* Collectives                                                         */
/* ------------------------------------------------------------------ */
/* Counts are in elements.  sendbuf == recvbuf means in place.  A count of
 * 0 is valid and does nothing (apart from argument checks).  `stream` is a
 * cudaStream_t for GPU buffers and is ignored for host buffers. */

/** recvbuf[i] = op over ranks of sendbuf[i], on every rank. */
qcoll_status_t qcoll_all_reduce(const void *sendbuf, void *recvbuf,
                                size_t count, qcoll_dtype_t dtype,
                                qcoll_op_t op, qcoll_comm_t comm, void *stream);

/** Like qcoll_all_reduce, but only root's recvbuf receives the result
 *  (recvbuf may be NULL on the other ranks). */
qcoll_status_t qcoll_reduce(const void *sendbuf, void *recvbuf, size_t count,
                            qcoll_dtype_t dtype, qcoll_op_t op, int root,
                            qcoll_comm_t comm, void *stream);

/** Copy root's sendbuf into every rank's recvbuf (sendbuf is read on root
 *  only and may be NULL elsewhere). */
qcoll_status_t qcoll_broadcast(const void *sendbuf, void *recvbuf, size_t count,
                               qcoll_dtype_t dtype, int root, qcoll_comm_t comm,
                               void *stream);

/** recvbuf[r*sendcount + i] = sendbuf of rank r [i]; recvbuf holds
 *  size*sendcount elements.  In place when
 *  sendbuf == recvbuf + rank*sendcount. */
qcoll_status_t qcoll_all_gather(const void *sendbuf, void *recvbuf,
                                size_t sendcount, qcoll_dtype_t dtype,
                                qcoll_comm_t comm, void *stream);

/** recvbuf[i] = op over ranks of sendbuf[rank*recvcount + i]; sendbuf holds
 *  size*recvcount elements.  In place when
 *  recvbuf == sendbuf + rank*recvcount. */
qcoll_status_t qcoll_reduce_scatter(const void *sendbuf, void *recvbuf,
                                    size_t recvcount, qcoll_dtype_t dtype,
                                    qcoll_op_t op, qcoll_comm_t comm,
                                    void *stream);

/** recvbuf[r*count + i] = sendbuf of rank r [rank*count + i]: both buffers
 *  hold size*count elements and must not overlap. */
qcoll_status_t qcoll_all_to_all(const void *sendbuf, void *recvbuf,
                                size_t count, qcoll_dtype_t dtype,
                                qcoll_comm_t comm, void *stream);

/** Send count elements to peer, which must call qcoll_recv with the same
 *  count and dtype.  peer must be another rank: a send or recv to oneself is
 *  QCOLL_ERR_INVALID_ARGUMENT (there is no grouping of calls, so a rank's
 *  send could never be outstanding together with its own recv; copy the
 *  buffer instead).  On the host back end a message that fits the pair's
 *  buffer (QCOLL_P2P_BYTES) returns at once; a larger one streams and
 *  returns when the peer has taken it.  GPU buffers on one host: the same
 *  holds for the work enqueued on `stream` (buffer QCOLL_IPC_P2P_BYTES),
 *  and the n-th send to a peer meets that peer's n-th recv from this rank
 *  in the order the GPU runs them (keep each direction on one stream). */
qcoll_status_t qcoll_send(const void *sendbuf, size_t count,
                          qcoll_dtype_t dtype, int peer, qcoll_comm_t comm,
                          void *stream);

/** Receive count elements from peer. */
qcoll_status_t qcoll_recv(void *recvbuf, size_t count, qcoll_dtype_t dtype,
                          int peer, qcoll_comm_t comm, void *stream);

/** Every rank waits until all ranks have entered the barrier.  With a
 *  non-NULL stream on a GPU communicator the barrier is also ordered on
 *  that stream: work enqueued after it starts only once every rank's
 *  stream has reached it (it can be captured into a CUDA graph, whose
 *  replays then order the streams only).  Either every rank passes a
 *  stream or none does. */
qcoll_status_t qcoll_barrier(qcoll_comm_t comm, void *stream);

/* ------------------------------------------------------------------ */
/* Per-call options                                                    */
/* ------------------------------------------------------------------ */

typedef enum qcoll_algo {
  QCOLL_ALGO_AUTO = 0,    /**< the selection table (QCOLL_ALGO overrides) */
  QCOLL_ALGO_HOST = 1,    /**< host back end (GPU buffers: staged through it) */
  QCOLL_ALGO_ONESHOT = 2, /**< CUDA IPC one-shot (all-reduce only) */
  QCOLL_ALGO_TWOSHOT = 3, /**< CUDA IPC two-shot (all-reduce only) */
  QCOLL_ALGO_NCCL = 4,    /**< delegate to NCCL */
  QCOLL_ALGO_IPC = 5,     /**< CUDA IPC copy/reduce kernels (every collective) */
  QCOLL_ALGO_COUNT = 6
} qcoll_algo_t;

typedef enum qcoll_quant {
  QCOLL_QUANT_DEFAULT = 0, /**< QCOLL_QUANT environment variable (none) */
  QCOLL_QUANT_NONE = 1,
  QCOLL_QUANT_FP8 = 2,
  QCOLL_QUANT_INT8 = 3,
  QCOLL_QUANT_INT6 = 4,
  QCOLL_QUANT_INT4 = 5,
  QCOLL_QUANT_INT3 = 6, /**< 3-bit codes: 7 levels per group of 32 values
                             sharing one f32 scale (16 bytes a group) */
  QCOLL_QUANT_COUNT = 7
} qcoll_quant_t;

/** Name of an algorithm ("auto", "host", "oneshot", ...), or "invalid".
 *  The environment variable QCOLL_ALGO forces one for every GPU collective
 *  it can serve: host, nccl and ipc for all of them, oneshot and twoshot
 *  for all-reduce only (other collectives keep the table's choice then);
 *  the barrier always keeps its own.  The *_ex collectives force one per
 *  call, which wins over QCOLL_ALGO. */
const char *qcoll_algo_name(qcoll_algo_t algo);
/** Name of a quantisation ("default", "none", "fp8", ...), or "invalid". */
const char *qcoll_quant_name(qcoll_quant_t quant);

/** Per-call options of the *_ex collectives.  Every rank taking part in a
 *  call must pass the same options (with QCOLL_CHECK=1 a difference is
 *  QCOLL_ERR_MISMATCH naming both ranks' algorithms); a send and its recv
 *  must force the same algorithm. */
typedef struct qcoll_options {
  size_t size;         /**< sizeof(qcoll_options_t) */
  qcoll_algo_t algo;   /**< QCOLL_ALGO_AUTO by default */
  qcoll_quant_t quant; /**< QCOLL_QUANT_DEFAULT by default; all-reduce only:
                            the other collectives refuse anything but
                            DEFAULT and NONE */
  int quant_rotate;    /**< 1: rotate every group of 32 values (a fixed sign
                            pattern and a 32-point Walsh-Hadamard transform)
                            before it is quantised, and back after the last
                            decode: an outlier no longer sets the scale of
                            the other 31 values.  Measured (docs/results/
                            quant-accuracy.md): INT8 and INT6 3-4x more
                            accurate on data with rare large values, no
                            change on Gaussian data, INT4 0.65-1.03x, FP8
                            and INT3 less accurate.  0 (default): no
                            rotation, or with quant DEFAULT the "+rot"
                            suffix of QCOLL_QUANT ("int8+rot").  Ignored
                            when the call is not quantised.  Options
                            filled for the earlier struct (size without
                            this field) mean 0. */
} qcoll_options_t;

/** Fill options with defaults. */
qcoll_status_t qcoll_options_init(qcoll_options_t *opts);

/** The earlier names of qcoll_options_t (struct tag included) and
 *  qcoll_options_init(). */
#define qcoll_all_reduce_options qcoll_options
typedef qcoll_options_t qcoll_all_reduce_options_t;
qcoll_status_t qcoll_all_reduce_options_init(qcoll_all_reduce_options_t *opts);

/* The collectives above with per-call options (NULL = defaults).  Forcing an
 * algorithm that cannot serve the call (oneshot/twoshot for anything but an
 * all-reduce, nccl where NCCL refuses the ranks or, for send/recv, before a
 * collective has created NCCL's communicator, ipc without CUDA IPC, any GPU
 * algorithm on host buffers) is QCOLL_ERR_UNSUPPORTED with a message saying
 * why, and nothing is enqueued.  The barrier moves no data and takes no
 * options. */
qcoll_status_t qcoll_all_reduce_ex(const void *sendbuf, void *recvbuf,
                                   size_t count, qcoll_dtype_t dtype,
                                   qcoll_op_t op, qcoll_comm_t comm,
                                   void *stream, const qcoll_options_t *opts);
qcoll_status_t qcoll_reduce_ex(const void *sendbuf, void *recvbuf,
                               size_t count, qcoll_dtype_t dtype,
                               qcoll_op_t op, int root, qcoll_comm_t comm,
                               void *stream, const qcoll_options_t *opts);
qcoll_status_t qcoll_broadcast_ex(const void *sendbuf, void *recvbuf,
                                  size_t count, qcoll_dtype_t dtype, int root,
                                  qcoll_comm_t comm, void *stream,
                                  const qcoll_options_t *opts);
qcoll_status_t qcoll_all_gather_ex(const void *sendbuf, void *recvbuf,
                                   size_t sendcount, qcoll_dtype_t dtype,
                                   qcoll_comm_t comm, void *stream,
                                   const qcoll_options_t *opts);
qcoll_status_t qcoll_reduce_scatter_ex(const void *sendbuf, void *recvbuf,
                                       size_t recvcount, qcoll_dtype_t dtype,
                                       qcoll_op_t op, qcoll_comm_t comm,
                                       void *stream,
                                       const qcoll_options_t *opts);
qcoll_status_t qcoll_all_to_all_ex(const void *sendbuf, void *recvbuf,
                                   size_t count, qcoll_dtype_t dtype,
                                   qcoll_comm_t comm, void *stream,
                                   const qcoll_options_t *opts);
qcoll_status_t qcoll_send_ex(const void *sendbuf, size_t count,
                             qcoll_dtype_t dtype, int peer, qcoll_comm_t comm,
                             void *stream, const qcoll_options_t *opts);
qcoll_status_t qcoll_recv_ex(void *recvbuf, size_t count, qcoll_dtype_t dtype,
                             int peer, qcoll_comm_t comm, void *stream,
                             const qcoll_options_t *opts);

/* ------------------------------------------------------------------ */
/* Configuration table                                                 */
/* ------------------------------------------------------------------ */

/** Describe the i-th QCOLL_* environment variable: its name, default and a
 *  one-line description.  Returns QCOLL_ERR_INVALID_ARGUMENT once i is past
 *  the end.  Used by qcoll-info. */
qcoll_status_t qcoll_env_describe(int i, const char **name,
                                  const char **default_value, const char **doc);

/** Write the selection table (which path serves which call, first match
 *  wins, with the thresholds in force) as text into buf.  *needed (if not
 *  NULL) gets the bytes required including the NUL.  A size query (buf
 *  NULL or len 0, needed not NULL) writes nothing and returns QCOLL_OK; a
 *  buffer too small is QCOLL_ERR_INVALID_ARGUMENT (*needed still set), as
 *  is a call with neither a buffer nor needed.  Used by qcoll-info. */
qcoll_status_t qcoll_selection_table_format(char *buf, size_t len,
                                            size_t *needed);

/** Write what this process can use (the device runtime and how many CUDA
 *  devices it sees; whether NCCL loaded, which version and from where, or
 *  why not) as text into buf.  Same buffer rules as
 *  qcoll_selection_table_format().  Used by qcoll-info. */
qcoll_status_t qcoll_backends_describe(char *buf, size_t len, size_t *needed);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* QCOLL_H */
