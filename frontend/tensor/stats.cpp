// The process-wide counters and limits the API reports and sets: memory, threads, and the compile
// cache.
#include <algorithm>

#include <hjit/jit_options.h>
#include <hjit/error.h>
#include <hjit/memory.h>
#include <hjit/threads.h>

#include "halide_backend/backend.h"
#include "support/allocator.h"
#include "support/thread_pool.h"

namespace hjit {

MemoryStats memory_stats() {
  const AllocatorCounts a = allocator_counts();
  MemoryStats m;
  m.current_bytes = a.in_use, m.peak_bytes = a.peak, m.cached_bytes = a.cached;
  m.allocations = a.allocations, m.system_allocations = a.system_allocations;
  for (const auto& e : backend::live_executables()) m.pipelines.push_back(PipelineMemory{e->name(), e->temporary_bytes()});
  std::sort(m.pipelines.begin(), m.pipelines.end(), [](const PipelineMemory& a, const PipelineMemory& b) { return a.name < b.name; });
  return m;
}

void reset_peak_memory() { reset_allocator_peak(); }

CacheStats cache_stats() {
  const backend::CacheCounts c = backend::cache_counts();
  CacheStats s;
  s.memory_hits = c.memory_hits, s.disk_hits = c.disk_hits, s.misses = c.misses, s.disk_rejected = c.disk_rejected;
  s.disk_writes = c.disk_writes, s.disk_evictions = c.disk_evictions, s.disk_entries = c.disk_entries;
  s.disk_bytes = c.disk_bytes, s.directory = c.directory;
  s.shared_hits = c.shared_hits, s.shared_rejected = c.shared_rejected, s.shared_writes = c.shared_writes, s.shared = c.shared;
  return s;
}

void set_memory_limit(int64_t bytes) { set_allocation_limit(bytes); }
int64_t memory_limit() { return allocation_limit(); }

void set_num_threads(int threads) {
  if (threads < 0) throw ValueError("hjit::set_num_threads: threads must be >= 0 (0: the default), got " + std::to_string(threads));
  set_pool_threads(threads);
}
int num_threads() { return pool_threads(); }

}  // namespace hjit
