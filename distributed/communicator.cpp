#include "distributed/communicator.h"

#include <cstring>
#include <mutex>

#include <hjit/error.h>

namespace hjit::distributed {
namespace {

class Done final : public Pending {
 public:
  void wait() override {}
};

void copy(void* out, const void* in, int64_t bytes) {
  if (bytes > 0 && out != in) std::memmove(out, in, size_t(bytes));
}

class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string engine() const override { return "single process"; }
  std::unique_ptr<Pending> start_all_reduce(const void* in, void* out, int64_t count, DType dtype, dist::ReduceOp, int) override {
    copy(out, in, count * dtype_size(dtype));
    return std::make_unique<Done>();
  }
  std::unique_ptr<Pending> start_all_gather(const void* in, void* out, int64_t bytes) override {
    copy(out, in, bytes);
    return std::make_unique<Done>();
  }
  std::unique_ptr<Pending> start_reduce_scatter(const void* in, void* out, int64_t count, DType dtype, dist::ReduceOp) override {
    copy(out, in, count * dtype_size(dtype));
    return std::make_unique<Done>();
  }
  std::unique_ptr<Pending> start_broadcast(void*, int64_t, int) override { return std::make_unique<Done>(); }
  // Callers check the peer against size() first: a world of one has none.
  std::unique_ptr<Pending> start_send(const void*, int64_t, int peer, int) override { throw no_peer(peer); }
  std::unique_ptr<Pending> start_recv(void*, int64_t, int peer, int) override { throw no_peer(peer); }
  std::unique_ptr<Pending> start_barrier() override { return std::make_unique<Done>(); }
  void finalize() override {}

 private:
  static InternalError no_peer(int peer) { return InternalError("rank " + std::to_string(peer) + " in a world of one process"); }
};

std::mutex& world_mutex() {
  static std::mutex m;
  return m;
}
std::unique_ptr<Communicator>& installed() {
  static std::unique_ptr<Communicator> w;
  return w;
}

}  // namespace

std::unique_ptr<Communicator> single_process_world() { return std::make_unique<SingleProcess>(); }

Communicator& world() {
  std::lock_guard<std::mutex> lock(world_mutex());
  if (!installed()) installed() = single_process_world();
  return *installed();
}

void install_world(std::unique_ptr<Communicator> c) {
  std::lock_guard<std::mutex> lock(world_mutex());
  if (installed()) installed()->finalize();
  installed() = std::move(c);
}

}  // namespace hjit::distributed
