// A caching allocator for tensor storage and Halide's internal buffers. Large blocks from malloc
// come from mmap and return to the kernel on free, so a compiled call that allocates the same
// temporaries every time pays page faults every time; blocks kept here are reused instead
// (PyTorch's CPU caching allocator makes the same trade).
#pragma once
#include <cstddef>

namespace hjit {

void* cached_alloc(size_t bytes);  // 64-byte aligned; never null (throws std::bad_alloc)
void cached_free(void* p);         // p from cached_alloc, or null

}  // namespace hjit
