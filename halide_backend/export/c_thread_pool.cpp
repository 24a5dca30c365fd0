// An exported CPU library's parallel loops: hjit's thread pool (support/thread_pool.cpp), written
// in C so that the library needs no C++ runtime and no OpenMP. Each loop is split in contiguous
// shares as OpenMP's static schedule splits it; a thread that finishes its own takes iterations
// from the far end of a late one's; a loop ends when its iterations do; idle workers spin
// (yielding now and then), then sleep; the caller spins, then sleeps, once only iterations other
// threads are inside of remain; after a worker kept it waiting a time slice, loops run on their
// callers for a pause. Its timings are hjit's pool's (support/pool_timing.h), written in. On a
// machine where another process holds a core, OpenMP's team waited out that process's time slice
// at every loop (docs/threads.md: ResNet-50 234 against 104-119 ms).
#include "halide_backend/export/library.h"
#include "support/pool_timing.h"
#include "support/settings.h"

namespace hjit::backend {

std::string c_thread_pool() {
  std::string c = R"(/* Parallel loops: hjit's thread pool. THREADS_VARIABLE (read at the first loop) sets its threads;
   by default one per CPU this process may run on. */
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
enum { hjit_NAME_max_threads = 256 };
typedef struct {
  halide_task_t task;
  void* ctx;
  uint8_t* closure;
  int min, threads;
  _Atomic int refs;      /* the caller, the pool's slot and each worker that took the loop */
  _Atomic int remaining; /* iterations not finished (or skipped after an error) */
  _Atomic int status;
  /* Share p at [8 p], a cache line each, none with the fields above (read at every iteration):
     [front, back) in one word. */
  _Alignas(64) _Atomic uint64_t spans[];
} hjit_NAME_loop;
static pthread_mutex_t hjit_NAME_pool_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hjit_NAME_pool_wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t hjit_NAME_pool_done = PTHREAD_COND_INITIALIZER;
static _Atomic uint64_t hjit_NAME_generation;
static _Atomic int hjit_NAME_busy;
static _Atomic int hjit_NAME_wanted;
static hjit_NAME_loop* hjit_NAME_current; /* under the mutex */
static int hjit_NAME_sleepers, hjit_NAME_started, hjit_NAME_stopping;
static pthread_t hjit_NAME_workers[hjit_NAME_max_threads];
static __thread int hjit_NAME_in_loop;
/* A worker another process holds off its core inside an iteration makes the caller wait a time
   slice: where that persists (a second late loop soon after, or one long wait), loops run on
   their callers for a pause, doubled while it recurs, as hjit's pool does (its
   support/thread_pool.cpp; the times in nanoseconds are its support/pool_timing.h's). The
   pause's fields are the caller's that holds hjit_NAME_busy. */
static _Atomic uint64_t hjit_NAME_serial_until;
static uint64_t hjit_NAME_pause = FIRST_PAUSE_NS, hjit_NAME_last_late, hjit_NAME_last_pause;

static uint64_t hjit_NAME_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
/* Mostly the CPU's pause, now and then the scheduler's: a thread waiting for this core gets it. */
static void hjit_NAME_relax(int k) {
  if ((k & 15) == 15) sched_yield();
#if defined(__x86_64__) || defined(__i386__)
  else __builtin_ia32_pause();
#endif
}
static int hjit_NAME_threads(void) {
  int n = atomic_load_explicit(&hjit_NAME_wanted, memory_order_relaxed);
  if (n > 0) return n;
  cpu_set_t set;
  n = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0 ? CPU_COUNT(&set) : 1;
  const char* env = getenv("THREADS_VARIABLE");
  if (env && atoi(env) > 0) n = atoi(env);
  if (n > hjit_NAME_max_threads) n = hjit_NAME_max_threads;
  atomic_store_explicit(&hjit_NAME_wanted, n, memory_order_relaxed);
  return n;
}
static void hjit_NAME_release_loop(hjit_NAME_loop* l) {
  if (atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) == 1) free(l);
}
/* One iteration of a share, from its front (its owner) or its back (the others). */
static int hjit_NAME_take(_Atomic uint64_t* span, int back, int* i) {
  uint64_t s = atomic_load_explicit(span, memory_order_relaxed);
  for (;;) {
    const uint32_t f = (uint32_t)s, b = (uint32_t)(s >> 32);
    if (f >= b) return 0;
    const uint64_t next = back ? ((uint64_t)(b - 1) << 32 | f) : ((uint64_t)b << 32 | (f + 1));
    if (atomic_compare_exchange_weak_explicit(span, &s, next, memory_order_acq_rel, memory_order_relaxed)) {
      *i = (int)(back ? b - 1 : f);
      return 1;
    }
  }
}
/* Participant p's part: its own share, then the others' from their backs. The count done is
   handed back once: a counter written at every iteration moves between the cores each time.
   Returns the iterations it ran. */
static int hjit_NAME_work(hjit_NAME_loop* l, int p) {
  const int outer = hjit_NAME_in_loop;
  int i, done = 0;
  hjit_NAME_in_loop = 1;
  for (int k = 0; k < l->threads; ++k) {
    _Atomic uint64_t* span = &l->spans[(size_t)((p + k) % l->threads) * 8];
    for (; hjit_NAME_take(span, k > 0, &i); ++done) {
      if (atomic_load_explicit(&l->status, memory_order_relaxed) != 0) continue;
      const int s = l->task(l->ctx, l->min + i, l->closure);
      int none = 0;
      if (s != 0) atomic_compare_exchange_strong(&l->status, &none, s);
    }
  }
  hjit_NAME_in_loop = outer;
  if (done > 0 && atomic_fetch_sub_explicit(&l->remaining, done, memory_order_acq_rel) == done) {
    pthread_mutex_lock(&hjit_NAME_pool_mutex);
    pthread_cond_broadcast(&hjit_NAME_pool_done);
    pthread_mutex_unlock(&hjit_NAME_pool_mutex);
  }
  return done;
}
static void* hjit_NAME_worker(void* arg) {
  const int index = (int)(intptr_t)arg;
  /* A loop in flight when this thread starts (the one that started it) is its to join. */
  pthread_mutex_lock(&hjit_NAME_pool_mutex);
  uint64_t seen = atomic_load_explicit(&hjit_NAME_generation, memory_order_acquire) - (hjit_NAME_current ? 1 : 0);
  pthread_mutex_unlock(&hjit_NAME_pool_mutex);
  for (;;) {
    const uint64_t until = hjit_NAME_now_ns() + IDLE_SPIN_NS;
    for (int k = 0; atomic_load_explicit(&hjit_NAME_generation, memory_order_acquire) == seen; ++k) {
      hjit_NAME_relax(k);
      if ((k & 255) == 255 && hjit_NAME_now_ns() > until) break;
    }
    pthread_mutex_lock(&hjit_NAME_pool_mutex);
    while (atomic_load_explicit(&hjit_NAME_generation, memory_order_acquire) == seen && !hjit_NAME_stopping) {
      ++hjit_NAME_sleepers;
      pthread_cond_wait(&hjit_NAME_pool_wake, &hjit_NAME_pool_mutex);
      --hjit_NAME_sleepers;
    }
    if (hjit_NAME_stopping) {
      pthread_mutex_unlock(&hjit_NAME_pool_mutex);
      return NULL;
    }
    seen = atomic_load_explicit(&hjit_NAME_generation, memory_order_acquire);
    hjit_NAME_loop* l = hjit_NAME_current;
    if (l) atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&hjit_NAME_pool_mutex);
    if (l) {
      if (index < l->threads) hjit_NAME_work(l, index);
      hjit_NAME_release_loop(l);
    }
  }
}
static int hjit_NAME_serial(void* ctx, halide_task_t task, int min, int extent, uint8_t* closure) {
  const int outer = hjit_NAME_in_loop;
  int status = 0;
  hjit_NAME_in_loop = 1;
  for (int i = min; i < min + extent && status == 0; ++i) status = task(ctx, i, closure);
  hjit_NAME_in_loop = outer;
  return status;
}
/* Loops inside an iteration, and loops from a second application thread while one runs, run on
   their callers. */
static int hjit_NAME_par_for(void* ctx, halide_task_t task, int min, int extent, uint8_t* closure) {
  int threads = hjit_NAME_threads(), idle = 0;
  if (threads > extent) threads = extent;
  const uint64_t serial_until = atomic_load_explicit(&hjit_NAME_serial_until, memory_order_relaxed);
  if (threads <= 1 || hjit_NAME_in_loop || (serial_until != 0 && hjit_NAME_now_ns() < serial_until) ||
      !atomic_compare_exchange_strong(&hjit_NAME_busy, &idle, 1))
    return hjit_NAME_serial(ctx, task, min, extent, closure);
  const uint64_t start = hjit_NAME_now_ns();
  hjit_NAME_loop* l = (hjit_NAME_loop*)aligned_alloc(64, sizeof(hjit_NAME_loop) + sizeof(_Atomic uint64_t) * 8 * (size_t)threads);
  if (!l) {
    atomic_store(&hjit_NAME_busy, 0);
    return hjit_NAME_serial(ctx, task, min, extent, closure);
  }
  l->task = task, l->ctx = ctx, l->closure = closure, l->min = min, l->threads = threads;
  atomic_init(&l->refs, 2);
  atomic_init(&l->remaining, extent);
  atomic_init(&l->status, 0);
  for (int p = 0; p < threads; ++p)
    atomic_init(&l->spans[(size_t)p * 8], (uint64_t)((int64_t)extent * (p + 1) / threads) << 32 | (uint64_t)((int64_t)extent * p / threads));
  pthread_mutex_lock(&hjit_NAME_pool_mutex);
  /* A worker that cannot start leaves its share to the others. */
  while (hjit_NAME_started < threads - 1 &&
         pthread_create(&hjit_NAME_workers[hjit_NAME_started], NULL, hjit_NAME_worker, (void*)(intptr_t)(hjit_NAME_started + 1)) == 0)
    ++hjit_NAME_started;
  hjit_NAME_current = l;
  atomic_fetch_add_explicit(&hjit_NAME_generation, 1, memory_order_release);
  if (hjit_NAME_sleepers > 0) pthread_cond_broadcast(&hjit_NAME_pool_wake);
  pthread_mutex_unlock(&hjit_NAME_pool_mutex);
  const int own = hjit_NAME_work(l, 0);
  /* Left: iterations others are inside of. Asleep, this core is free for a preempted worker. */
  const uint64_t own_done = hjit_NAME_now_ns(), until = own_done + STRAGGLER_SPIN_NS;
  for (int k = 0; atomic_load_explicit(&l->remaining, memory_order_acquire) > 0; ++k) {
    if ((k & 63) == 63 && hjit_NAME_now_ns() > until) {
      pthread_mutex_lock(&hjit_NAME_pool_mutex);
      while (atomic_load_explicit(&l->remaining, memory_order_acquire) > 0) pthread_cond_wait(&hjit_NAME_pool_done, &hjit_NAME_pool_mutex);
      pthread_mutex_unlock(&hjit_NAME_pool_mutex);
      break;
    }
    hjit_NAME_relax(k);
  }
  pthread_mutex_lock(&hjit_NAME_pool_mutex);
  hjit_NAME_current = NULL;
  pthread_mutex_unlock(&hjit_NAME_pool_mutex);
  const uint64_t end = hjit_NAME_now_ns();
  if (end - own_done >= LATE_WAIT_NS + 2 * ((own_done - start) / (uint64_t)(own > 0 ? own : 1))) {
    const int persists = end - own_done >= LONG_LATE_NS || end - hjit_NAME_last_late < DENSE_NS;
    hjit_NAME_last_late = end;
    if (persists) {
      const int recent = end - hjit_NAME_last_pause < RECENT_NS;
      hjit_NAME_pause = !recent ? FIRST_PAUSE_NS : hjit_NAME_pause * 2 < LONGEST_PAUSE_NS ? hjit_NAME_pause * 2 : LONGEST_PAUSE_NS;
      hjit_NAME_last_pause = end;
      atomic_store_explicit(&hjit_NAME_serial_until, end + hjit_NAME_pause, memory_order_relaxed);
    }
  }
  hjit_NAME_release_loop(l); /* the slot's */
  const int status = atomic_load(&l->status);
  hjit_NAME_release_loop(l);
  atomic_store(&hjit_NAME_busy, 0);
  return status;
}
/* Workers end before the library's code goes (a shared library that holds it unloaded). */
static void hjit_NAME_stop_pool(void) {
  pthread_mutex_lock(&hjit_NAME_pool_mutex);
  hjit_NAME_stopping = 1;
  atomic_fetch_add(&hjit_NAME_generation, 1);
  pthread_cond_broadcast(&hjit_NAME_pool_wake);
  const int started = hjit_NAME_started;
  pthread_mutex_unlock(&hjit_NAME_pool_mutex);
  for (int i = 0; i < started; ++i) pthread_join(hjit_NAME_workers[i], NULL);
}

)";
  // The variable's name from hjit's table of settings, where it is documented.
  const std::string variable = setting::row(setting::Id::Threads).name;
  auto put = [&](const std::string& word, const std::string& value) {
    for (size_t at = 0; (at = c.find(word, at)) != std::string::npos; at += value.size()) c.replace(at, word.size(), value);
  };
  put("THREADS_VARIABLE", variable);
  // The pool's timings, in nanoseconds.
  using namespace pool_timing;
  auto ns = [](auto d) { return std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()) + "u"; };
  put("IDLE_SPIN_NS", ns(kIdleSpin));
  put("STRAGGLER_SPIN_NS", ns(kStragglerSpin));
  put("LATE_WAIT_NS", ns(kLateWait));
  put("LONG_LATE_NS", ns(kLongLate));
  put("DENSE_NS", ns(kDense));
  put("RECENT_NS", ns(kRecent));
  put("FIRST_PAUSE_NS", ns(kFirstPause));
  put("LONGEST_PAUSE_NS", ns(kLongestPause));
  return c;
}

}  // namespace hjit::backend
