#include "distributed/mpi_communicator.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include <hjit/error.h>

#include "support/log.h"

#ifdef HJIT_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // MPI's C API only: the deprecated C++ bindings need a library of their own
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace hjit::distributed {

int launched_world_size() {
  // Open MPI's mpirun, then the PMI / PMIx variables srun sets.
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "SLURM_NTASKS"})
    if (const char* v = std::getenv(var)) {
      const int n = std::atoi(v);
      if (n > 0 && (std::strcmp(var, "SLURM_NTASKS") != 0 || std::getenv("SLURM_PROCID"))) return n;
    }
  return 0;
}

#ifndef HJIT_HAVE_MPI

std::unique_ptr<Communicator> mpi_world(std::chrono::milliseconds) {
  throw DistributedError("dist::init: this process was started by an MPI launcher, but hjit was built without MPI "
                         "(install Debian's libopenmpi-dev and rebuild hjit)");
}

#else

namespace {

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, size_t(len));
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::Bool: case DType::U8: return MPI_UINT8_T;
    case DType::I8: return MPI_INT8_T;
    case DType::I16: return MPI_INT16_T;
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    case DType::U16: return MPI_UINT16_T;
    case DType::U32: return MPI_UINT32_T;
    case DType::U64: return MPI_UINT64_T;
    case DType::F32: case DType::F16: case DType::BF16: return MPI_FLOAT;  // 16-bit floats are combined in f32
    case DType::F64: return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

// bool is 0 or 1: any is the max, all the min.
MPI_Op mpi_op(dist::ReduceOp op, DType t) {
  using dist::ReduceOp;
  if (t == DType::Bool) return op == ReduceOp::Sum || op == ReduceOp::Max ? MPI_MAX : MPI_MIN;
  switch (op) {
    case ReduceOp::Sum: case ReduceOp::Mean: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Prod: return MPI_PROD;
  }
  return MPI_SUM;
}

bool is_half(DType t) { return t == DType::F16 || t == DType::BF16; }
void widen(const void* in, float* out, int64_t n, DType t) {
  const uint16_t* h = static_cast<const uint16_t*>(in);
  for (int64_t i = 0; i < n; ++i) out[i] = t == DType::F16 ? f16::to_float(h[i]) : bf16::to_float(h[i]);
}
void narrow(const float* in, void* out, int64_t n, DType t) {
  uint16_t* h = static_cast<uint16_t*>(out);
  for (int64_t i = 0; i < n; ++i) h[i] = t == DType::F16 ? f16::from_float(in[i]) : bf16::from_float(in[i]);
}

class MpiWorld;

// One request, waited for with the group's timeout. 16-bit floats travel as f32 and are narrowed
// into the caller's buffer once the operation is done.
class MpiPending final : public Pending {
 public:
  MpiPending(MpiWorld& w, std::string what) : world_(w), what_(std::move(what)) {}
  ~MpiPending() override;
  void wait() override;
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<float> wide_in, wide_out;
  void* narrow_to = nullptr;
  DType dtype = DType::F32;

 private:
  MpiWorld& world_;
  std::string what_;
};

class MpiWorld final : public Communicator {
 public:
  explicit MpiWorld(std::chrono::milliseconds t) {
    timeout = t;
    int provided = 0;
    int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (code != MPI_SUCCESS) throw DistributedError("dist::init: MPI_Init_thread failed: " + mpi_error(code));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm local = MPI_COMM_NULL;
    if (MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
      MPI_Comm_size(local, &local_size_);
      MPI_Comm_free(&local);
    }
    log().debug("dist: MPI world of {} processes, this is rank {} (thread level {}), timeout {} ms", size_, rank_, provided,
                timeout.count());
    progress_thread_ = std::thread([this] { progress(); });
  }
  ~MpiWorld() override { finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string engine() const override { return "mpi"; }
  int ranks_on_this_machine() const override { return local_size_; }

  std::unique_ptr<Pending> start_all_reduce(const void* in, void* out, int64_t count, DType t, dist::ReduceOp op, int root) override {
    auto p = pending("all_reduce");
    const void* src = in == out ? MPI_IN_PLACE : in;
    void* dst = out;
    if (is_half(t)) {
      p->wide_in.resize(size_t(count));
      p->wide_out.resize(size_t(count));
      widen(in, p->wide_in.data(), count, t);
      src = p->wide_in.data(), dst = p->wide_out.data(), p->narrow_to = out, p->dtype = t;
    }
    if (root >= 0 && root != rank_) p->narrow_to = nullptr;  // only the root receives
    if (root >= 0 && src == MPI_IN_PLACE && root != rank_) src = in;  // MPI_IN_PLACE is the root's alone
    return started(std::move(p), [&](MPI_Request* r) {
      return root < 0 ? MPI_Iallreduce(src, dst, int(count), mpi_type(t), mpi_op(op, t), comm_, r)
                      : MPI_Ireduce(src, dst, int(count), mpi_type(t), mpi_op(op, t), root, comm_, r);
    });
  }
  std::unique_ptr<Pending> start_all_gather(const void* in, void* out, int64_t bytes) override {
    auto p = pending("all_gather");
    return started(std::move(p), [&](MPI_Request* r) { return MPI_Iallgather(in, int(bytes), MPI_BYTE, out, int(bytes), MPI_BYTE, comm_, r); });
  }
  std::unique_ptr<Pending> start_reduce_scatter(const void* in, void* out, int64_t count, DType t, dist::ReduceOp op) override {
    auto p = pending("reduce_scatter");
    const void* src = in;
    void* dst = out;
    if (is_half(t)) {
      p->wide_in.resize(size_t(count) * size_t(size_));
      p->wide_out.resize(size_t(count));
      widen(in, p->wide_in.data(), count * size_, t);
      src = p->wide_in.data(), dst = p->wide_out.data(), p->narrow_to = out, p->dtype = t;
    }
    return started(std::move(p), [&](MPI_Request* r) { return MPI_Ireduce_scatter_block(src, dst, int(count), mpi_type(t), mpi_op(op, t), comm_, r); });
  }
  std::unique_ptr<Pending> start_broadcast(void* data, int64_t bytes, int root) override {
    auto p = pending("broadcast");
    return started(std::move(p), [&](MPI_Request* r) { return MPI_Ibcast(data, int(bytes), MPI_BYTE, root, comm_, r); });
  }
  std::unique_ptr<Pending> start_send(const void* data, int64_t bytes, int peer, int tag) override {
    auto p = pending("send to rank " + std::to_string(peer));
    return started(std::move(p), [&](MPI_Request* r) { return MPI_Isend(data, int(bytes), MPI_BYTE, peer, tag, comm_, r); });
  }
  std::unique_ptr<Pending> start_recv(void* data, int64_t bytes, int peer, int tag) override {
    auto p = pending("recv from rank " + std::to_string(peer));
    return started(std::move(p), [&](MPI_Request* r) { return MPI_Irecv(data, int(bytes), MPI_BYTE, peer, tag, comm_, r); });
  }
  std::unique_ptr<Pending> start_barrier() override {
    auto p = pending("barrier");
    return started(std::move(p), [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); });
  }

  void finalize() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    progress_cv_.notify_one();
    if (progress_thread_.joinable()) progress_thread_.join();
    std::lock_guard<std::mutex> lock(mutex_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    // After a failure requests may be outstanding forever, and MPI_Finalize would wait for them.
    if (!failure_.empty()) return;
    MPI_Comm_free(&comm_);
    MPI_Finalize();
  }

  // Polls until done; a rank that never joins makes this throw after the timeout.
  void wait(MpiPending& p, const std::string& what) {
    std::unique_lock<std::mutex> lock(mutex_);
    check_alive(what);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (int polls = 0;; ++polls) {
      int done = 0;
      const int code = MPI_Test(&p.request, &done, MPI_STATUS_IGNORE);
      if (code != MPI_SUCCESS) fail(what + " failed: " + mpi_error(code));
      if (done) {
        forget(&p);
        return;
      }
      if (std::chrono::steady_clock::now() > deadline)
        fail(what + ": no answer from the other ranks within " + std::to_string(timeout.count()) +
             " ms (a rank died, stopped, or is running other collectives; dist::init's timeout sets the limit)");
      // Spin a little for the latency of small messages, then leave the core to others, waking
      // less and less often (20 us doubling every 100 polls, up to 1 ms) for a long wait.
      if (polls > 2000) {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, 20 << std::min(6, (polls - 2000) / 100))));
        lock.lock();
      }
    }
  }

 private:
  std::unique_ptr<MpiPending> pending(const std::string& what) {
    check_alive(what);
    return std::make_unique<MpiPending>(*this, what);
  }
  // Starts the operation under the lock (MPI_THREAD_SERIALIZED: one MPI call at a time, this thread
  // or the progress thread), and hands it to the progress thread.
  template <class Start>
  std::unique_ptr<Pending> started(std::unique_ptr<MpiPending> p, Start&& start) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const int code = start(&p->request);
      if (code != MPI_SUCCESS) fail("starting a collective failed: " + mpi_error(code));
      active_.push_back(p.get());
      ++started_;
    }
    progress_cv_.notify_one();
    return p;
  }
  void forget(MpiPending* p) { active_.erase(std::remove(active_.begin(), active_.end(), p), active_.end()); }

  // MPI moves a nonblocking collective on only inside MPI calls: while the caller computes the next
  // pipeline, this thread calls them, so the exchange travels meanwhile. Every 50 us after an
  // operation starts or moves, less often (up to every 2 ms) while nothing moves: a receive that
  // waits seconds for its sender (a tuning rank's next request) must not keep a core busy.
  void progress() {
    std::unique_lock<std::mutex> lock(mutex_);
    auto interval = std::chrono::microseconds(50);
    for (uint64_t seen = started_; !stopping_;) {
      if (active_.empty() || !failure_.empty()) {
        progress_cv_.wait(lock);
        continue;
      }
      bool moved = seen != started_;
      seen = started_;
      for (MpiPending* p : active_) {
        int done = 0;
        if (p->request != MPI_REQUEST_NULL) MPI_Test(&p->request, &done, MPI_STATUS_IGNORE);
        moved = moved || done;
      }
      interval = moved ? std::chrono::microseconds(50) : std::min(interval * 2, std::chrono::microseconds(2000));
      progress_cv_.wait_for(lock, interval, [&] { return stopping_ || seen != started_; });
    }
  }
  void check_alive(const std::string& what) {
    if (!failure_.empty())
      throw DistributedError(what + ": the process group failed earlier (" + failure_ + "); start the job again");
  }
  [[noreturn]] void fail(const std::string& why) {
    failure_ = why;
    throw DistributedError("rank " + std::to_string(rank_) + ": " + why);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_size_ = 1;
  std::string failure_;
  std::mutex mutex_;
  std::vector<MpiPending*> active_;  // started, not yet seen done by their wait()
  uint64_t started_ = 0;              // operations started so far
  std::condition_variable progress_cv_;
  bool stopping_ = false;
  std::thread progress_thread_;

  friend class MpiPending;
};

MpiPending::~MpiPending() {
  std::lock_guard<std::mutex> lock(world_.mutex_);
  world_.forget(this);
}

void MpiPending::wait() {
  if (request != MPI_REQUEST_NULL) world_.wait(*this, what_);
  if (narrow_to) narrow(wide_out.data(), narrow_to, int64_t(wide_out.size()), dtype);
  narrow_to = nullptr;
}

}  // namespace

std::unique_ptr<Communicator> mpi_world(std::chrono::milliseconds timeout) { return std::make_unique<MpiWorld>(timeout); }

#endif

}  // namespace hjit::distributed
