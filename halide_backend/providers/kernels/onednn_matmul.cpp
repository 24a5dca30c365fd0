// oneDNN's matmul primitive as kernels for the two products whose fast form is AMX's tile unit,
// which Halide 14 cannot drive at speed (docs/low-precision.md): u8 x s8 -> s32
// (brg:avx512_core_amx_int8: 1.0-1.6x hjit's own VNNI tiles on a 1024^3 product) and bf16 x bf16
// -> bf16 summed in f32 (brg:avx512_core_amx_bf16). Planned once per shape. Built into the kernels'
// object (providers/provider.h) when hjit was built with oneDNN: nothing of hjit's but
// kernel_abi.h.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "halide_backend/providers/kernels/onednn_calls.h"

namespace {

using namespace hjit::kernels;
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

// One product shape: the matmul primitive and, where its weights take the layout it picks, the
// reorder into that layout: int8 weights always (hjit's packed layout is not one oneDNN's AMX code
// reads), on each call unless they were packed when compiling (constants: hjit_matmul_pack_constant);
// bf16 weights only packed when compiling, else read as they lie, [K, N] rows (the primitive copies
// its blocks of them itself). A bf16 product is rounded to bf16 once, into a buffer of its own, and
// widened into the f32 output that hjit's bf16 values live in.
struct GemmPlan {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::matmul matmul;
  dnnl::reorder pack;   // int8 only
  dnnl::reorder widen;  // bf16 only
  memory::desc a, b, c, out, weights, scratchpad, pack_scratchpad;
  uint64_t weights_fingerprint = 0;  // of weights' layout (made once: calls compare it with a header)
  bool amx = false;

  // a with its row stride, b as the caller stores it, c dense; `packs`: b is reordered into the
  // primitive's layout before each product; `out`: where c is widened to, if it is.
  GemmPlan(const memory::desc& a_, const memory::desc& b_, const memory::desc& c_, bool packs, const memory::desc& out_)
      : a(a_), b(b_), c(c_), out(out_) {
    // Threads call one plan at once: each brings its own scratchpad (a library-owned one is the
    // primitive's, shared by its callers, unless oneDNN was built for concurrent execution).
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const memory::desc chosen = packs ? memory::desc(b.dims(), b.data_type(), tag::any) : b;
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, chosen, c), attr, engine);
    weights = pd.weights_desc();
    weights_fingerprint = fingerprint(weights);
    scratchpad = pd.scratchpad_desc();
    matmul = dnnl::matmul(pd);
    if (packs) {
      const dnnl::reorder::primitive_desc rpd(engine, b, engine, weights, attr);
      pack_scratchpad = rpd.scratchpad_desc();
      pack = dnnl::reorder(rpd);
    }
    if (out) widen = dnnl::reorder(dnnl::reorder::primitive_desc(engine, c, engine, out));
    amx = std::strstr(pd.impl_info_str(), "amx") != nullptr;
  }
};

enum class Kind { Int8, Bf16 };

// The kind, whether the weights take the primitive's layout (always for int8), the rows, columns
// and depth of the product, and the strides of a, b and c's rows.
using Key = std::tuple<Kind, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;

GemmPlan make_plan(const Key& key) {
  const auto [kind, packs, m, n, k, lda, ldb, ldc] = key;
  if (kind == Kind::Int8)
    return GemmPlan(memory::desc({m, k}, dt::u8, memory::dims{lda, 1}), packed_weights(k, n, ldb),
                    memory::desc({m, n}, dt::s32, memory::dims{ldc, 1}), true, {});
  return GemmPlan(memory::desc({m, k}, dt::bf16, memory::dims{lda, 1}), memory::desc({k, n}, dt::bf16, memory::dims{ldb, 1}),
                  memory::desc({m, n}, dt::bf16, tag::ab), packs, memory::desc({m, n}, dt::f32, memory::dims{ldc, 1}));
}

GemmPlan& plan_for(const Key& key) {
  static std::mutex mu;
  static std::map<Key, std::unique_ptr<GemmPlan>> plans;
  std::lock_guard lock(mu);
  std::unique_ptr<GemmPlan>& p = plans[key];
  if (!p) p = std::make_unique<GemmPlan>(make_plan(key));
  return *p;
}

// C = A B over the region of C asked for, batches of A times B's one matrix (`per_batch` false: a
// batch of extent 1, or none) or times its matrix of the same batch. Halide order: A (K, M[,
// batch]) and C (N, M[, batch]); B is (4, N, K/4[, batch]) for int8 (hjit's packed layout), (N, K[,
// batch]) for bf16. `packed`: B packed when compiling (a PackedHeader whose magic is 0 where it was
// not). `k`: A's row length. In a bounds query (a host pointer null) it says which parts of A and B
// that region reads.
int matmul(Kind kind, halide_buffer_t* a, halide_buffer_t* b, halide_buffer_t* packed, int32_t k, bool per_batch,
           halide_buffer_t* c) {
  const bool batched = c->dimensions == 3, shared = !per_batch, int8 = kind == Kind::Int8;
  const int32_t x0 = c->dim[0].min, n = c->dim[0].extent, y0 = c->dim[1].min, m = c->dim[1].extent;
  const int32_t z0 = batched ? c->dim[2].min : 0, batches = batched ? c->dim[2].extent : 1;
  // B's dimensions: its columns', its rows', its batch's.
  const int bn = int8 ? 1 : 0, bk = bn + 1, bz = bk + 1;
  if (!a->host || !b->host || !c->host || !packed->host) {
    if (!packed->host) packed->dim[0].min = 0, packed->dim[0].extent = int32_t(sizeof(PackedHeader));  // (the whole is passed)
    if (!a->host) {
      a->dim[0].min = 0, a->dim[0].extent = k, a->dim[1].min = y0, a->dim[1].extent = m;
      if (batched) a->dim[2].min = z0, a->dim[2].extent = batches;
    }
    if (!b->host) {
      if (int8) b->dim[0].min = 0, b->dim[0].extent = 4;
      b->dim[bn].min = x0, b->dim[bn].extent = n, b->dim[bk].min = 0, b->dim[bk].extent = int8 ? k / 4 : k;
      if (b->dimensions > bz) b->dim[bz].min = shared ? 0 : z0, b->dim[bz].extent = shared ? 1 : batches;
    }
    return 0;
  }
  if (a->dim[0].stride != 1 || b->dim[0].stride != 1 || (int8 && b->dim[1].stride != 4) || c->dim[0].stride != 1) return -1;
  if (m == 0 || n == 0 || batches == 0) return 0;
  const int64_t lda = a->dim[1].stride, ldb = b->dim[bk].stride, ldc = c->dim[1].stride;
  // A batch whose matrices lie one after another, times one shared matrix, is one product of all
  // their rows.
  const bool one_product = shared && batched && (batches == 1 || (a->dim[2].stride == m * lda && c->dim[2].stride == m * ldc));
  const int64_t rows = one_product ? int64_t(m) * batches : m;
  const OneThread one_thread;
  try {
    // Weights packed when compiling serve a product of all their columns (the built-in schedule
    // splits rows, never columns), where the layout is the plan's.
    const int64_t packed_bytes = packed->dim[0].extent;
    const auto* header = packed_bytes >= int64_t(sizeof(PackedHeader)) ? reinterpret_cast<const PackedHeader*>(packed->host) : nullptr;
    bool prepacked = header && header->magic == kPackedMagic && header->bytes <= uint64_t(packed_bytes) - sizeof(PackedHeader) &&
                     shared && x0 == 0 && n == header->n && k == header->k;
    GemmPlan* chosen = &plan_for(Key{kind, int8 || prepacked, rows, n, k, lda, ldb, ldc});
    if (prepacked && (chosen->weights_fingerprint != header->fingerprint || header->bytes != chosen->weights.get_size())) {
      prepacked = false;
      chosen = &plan_for(Key{kind, int8, rows, n, k, lda, ldb, ldc});
    }
    GemmPlan& plan = *chosen;
    dnnl::stream stream(plan.engine);
    auto held = [&](Slot slot, const memory::desc& d) { return hjit::kernels::held(slot, d, plan.engine); };
    memory scratchpad = held(kScratchpad, plan.scratchpad);
    memory weights = prepacked ? memory(plan.weights, plan.engine, const_cast<PackedHeader*>(header) + 1)
                     : int8    ? held(kWeightsOrProduct, plan.weights)
                               : memory();
    memory pack_scratchpad = int8 && !prepacked ? held(kPackScratchpad, plan.pack_scratchpad) : memory();
    memory product = int8 ? memory() : held(kWeightsOrProduct, plan.c);
    for (int32_t z = z0; z < z0 + (one_product ? 1 : batches); ++z) {
      // (B's first element of columns x0..; a shared one's batch is 0.)
      void* user = int8 ? static_cast<void*>(at<int8_t>(b, {0, x0, 0, shared ? 0 : z})) : at<uint16_t>(b, {x0, 0, shared ? 0 : z});
      if (int8 && !prepacked && (z == z0 || !shared)) {
        memory from(plan.b, plan.engine, user);
        plan.pack.execute(stream, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, weights}, {DNNL_ARG_SCRATCHPAD, pack_scratchpad}});
      }
      if (!int8 && !prepacked) weights = memory(plan.b, plan.engine, user);
      memory src(plan.a, plan.engine, int8 ? static_cast<void*>(at<uint8_t>(a, {0, y0, z})) : at<uint16_t>(a, {0, y0, z}));
      void* c_at = int8 ? static_cast<void*>(at<int32_t>(c, {x0, y0, z})) : at<float>(c, {x0, y0, z});
      memory dst = int8 ? memory(plan.c, plan.engine, c_at) : product;
      plan.matmul.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, scratchpad}});
      if (!int8) {
        memory to(plan.out, plan.engine, c_at);
        plan.widen.execute(stream, product, to);
      }
    }
    stream.wait();
  } catch (const std::exception&) {  // dnnl::error, std::bad_alloc
    return -1;
  }
  return 0;
}

}  // namespace

extern "C" int hjit_matmul_uses_amx(int32_t bf16) {
  const OneThread one_thread;  // as every call plans
  try {
    const Kind kind = bf16 ? Kind::Bf16 : Kind::Int8;
    return plan_for(Key{kind, !bf16, 64, 64, 64, 64, bf16 ? 64 : 256, 64}).amx ? 1 : 0;
  } catch (const dnnl::error&) {
    return 0;
  }
}

extern "C" int64_t hjit_matmul_pack_constant(int32_t bf16, int64_t k, int64_t n, const void* weights, void* out, int64_t out_bytes) {
  const OneThread one_thread;
  try {
    // The layout oneDNN picks for these weights does not depend on the rows (checked for int8 on
    // Sapphire Rapids, 16 to 4096 rows); a call whose plan picks another packs on the call.
    constexpr int64_t kRows = 256;
    const Kind kind = bf16 ? Kind::Bf16 : Kind::Int8;
    GemmPlan& plan = plan_for(Key{kind, true, kRows, n, k, k, bf16 ? n : 4 * n, n});
    return write_packed(plan.engine, plan.pack, plan.b, plan.weights, plan.weights_fingerprint, plan.pack_scratchpad, k, n, weights,
                        out, out_bytes);
  } catch (const std::exception&) {
    return 0;
  }
}

// u8 A [.., M, 4K] times s8 B packed [.., K, N, 4] (as hjit's int_matmul takes them) into s32 C.
extern "C" int hjit_extern_int_gemm(halide_buffer_t* a, halide_buffer_t* b, halide_buffer_t* packed, int32_t k4, int32_t per_batch,
                                    halide_buffer_t* c) {
  return matmul(Kind::Int8, a, b, packed, k4, per_batch != 0, c);
}

// bf16 A [.., M, K] times bf16 B [.., K, N], summed in f32 and rounded once to bf16, into f32 C.
extern "C" int hjit_extern_bf16_gemm(halide_buffer_t* a, halide_buffer_t* b, halide_buffer_t* packed, int32_t k, int32_t per_batch,
                                     halide_buffer_t* c) {
  return matmul(Kind::Bf16, a, b, packed, k, per_batch != 0, c);
}
