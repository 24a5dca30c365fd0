#include "support/allocator.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <optional>
#include <map>
#include <unordered_map>
#include <vector>

#include "support/settings.h"

#include <sys/mman.h>

namespace hjit {
namespace {

constexpr size_t kHeader = 64;                         // keeps the block size, keeps alignment
constexpr size_t kMaxCachedBytes = size_t(1) << 30;   // beyond this, blocks go back to the system

// Sizes round up to one of four classes per power of two: at most 25% waste.
size_t size_class(size_t n) {
  if (n <= 256) return (n + 63) / 64 * 64;
  size_t p = size_t(1) << (63 - __builtin_clzll(n - 1));  // the power of two below n
  size_t step = p / 4;
  return (n + step - 1) / step * step;
}

struct Cache {
  std::mutex mu;
  std::map<size_t, std::vector<void*>> free_blocks;  // by size; no empty lists
  size_t cached_bytes = 0;
};

// Counters for memory_stats(): relaxed atomics, a few nanoseconds an allocation.
std::atomic<int64_t> g_in_use{0}, g_peak{0}, g_thread_cached{0}, g_allocations{0}, g_system_allocations{0};

void count_taken(size_t size) {
  const int64_t now = g_in_use.fetch_add(int64_t(size), std::memory_order_relaxed) + int64_t(size);
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  g_allocations.fetch_add(1, std::memory_order_relaxed);
}

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: blocks may be freed during static destruction
  return *c;
}

// Small blocks a thread freed, for its next allocations without the global lock: the temporaries
// a compiled pipeline allocates per tile in its parallel loops (sizes known only at run time, with
// dynamic sizes) cost a lock each otherwise. Returned to the global cache when the thread ends.
constexpr size_t kThreadBlockMax = size_t(256) << 10;
constexpr size_t kThreadBlocks = 16;
struct ThreadCache {
  size_t count = 0;
  size_t size[kThreadBlocks];
  void* base[kThreadBlocks];
  ~ThreadCache();
};
thread_local bool t_cache_alive = false;  // trivially destructible: readable while threads end
thread_local ThreadCache t_cache;

void give_back(void* base, size_t size) {
  Cache& c = cache();
  {
    std::lock_guard lock(c.mu);
    if (c.cached_bytes + size <= kMaxCachedBytes) {
      c.free_blocks[size].push_back(base);
      c.cached_bytes += size;
      return;
    }
  }
  std::free(base);
}

ThreadCache::~ThreadCache() {
  t_cache_alive = false;
  for (size_t k = 0; k < count; ++k) g_thread_cached.fetch_sub(int64_t(size[k]), std::memory_order_relaxed), give_back(base[k], size[k]);
  count = 0;
}

ThreadCache* thread_cache() {
  if (!t_cache_alive) {
    static thread_local bool made = false;
    if (made) return nullptr;  // this thread's cache is gone (the thread is ending)
    made = true;
    t_cache.count = 0;
    t_cache_alive = true;
  }
  return &t_cache;
}

// Blocks above kThreadBlockMax come from an arena of large mapped regions with coalescing: a
// freed block merges with its free neighbours, and a request takes the smallest free range that
// fits. A model's first call (activations of many sizes, each a fresh page fault, microseconds
// apiece in a VM) then touches about its peak, where blocks kept per size class touched twice
// that; warm calls reuse the same ranges and fault no more. Past kMaxCachedBytes of free space, a
// region that is wholly free is unmapped.
constexpr size_t kRegion = size_t(32) << 20;

// A region aligned to and advised as huge pages: the first touch of each 2 MiB is one fault, not
// 512 (ResNet-50's first call: 500 faults and 78-95 ms, against 6,300 and 100-112 with 4 KiB
// pages). Where the kernel has no huge pages the advice does nothing.
constexpr size_t kHugePage = size_t(2) << 20;
char* map_region(size_t size) {
  void* p = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  char* raw = static_cast<char*>(p);
  char* aligned = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + kHugePage - 1) / kHugePage * kHugePage);
  if (aligned > raw) munmap(raw, size_t(aligned - raw));
  if (aligned + size < raw + size + kHugePage) munmap(aligned + size, size_t(raw + size + kHugePage - (aligned + size)));
  madvise(aligned, size, MADV_HUGEPAGE);
  return aligned;
}

struct Arena {
  struct Range {
    size_t size;
    int region;
  };
  struct Region {
    char* base;
    size_t size;
  };
  std::vector<Region> regions;
  std::map<char*, Range> free_by_addr;
  std::multimap<size_t, char*> free_by_size;
  size_t free_bytes = 0;

  void add_free(char* at, size_t size, int region) {
    free_by_addr[at] = Range{size, region};
    free_by_size.emplace(size, at);
    free_bytes += size;
  }
  void remove_free(std::map<char*, Range>::iterator it) {
    auto [lo, hi] = free_by_size.equal_range(it->second.size);
    for (auto s = lo; s != hi; ++s)
      if (s->second == it->first) {
        free_by_size.erase(s);
        break;
      }
    free_bytes -= it->second.size;
    free_by_addr.erase(it);
  }

  // `bytes` (a multiple of 64) from the smallest free range that holds it, else a new region.
  char* take(size_t bytes) {
    auto fit = free_by_size.lower_bound(bytes);
    if (fit == free_by_size.end()) {
      const size_t size = std::max(kRegion, (bytes + kRegion - 1) / kRegion * kRegion);
      char* p = map_region(size);
      regions.push_back(Region{p, size});
      g_system_allocations.fetch_add(1, std::memory_order_relaxed);
      add_free(static_cast<char*>(p), size, int(regions.size() - 1));
      fit = free_by_size.lower_bound(bytes);
    }
    char* at = fit->second;
    auto range = free_by_addr.find(at);
    const Range r = range->second;
    remove_free(range);
    if (r.size > bytes) add_free(at + bytes, r.size - bytes, r.region);
    return at;
  }

  // A block given back: merged with the free ranges beside it in its region.
  void give(char* at, size_t bytes) {
    int region = -1;
    for (size_t k = 0; k < regions.size(); ++k)
      if (at >= regions[k].base && at < regions[k].base + regions[k].size) region = int(k);
    auto next = free_by_addr.lower_bound(at);
    if (next != free_by_addr.end() && next->first == at + bytes && next->second.region == region) {
      bytes += next->second.size;
      remove_free(next);
    }
    auto after = free_by_addr.lower_bound(at);
    if (after != free_by_addr.begin()) {
      auto prev = std::prev(after);
      if (prev->first + prev->second.size == at && prev->second.region == region) {
        at = prev->first;
        bytes += prev->second.size;
        remove_free(prev);
      }
    }
    const Region whole = region >= 0 ? regions[size_t(region)] : Region{nullptr, 0};
    if (whole.base && at == whole.base && bytes == whole.size && free_bytes + bytes > kMaxCachedBytes) {
      munmap(whole.base, whole.size);  // past the cache's bound a wholly free region goes back
      regions[size_t(region)] = Region{nullptr, 0};
      return;
    }
    add_free(at, bytes, region);
  }
};

Arena& arena() {
  static Arena* a = new Arena;  // never destroyed: blocks may be freed while the process exits
  return *a;
}

// The bytes a block of `size` takes in the arena, its header included.
size_t arena_bytes(size_t size) { return (size + kHeader + 63) / 64 * 64; }

}  // namespace

namespace {

int64_t default_limit() {
  const std::optional<int64_t> mb = setting::count(setting::Id::MemoryLimitMb);
  if (mb && *mb > 0) return std::min<int64_t>(*mb, INT64_MAX >> 21) << 20;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? int64_t(pages) * int64_t(page) / 4 * 3 : INT64_MAX;
}

std::atomic<int64_t> g_limit{0};  // 0: not read yet

int64_t limit_now() {
  int64_t l = g_limit.load(std::memory_order_relaxed);
  if (l == 0) {
    l = default_limit();
    g_limit.store(l, std::memory_order_relaxed);
  }
  return l;
}

}  // namespace

namespace {

// Guarded blocks, by the pointer handed out: their mappings, and the bytes each holds.
struct Guarded {
  char* map;
  size_t map_bytes, size;
};
struct GuardedBlocks {
  std::mutex mu;
  std::unordered_map<const void*, Guarded> blocks;
};
GuardedBlocks& guarded() {
  static GuardedBlocks* g = new GuardedBlocks;  // never destroyed, as the arena
  return *g;
}
std::atomic<int> g_guard_mode{-1};     // -1: HJIT_GUARD_PAGES not read yet
std::atomic<int64_t> g_guarded_count{0};  // blocks in guarded(): none, and no lookup on the fast path

GuardPages guard_mode() {
  int m = g_guard_mode.load(std::memory_order_relaxed);
  if (m < 0) {
    const std::string c = setting::choice(setting::Id::GuardPages);
    m = int(c == "after" ? GuardPages::After : c == "before" ? GuardPages::Before : GuardPages::Off);
    g_guard_mode.store(m, std::memory_order_relaxed);
  }
  return GuardPages(m);
}

void* guarded_alloc(size_t size, GuardPages mode) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  // After: the header (the block's size, where cached_size reads it) and the bytes in pages of
  // their own, the bytes ending at the inaccessible page. Before: the bytes start one page in.
  const size_t data_pages = (size + kHeader + page - 1) / page, map_bytes = (data_pages + 1) * page;
  void* m = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  char* map = static_cast<char*>(m);
  char* p = mode == GuardPages::After ? map + data_pages * page - size : map + page;
  if (mprotect(mode == GuardPages::After ? map + data_pages * page : map, page, PROT_NONE) != 0) {
    munmap(map, map_bytes);
    throw std::bad_alloc();
  }
  if (mode == GuardPages::After) *reinterpret_cast<size_t*>(p - kHeader) = size;
  GuardedBlocks& g = guarded();
  std::lock_guard lock(g.mu);
  g.blocks.emplace(p, Guarded{map, map_bytes, size});
  g_guarded_count.fetch_add(1, std::memory_order_relaxed);
  return p;
}

// The guarded block at p, if p is one; taken out of the table where `take`.
std::optional<Guarded> find_guarded(const void* p, bool take) {
  if (g_guarded_count.load(std::memory_order_relaxed) == 0) return std::nullopt;  // the usual case
  GuardedBlocks& g = guarded();
  std::lock_guard lock(g.mu);
  auto it = g.blocks.find(p);
  if (it == g.blocks.end()) return std::nullopt;
  const Guarded b = it->second;
  if (take) g.blocks.erase(it), g_guarded_count.fetch_sub(1, std::memory_order_relaxed);
  return b;
}

}  // namespace

void set_guard_pages(GuardPages mode) { g_guard_mode.store(int(mode), std::memory_order_relaxed); }

void set_allocation_limit(int64_t bytes) { g_limit.store(bytes > 0 ? bytes : default_limit(), std::memory_order_relaxed); }
int64_t allocation_limit() { return limit_now(); }

void* cached_alloc(size_t bytes) {
  const GuardPages guard = guard_mode();
  // A guarded block holds its bytes rounded up to the alignment only: nothing of a size class.
  const size_t size = guard != GuardPages::Off && bytes < SIZE_MAX / 2 ? std::max<size_t>(64, (bytes + 63) / 64 * 64)
                                                                     : size_class(bytes == 0 ? 1 : bytes);
  const int64_t limit = limit_now(), in_use = g_in_use.load(std::memory_order_relaxed);
  if (size > uint64_t(INT64_MAX) || int64_t(size) > limit - in_use) throw LimitExceeded(size, in_use, limit);
  if (guard != GuardPages::Off) {
    void* p = guarded_alloc(size, guard);
    g_system_allocations.fetch_add(1, std::memory_order_relaxed);
    count_taken(size);
    return p;
  }
  if (size > kThreadBlockMax) {
    Cache& c = cache();
    std::lock_guard lock(c.mu);
    char* base = arena().take(arena_bytes(size));
    *reinterpret_cast<size_t*>(base) = size;
    count_taken(size);
    return base + kHeader;
  }
  if (size <= kThreadBlockMax)
    if (ThreadCache* t = thread_cache())
      for (size_t k = t->count; k-- > 0;)
        if (t->size[k] == size) {
          void* base = t->base[k];
          t->base[k] = t->base[t->count - 1], t->size[k] = t->size[t->count - 1];
          --t->count;
          g_thread_cached.fetch_sub(int64_t(size), std::memory_order_relaxed);
          count_taken(size);
          return static_cast<char*>(base) + kHeader;
        }
  {
    Cache& c = cache();
    std::lock_guard lock(c.mu);
    // The smallest cached block that fits and wastes at most a third of itself: a program's first
    // call (a model's activations of many sizes) then takes from the system about its peak, not
    // one block per size class (each fresh page a fault, microseconds apiece in a VM).
    auto it = c.free_blocks.lower_bound(size);
    if (it != c.free_blocks.end() && it->first <= size + size / 2) {
      const size_t got = it->first;
      void* base = it->second.back();
      it->second.pop_back();
      if (it->second.empty()) c.free_blocks.erase(it);
      c.cached_bytes -= got;
      count_taken(got);
      return static_cast<char*>(base) + kHeader;
    }
  }
  void* base = std::aligned_alloc(64, size + kHeader);
  if (!base) throw std::bad_alloc();
  *static_cast<size_t*>(base) = size;
  g_system_allocations.fetch_add(1, std::memory_order_relaxed);
  count_taken(size);
  return static_cast<char*>(base) + kHeader;
}

size_t block_size(size_t bytes) { return size_class(bytes == 0 ? 1 : bytes); }

size_t cached_size(const void* p) {
  if (const std::optional<Guarded> g = find_guarded(p, false)) return g->size;
  return *static_cast<const size_t*>(static_cast<const void*>(static_cast<const char*>(p) - kHeader));
}

void cached_free(void* p) {
  if (!p) return;
  if (const std::optional<Guarded> g = find_guarded(p, true)) {
    g_in_use.fetch_sub(int64_t(g->size), std::memory_order_relaxed);
    munmap(g->map, g->map_bytes);
    return;
  }
  void* base = static_cast<char*>(p) - kHeader;
  const size_t size = *static_cast<size_t*>(base);
  g_in_use.fetch_sub(int64_t(size), std::memory_order_relaxed);
  if (size > kThreadBlockMax) {
    Cache& c = cache();
    std::lock_guard lock(c.mu);
    arena().give(static_cast<char*>(base), arena_bytes(size));
    return;
  }
  if (size <= kThreadBlockMax)
    if (ThreadCache* t = thread_cache(); t && t->count < kThreadBlocks) {
      t->size[t->count] = size, t->base[t->count] = base;
      ++t->count;
      g_thread_cached.fetch_add(int64_t(size), std::memory_order_relaxed);
      return;
    }
  give_back(base, size);
}

AllocatorCounts allocator_counts() {
  AllocatorCounts c;
  c.in_use = g_in_use.load(std::memory_order_relaxed);
  c.peak = std::max(c.in_use, g_peak.load(std::memory_order_relaxed));
  {
    std::lock_guard lock(cache().mu);
    c.cached = int64_t(cache().cached_bytes + arena().free_bytes);
  }
  c.cached += g_thread_cached.load(std::memory_order_relaxed);
  c.allocations = g_allocations.load(std::memory_order_relaxed);
  c.system_allocations = g_system_allocations.load(std::memory_order_relaxed);
  return c;
}

void reset_allocator_peak() { g_peak.store(g_in_use.load(std::memory_order_relaxed), std::memory_order_relaxed); }

}  // namespace hjit
