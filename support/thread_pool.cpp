#include "support/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "support/log.h"
#include "support/pool_timing.h"
#include "support/settings.h"

namespace hjit {
namespace {

using namespace pool_timing;

constexpr int kMaxThreads = 256;

using Clock = std::chrono::steady_clock;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// A spinning thread's pause: mostly the CPU's, now and then the scheduler's, so that a thread of
// this process (or another's) waiting for the core gets it: with a core taken by another process,
// a loop's threads may share the other one, and a waiter that only paused held it from the thread
// it waited for. The yields stay frequent where they are dear: on a 2-vCPU Zen 5 guest whose
// sched_yield costs 1.2 us (60 pauses), a GPT-2 int8 decode step ran 3-10% slower yielding every
// 128 pauses (alternated, four rounds) and no faster every 4.
inline void relax(int k) {
  if ((k & 15) != 15) cpu_relax();
  else std::this_thread::yield();
}

// The iterations [front, back) of one thread's share, in one word: the owner takes from the front,
// the others from the back, each with one compare-and-swap.
struct alignas(64) Share {
  std::atomic<uint64_t> span{0};
  static uint64_t pack(uint32_t front, uint32_t back) { return uint64_t(back) << 32 | front; }
  bool take_front(int& i) {
    uint64_t s = span.load(std::memory_order_relaxed);
    for (;;) {
      const uint32_t f = uint32_t(s), b = uint32_t(s >> 32);
      if (f >= b) return false;
      if (span.compare_exchange_weak(s, pack(f + 1, b), std::memory_order_acq_rel)) return i = int(f), true;
    }
  }
  bool take_back(int& i) {
    uint64_t s = span.load(std::memory_order_relaxed);
    for (;;) {
      const uint32_t f = uint32_t(s), b = uint32_t(s >> 32);
      if (f >= b) return false;
      if (span.compare_exchange_weak(s, pack(f, b - 1), std::memory_order_acq_rel)) return i = int(b - 1), true;
    }
  }
};

thread_local bool t_in_loop = false;
thread_local int t_limit = 0;  // ThreadLimit's cap, 0: none

struct Job {
  ParallelTask task = nullptr;
  void* context = nullptr;
  uint8_t* closure = nullptr;
  int min = 0, threads = 1, capacity = 0;  // capacity: the shares allocated
  std::unique_ptr<Share[]> shares;
  alignas(64) std::atomic<int> remaining{0};  // iterations not finished (or skipped after an error)
  std::atomic<int> status{0};

  void run_one(int i) {
    if (status.load(std::memory_order_relaxed) != 0) return;  // skipped after an error
    const int s = task(context, min + i, closure);
    if (s != 0) {
      int none = 0;
      status.compare_exchange_strong(none, s);
    }
  }
  // Participant p's part: its own share front to back, then the others' from their backs. The
  // count of iterations done is handed back once, at the end: a counter both threads wrote at
  // each iteration moved its cache line between the cores each time (10% of an int8 encoder).
  // Returns the iterations it ran.
  int work(int p) {
    const bool outer = t_in_loop;
    t_in_loop = true;
    int i, done = 0;
    for (; shares[size_t(p)].take_front(i); ++done) run_one(i);
    for (int k = 1; k < threads; ++k) {
      Share& other = shares[size_t((p + k) % threads)];
      for (; other.take_back(i); ++done) run_one(i);
    }
    t_in_loop = outer;
    if (done > 0 && remaining.fetch_sub(done, std::memory_order_acq_rel) == done) remaining.notify_all();
    return done;
  }
};

class Pool {
 public:
  static Pool& get() {
    static Pool* pool = new Pool;  // never destroyed: workers may outlive static destructors
    return *pool;
  }

  int run(ParallelTask task, void* context, int min, int extent, uint8_t* closure, int threads) {
    if (extent <= 0) return 0;
    if (threads <= 0) threads = default_threads();
    if (t_limit > 0) threads = std::min(threads, t_limit);
    threads = std::min({threads, extent, kMaxThreads});
    if (threads <= 1 || t_in_loop || paused() || busy_.exchange(true, std::memory_order_acquire))
      return serial(task, context, min, extent, closure);
    const Clock::time_point start = Clock::now();
    ensure_workers(threads - 1);
    // The last loop's job again where no worker holds it any more: a job and its shares are
    // over-aligned, and two aligned allocations a loop (each a malloc and a free inside glibc's
    // memalign) were about 1% of an int8 encoder's call, on the caller before its workers start.
    std::shared_ptr<Job> job;
    if (spare_ && spare_.use_count() == 1 && spare_->capacity >= threads) {
      std::atomic_thread_fence(std::memory_order_acquire);  // (the workers' last reads of it before their release)
      job = std::move(spare_);
      job->status.store(0, std::memory_order_relaxed);
    } else {
      job = std::make_shared<Job>();
      job->shares.reset(new Share[size_t(threads)]);
      job->capacity = threads;
    }
    job->task = task, job->context = context, job->closure = closure, job->min = min, job->threads = threads;
    for (int p = 0; p < threads; ++p)  // OpenMP's static split: the same rows to the same thread
      job->shares[size_t(p)].span.store(Share::pack(uint32_t(int64_t(extent) * p / threads), uint32_t(int64_t(extent) * (p + 1) / threads)),
                                        std::memory_order_relaxed);
    job->remaining.store(extent, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      current_ = job;
      generation_.fetch_add(1, std::memory_order_release);
      if (sleepers_ > 0) wake_.notify_all();
    }
    const int own_iterations = job->work(0);
    // What is left is iterations other threads are inside of: wait for those alone, spinning for
    // kStragglerSpin, then asleep. Asleep, this core is idle, and the kernel moves a thread that
    // waits for a core (a worker another process preempted inside its iteration) onto it at once;
    // spinning or yielding, it would wait out the other process's time slice (milliseconds).
    const Clock::time_point own_done = Clock::now();
    const auto until = own_done + kStragglerSpin;
    for (int k = 0;; ++k) {
      const int left = job->remaining.load(std::memory_order_acquire);
      if (left == 0) break;
      if ((k & 63) == 63 && std::chrono::steady_clock::now() > until) job->remaining.wait(left, std::memory_order_acquire);
      else relax(k);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (current_ == job) current_.reset();
    }
    spare_ = std::move(job);
    after_loop((own_done - start) / std::max(1, own_iterations), own_done, Clock::now());
    const int status = spare_->status.load();
    busy_.store(false, std::memory_order_release);
    return status;
  }

  int default_threads() {
    const int set = requested_.load(std::memory_order_relaxed);
    if (set > 0) return std::min(set, cpus());
    static const int fallback = [] {
      const std::optional<int64_t> env = setting::count(setting::Id::Threads);
      return env && *env > 0 ? int(std::min<int64_t>(*env, kMaxThreads)) : cpus();
    }();
    return fallback;
  }
  int64_t late_loops() const { return late_loops_.load(std::memory_order_relaxed); }
  bool paused() const {
    const Clock::rep until = serial_until_.load(std::memory_order_relaxed);
    return until != 0 && Clock::now().time_since_epoch().count() < until;  // (no clock read before a first pause)
  }
  void set_default(int threads) { requested_.store(std::max(0, threads), std::memory_order_relaxed); }

  static int cpus() {
    static const int n = [] {
      cpu_set_t set;
      if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return std::min(CPU_COUNT(&set), kMaxThreads);
      return std::clamp(int(std::thread::hardware_concurrency()), 1, kMaxThreads);
    }();
    return n;
  }

 private:
  static int serial(ParallelTask task, void* context, int min, int extent, uint8_t* closure) {
    const bool outer = t_in_loop;
    t_in_loop = true;
    int status = 0;
    for (int i = min; i < min + extent && status == 0; ++i) status = task(context, i, closure);
    t_in_loop = outer;
    return status;
  }

  // (Called by the loop's caller while it holds busy_: the pause's fields are its alone.)
  void after_loop(Clock::duration iteration, Clock::time_point own_done, Clock::time_point end) {
    const Clock::duration waited = end - own_done;
    if (waited < kLateWait + 2 * iteration) return;
    late_loops_.fetch_add(1, std::memory_order_relaxed);
    const bool persists = waited >= kLongLate || end - last_late_ < kDense;
    last_late_ = end;
    if (!persists) return;
    pause_ = end - last_pause_ < kRecent ? std::min<Clock::duration>(2 * pause_, kLongestPause) : Clock::duration(kFirstPause);
    last_pause_ = end;
    serial_until_.store((end + pause_).time_since_epoch().count(), std::memory_order_relaxed);
    log().debug("thread pool: a worker was {:.2f} ms late (another process holds a core); loops run on their callers for {:.0f} ms",
                std::chrono::duration<double, std::milli>(waited).count(), std::chrono::duration<double, std::milli>(pause_).count());
  }

  void ensure_workers(int n) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (int(workers_.size()) < n) {
      const int index = int(workers_.size()) + 1;  // the caller is participant 0
      // The generation now, not when the thread starts: a loop begun in between is its to join.
      workers_.emplace_back([this, index, seen = generation_.load(std::memory_order_acquire)] { worker(index, seen); });
      workers_.back().detach();
    }
  }

  void worker(int index, uint64_t seen) {
    for (;;) {
      const auto until = std::chrono::steady_clock::now() + kIdleSpin;
      for (int k = 0; generation_.load(std::memory_order_acquire) == seen; ++k) {
        relax(k);
        if ((k & 255) == 255 && std::chrono::steady_clock::now() > until) break;
      }
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (generation_.load(std::memory_order_acquire) == seen) {
          ++sleepers_;
          wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
          --sleepers_;
        }
        seen = generation_.load(std::memory_order_acquire);
        job = current_;
      }
      if (job && index < job->threads) job->work(index);
    }
  }

  std::atomic<bool> busy_{false};
  std::atomic<Clock::rep> serial_until_{0};  // loops run serially before this time (after_loop)
  std::atomic<int64_t> late_loops_{0};
  Clock::duration pause_ = kFirstPause;
  Clock::time_point last_late_{}, last_pause_{};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> requested_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  int sleepers_ = 0;
  std::shared_ptr<Job> current_;
  std::shared_ptr<Job> spare_;  // (the caller's, under busy_)
  std::vector<std::thread> workers_;
};

}  // namespace

int parallel_for(ParallelTask task, void* context, int min, int extent, uint8_t* closure, int threads) {
  return Pool::get().run(task, context, min, extent, closure, threads);
}

int pool_threads() { return Pool::get().default_threads(); }
int machine_threads() { return Pool::cpus(); }
int loop_threads() { return t_limit > 0 ? std::min(t_limit, pool_threads()) : pool_threads(); }
void set_pool_threads(int threads) { Pool::get().set_default(threads); }
bool in_parallel_loop() { return t_in_loop; }
int64_t late_loops() { return Pool::get().late_loops(); }
bool loops_paused() { return Pool::get().paused(); }

ThreadLimit::ThreadLimit(int threads) : previous_(t_limit) {
  if (threads > 0) t_limit = threads;
}
ThreadLimit::~ThreadLimit() { t_limit = previous_; }

}  // namespace hjit
