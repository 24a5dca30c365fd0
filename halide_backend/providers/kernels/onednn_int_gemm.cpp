// oneDNN's u8 x s8 -> s32 matmul as a kernel: where the CPU has AMX its primitive runs on the tile
// unit (brg:avx512_core_amx_int8: 1.0-1.6x hjit's own VNNI tiles on a 1024^3 product), which
// Halide 14 cannot drive at speed (docs/low-precision.md). Planned once per shape. Built into the
// kernels' object (providers/provider.h) when hjit was built with oneDNN: nothing of hjit's but
// kernel_abi.h.
#include <HalideRuntime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "halide_backend/providers/kernel_abi.h"

namespace {

using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

// hjit's packed right operand, [K/4, N, 4] with rows of K/4 blocks `block_stride` bytes apart,
// as oneDNN's blocked memory: dimension K blocked by 4 innermost. No format tag names this
// layout; oneDNN 2's descriptor is a public struct, and its reorders read any blocking.
memory::desc packed_weights(int64_t k, int64_t n, int64_t block_stride) {
  dnnl_memory_desc_t d;
  const dnnl_dims_t dims = {k, n};
  if (dnnl_memory_desc_init_by_tag(&d, 2, dims, dnnl_s8, dnnl_ab) != dnnl_success) return {};
  dnnl_blocking_desc_t& b = d.format_desc.blocking;
  b.strides[0] = block_stride;
  b.strides[1] = 4;
  b.inner_nblks = 1;
  b.inner_blks[0] = 4;
  b.inner_idxs[0] = 0;
  return memory::desc(d);
}

// oneDNN (Debian's, on OpenMP) runs a primitive on as many threads as the calling thread's
// OpenMP setting: one here, as the built-in schedule calls the kernel from each of Halide's
// workers on a part of the matrices or rows. (A call at root on OpenMP's team, between Halide's loops on
// its own pool, had the two pools spin against each other: the encoder's int8 layers ran 2x
// slower.) The caller's setting is put back.
class OneThread {
 public:
  OneThread() : before_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(before_); }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int before_;
};

// One product shape: the matmul primitive (its weights in the layout it picks) and the reorder of
// hjit's packed weights into that layout, which runs on each call (K x N bytes against M x K x N
// multiply-adds; the weights may change between calls).
struct GemmPlan {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::matmul matmul;
  dnnl::reorder pack;
  memory::desc a, b, c, weights, scratchpad, pack_scratchpad;
  bool amx = false;

  GemmPlan(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t block_stride, int64_t ldc)
      : a({m, k}, dt::u8, memory::dims{lda, 1}), b(packed_weights(k, n, block_stride)), c({m, n}, dt::s32, memory::dims{ldc, 1}) {
    // Threads call one plan at once: each brings its own scratchpad (a library-owned one is the
    // primitive's, shared by its callers, unless oneDNN was built for concurrent execution).
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, memory::desc({k, n}, dt::s8, tag::any), c), attr, engine);
    weights = pd.weights_desc();
    scratchpad = pd.scratchpad_desc();
    matmul = dnnl::matmul(pd);
    const dnnl::reorder::primitive_desc rpd(engine, b, engine, weights, attr);
    pack_scratchpad = rpd.scratchpad_desc();
    pack = dnnl::reorder(rpd);
    amx = std::strstr(pd.impl_info_str(), "amx") != nullptr;
  }
};

using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;

GemmPlan& plan_for(const Key& key) {
  static std::mutex mu;
  static std::map<Key, std::unique_ptr<GemmPlan>> plans;
  std::lock_guard lock(mu);
  std::unique_ptr<GemmPlan>& p = plans[key];
  if (!p) p = std::make_unique<GemmPlan>(std::get<0>(key), std::get<1>(key), std::get<2>(key), std::get<3>(key),
                                         std::get<4>(key), std::get<5>(key));
  return *p;
}

// Per thread, bytes that stay allocated between calls: the packed weights and the scratchpads
// (allocated afresh, each call's megabyte was mapped and faulted in again: a 1024^3 product took
// 4.1 ms against 2.2).
void* scratch(size_t slot, size_t bytes) {
  struct Block {
    void operator()(void* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<void, Block> blocks[3];
  thread_local size_t sizes[3] = {};
  if (bytes > sizes[slot]) {
    const size_t rounded = (bytes + 4095) / 4096 * 4096;
    blocks[slot].reset(std::aligned_alloc(4096, rounded));
    sizes[slot] = blocks[slot] ? rounded : 0;
  }
  return blocks[slot].get();
}

// The element of b at `coords` (Halide order), of the dimensions b has: a trailing batch
// coordinate is ignored where b has no batch dimension.
template <class T>
T* at(const halide_buffer_t* b, std::initializer_list<int64_t> coords) {
  int64_t offset = 0;
  int d = 0;
  for (int64_t x : coords)
    if (d < b->dimensions) offset += (x - b->dim[d].min) * b->dim[d].stride, ++d;
  return reinterpret_cast<T*>(b->host) + offset;
}

}  // namespace

extern "C" int hjit_int_gemm_uses_amx() {
  const OneThread one_thread;  // as every call plans
  try {
    return plan_for(Key{64, 64, 64, 64, 256, 64}).amx ? 1 : 0;
  } catch (const dnnl::error&) {
    return 0;
  }
}

// C = A B for u8 A [.., M, 4K] and s8 B packed [.., K, N, 4] (as hjit's int_matmul takes them),
// s32 C [.., M, N], over the region of C asked for. Halide order: A (4K, M[, batch]), B (4, N,
// K[, batch]), C (N, M[, batch]); B's matrix z multiplies A's where `per_batch`, else its one
// matrix (a batch of extent 1, or none) multiplies every one of A's.
// In a bounds query (a host pointer null) it says which parts of A and B that region reads.
extern "C" int hjit_extern_int_gemm(halide_buffer_t* a, halide_buffer_t* b, int32_t k4, int32_t per_batch, halide_buffer_t* c) {
  const bool batched = c->dimensions == 3, shared = !per_batch;
  const int32_t x0 = c->dim[0].min, n = c->dim[0].extent, y0 = c->dim[1].min, m = c->dim[1].extent;
  const int32_t z0 = batched ? c->dim[2].min : 0, batches = batched ? c->dim[2].extent : 1;
  if (!a->host || !b->host || !c->host) {
    if (!a->host) {
      a->dim[0].min = 0, a->dim[0].extent = k4, a->dim[1].min = y0, a->dim[1].extent = m;
      if (batched) a->dim[2].min = z0, a->dim[2].extent = batches;
    }
    if (!b->host) {
      b->dim[0].min = 0, b->dim[0].extent = 4, b->dim[1].min = x0, b->dim[1].extent = n, b->dim[2].min = 0, b->dim[2].extent = k4 / 4;
      if (b->dimensions == 4) b->dim[3].min = shared ? 0 : z0, b->dim[3].extent = shared ? 1 : batches;
    }
    return 0;
  }
  if (a->dim[0].stride != 1 || b->dim[0].stride != 1 || b->dim[1].stride != 4 || c->dim[0].stride != 1) return -1;
  if (m == 0 || n == 0 || batches == 0) return 0;
  const int64_t lda = a->dim[1].stride, ldc = c->dim[1].stride, block_stride = b->dim[2].stride;
  // A batch whose matrices lie one after another, times one shared matrix, is one product of all
  // their rows.
  const bool one_product = shared && batched && (batches == 1 || (a->dim[2].stride == m * lda && c->dim[2].stride == m * ldc));
  const int64_t rows = one_product ? int64_t(m) * batches : m;
  const OneThread one_thread;
  try {
    GemmPlan& plan = plan_for(Key{rows, n, k4, lda, block_stride, ldc});
    dnnl::stream stream(plan.engine);
    auto held = [&](size_t slot, const memory::desc& d) {
      void* p = scratch(slot, std::max<size_t>(d.get_size(), 1));
      if (!p) throw std::bad_alloc();
      return memory(d, plan.engine, p);
    };
    memory weights = held(0, plan.weights), scratchpad = held(1, plan.scratchpad), pack_scratchpad = held(2, plan.pack_scratchpad);
    for (int32_t z = z0; z < z0 + (one_product ? 1 : batches); ++z) {
      if (z == z0 || !shared) {
        // (B's first element of columns x0..: Halide order 4, N, K[, batch]; a shared one's batch is 0.)
        memory user(plan.b, plan.engine, at<int8_t>(b, {0, x0, 0, shared ? 0 : z}));
        plan.pack.execute(stream, {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, weights}, {DNNL_ARG_SCRATCHPAD, pack_scratchpad}});
      }
      memory src(plan.a, plan.engine, at<uint8_t>(a, {0, y0, z})), dst(plan.c, plan.engine, at<int32_t>(c, {x0, y0, z}));
      plan.matmul.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, scratchpad}});
    }
    stream.wait();
  } catch (const std::exception&) {  // dnnl::error, std::bad_alloc
    return -1;
  }
  return 0;
}
