// hjit::dist: the process group (distributed/communicator.h) and the collectives as ops.
#include <hjit/distributed.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>

#include "distributed/communicator.h"
#include "distributed/mpi_communicator.h"
#include "frontend/tensor/dispatch.h"
#include "frontend/tensor/tensor_impl.h"
#include "support/hash.h"
#include "support/log.h"
#include "support/settings.h"
#include "support/thread_pool.h"

namespace hjit::dist {
namespace {

std::mutex init_mutex;
bool joined = false;

std::chrono::milliseconds timeout_from(const InitOptions& o) {
  if (const std::optional<double> s = setting::seconds(setting::Id::DistTimeout))
    return std::chrono::milliseconds(int64_t(*s * 1000));
  if (o.timeout.count() <= 0) throw ValueError("dist::init: the timeout must be positive, got " + std::to_string(o.timeout.count()) + " ms");
  return o.timeout;
}

int64_t checked_axis(const char* op, const Tensor& x, int axis) {
  const int64_t rank = x.ndim();
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    throw ShapeError(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for " + TensorType{x.dtype(), x.shape()}.str() +
                     (rank == 0 ? " (a scalar has no axis: reshape it to [1])" : ""));
  return a;
}

int checked_rank(const char* op, const char* what, int r) {
  if (r < 0 || r >= world_size())
    throw ValueError(std::string(op) + ": " + what + " " + std::to_string(r) + " is not a rank of this world of " +
                     std::to_string(world_size()) + (world_size() == 1 ? " (was dist::init() called in every process?)" : ""));
  return r;
}

// Ranks sharing a machine share its cores: each runs its pipelines (and eager kernels) on its
// part of them, as one process would on all of them. HJIT_THREADS, when set, decides instead.
void share_the_cores(int ranks_here) {
  if (ranks_here <= 1 || setting::raw(setting::Id::Threads)) return;
  const int share = std::max(1, machine_threads() / ranks_here);
  set_pool_threads(share);
  setenv("HJIT_THREADS", std::to_string(share).c_str(), 0);  // and the processes it starts (tuning workers)
}

}  // namespace

int threads_per_rank() { return pool_threads(); }

void init(const InitOptions& options) {
  const auto timeout = timeout_from(options);
  std::lock_guard<std::mutex> lock(init_mutex);
  if (joined) return;
  const int launched = distributed::launched_world_size();
  std::unique_ptr<distributed::Communicator> w =
      launched > 1 ? distributed::mpi_world(timeout) : distributed::single_process_world();
  w->timeout = timeout;
  share_the_cores(w->ranks_on_this_machine());
  log().info("dist: rank {} of {} ({}), {} thread(s)", w->rank(), w->size(), w->engine(), threads_per_rank());
  distributed::install_world(std::move(w));
  joined = true;
  static const bool at_exit = [] { return std::atexit([] { finalize(); }) == 0; }();
  (void)at_exit;
}

void finalize() {
  std::lock_guard<std::mutex> lock(init_mutex);
  if (!joined) return;
  distributed::install_world(distributed::single_process_world());
  joined = false;
}

bool initialized() {
  std::lock_guard<std::mutex> lock(init_mutex);
  return joined;
}

int rank() { return distributed::world().rank(); }
int world_size() { return distributed::world().size(); }
void barrier() { distributed::world().start_barrier()->wait(); }

Tensor all_reduce(const Tensor& x, ReduceOp op) {
  return detail::apply(OpKind::AllReduce, {x}, Attrs{{"op", int64_t(op)}, {"root", int64_t(-1)}});
}

Tensor reduce(const Tensor& x, ReduceOp op, int root) {
  return detail::apply(OpKind::AllReduce, {x}, Attrs{{"op", int64_t(op)}, {"root", int64_t(checked_rank("reduce", "root", root))}});
}

Tensor all_gather(const Tensor& x, int axis) {
  return detail::apply(OpKind::AllGather, {x}, Attrs{{"axis", checked_axis("all_gather", x, axis)}, {"world", int64_t(world_size())}});
}

Tensor reduce_scatter(const Tensor& x, int axis, ReduceOp op) {
  return detail::apply(OpKind::ReduceScatter, {x},
                       Attrs{{"axis", checked_axis("reduce_scatter", x, axis)}, {"op", int64_t(op)}, {"world", int64_t(world_size())}});
}

Tensor broadcast(const Tensor& x, int root) {
  return detail::apply(OpKind::DistBroadcast, {x}, Attrs{{"root", int64_t(checked_rank("broadcast", "root", root))}});
}

void send(const Tensor& x, int peer, int tag) {
  detail::apply(OpKind::Send, {x}, Attrs{{"peer", int64_t(checked_rank("send", "peer", peer))}, {"tag", int64_t(tag)}});
}

Tensor recv(const Shape& shape, DType dtype, int peer, int tag) {
  return detail::apply(OpKind::Recv, {},
                       Attrs{{"peer", int64_t(checked_rank("recv", "peer", peer))}, {"tag", int64_t(tag)}, {"shape", shape}, {"dtype", dtype}});
}

void broadcast_parameters(std::vector<Tensor>& params, int root) {
  checked_rank("broadcast_parameters", "root", root);
  for (Tensor& p : params) p.assign(broadcast(p, root));
}

void check_parameters_equal(const std::vector<Tensor>& params) {
  std::vector<uint64_t> mine;
  for (const Tensor& p : params) {
    const Tensor c = p.to(Device::CPU);
    mine.push_back(Hasher().add(int(c.dtype())).add_range(c.shape()).add_bytes(c.data(), size_t(c.numel()) * size_t(dtype_size(c.dtype()))).value());
  }
  distributed::Communicator& w = distributed::world();
  if (w.size() == 1) return;
  // The same count on every rank first: a rank with other parameters is a mismatch too.
  const uint64_t count = mine.size();
  std::vector<uint64_t> counts(size_t(w.size()));
  w.start_all_gather(&count, counts.data(), sizeof count)->wait();
  for (int r = 0; r < w.size(); ++r)
    if (counts[size_t(r)] != count)
      throw DistributedError("check_parameters_equal: rank " + std::to_string(r) + " passed " + std::to_string(counts[size_t(r)]) +
                             " parameters, rank " + std::to_string(w.rank()) + " " + std::to_string(count));
  std::vector<uint64_t> all(mine.size() * size_t(w.size()));
  w.start_all_gather(mine.data(), all.data(), int64_t(mine.size() * sizeof(uint64_t)))->wait();
  for (size_t i = 0; i < mine.size(); ++i)
    for (int r = 1; r < w.size(); ++r)
      if (all[size_t(r) * mine.size() + i] != all[i])
        throw DistributedError("check_parameters_equal: parameter " + std::to_string(i) + " (" + TensorType{params[i].dtype(), params[i].shape()}.str() +
                               ") differs between rank 0 and rank " + std::to_string(r) +
                               ": the ranks are no longer in step (did every rank apply the same all_reduced gradients?)");
}

}  // namespace hjit::dist
