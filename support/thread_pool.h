// The process's one pool of threads for parallel loops: compiled pipelines' (Halide's do_par_for)
// and eager kernels'. Built for a machine other processes share:
// - each loop's iterations are split in one contiguous range per thread (the split OpenMP's static
//   schedule makes, so that consecutive loops find their rows in the same core's cache), and a
//   thread that finishes its range takes iterations from the far end of another's: a worker that
//   another process holds off its core is not waited for unless it is inside an iteration;
// - a loop is done when its iterations are, not when every thread has checked in (OpenMP's end
//   of a parallel region waits for each thread of the team, and a descheduled one costs a time
//   slice per loop: 8-28x slower with one of two cores busy);
// - idle workers spin a while (a pipeline's loops come microseconds apart), then sleep;
// - a loop started while the pool runs another one (an application calling from several threads,
//   or a loop inside a loop's iteration) runs on its caller's thread alone: never more threads
//   than cores.
// - after a loop whose caller waited a time slice for a worker another process had preempted
//   inside an iteration, loops run on their callers alone for a pause (5 ms, doubling while it
//   recurs, up to 320 ms), then on every thread again: with a core taken, two threads did no more
//   than one and waited out the neighbour's slices besides.
// Results do not depend on the thread count: an iteration computes the same wherever it runs.
#pragma once
#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>

namespace hjit {

// A loop body: iteration i of the loop with its context and closure (Halide's halide_task_t);
// nonzero is an error status, which stops the loop's unclaimed iterations.
using ParallelTask = int (*)(void* context, int i, uint8_t* closure);

// Runs task(context, i, closure) for i in [min, min + extent) on up to `threads` threads, the
// caller's included (0: the pool's size). Returns the first nonzero status, else 0.
int parallel_for(ParallelTask task, void* context, int min, int extent, uint8_t* closure, int threads = 0);

// The same for a callable, body(i) (eager kernels' loops). Iterations are best a few microseconds
// of work or more: group small ones (parallel_loop does). An exception an iteration throws stops
// the iterations not yet begun and is thrown again on the caller's thread once the loop is over.
template <typename Body>
void parallel_for(int64_t n, const Body& body, int threads = 0) {
  if (n <= 0) return;
  struct Call {
    const Body* body;
    std::exception_ptr error;
    std::once_flag first;
  } call{&body, nullptr, {}};
  auto task = [](void* ctx, int i, uint8_t*) {
    auto* c = static_cast<Call*>(ctx);
    try {
      (*c->body)(int64_t(i));
      return 0;
    } catch (...) {
      std::call_once(c->first, [&] { c->error = std::current_exception(); });
      return -1;
    }
  };
  parallel_for(task, &call, 0, int(n), nullptr, threads);
  if (call.error) std::rethrow_exception(call.error);
}

// Calls body(i) for i in [0, n): on the pool when `parallel` (the eager kernels' loops), each
// thread a contiguous run of i as OpenMP's static schedule gives, in chunks a late thread's
// neighbour can take over.
template <typename Body>
void parallel_loop(int64_t n, bool parallel, const Body& body);

// Caps the threads of the loops this thread starts while it lives (a jitted function's or a
// module's JitOptions::threads / ModuleOptions::threads); 0 leaves the cap as it was.
class ThreadLimit {
 public:
  explicit ThreadLimit(int threads);
  ~ThreadLimit();
  ThreadLimit(const ThreadLimit&) = delete;
  ThreadLimit& operator=(const ThreadLimit&) = delete;

 private:
  int previous_;
};

// The CPUs this process may run on (its affinity mask): what compiled code is scheduled for.
int machine_threads();
// The threads a loop uses by default: HJIT_THREADS, else the CPUs this process may run on.
int pool_threads();
// Sets the default for later loops (at most the CPUs it may run on; 0: back to the default).
// Distributed ranks on one machine share its cores so.
void set_pool_threads(int threads);
// The threads a loop started here would use: pool_threads() under this thread's ThreadLimit.
int loop_threads();
// Inside an iteration of a pool loop (a nested loop runs serially there).
bool in_parallel_loop();
// The loops whose caller a preempted worker kept waiting, since the process started, and whether
// the pause after the last of them lasts now (loops run on their callers alone).
int64_t late_loops();
bool loops_paused();

template <typename Body>
void parallel_loop(int64_t n, bool parallel, const Body& body) {
  if (n <= 0) return;
  const int64_t chunks = parallel && n > 1 && !in_parallel_loop() ? std::min<int64_t>(n, int64_t(loop_threads()) * 8) : 1;
  auto chunk = [&](int64_t c) {
    for (int64_t i = n * c / chunks, end = n * (c + 1) / chunks; i < end; ++i) body(i);
  };
  if (chunks == 1) chunk(0);
  else parallel_for(chunks, chunk);
}

}  // namespace hjit
