// The process group hjit's collectives run on: a small interface over an existing engine (Open MPI,
// distributed/mpi_communicator.cpp), or the world of one process, which needs none. Every rank
// calls the same operations in the same order; each call that cannot finish within the group's
// timeout (a rank that died, stopped, or took another path) raises DistributedError, and the
// group fails for good: every later call raises at once with the first failure's reason.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include <hjit/dtype.h>
#include <hjit/reduce_op.h>

namespace hjit::distributed {

// A started operation (nonblocking: communication overlaps whatever the caller does meanwhile).
class Pending {
 public:
  virtual ~Pending() = default;
  // Returns when the operation finished; DistributedError after the group's timeout.
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string engine() const = 0;  // "mpi", or "single process"
  virtual int ranks_on_this_machine() const { return 1; }

  // Elements of one dtype combined over the ranks, into out on every rank (root < 0) or on root only
  // (the others' out untouched). Mean is a sum here: collectives.cpp divides. in may equal out.
  virtual std::unique_ptr<Pending> start_all_reduce(const void* in, void* out, int64_t count, DType dtype,
                                                    dist::ReduceOp op, int root) = 0;
  // Each rank's `bytes` bytes, in rank order, into out (size() * bytes) on every rank.
  virtual std::unique_ptr<Pending> start_all_gather(const void* in, void* out, int64_t bytes) = 0;
  // in holds size() blocks of `count` elements; block r combined over the ranks lands in rank r's out.
  virtual std::unique_ptr<Pending> start_reduce_scatter(const void* in, void* out, int64_t count, DType dtype,
                                                        dist::ReduceOp op) = 0;
  virtual std::unique_ptr<Pending> start_broadcast(void* data, int64_t bytes, int root) = 0;
  virtual std::unique_ptr<Pending> start_send(const void* data, int64_t bytes, int peer, int tag) = 0;
  virtual std::unique_ptr<Pending> start_recv(void* data, int64_t bytes, int peer, int tag) = 0;
  virtual std::unique_ptr<Pending> start_barrier() = 0;
  virtual void finalize() = 0;

  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

// The group of this process: the one installed by dist::init(), else the world of one.
Communicator& world();
void install_world(std::unique_ptr<Communicator> c);  // replaces (and finalizes) the current one

// The world of one process: every collective is a copy, a peer is always out of range.
std::unique_ptr<Communicator> single_process_world();

}  // namespace hjit::distributed
