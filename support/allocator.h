// A caching allocator for tensor storage and Halide's internal buffers. Large blocks from malloc
// come from mmap and return to the kernel on free, so a compiled call that allocates the same
// temporaries every time pays page faults every time; blocks kept here are reused instead
// (PyTorch's CPU caching allocator makes the same trade).
#pragma once
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace hjit {

void* cached_alloc(size_t bytes);  // 64-byte aligned; never null (throws std::bad_alloc)

// The most the allocator hands out at once (blocks in use): an allocation that would pass it
// throws LimitExceeded (a std::bad_alloc, so every caller that survives running out of memory
// survives this too) before asking the system. Default: HJIT_MEMORY_LIMIT_MB, else three quarters
// of the machine's physical memory; a file that declares a huge size then fails with a typed
// error, not an abort of the process that loaded it.
struct LimitExceeded : std::bad_alloc {
  size_t bytes = 0;
  int64_t in_use = 0, limit = 0;
  LimitExceeded(size_t b, int64_t u, int64_t l) : bytes(b), in_use(u), limit(l) {}
  const char* what() const noexcept override { return "hjit's memory limit"; }
};
void set_allocation_limit(int64_t bytes);  // <= 0: the default again

// Guard pages (HJIT_GUARD_PAGES, a debugging aid): each block from cached_alloc gets a mapping of
// its own that ends against an inaccessible page (After: its bytes rounded up to 64, so a read or
// write past them faults at once) or starts just after one (Before). A compiled loop that strays
// out of a buffer mostly reads memory that is there (the rest of a page, a neighbour's block): its
// values are discarded or its writes land unseen, until a machine where that memory is not
// mapped crashes. Slow (a mapping a block, none reused); blocks made before a change keep theirs.
enum class GuardPages { Off, After, Before };
void set_guard_pages(GuardPages mode);  // in place of HJIT_GUARD_PAGES from now on
int64_t allocation_limit();
void cached_free(void* p);         // p from cached_alloc, or null
size_t cached_size(const void* p);  // the bytes p holds (its size class); p from cached_alloc
size_t block_size(size_t bytes);    // the bytes cached_alloc(bytes) holds (its size class)

// Slots of blocks from cached_alloc, each freed when the slots go (a slot freed earlier is set null).
struct CachedBlocks {
  std::vector<void*> slots;
  explicit CachedBlocks(size_t n) : slots(n, nullptr) {}
  CachedBlocks(const CachedBlocks&) = delete;
  CachedBlocks& operator=(const CachedBlocks&) = delete;
  ~CachedBlocks() {
    for (void* p : slots) cached_free(p);
  }
};

// What the allocator holds (hjit::memory_stats()): blocks in use now and at most since the last
// reset, blocks kept for reuse, and how often it was asked and went to the system.
struct AllocatorCounts {
  int64_t in_use = 0, peak = 0, cached = 0, allocations = 0, system_allocations = 0;
};
AllocatorCounts allocator_counts();
void reset_allocator_peak();  // the peak starts again from what is in use now

}  // namespace hjit
