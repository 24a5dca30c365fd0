// How much memory hjit takes: tensors' storage and compiled code's temporaries all come from one
// caching allocator, whose blocks in use, peak and cache are counted (PyTorch's
// torch.cuda.memory_stats, JAX's memory_stats for the host).
//
//   hjit::reset_peak_memory();
//   step(x, y);
//   hjit::MemoryStats m = hjit::memory_stats();   // m.peak_bytes: the most this step held at once
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace hjit {

// A compiled pipeline alive in this process (held by a jit cache entry or a loaded module).
struct PipelineMemory {
  std::string name;             // its function's name (HJIT_LOG=debug and explain() use it)
  int64_t temporary_bytes = 0;  // the most one call has taken besides its arguments and results
};

struct MemoryStats {
  int64_t current_bytes = 0;   // in use now: tensors' storage and running pipelines' temporaries
  int64_t peak_bytes = 0;      // the most in use at once since the start or reset_peak_memory()
  int64_t cached_bytes = 0;    // freed blocks kept for reuse (returned to the system past 1 GiB)
  int64_t allocations = 0;     // blocks handed out since the start
  int64_t system_allocations = 0;  // of those, the ones that came from the system, not the cache
  std::vector<PipelineMemory> pipelines;
};

MemoryStats memory_stats();
// The peak starts again from what is in use now: measure one call's peak by resetting before it.
void reset_peak_memory();

// The most memory hjit takes at once (tensors' storage and compiled code's temporaries): a tensor
// that would take it past this is a ResourceError, raised before anything is allocated (a model
// declaring a huge size fails with an error its caller can catch, not an abort). Default:
// HJIT_MEMORY_LIMIT_MB, else three quarters of physical memory; bytes <= 0 restores it.
void set_memory_limit(int64_t bytes);
int64_t memory_limit();

}  // namespace hjit
