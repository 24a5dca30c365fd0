// The thread pool every parallel loop runs on (support/thread_pool.h) and the thread counts of the
// API (hjit::set_num_threads, JitOptions::threads, ModuleOptions::threads): every iteration once,
// errors stop a loop, loops inside loops and loops from several threads at once, a late thread's
// iterations taken over, and results bit for bit the same whatever the count.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "support/pool_timing.h"
#include "support/thread_pool.h"
#include "tests/support.h"

using hjit::DType;
using hjit::Tensor;

namespace {

struct Counts {
  std::vector<std::atomic<int>> runs;
  explicit Counts(int n) : runs(size_t(n)) {}
};

int count_run(void* ctx, int i, uint8_t*) {
  static_cast<Counts*>(ctx)->runs[size_t(i)].fetch_add(1);
  return 0;
}

// The threads a loop's iterations ran on.
struct ThreadsSeen {
  std::set<std::thread::id> ids;
  std::mutex mu;
  void note() {
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  }
};

// Waits out a pause after a late loop (an earlier case's, or another process's doing on a loaded
// machine), so that the next loop runs on every thread.
bool wait_for_all_threads() {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (hjit::loops_paused())
    if (std::chrono::steady_clock::now() > until) return false;
    else std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return true;
}

// A loop whose caller's first iteration waits until every other iteration is done: another
// thread has to take the rest of the caller's share from its far end (or the loop would never
// end; the wait gives up after 20 s and the check fails instead).
void check_taken_over(int extent) {
  struct Ctx {
    std::atomic<int> done{0};
    int extent = 0;
    bool timed_out = false;
    ThreadsSeen seen;
  } ctx;
  ctx.extent = extent;
  auto task = [](void* c, int i, uint8_t*) {
    auto* x = static_cast<Ctx*>(c);
    x->seen.note();
    if (i == 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (x->done.load() < x->extent - 1)
        if (std::chrono::steady_clock::now() > until) return x->timed_out = true, 1;
    }
    x->done.fetch_add(1);
    return 0;
  };
  CHECK(hjit::parallel_for(task, &ctx, 0, ctx.extent, nullptr, 2) == 0);
  CHECK_FALSE(ctx.timed_out);
  CHECK(ctx.done.load() == ctx.extent);
  CHECK(ctx.seen.ids.size() == 2);
}

// Restores the process's default thread count when a case ends.
struct DefaultThreads {
  ~DefaultThreads() { hjit::set_num_threads(0); }
};

}  // namespace

TEST_CASE("a pool loop runs every iteration exactly once, for any extent, offset and thread count") {
  for (int threads : {0, 1, 2, 3, 8, 300})
    for (int extent : {1, 2, 3, 7, 64, 1000}) {
      CAPTURE(threads);
      CAPTURE(extent);
      Counts c(extent + 5);
      CHECK(hjit::parallel_for(count_run, &c, 5, extent, nullptr, threads) == 0);
      for (int i = 0; i < extent + 5; ++i) CHECK(c.runs[size_t(i)].load() == (i >= 5 ? 1 : 0));
    }
  Counts none(1);
  CHECK(hjit::parallel_for(count_run, &none, 0, 0, nullptr) == 0);
  CHECK(hjit::parallel_for(count_run, &none, 0, -3, nullptr) == 0);
  CHECK(none.runs[0].load() == 0);
}

TEST_CASE("an iteration's error is the loop's status, and iterations not yet begun are skipped") {
  struct Ctx {
    std::atomic<int> ran{0};
  } ctx;
  auto fail_at_3 = [](void* c, int i, uint8_t*) {
    static_cast<Ctx*>(c)->ran.fetch_add(1);
    return i == 3 ? -7 : 0;
  };
  CHECK(hjit::parallel_for(fail_at_3, &ctx, 0, 10000, nullptr) == -7);
  CHECK(ctx.ran.load() < 10000);
  // The pool is usable afterwards.
  Counts c(100);
  CHECK(hjit::parallel_for(count_run, &c, 0, 100, nullptr) == 0);
  for (auto& r : c.runs) CHECK(r.load() == 1);
}

TEST_CASE("an exception an iteration throws reaches the loop's caller, and the pool goes on") {
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    std::atomic<int> ran{0};
    CHECK_THROWS_WITH_AS(hjit::parallel_for(
                             int64_t(5000),
                             [&](int64_t i) {
                               ran.fetch_add(1);
                               if (i == 17) throw hjit::ValueError("iteration 17 failed");
                             },
                             threads),
                         "iteration 17 failed", hjit::ValueError);
    CHECK(ran.load() < 5000);
    std::atomic<int> after{0};
    hjit::parallel_loop(1000, true, [&](int64_t) { after.fetch_add(1); });
    CHECK(after.load() == 1000);
    CHECK_FALSE(hjit::in_parallel_loop());
  }
}

TEST_CASE("loops inside an iteration and loops from several threads at once all complete") {
  // Nested: each outer iteration runs an inner loop (serially, on its thread).
  std::vector<std::atomic<int>> cells(16 * 32);
  hjit::parallel_for(int64_t(16), [&](int64_t i) {
    CHECK(hjit::in_parallel_loop());
    hjit::parallel_for(int64_t(32), [&](int64_t j) { cells[size_t(i * 32 + j)].fetch_add(1); });
  });
  for (auto& c : cells) CHECK(c.load() == 1);
  CHECK_FALSE(hjit::in_parallel_loop());
  // Four application threads, each its own loops: the pool serves one, the others run on their
  // callers' threads; every loop completes with every iteration once.
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int round = 0; round < 200; ++round) {
        Counts c(37);
        if (hjit::parallel_for(count_run, &c, 0, 37, nullptr) != 0) wrong.fetch_add(1);
        for (auto& r : c.runs)
          if (r.load() != 1) wrong.fetch_add(1);
      }
    });
  for (std::thread& t : callers) t.join();
  CHECK(wrong.load() == 0);
}

TEST_CASE("a thread that finishes its share takes over the iterations of one that is late") {
  if (hjit::machine_threads() < 2) return;  // one CPU: every loop runs on its caller
  REQUIRE(wait_for_all_threads());
  check_taken_over(64);
}

// A loop of two iterations: iteration 0 (the caller's share) waits for iteration 1 to start on
// the worker (or gives up after 5 s and takes it itself); on the worker, iteration 1 sleeps `ms`,
// as a worker another process preempted inside it: the caller is left waiting. `seen` records
// the threads the loop ran on.
void run_late_loop(int ms, ThreadsSeen* seen = nullptr) {
  struct Ctx {
    std::thread::id caller = std::this_thread::get_id();
    std::atomic<bool> started{false};
    int ms = 0;
    ThreadsSeen* seen = nullptr;
  } ctx;
  ctx.ms = ms, ctx.seen = seen;
  auto task = [](void* c, int i, uint8_t*) {
    auto* x = static_cast<Ctx*>(c);
    if (x->seen) x->seen->note();
    if (i == 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!x->started.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    } else {
      x->started = true;
      if (std::this_thread::get_id() != x->caller) std::this_thread::sleep_for(std::chrono::milliseconds(x->ms));
    }
    return 0;
  };
  CHECK(hjit::parallel_for(task, &ctx, 0, 2, nullptr, 2) == 0);
}

TEST_CASE("after a worker kept its loop's caller waiting, loops run on the caller for a pause, then on every thread") {
  if (hjit::machine_threads() < 2) return;
  REQUIRE(wait_for_all_threads());
  const std::thread::id caller = std::this_thread::get_id();
  ThreadsSeen seen;
  const int64_t late_before = hjit::late_loops();
  run_late_loop(200, &seen);
  const auto late_end = std::chrono::steady_clock::now();
  REQUIRE(seen.ids.size() == 2);  // the worker took iteration 1
  CHECK(hjit::late_loops() == late_before + 1);
  // The next loop, within the first pause (5 ms), runs on the caller alone.
  ThreadsSeen next;
  hjit::parallel_for(int64_t(64), [&](int64_t) { next.note(); });
  if (std::chrono::steady_clock::now() - late_end < std::chrono::milliseconds(4)) CHECK(next.ids == std::set<std::thread::id>{caller});
  // After the pause, the loops have every thread again.
  REQUIRE(wait_for_all_threads());
  check_taken_over(2);
}

// A lone loop late by a few milliseconds (a virtual machine's host took the worker's core for a
// moment) pauses nothing; a second within 20 ms does.
TEST_CASE("one short late loop pauses nothing, a second soon after pauses") {
  if (hjit::machine_threads() < 2) return;
  REQUIRE(wait_for_all_threads());
  std::this_thread::sleep_for(std::chrono::milliseconds(40));  // (past any earlier lateness)
  const int64_t before = hjit::late_loops();
  const auto begun = std::chrono::steady_clock::now();
  run_late_loop(6);
  const auto first = std::chrono::steady_clock::now();
  // (A loop that took kLongLate, the worker's sleep stretched by a virtual machine's host, pauses
  // by itself.)
  if (hjit::late_loops() == before + 1 && first - begun < hjit::pool_timing::kLongLate) CHECK_FALSE(hjit::loops_paused());
  run_late_loop(6);
  // (Each is counted late where the caller's own iteration, waiting for the worker to start, took
  // less than a third of the sleep: a worker asleep on a virtual machine can take milliseconds to
  // wake, and its loop is then not late at all.)
  const bool soon = std::chrono::steady_clock::now() - first < std::chrono::milliseconds(18);
  if (soon && hjit::late_loops() == before + 2) CHECK(hjit::loops_paused());
  REQUIRE(wait_for_all_threads());
}

TEST_CASE("a thread limit keeps a loop on fewer threads, and one thread is the caller's alone") {
  ThreadsSeen seen;
  {
    const hjit::ThreadLimit one(1);
    CHECK(hjit::loop_threads() == 1);
    hjit::parallel_for(int64_t(256), [&](int64_t) { seen.note(); });
  }
  CHECK(seen.ids == std::set<std::thread::id>{std::this_thread::get_id()});
  CHECK(hjit::loop_threads() == hjit::pool_threads());
}

TEST_CASE("results are the same bit for bit whatever the thread count: compiled, eager, modules") {
  DefaultThreads restore;
  // Reductions (sums, a softmax, a layer norm, a matmul) whose order would show a different split.
  auto f = [](const Tensor& x, const Tensor& w) {
    const Tensor h = hjit::layer_norm(hjit::matmul(x, w), std::nullopt, std::nullopt);
    return std::vector<Tensor>{hjit::softmax(h), hjit::sum(h, {0}), hjit::mean(hjit::exp(h * 0.01f))};
  };
  const Tensor x = test::random({257, 96}, DType::F32, 5), w = test::random({96, 333}, DType::F32, 6);
  auto bytes = [](const std::vector<Tensor>& ts) {
    std::vector<std::vector<float>> out;
    for (const Tensor& t : ts) out.push_back(t.to_vector<float>());
    return out;
  };
  auto compiled = hjit::jit(f, {.name = "threads_default"});
  const auto want = bytes(compiled(x, w));
  // Eager: an eager matmul this big runs the plain kernel the first time and a compiled pipeline
  // from the second on (frontend/tensor/eager_compiled.cpp), which may round otherwise: each is
  // compared with itself. The plain kernels' loops run on the pool too. Both kinds are chosen here,
  // whatever HJIT_EAGER says (the suite runs every test with plain ones: tests/CMakeLists.txt).
  const hjit::EagerKernels outer = hjit::eager_kernels();
  hjit::set_eager_kernels(hjit::EagerKernels::Compiled);
  f(x, w);
  const auto eager = bytes(f(x, w));
  hjit::set_eager_kernels(hjit::EagerKernels::Plain);
  const auto plain = bytes(f(x, w));
  hjit::set_eager_kernels(hjit::EagerKernels::Compiled);
  for (int threads : {1, 2, 3}) {
    CAPTURE(threads);
    auto limited = hjit::jit(f, {.name = "threads_" + std::to_string(threads), .threads = threads});
    CHECK(bytes(limited(x, w)) == want);
    hjit::ModuleOptions mo;
    mo.threads = threads;
    const hjit::Module m = hjit::make_module("threads_module", mo, hjit::SaveOptions{}, f, x, w);
    CHECK(bytes(m(x, w)) == want);
    hjit::set_num_threads(threads);
    CHECK(hjit::num_threads() == std::min(threads, hjit::machine_threads()));
    CHECK(bytes(compiled(x, w)) == want);
    CHECK(bytes(f(x, w)) == eager);
    hjit::set_eager_kernels(hjit::EagerKernels::Plain);
    CHECK(bytes(f(x, w)) == plain);
    hjit::set_eager_kernels(hjit::EagerKernels::Compiled);
    hjit::set_num_threads(0);
  }
  hjit::set_eager_kernels(outer);
  CHECK(hjit::num_threads() == hjit::pool_threads());
}

TEST_CASE("a negative thread count is a ValueError where it enters") {
  CHECK_THROWS_WITH_AS(hjit::set_num_threads(-1), doctest::Contains("threads must be >= 0"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(hjit::jit([](const Tensor& x) { return x + 1; }, {.name = "bad_threads", .threads = -2}),
                       doctest::Contains("threads must be >= 0"), hjit::ValueError);
  hjit::ModuleOptions o;
  o.threads = -1;
  CHECK_THROWS_WITH_AS(hjit::Module::load("/nonexistent.hjit", o), doctest::Contains("threads must be >= 0"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(hjit::make_module("bad_threads", o, hjit::SaveOptions{}, [](const Tensor& x) { return x + 1; }, Tensor::randn({4}, 1)),
                       doctest::Contains("threads must be >= 0"), hjit::ValueError);
}
