// What the kernels that call oneDNN from Halide's workers share (onednn_matmul.cpp,
// onednn_int_conv.cpp): one OpenMP thread a call, per-thread buffers that stay allocated, and the
// header of weights packed when compiling. Kernel-private: nothing of hjit's but kernel_abi.h.
#pragma once
#include <HalideRuntime.h>

#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <new>

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "halide_backend/providers/kernel_abi.h"

namespace hjit::kernels {

// oneDNN (Debian's, on OpenMP) runs a primitive on as many threads as the calling thread's
// OpenMP setting: one here, as the built-in schedule calls the kernels from each of Halide's
// workers on a part of the work. (A call at root on OpenMP's team, between Halide's loops on its
// own pool, had the two pools spin against each other: the encoder's int8 layers ran 2x slower.)
// The caller's setting is put back.
class OneThread {
 public:
  OneThread() : before_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(before_); }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int before_;
};

// A memory layout's identity, for weights packed in one process and read in another.
inline uint64_t fingerprint(const dnnl::memory::desc& d) {
  const dnnl_memory_desc_t& raw = d.data;
  const auto* bytes = reinterpret_cast<const unsigned char*>(&raw);
  uint64_t h = 0xcbf29ce484222325;  // FNV-1a
  for (size_t i = 0; i < sizeof raw; ++i) h = (h ^ bytes[i]) * 0x100000001b3;
  return h;
}

// Weights packed when compiling: a header, then the bytes in the layout of the primitive that
// packed them. The layout's fingerprint is checked at each call against the plan's (another oneDNN
// or CPU, a compiled pipeline read from the disk cache, may pick another layout: the weights are
// then packed on the call, as unpacked ones).
struct PackedHeader {
  uint64_t magic;        // kPackedMagic; 0: no packed weights
  uint64_t fingerprint;  // of the layout
  uint64_t bytes;        // after the header
  int64_t k, n;          // the product's depth and columns (a convolution's: C KH KW and O)
  uint64_t reserved[3];
};
inline constexpr uint64_t kPackedMagic = 0x6b6361706a6a6968;  // "hijjpack"
static_assert(sizeof(PackedHeader) == hjit::kernel_abi::kPackedHeaderBytes);

// The packed weights `packed` holds for a plan whose weights are `layout` and whose product is
// k deep and n wide, or null (none, or packed for another layout).
inline const void* packed_for(const halide_buffer_t* packed, const dnnl::memory::desc& layout, uint64_t layout_fingerprint, int64_t k,
                              int64_t n) {
  const int64_t bytes = packed->dim[0].extent;
  if (bytes < int64_t(sizeof(PackedHeader))) return nullptr;
  const auto* header = reinterpret_cast<const PackedHeader*>(packed->host);
  if (header->magic != kPackedMagic || header->bytes > uint64_t(bytes) - sizeof(PackedHeader) || header->k != k || header->n != n ||
      header->fingerprint != layout_fingerprint || header->bytes != layout.get_size())
    return nullptr;
  return header + 1;
}

// Writes weights packed when compiling into out (out_bytes): a header for a plan whose weights
// layout is `layout` (fingerprinted), then the weights reordered by `pack` from `user`. The bytes
// that takes (out null), or written (0: out_bytes too few). Throws what oneDNN throws.
inline int64_t write_packed(const dnnl::engine& engine, const dnnl::reorder& pack, const dnnl::memory::desc& user,
                            const dnnl::memory::desc& layout, uint64_t layout_fingerprint, const dnnl::memory::desc& pack_scratchpad,
                            int64_t k, int64_t n, const void* weights, void* out, int64_t out_bytes) {
  const int64_t bytes = int64_t(sizeof(PackedHeader) + layout.get_size());
  if (!out) return bytes;
  if (out_bytes < bytes) return 0;
  auto* header = static_cast<PackedHeader*>(out);
  *header = PackedHeader{kPackedMagic, layout_fingerprint, layout.get_size(), k, n, {}};
  dnnl::stream stream(engine);
  dnnl::memory from(user, engine, const_cast<void*>(weights)), to(layout, engine, header + 1);
  std::unique_ptr<char[]> pad(new char[pack_scratchpad.get_size() > 0 ? pack_scratchpad.get_size() : 1]);
  dnnl::memory scratchpad(pack_scratchpad, engine, pad.get());
  pack.execute(stream, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, scratchpad}});
  stream.wait();
  return bytes;
}

// Per thread, bytes that stay allocated between calls: packed weights or a product, scratchpads,
// an operand or result copied into the layout the primitive reads (allocated afresh, each call's
// megabyte was mapped and faulted in again: a 1024^3 product took 4.1 ms against 2.2).
enum Slot : size_t { kWeightsOrProduct, kScratchpad, kPackScratchpad, kSource, kResult, kSlots };
inline void* scratch(Slot slot, size_t bytes) {
  struct Block {
    void operator()(void* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<void, Block> blocks[kSlots];
  thread_local size_t sizes[kSlots] = {};
  if (bytes > sizes[slot]) {
    const size_t rounded = (bytes + 4095) / 4096 * 4096;
    blocks[slot].reset(std::aligned_alloc(4096, rounded));
    sizes[slot] = blocks[slot] ? rounded : 0;
  }
  return blocks[slot].get();
}
// A slot's bytes as memory of layout d (std::bad_alloc where they cannot be had).
inline dnnl::memory held(Slot slot, const dnnl::memory::desc& d, const dnnl::engine& engine) {
  void* p = scratch(slot, d.get_size() > 0 ? d.get_size() : 1);
  if (!p) throw std::bad_alloc();
  return dnnl::memory(d, engine, p);
}

// The element of b at `coords` (Halide order), of the dimensions b has: trailing coordinates
// past them are ignored.
template <class T>
T* at(const halide_buffer_t* b, std::initializer_list<int64_t> coords) {
  int64_t offset = 0;
  int d = 0;
  for (int64_t x : coords)
    if (d < b->dimensions) offset += (x - b->dim[d].min) * b->dim[d].stride, ++d;
  return reinterpret_cast<T*>(b->host) + offset;
}

}  // namespace hjit::kernels
