// The compiled half of qcoll.torch: a c10d::Backend named "qcoll" over the
// C library, and QuickAllReduce's all-reduce as the custom op
// qcoll::quick_all_reduce (with a meta kernel, so torch.compile can trace it).
//
// The library.  Nothing here links libqcoll: the Python package has already
// loaded it (it knows where it lives), and bind_library(path) dlopens that
// same file, which returns the instance already in the process, and takes
// every function of include/qcoll.h from it.  Communicators made through the
// Python binding (QuickAllReduce's) are therefore usable here as handles.
//
// Placement (as in the Python backend).  Every op runs on the device of its
// tensors: one qcoll communicator per device (the host, or a CUDA index),
// created by the first op on that device, rank 0's unique id passed through
// the group's store under a key naming the n-th communicator of its kind.
// The barrier runs on the bound device (init_process_group's device_id),
// else the first device the group has seen, else the host.
//
// Streams.  An op of more than QCOLL_TORCH_INLINE_BYTES (default 1 MiB) of
// tensors goes to an internal stream of the tensors' device, which first
// waits for the caller's current stream of that device, so that it overlaps
// the caller's later compute (DDP's buckets); outside graph capture its
// tensors are recorded on the internal stream, so the caching allocator
// does not reuse their memory while the op runs.  A smaller op runs on the
// caller's current stream itself: its time is the host's and there is no
// compute worth overlapping, while the start event, the internal stream's
// wait and the allocator's bookkeeping would cost more host time than the
// collective.  Either way the work object holds an event recorded after the
// op (for an inline op, recorded only when first needed: by isCompleted, or
// by wait() from another stream), and wait() makes the caller's current
// stream wait on it (nothing to do when that is the op's stream; the host
// blocks only for barrier).
// Host ops are synchronous and their work objects complete at once.
//
// Errors.  A failed call throws with the library's message: ValueError for
// QCOLL_ERR_INVALID_ARGUMENT, NotImplementedError for
// QCOLL_ERR_UNSUPPORTED, RuntimeError for the rest, each naming the status.
// Bad input found here is a ValueError and enqueues nothing.

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <torch/extension.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#ifdef QCOLL_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

#include "qcoll.h"

namespace qcoll_torch {

// ---- the library's functions ---------------------------------------------------

#define QCOLL_TORCH_FUNCTIONS(X)                                                  \
  X(status_string) X(last_error) X(comm_last_error) X(config_init)                \
  X(get_unique_id) X(comm_init_rank) X(comm_destroy) X(comm_abort)                \
  X(all_reduce) X(all_reduce_ex) X(reduce) X(broadcast) X(all_gather)             \
  X(reduce_scatter) X(all_to_all) X(send) X(recv) X(barrier) X(options_init)

struct Api {
#define QCOLL_TORCH_FIELD(name) decltype(&qcoll_##name) name = nullptr;
  QCOLL_TORCH_FUNCTIONS(QCOLL_TORCH_FIELD)
#undef QCOLL_TORCH_FIELD
};

Api api;
std::string api_path;

void bind_library(const std::string& path) {
  // Local: every function is taken from this handle, and nothing else in the
  // process should resolve its symbols against libqcoll or what it links.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  TORCH_CHECK(handle != nullptr, "qcoll: cannot open ", path, ": ", dlerror());
  Api bound;
#define QCOLL_TORCH_BIND(name)                                                        \
  bound.name = reinterpret_cast<decltype(&qcoll_##name)>(dlsym(handle, "qcoll_" #name)); \
  TORCH_CHECK(bound.name != nullptr, "qcoll: ", path, " has no qcoll_" #name,         \
              ": it was built from older sources; rebuild libqcoll");
  QCOLL_TORCH_FUNCTIONS(QCOLL_TORCH_BIND)
#undef QCOLL_TORCH_BIND
  api = bound;
  api_path = path;
}

void require_library() {
  TORCH_CHECK(api.all_reduce != nullptr,
              "qcoll: the extension is not bound to libqcoll (call bind_library first)");
}

// ---- errors -------------------------------------------------------------------------

[[noreturn]] void fail(qcoll_status_t status, qcoll_comm_t comm, const char* what) {
  const char* message = api.last_error();
  if ((message == nullptr || *message == '\0') && comm != nullptr) {
    message = api.comm_last_error(comm);
  }
  const char* name = api.status_string(status);
  std::string text = std::string("qcoll ") + what + ": " +
                     (message && *message ? message : name) + " (" + name + ")";
  if (status == QCOLL_ERR_INVALID_ARGUMENT) {
    TORCH_CHECK_VALUE(false, text);
  }
  if (status == QCOLL_ERR_UNSUPPORTED) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, text);
  }
  TORCH_CHECK(false, text);
}

inline void check(qcoll_status_t status, qcoll_comm_t comm, const char* what) {
  if (status != QCOLL_OK) {
    fail(status, comm, what);
  }
}

// ---- element types and ops -------------------------------------------------------

// The qcoll dtype of a scalar type, or -1 when qcoll cannot reduce it.
int qcoll_dtype_of(at::ScalarType t) {
  switch (t) {
    case at::kChar: return QCOLL_I8;
    case at::kByte: return QCOLL_U8;
    case at::kInt: return QCOLL_I32;
    case at::kUInt32: return QCOLL_U32;
    case at::kLong: return QCOLL_I64;
    case at::kUInt64: return QCOLL_U64;
    case at::kHalf: return QCOLL_F16;
    case at::kBFloat16: return QCOLL_BF16;
    case at::kFloat: return QCOLL_F32;
    case at::kDouble: return QCOLL_F64;
    default: return -1;
  }
}

// A tensor as the library sees it: elements of a reducible type, or bytes.
struct Span {
  void* ptr;
  size_t count;
  qcoll_dtype_t dtype;
};

Span reduce_span(const char* what, const at::Tensor& t) {
  int d = qcoll_dtype_of(t.scalar_type());
  TORCH_CHECK_VALUE(d >= 0, "qcoll backend ", what, ": dtype ", t.scalar_type(),
                    " cannot be reduced (qcoll reduces int8, uint8, int32, uint32, int64, "
                    "uint64, float16, bfloat16, float32, float64)");
  return {t.data_ptr(), static_cast<size_t>(t.numel()), static_cast<qcoll_dtype_t>(d)};
}

// Collectives that move data without reducing take any type, as bytes.
Span move_span(const at::Tensor& t) {
  int d = qcoll_dtype_of(t.scalar_type());
  if (d >= 0) {
    return {t.data_ptr(), static_cast<size_t>(t.numel()), static_cast<qcoll_dtype_t>(d)};
  }
  return {t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size(), QCOLL_U8};
}

qcoll_op_t qcoll_op_of(const c10d::ReduceOp& op) {
  switch (static_cast<c10d::ReduceOp::RedOpType>(op)) {
    case c10d::ReduceOp::SUM: return QCOLL_SUM;
    case c10d::ReduceOp::PRODUCT: return QCOLL_PROD;
    case c10d::ReduceOp::MIN: return QCOLL_MIN;
    case c10d::ReduceOp::MAX: return QCOLL_MAX;
    case c10d::ReduceOp::AVG: return QCOLL_AVG;
    default:
      TORCH_CHECK_NOT_IMPLEMENTED(false, "qcoll backend: reduce op ",
                                  static_cast<int>(static_cast<c10d::ReduceOp::RedOpType>(op)),
                                  " is not supported (SUM, PRODUCT, MIN, MAX, AVG are)");
  }
}

void check_tensors(const char* what, const std::vector<at::Tensor>& tensors) {
  for (const auto& t : tensors) {
    TORCH_CHECK_VALUE(t.layout() == at::kStrided, "qcoll backend ", what,
                      ": tensors must be dense, got layout ", t.layout());
    TORCH_CHECK_VALUE(t.is_contiguous(), "qcoll backend ", what,
                      ": tensors must be contiguous (got shape ", t.sizes(), ", strides ",
                      t.strides(), ")");
  }
}

at::Device device_of(const char* what, const std::vector<at::Tensor>& tensors) {
  TORCH_CHECK_VALUE(!tensors.empty(), "qcoll backend ", what, ": no tensors");
  at::Device device = tensors[0].device();
  for (const auto& t : tensors) {
    TORCH_CHECK_VALUE(t.device() == device, "qcoll backend ", what,
                      ": all tensors of one op must be on one device, got ", device, " and ",
                      t.device());
  }
  TORCH_CHECK_VALUE(device.is_cpu() || device.is_cuda(), "qcoll backend ", what,
                    ": tensors on ", device, " are not supported (cpu, cuda)");
#ifndef QCOLL_TORCH_CUDA
  TORCH_CHECK_NOT_IMPLEMENTED(device.is_cpu(), "qcoll backend ", what,
                              ": this build of the extension has no CUDA support");
#endif
  return device;
}

void check_blocks(const char* what, const at::Tensor& one, const std::vector<at::Tensor>& blocks,
                  int size) {
  TORCH_CHECK_VALUE(static_cast<int>(blocks.size()) == size, "qcoll backend ", what, ": needs ",
                    size, " tensors, got ", blocks.size());
  for (const auto& b : blocks) {
    TORCH_CHECK_VALUE(b.numel() == one.numel() && b.scalar_type() == one.scalar_type(),
                      "qcoll backend ", what, ": every tensor must match the ",
                      one.scalar_type(), " tensor of ", one.numel(), " elements, got ",
                      b.scalar_type(), " with ", b.numel());
  }
}

std::vector<at::Tensor> joined(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  std::vector<at::Tensor> all = a;
  all.insert(all.end(), b.begin(), b.end());
  return all;
}

// ---- CUDA events --------------------------------------------------------------------

#ifdef QCOLL_TORCH_CUDA
void cuda_check(cudaError_t err, const char* what) {
  TORCH_CHECK(err == cudaSuccess, "qcoll backend: ", what, ": ", cudaGetErrorString(err));
}

// Events without timing, reused: creating one per op would cost as much as
// the op's own host time.  One free list per device, since an event belongs
// to the device that was current when it was created and can be recorded
// only on that device's streams.
class EventPool {
 public:
  // An event of `device`; the caller has made `device` current.
  cudaEvent_t take(c10::DeviceIndex device) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::vector<cudaEvent_t>& free = free_[device];
      if (!free.empty()) {
        cudaEvent_t e = free.back();
        free.pop_back();
        return e;
      }
    }
    cudaEvent_t e;
    cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    return e;
  }
  void give(c10::DeviceIndex device, cudaEvent_t e) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_[device].push_back(e);
  }

 private:
  std::mutex mutex_;
  std::map<c10::DeviceIndex, std::vector<cudaEvent_t>> free_;
};

EventPool& event_pool() {
  static EventPool* pool = new EventPool();  // outlives every work object
  return *pool;
}

bool is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cuda_check(cudaStreamIsCapturing(stream, &status), "cudaStreamIsCapturing");
  return status != cudaStreamCaptureStatusNone;
}
#endif

// ---- work objects ----------------------------------------------------------------------

class QcollWork : public c10d::Work {
 public:
  QcollWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, at::Device device)
      : c10d::Work(rank, type), outputs_(std::move(outputs)), device_(device) {}

  ~QcollWork() override {
#ifdef QCOLL_TORCH_CUDA
    if (event_ != nullptr) {
      event_pool().give(device_.index(), event_);
    }
#endif
  }

#ifdef QCOLL_TORCH_CUDA
  // The op was enqueued on `stream`.  `event`, recorded after it there, may
  // be nullptr: it is then recorded when first needed (done_event), which
  // saves a record on every inline op whose result stays on its stream.
  void set_cuda(cudaEvent_t event, c10::cuda::CUDAStream stream, bool blocking) {
    event_ = event;
    stream_ = stream;
    blocking_ = blocking;
  }
#endif

  bool isCompleted() override {
#ifdef QCOLL_TORCH_CUDA
    if (stream_) {
      return cudaEventQuery(done_event()) == cudaSuccess;
    }
#endif
    return true;
  }

  bool isSuccess() const override { return true; }

  // The caller's current stream of the op's device waits for the op; a
  // barrier blocks the host until it completes.
  bool wait(std::chrono::milliseconds /*timeout*/) override {
#ifdef QCOLL_TORCH_CUDA
    if (stream_) {
      if (blocking_) {
        cuda_check(cudaEventSynchronize(done_event()), "cudaEventSynchronize");
      } else {
        cudaStream_t caller = c10::cuda::getCurrentCUDAStream(device_.index()).stream();
        // On the op's own stream the order is already the stream's.
        if (caller != stream_->stream()) {
          cuda_check(cudaStreamWaitEvent(caller, done_event(), 0), "cudaStreamWaitEvent");
        }
      }
    }
#endif
    return true;
  }

  void synchronize() override { wait(kNoTimeout); }

  std::vector<at::Tensor> result() override { return outputs_; }

  // A future holding the outputs, completed on the op's stream so that
  // whoever waits on it (DDP's reducer does) is ordered after the op.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    if (!future_) {
      auto type = c10::ListType::create(c10::TensorType::get());
#ifdef QCOLL_TORCH_CUDA
      if (stream_) {
        future_ = c10::make_intrusive<c10::ivalue::Future>(type, std::vector<c10::Device>{device_});
        c10::cuda::CUDAStreamGuard guard(*stream_);
        future_->markCompleted(c10::IValue(outputs_));
        return future_;
      }
#endif
      future_ = c10::make_intrusive<c10::ivalue::Future>(type);
      future_->markCompleted(c10::IValue(outputs_));
    }
    return future_;
  }

 private:
#ifdef QCOLL_TORCH_CUDA
  // The event that completes with the op.  Recorded late, it also waits for
  // what the op's stream received after the op: later, never earlier, so
  // every use above stays correct (a wait may last longer, no less).
  cudaEvent_t done_event() {
    if (event_ == nullptr) {
      c10::cuda::CUDAGuard device_guard(device_.index());
      event_ = event_pool().take(device_.index());
      cuda_check(cudaEventRecord(event_, stream_->stream()), "cudaEventRecord");
    }
    return event_;
  }
#endif

  std::vector<at::Tensor> outputs_;
  at::Device device_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
#ifdef QCOLL_TORCH_CUDA
  cudaEvent_t event_ = nullptr;
  std::optional<c10::cuda::CUDAStream> stream_;  // set for CUDA ops (CPU work touches no GPU)
  bool blocking_ = false;
#endif
};

// ---- the backend -----------------------------------------------------------------------

size_t tensor_bytes(const std::vector<at::Tensor>& tensors) {
  size_t bytes = 0;
  for (const auto& t : tensors) {
    bytes += t.numel() * t.element_size();
  }
  return bytes;
}

// Ops of at most this many bytes run on the caller's stream (see Streams
// above): QCOLL_TORCH_INLINE_BYTES, read once; 0 sends every op to the
// internal stream.
size_t inline_bytes() {
  static const size_t bytes = [] {
    const char* v = std::getenv("QCOLL_TORCH_INLINE_BYTES");
    char* end = nullptr;
    unsigned long long n = v && *v ? std::strtoull(v, &end, 10) : 0;
    return v && *v && end && *end == '\0' ? static_cast<size_t>(n) : size_t{1} << 20;
  }();
  return bytes;
}

class QcollBackend : public c10d::Backend {
 public:
  QcollBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
               double timeout_s, int64_t bound_device)
      : c10d::Backend(rank, size), store_(store), timeout_s_(timeout_s) {
    require_library();
    if (bound_device >= 0) {
      bound_ = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(bound_device));
    }
  }

  ~QcollBackend() override = default;  // communicators are freed by shutdown()

  const std::string getBackendName() const override { return "qcoll"; }

  // -- communicators and streams ---------------------------------------------------

  // -1 stands for the host communicator, n >= 0 for CUDA device n.
  static int key_of(const at::Device& d) { return d.is_cpu() ? -1 : d.index(); }

  qcoll_comm_t comm_for(const at::Device& device) {
    std::lock_guard<std::mutex> lock(mutex_);
    int key = key_of(device);
    auto it = comms_.find(key);
    if (it != comms_.end()) {
      return it->second;
    }
    return create_comm(key);
  }

  // Collective: every rank creates its n-th communicator of a kind (host or
  // CUDA) at the same point, rank 0's unique id passed through the store.
  qcoll_comm_t create_comm(int key) {
    const char* kind = key < 0 ? "cpu" : "cuda";
    int& created = key < 0 ? created_cpu_ : created_cuda_;
    std::string store_key = std::string("qcoll/unique_id/") + kind + "/" + std::to_string(created);
    created++;
    qcoll_unique_id_t id;
    if (getRank() == 0) {
      check(api.get_unique_id(&id), nullptr, "get_unique_id");
      store_->set(store_key, std::vector<uint8_t>(id.bytes, id.bytes + QCOLL_UNIQUE_ID_BYTES));
    } else {
      std::vector<uint8_t> raw = store_->get(store_key);
      TORCH_CHECK(raw.size() == QCOLL_UNIQUE_ID_BYTES, "qcoll backend: the store holds ",
                  raw.size(), " bytes under ", store_key, ", not a unique id");
      std::memcpy(id.bytes, raw.data(), QCOLL_UNIQUE_ID_BYTES);
    }
    qcoll_config_t config;
    check(api.config_init(&config), nullptr, "config_init");
    config.device = key < 0 ? QCOLL_DEVICE_NONE : key;
    config.timeout_s = timeout_s_;
    qcoll_comm_t comm = nullptr;
    check(api.comm_init_rank(&comm, getSize(), &id, getRank(), &config), nullptr,
          "comm_init_rank");
    comms_[key] = comm;
    order_.push_back(key);
    return comm;
  }

  // -- running an op -------------------------------------------------------------------

  // Run body(comm, stream) on `device` and return its work object; stream
  // is the op's CUDA stream (the caller's or the internal one, see Streams
  // above), nullptr on the host.
  template <typename Body>
  c10::intrusive_ptr<c10d::Work> run(c10d::OpType type, const std::vector<at::Tensor>& tensors,
                                     std::vector<at::Tensor> outputs, at::Device device,
                                     Body&& body, bool blocking = false) {
    if (!seen_) {
      seen_ = device;
    }
    qcoll_comm_t comm = comm_for(device);
    auto work = c10::make_intrusive<QcollWork>(getRank(), type, std::move(outputs), device);
    if (device.is_cpu()) {
      body(comm, nullptr);
      return work;
    }
#ifdef QCOLL_TORCH_CUDA
    c10::DeviceIndex index = device.index();
    c10::cuda::CUDAGuard device_guard(index);
    c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(index);
    // Small ops on the caller's stream, larger ones on the internal one
    // (see Streams above).
    const bool inline_op = tensor_bytes(tensors) <= inline_bytes();
    c10::cuda::CUDAStream op_stream = inline_op ? caller : stream_for(index);
    if (!inline_op) {
      // The internal stream starts after what the caller enqueued so far.
      cudaEvent_t start = event_pool().take(index);
      cuda_check(cudaEventRecord(start, caller.stream()), "cudaEventRecord");
      cuda_check(cudaStreamWaitEvent(op_stream.stream(), start, 0), "cudaStreamWaitEvent");
      event_pool().give(index, start);  // the wait is enqueued: the event may be recorded again
    }
    {
      c10::cuda::CUDAStreamGuard stream_guard(op_stream);
      body(comm, op_stream.stream());
    }
    if (!inline_op && !is_capturing(caller.stream())) {
      for (const auto& t : tensors) {
        c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), op_stream);
      }
    }
    // An inline op's event is recorded only if the work object needs it
    // (another stream waits, isCompleted): DDP and plain calls do not.
    cudaEvent_t done = nullptr;
    if (!inline_op || blocking) {
      done = event_pool().take(index);
      cuda_check(cudaEventRecord(done, op_stream.stream()), "cudaEventRecord");
    }
    work->set_cuda(done, op_stream, blocking);
#endif
    return work;
  }

#ifdef QCOLL_TORCH_CUDA
  c10::cuda::CUDAStream stream_for(c10::DeviceIndex index) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = streams_.find(index);
    if (it != streams_.end()) {
      return it->second;
    }
    auto stream = c10::cuda::getStreamFromPool(false, index);
    streams_.emplace(index, stream);
    return stream;
  }
#endif

  // -- collectives -----------------------------------------------------------------------

  c10::intrusive_ptr<c10d::Work> allreduce_each(const char* what, std::vector<at::Tensor>& tensors,
                                                const c10d::ReduceOp& reduce_op) {
    check_tensors(what, tensors);
    at::Device device = device_of(what, tensors);
    qcoll_op_t op = qcoll_op_of(reduce_op);
    std::vector<Span> spans;
    for (const auto& t : tensors) {
      spans.push_back(reduce_span(what, t));
    }
    return run(c10d::OpType::ALLREDUCE, tensors, tensors, device,
               [&](qcoll_comm_t comm, void* stream) {
                 for (const Span& s : spans) {
                   check(api.all_reduce(s.ptr, s.ptr, s.count, s.dtype, op, comm, stream), comm,
                         what);
                 }
               });
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    return allreduce_each("allreduce", tensors, opts.reduceOp);
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override {
    return allreduce_each("allreduce_coalesced", tensors, opts.reduceOp);
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    const char* what = "broadcast";
    check_tensors(what, tensors);
    at::Device device = device_of(what, tensors);
    int root = static_cast<int>(opts.rootRank);
    return run(c10d::OpType::BROADCAST, tensors, tensors, device,
               [&](qcoll_comm_t comm, void* stream) {
                 for (const auto& t : tensors) {
                   Span s = move_span(t);
                   check(api.broadcast(s.ptr, s.ptr, s.count, s.dtype, root, comm, stream), comm,
                         what);
                 }
               });
  }

  // Root reduces in place; the other ranks' tensors are left alone.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override {
    const char* what = "reduce";
    check_tensors(what, tensors);
    at::Device device = device_of(what, tensors);
    qcoll_op_t op = qcoll_op_of(opts.reduceOp);
    int root = static_cast<int>(opts.rootRank);
    bool is_root = root == getRank();
    return run(c10d::OpType::REDUCE, tensors, tensors, device,
               [&](qcoll_comm_t comm, void* stream) {
                 for (const auto& t : tensors) {
                   Span s = reduce_span(what, t);
                   check(api.reduce(s.ptr, is_root ? s.ptr : nullptr, s.count, s.dtype, op, root,
                                    comm, stream),
                         comm, what);
                 }
               });
  }

  // outputs[k][r] = inputs[k] of rank r.
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions&) override {
    const char* what = "allgather";
    std::vector<at::Tensor> everything = inputs;
    std::vector<at::Tensor> flat_outputs;
    TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "qcoll backend allgather: ",
                      outputs.size(), " output lists for ", inputs.size(), " inputs");
    for (size_t k = 0; k < inputs.size(); k++) {
      check_blocks(what, inputs[k], outputs[k], getSize());
      everything.insert(everything.end(), outputs[k].begin(), outputs[k].end());
      flat_outputs.insert(flat_outputs.end(), outputs[k].begin(), outputs[k].end());
    }
    check_tensors(what, everything);
    at::Device device = device_of(what, everything);
    return run(c10d::OpType::ALLGATHER, everything, flat_outputs, device,
               [&](qcoll_comm_t comm, void* stream) {
                 for (size_t k = 0; k < inputs.size(); k++) {
                   const at::Tensor& inp = inputs[k];
                   at::Tensor flat = at::empty({getSize() * inp.numel()}, inp.options());
                   Span s = move_span(inp);
                   check(api.all_gather(s.ptr, flat.data_ptr(), s.count, s.dtype, comm, stream),
                         comm, what);
                   for (int r = 0; r < getSize(); r++) {
                     outputs[k][r].copy_(
                         flat.narrow(0, r * inp.numel(), inp.numel()).view_as(outputs[k][r]));
                   }
                 }
               });
  }

  // Checks tensor pairs (small[k], big[k]) where big[k] holds size x the
  // elements of small[k], of the same type; returns their device.
  at::Device check_pairs(const char* what, const std::vector<at::Tensor>& small,
                         const char* small_name, const std::vector<at::Tensor>& big,
                         const char* big_name) {
    TORCH_CHECK_VALUE(small.size() == big.size(), "qcoll backend ", what, ": ", big.size(), " ",
                      big_name, "s for ", small.size(), " ", small_name, "s");
    std::vector<at::Tensor> everything = joined(big, small);
    check_tensors(what, everything);
    at::Device device = device_of(what, everything);
    for (size_t k = 0; k < small.size(); k++) {
      TORCH_CHECK_VALUE(big[k].numel() == small[k].numel() * getSize() &&
                            big[k].scalar_type() == small[k].scalar_type(),
                        "qcoll backend ", what, ": the ", big_name, " must hold ", getSize(),
                        " x the ", small_name, "'s ", small[k].numel(), " ",
                        small[k].scalar_type(), " elements, got ", big[k].numel(), " ",
                        big[k].scalar_type());
    }
    return device;
  }

  c10::intrusive_ptr<c10d::Work> gather_into(const char* what, std::vector<at::Tensor>& outputs,
                                             std::vector<at::Tensor>& inputs) {
    std::vector<at::Tensor> everything = joined(outputs, inputs);
    at::Device device = check_pairs(what, inputs, "input", outputs, "output");
    return run(c10d::OpType::_ALLGATHER_BASE, everything, outputs, device,
               [&](qcoll_comm_t comm, void* stream) {
                 for (size_t k = 0; k < inputs.size(); k++) {
                   Span s = move_span(inputs[k]);
                   check(api.all_gather(s.ptr, outputs[k].data_ptr(), s.count, s.dtype, comm,
                                        stream),
                         comm, what);
                 }
               });
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions&) override {
    std::vector<at::Tensor> outs{output}, ins{input};
    return gather_into("all_gather_into_tensor", outs, ins);
  }

  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions&) override {
    return gather_into("allgather_into_tensor_coalesced", outputs, inputs);
  }

  // outputs[k] = op over ranks of inputs[k][rank].
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    const char* what = "reduce_scatter";
    TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "qcoll backend reduce_scatter: ",
                      inputs.size(), " input lists for ", outputs.size(), " outputs");
    std::vector<at::Tensor> everything = outputs;
    for (size_t k = 0; k < outputs.size(); k++) {
      check_blocks(what, outputs[k], inputs[k], getSize());
      everything.insert(everything.end(), inputs[k].begin(), inputs[k].end());
    }
    check_tensors(what, everything);
    at::Device device = device_of(what, everything);
    qcoll_op_t op = qcoll_op_of(opts.reduceOp);
    return run(c10d::OpType::REDUCE_SCATTER, everything, outputs, device,
               [&](qcoll_comm_t comm, void* stream) {
                 for (size_t k = 0; k < outputs.size(); k++) {
                   std::vector<at::Tensor> parts;
                   for (const auto& i : inputs[k]) {
                     parts.push_back(i.reshape({-1}));
                   }
                   at::Tensor flat = at::cat(parts);
                   Span s = reduce_span(what, outputs[k]);
                   check(api.reduce_scatter(flat.data_ptr(), s.ptr, s.count, s.dtype, op, comm,
                                            stream),
                         comm, what);
                 }
               });
  }

  c10::intrusive_ptr<c10d::Work> scatter_from(const char* what, std::vector<at::Tensor>& outputs,
                                              std::vector<at::Tensor>& inputs,
                                              const c10d::ReduceOp& reduce_op) {
    std::vector<at::Tensor> everything = joined(outputs, inputs);
    at::Device device = check_pairs(what, outputs, "output", inputs, "input");
    qcoll_op_t op = qcoll_op_of(reduce_op);
    return run(c10d::OpType::_REDUCE_SCATTER_BASE, everything, outputs, device,
               [&](qcoll_comm_t comm, void* stream) {
                 for (size_t k = 0; k < inputs.size(); k++) {
                   Span s = reduce_span(what, outputs[k]);
                   check(api.reduce_scatter(inputs[k].data_ptr(), s.ptr, s.count, s.dtype, op,
                                            comm, stream),
                         comm, what);
                 }
               });
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override {
    std::vector<at::Tensor> outs{output}, ins{input};
    return scatter_from("reduce_scatter_tensor", outs, ins, opts.reduceOp);
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    return scatter_from("reduce_scatter_tensor_coalesced", outputs, inputs, opts.reduceOp);
  }

  // all_to_all_single: equal blocks without split sizes, else blocks of the
  // given numbers of rows (first dimension).
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& out_splits,
                                               std::vector<int64_t>& in_splits,
                                               const c10d::AllToAllOptions&) override {
    const char* what = "all_to_all_single";
    std::vector<at::Tensor> both{output, input};
    check_tensors(what, both);
    at::Device device = device_of(what, both);
    std::vector<at::Tensor> sends = split(what, input, in_splits);
    std::vector<at::Tensor> recvs = split(what, output, out_splits);
    bool even = out_splits.empty() && in_splits.empty();
    return run(c10d::OpType::ALLTOALL_BASE, both, {output}, device,
               [&](qcoll_comm_t comm, void* stream) {
                 if (even) {
                   TORCH_CHECK_VALUE(input.numel() % getSize() == 0 &&
                                         output.numel() == input.numel(),
                                     "qcoll backend ", what, ": input of ", input.numel(),
                                     " and output of ", output.numel(),
                                     " elements do not form ", getSize(), " equal blocks");
                   Span s = move_span(input);
                   size_t bytes_per = s.count / getSize();
                   check(api.all_to_all(s.ptr, output.data_ptr(), bytes_per, s.dtype, comm,
                                        stream),
                         comm, what);
                   return;
                 }
                 exchange(comm, stream, sends, recvs);
               });
  }

  // outputs[r] = inputs[rank] of rank r (sizes may differ).
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions&) override {
    const char* what = "alltoall";
    std::vector<at::Tensor> everything = joined(outputs, inputs);
    check_tensors(what, everything);
    TORCH_CHECK_VALUE(static_cast<int>(outputs.size()) == getSize() &&
                          static_cast<int>(inputs.size()) == getSize(),
                      "qcoll backend alltoall: needs ", getSize(), " input and output tensors, got ",
                      inputs.size(), " and ", outputs.size());
    at::Device device = device_of(what, everything);
    std::vector<at::Tensor> sends, recvs;
    for (int r = 0; r < getSize(); r++) {
      sends.push_back(inputs[r].reshape({-1}));
      recvs.push_back(outputs[r].view({-1}));
    }
    return run(c10d::OpType::ALLTOALL, everything, outputs, device,
               [&](qcoll_comm_t comm, void* stream) { exchange(comm, stream, sends, recvs); });
  }

  // t's storage cut into size blocks of `rows` rows each (equal blocks when
  // rows is empty).
  std::vector<at::Tensor> split(const char* what, const at::Tensor& t,
                                const std::vector<int64_t>& rows) {
    at::Tensor flat = t.view({-1});
    int n = getSize();
    std::vector<at::Tensor> out;
    if (rows.empty()) {
      int64_t per = flat.numel() / n;
      for (int r = 0; r < n; r++) {
        out.push_back(flat.narrow(0, r * per, per));
      }
      return out;
    }
    int64_t per_row = (t.dim() && t.size(0)) ? t.numel() / t.size(0) : 1;
    int64_t total = 0;
    for (int64_t r : rows) {
      total += r;
    }
    TORCH_CHECK_VALUE(static_cast<int>(rows.size()) == n && total * per_row == t.numel(),
                      "qcoll backend ", what, ": split sizes ", rows,
                      " do not cut a tensor of shape ", t.sizes(), " into ", n, " blocks");
    int64_t start = 0;
    for (int64_t r : rows) {
      out.push_back(flat.narrow(0, start, r * per_row));
      start += r * per_row;
    }
    return out;
  }

  // recvs[r] = sends[rank] of rank r, for blocks of any sizes: every block is
  // padded to the largest block of the whole job (agreed on by an all-reduce
  // of the local maxima), exchanged with one all-to-all, then cut back.
  void exchange(qcoll_comm_t comm, void* stream, const std::vector<at::Tensor>& sends,
                const std::vector<at::Tensor>& recvs) {
    const char* what = "alltoall";
    int n = getSize();
    int64_t first = sends[0].numel();
    bool equal = true;
    int64_t local = 0;
    for (const auto* list : {&sends, &recvs}) {
      for (const auto& t : *list) {
        equal = equal && t.numel() == first;
        local = std::max<int64_t>(local, t.numel());
      }
    }
    at::Tensor send, recv;
    int64_t width = first;
    if (equal) {
      send = at::cat(sends);
      recv = at::empty_like(send);
    } else {
      at::Tensor widest = at::full({1}, local, sends[0].options().dtype(at::kLong));
      check(api.all_reduce(widest.data_ptr(), widest.data_ptr(), 1, QCOLL_I64, QCOLL_MAX, comm,
                           stream),
            comm, what);
      width = widest.item<int64_t>();
      send = at::zeros({n, width}, sends[0].options());
      for (int r = 0; r < n; r++) {
        send[r].narrow(0, 0, sends[r].numel()).copy_(sends[r]);
      }
      recv = at::empty_like(send);
    }
    Span s = move_span(send);
    check(api.all_to_all(s.ptr, recv.data_ptr(), s.count / n, s.dtype, comm, stream), comm, what);
    at::Tensor flat = recv.view({-1});
    for (int r = 0; r < n; r++) {
      recvs[r].copy_(flat.narrow(0, r * width, recvs[r].numel()));
    }
  }

  // On root, outputs[0][r] = inputs[0] of rank r.
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override {
    TORCH_CHECK_VALUE(inputs.size() == 1, "qcoll backend gather: needs one input tensor");
    return rooted("gather", c10d::OpType::GATHER, inputs[0], outputs,
                  static_cast<int>(opts.rootRank), /*to_root=*/true);
  }

  // outputs[0] = the root's inputs[0][rank].
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    TORCH_CHECK_VALUE(outputs.size() == 1, "qcoll backend scatter: needs one output tensor");
    return rooted("scatter", c10d::OpType::SCATTER, outputs[0], inputs,
                  static_cast<int>(opts.rootRank), /*to_root=*/false);
  }

  // Gather (to_root: the root's blocks[0][r] = `one` of rank r) or scatter
  // (`one` = the root's blocks[0][rank]) through sends and receives between
  // the root and each other rank; the root copies its own block.
  c10::intrusive_ptr<c10d::Work> rooted(const char* what, c10d::OpType type, at::Tensor one,
                                        std::vector<std::vector<at::Tensor>>& block_lists,
                                        int root, bool to_root) {
    bool is_root = getRank() == root;
    std::vector<at::Tensor> blocks;
    if (is_root && !block_lists.empty()) {
      blocks = block_lists[0];
    }
    if (is_root) {
      check_blocks(what, one, blocks, getSize());
    }
    std::vector<at::Tensor> everything = joined({one}, blocks);
    check_tensors(what, everything);
    at::Device device = device_of(what, everything);
    std::vector<at::Tensor> outputs = to_root ? blocks : std::vector<at::Tensor>{one};
    return run(type, everything, outputs, device, [&](qcoll_comm_t comm, void* stream) {
      // Moves t to (to_root) or from rank peer.
      auto move = [&](const at::Tensor& t, int peer, bool sending) {
        Span s = move_span(t);
        if (sending) {
          check(api.send(s.ptr, s.count, s.dtype, peer, comm, stream), comm, what);
        } else {
          check(api.recv(s.ptr, s.count, s.dtype, peer, comm, stream), comm, what);
        }
      };
      if (!is_root) {
        move(one, root, to_root);
        return;
      }
      for (int r = 0; r < getSize(); r++) {
        if (r != root) {
          move(blocks[r], r, !to_root);
        } else if (to_root) {
          blocks[r].copy_(one);
        } else {
          one.copy_(blocks[r]);
        }
      }
    });
  }

  // qcoll orders the messages of a pair; the tag is not used.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int /*tag*/) override {
    const char* what = "send";
    check_tensors(what, tensors);
    at::Device device = device_of(what, tensors);
    return run(c10d::OpType::SEND, tensors, tensors, device,
               [&](qcoll_comm_t comm, void* stream) {
                 for (const auto& t : tensors) {
                   Span s = move_span(t);
                   check(api.send(s.ptr, s.count, s.dtype, dst, comm, stream), comm, what);
                 }
               });
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int /*tag*/) override {
    const char* what = "recv";
    check_tensors(what, tensors);
    at::Device device = device_of(what, tensors);
    return run(c10d::OpType::RECV, tensors, tensors, device,
               [&](qcoll_comm_t comm, void* stream) {
                 for (const auto& t : tensors) {
                   Span s = move_span(t);
                   check(api.recv(s.ptr, s.count, s.dtype, src, comm, stream), comm, what);
                 }
               });
  }

  // Every rank waits for all; on a CUDA device the wait also orders that
  // device's streams and wait() blocks until it completes.
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    at::Device device = barrier_device(opts);
    return run(c10d::OpType::BARRIER, {}, {}, device,
               [&](qcoll_comm_t comm, void* stream) {
                 check(api.barrier(comm, stream), comm, "barrier");
               },
               /*blocking=*/true);
  }

  // opts.device_ids[0] when the caller names one, else the bound device,
  // else the first device the group has seen, else the host.
  at::Device barrier_device(const c10d::BarrierOptions& opts) const {
    if (!opts.device_ids.empty()) {
      return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(opts.device_ids[0]));
    }
    if (bound_) {
      return *bound_;
    }
    if (seen_) {
      return *seen_;
    }
    return at::Device(at::kCPU);
  }

  // -- lifecycle ---------------------------------------------------------------------------

  // Destroy the communicators in the order they were created (every rank
  // does the same: destroy_process_group calls this).
  void shutdown() override {
    std::vector<qcoll_comm_t> comms;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (int key : order_) {
        comms.push_back(comms_[key]);
      }
      comms_.clear();
      order_.clear();
    }
    for (qcoll_comm_t comm : comms) {
      check(api.comm_destroy(comm), nullptr, "comm_destroy");
    }
  }

  // Waits in progress fail at once.
  void abort() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& entry : comms_) {
      api.comm_abort(entry.second);
    }
  }

  // -- what tests look at --------------------------------------------------------------------

  // The devices holding a communicator: -1 for the host, n for cuda:n.
  std::vector<int> comm_devices() {
    std::lock_guard<std::mutex> lock(mutex_);
    return order_;
  }

  std::string bound_device_name() const {
    return barrier_device(c10d::BarrierOptions()).str();
  }

  void bind(int64_t index) { bound_ = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index)); }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  double timeout_s_;
  std::mutex mutex_;
  std::map<int, qcoll_comm_t> comms_;
  std::vector<int> order_;
  int created_cpu_ = 0;
  int created_cuda_ = 0;
  std::optional<at::Device> bound_;
  std::optional<at::Device> seen_;
#ifdef QCOLL_TORCH_CUDA
  std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams_;
#endif
};

// ---- QuickAllReduce's op --------------------------------------------------------------------

// out = sum over the ranks of inp, enqueued on the current stream of inp's
// device (CUDA) or run at once (host communicator).  comm is a qcoll_comm_t
// as an integer, quant a qcoll_quant_t.
void quick_all_reduce_into(const at::Tensor& inp, const at::Tensor& out, int64_t comm,
                           int64_t quant) {
  require_library();
  int d = qcoll_dtype_of(inp.scalar_type());
  TORCH_CHECK_VALUE(d >= 0, "qcoll::quick_all_reduce: dtype ", inp.scalar_type(),
                    " cannot be reduced");
  TORCH_CHECK_VALUE(inp.is_contiguous() && out.is_contiguous(),
                    "qcoll::quick_all_reduce: inp and out must be contiguous");
  TORCH_CHECK_VALUE(out.numel() == inp.numel() && out.scalar_type() == inp.scalar_type() &&
                        out.device() == inp.device(),
                    "qcoll::quick_all_reduce: out must match inp (", inp.scalar_type(), " ",
                    inp.numel(), " on ", inp.device(), "), got ", out.scalar_type(), " ",
                    out.numel(), " on ", out.device());
  TORCH_CHECK_VALUE(comm != 0, "qcoll::quick_all_reduce: comm 0 is not a communicator");
  void* stream = nullptr;
  if (inp.is_cuda()) {
#ifdef QCOLL_TORCH_CUDA
    c10::DeviceIndex index = inp.device().index();
    cudaStream_t s = c10::cuda::getCurrentCUDAStream(index).stream();
    // A capture on another current device would leave the all-reduce out
    // of the graph (and run it once, now): refuse before enqueuing.
    c10::DeviceIndex current = c10::cuda::current_device();
    if (current != index) {
      cudaStream_t current_stream = c10::cuda::getCurrentCUDAStream(current).stream();
      TORCH_CHECK(!is_capturing(current_stream), "QuickAllReduce on cuda:", index,
                  ": a CUDA graph is being captured on cuda:", current,
                  ", the current device, but this object enqueues on the current stream of cuda:",
                  index, "; make cuda:", index, " current (torch.cuda.set_device) before capturing");
    }
    stream = s;
#else
    TORCH_CHECK_NOT_IMPLEMENTED(false, "qcoll::quick_all_reduce: this build has no CUDA support");
#endif
  }
  qcoll_options_t opts;
  check(api.options_init(&opts), nullptr, "options_init");
  // quant: a qcoll_quant_t, with bit 0x100 for rotated groups (quant_code)
  opts.quant = static_cast<qcoll_quant_t>(quant & 0xff);
  opts.quant_rotate = (quant & 0x100) ? 1 : 0;
  auto handle = reinterpret_cast<qcoll_comm_t>(static_cast<intptr_t>(comm));
  check(api.all_reduce_ex(inp.data_ptr(), out.data_ptr(), static_cast<size_t>(inp.numel()),
                          static_cast<qcoll_dtype_t>(d), QCOLL_SUM, handle, stream, &opts),
        handle, "quick_all_reduce");
}

at::Tensor quick_all_reduce(const at::Tensor& inp, int64_t comm, int64_t quant) {
  at::Tensor out = at::empty_like(inp, at::MemoryFormat::Contiguous);
  quick_all_reduce_into(inp, out, comm, quant);
  return out;
}

void quick_all_reduce_out(const at::Tensor& inp, const at::Tensor& out, int64_t comm,
                          int64_t quant) {
  quick_all_reduce_into(inp, out, comm, quant);
}

// Shapes only, for tracing (torch.compile's fake tensors use it).
at::Tensor quick_all_reduce_meta(const at::Tensor& inp, int64_t, int64_t) {
  return at::empty_like(inp, at::MemoryFormat::Contiguous);
}

void quick_all_reduce_out_meta(const at::Tensor&, const at::Tensor&, int64_t, int64_t) {}

// The eager entry point: the same kernel without the dispatcher's cost.
// A tensor out is filled and returned; None allocates one.
at::Tensor quick_all_reduce_eager(const at::Tensor& inp, std::optional<at::Tensor> out,
                                  int64_t comm, int64_t quant) {
  if (!out) {
    return quick_all_reduce(inp, comm, quant);
  }
  quick_all_reduce_into(inp, *out, comm, quant);
  return *out;
}

}  // namespace qcoll_torch

TORCH_LIBRARY(qcoll, m) {
  m.def("quick_all_reduce(Tensor inp, int comm, int quant) -> Tensor");
  m.def("quick_all_reduce_out(Tensor inp, Tensor(a!) out, int comm, int quant) -> ()");
}

TORCH_LIBRARY_IMPL(qcoll, CPU, m) {
  m.impl("quick_all_reduce", &qcoll_torch::quick_all_reduce);
  m.impl("quick_all_reduce_out", &qcoll_torch::quick_all_reduce_out);
}

#ifdef QCOLL_TORCH_CUDA
TORCH_LIBRARY_IMPL(qcoll, CUDA, m) {
  m.impl("quick_all_reduce", &qcoll_torch::quick_all_reduce);
  m.impl("quick_all_reduce_out", &qcoll_torch::quick_all_reduce_out);
}
#endif

TORCH_LIBRARY_IMPL(qcoll, Meta, m) {
  m.impl("quick_all_reduce", &qcoll_torch::quick_all_reduce_meta);
  m.impl("quick_all_reduce_out", &qcoll_torch::quick_all_reduce_out_meta);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace py = pybind11;
  using qcoll_torch::QcollBackend;
  m.doc() = "qcoll's compiled torch.distributed backend and QuickAllReduce op";
  m.def("bind_library", &qcoll_torch::bind_library, py::arg("path"),
        "Take libqcoll's functions from the library at path (already loaded by qcoll).");
  m.def("library_path", []() { return qcoll_torch::api_path; });
#ifdef QCOLL_TORCH_CUDA
  m.attr("with_cuda") = true;
#else
  m.attr("with_cuda") = false;
#endif
  m.def("quick_all_reduce", &qcoll_torch::quick_all_reduce_eager, py::arg("inp"),
        py::arg("out"), py::arg("comm"), py::arg("quant"),
        py::call_guard<py::gil_scoped_release>());
  py::class_<QcollBackend, c10d::Backend, c10::intrusive_ptr<QcollBackend>>(m, "QcollBackend")
      .def(py::init<const c10::intrusive_ptr<c10d::Store>&, int, int, double, int64_t>(),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_s"),
           py::arg("bound_device"))
      .def("comm_devices", &QcollBackend::comm_devices)
      .def("bind_device_index", &QcollBackend::bind, py::arg("index"))
      .def_property_readonly("bound_device_name", &QcollBackend::bound_device_name);
}
