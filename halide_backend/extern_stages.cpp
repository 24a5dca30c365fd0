#include "halide_backend/extern_stages.h"

#include <HalideRuntime.h>

#include "graph/op_def.h"

#if defined(HJIT_HAVE_DNNL)
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>

#include <oneapi/dnnl/dnnl.hpp>
#elif defined(HJIT_HAVE_OPENBLAS)
extern "C" void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha, const float* a, int lda,
                            const float* b, int ldb, float beta, float* c, int ldc);
#endif

namespace hjit::backend {

const char* extern_gemm_library() {
#if defined(HJIT_HAVE_DNNL)
  return "oneDNN";
#elif defined(HJIT_HAVE_OPENBLAS)
  return "OpenBLAS";
#else
  return "";
#endif
}

bool extern_conv_available() {
#if defined(HJIT_HAVE_DNNL)
  return true;
#else
  return false;
#endif
}

namespace {

// An operand an extern stage can read: an f32 graph input, or a computed value (not a constant,
// which has no Func of its own to compute at root).
bool extern_operand(const Graph& g, int id, int rank) {
  const Node& o = g.node(id);
  return o.type.rank() == rank && o.type.dtype == DType::F32 && o.type.numel() > 0 &&
         (o.op == OpKind::Parameter || !has_trait(o.op, Source));
}

template <class Accept>
std::set<int> nodes_where(const Graph& g, OpKind op, int rank, Accept accept) {
  std::set<int> out;
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    if (n.op != op || n.type.dtype != DType::F32 || n.type.rank() != rank || n.type.numel() == 0 || !accept(n)) continue;
    bool ok = true;
    for (int in : n.inputs) ok &= extern_operand(g, in, rank);
    if (ok) out.insert(int(id));
  }
  return out;
}

}  // namespace

std::set<int> extern_gemm_nodes(const Graph& g) {
  if (!*extern_gemm_library()) return {};
  return nodes_where(g, OpKind::Matmul, 2, [](const Node&) { return true; });
}

std::set<int> extern_conv_nodes(const Graph& g) {
  if (!extern_conv_available()) return {};
  return nodes_where(g, OpKind::Conv2d, 4, [](const Node& n) { return n.attrs.i("groups") == 1; });
}

}  // namespace hjit::backend

namespace {

// Element (x, y) of a 2-D buffer (Halide order: x innermost).
float* at(const halide_buffer_t* b, int64_t x, int64_t y) {
  return reinterpret_cast<float*>(b->host) + (x - b->dim[0].min) * b->dim[0].stride + (y - b->dim[1].min) * b->dim[1].stride;
}

}  // namespace

// C = A B (A: m x k, B: k x n) for the region of C asked for: rows [y0, y0 + m), columns
// [x0, x0 + n). In a bounds query (a host pointer null) it says which parts of A and B that
// region reads, as Halide's extern stage protocol asks.
extern "C" int hjit_extern_sgemm(halide_buffer_t* a, halide_buffer_t* b, int32_t k, halide_buffer_t* c) {
  const int32_t x0 = c->dim[0].min, n = c->dim[0].extent, y0 = c->dim[1].min, m = c->dim[1].extent;
  if (!a->host || !b->host || !c->host) {
    if (!a->host) a->dim[0].min = 0, a->dim[0].extent = k, a->dim[1].min = y0, a->dim[1].extent = m;
    if (!b->host) b->dim[0].min = x0, b->dim[0].extent = n, b->dim[1].min = 0, b->dim[1].extent = k;
    return 0;
  }
  if (a->dim[0].stride != 1 || b->dim[0].stride != 1 || c->dim[0].stride != 1) return -1;
  if (m == 0 || n == 0) return 0;
  const float* pa = at(a, 0, y0);
  const float* pb = at(b, x0, 0);
  float* pc = at(c, x0, y0);
#if defined(HJIT_HAVE_DNNL)
  const dnnl_status_t status =
      dnnl_sgemm('N', 'N', m, n, k, 1.0f, pa, a->dim[1].stride, pb, b->dim[1].stride, 0.0f, pc, c->dim[1].stride);
  return status == dnnl_success ? 0 : -1;
#elif defined(HJIT_HAVE_OPENBLAS)
  cblas_sgemm(101 /*row major*/, 111, 111, m, n, k, 1.0f, pa, int(a->dim[1].stride), pb, int(b->dim[1].stride), 0.0f, pc,
              int(c->dim[1].stride));
  return 0;
#else
  (void)pa, (void)pb, (void)pc;
  return -1;
#endif
}

#if defined(HJIT_HAVE_DNNL)
namespace {

// One convolution shape, planned once: oneDNN picks its own (blocked) layouts, and reorders
// between hjit's NCHW / OIHW and them run around the convolution.
struct ConvPlan {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::convolution_forward conv;
  dnnl::memory src_user, weights_user, dst_user, src, weights, dst, scratchpad;
  std::optional<dnnl::reorder> to_src, to_weights, from_dst;
  std::mutex mu;  // one call at a time uses the plan's buffers
};

using ConvKey = std::tuple<int, int, int, int, int, int, int, int, int, int, int, int, int, int, int>;

ConvPlan& conv_plan(const ConvKey& key) {
  static std::mutex mu;
  static std::map<ConvKey, std::unique_ptr<ConvPlan>> plans;
  std::lock_guard lock(mu);
  std::unique_ptr<ConvPlan>& slot = plans[key];
  if (slot) return *slot;
  auto [n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow] = key;
  using dnnl::memory;
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  const memory::dims src{n, c, h, w}, wts{o, c, kh, kw}, dst{n, o, oh, ow};
  // PyTorch pads both sides alike and drops what does not fill a window: the right padding that
  // gives the same output size.
  const memory::dims pad_l{ph, pw}, pad_r{(oh - 1) * sh + (kh - 1) * dh + 1 - h - ph, (ow - 1) * sw + (kw - 1) * dw + 1 - w - pw};
  auto plan = std::make_unique<ConvPlan>();
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                    memory::desc(src, f32, tag::any), memory::desc(wts, f32, tag::any),
                                    memory::desc(dst, f32, tag::any), {sh, sw}, {dh - 1, dw - 1}, pad_l, pad_r);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::convolution_forward::primitive_desc pd(d, attr, plan->engine);
  plan->conv = dnnl::convolution_forward(pd);
  plan->src_user = memory(memory::desc(src, f32, tag::nchw), plan->engine, nullptr);
  plan->weights_user = memory(memory::desc(wts, f32, tag::oihw), plan->engine, nullptr);
  plan->dst_user = memory(memory::desc(dst, f32, tag::nchw), plan->engine, nullptr);
  auto internal = [&](const memory::desc& want, memory& user, memory& mem, std::optional<dnnl::reorder>& r, bool into) {
    if (want == user.get_desc()) return;
    mem = memory(want, plan->engine);
    r = into ? dnnl::reorder(user, mem) : dnnl::reorder(mem, user);
  };
  internal(pd.src_desc(), plan->src_user, plan->src, plan->to_src, true);
  internal(pd.weights_desc(), plan->weights_user, plan->weights, plan->to_weights, true);
  internal(pd.dst_desc(), plan->dst_user, plan->dst, plan->from_dst, false);
  plan->scratchpad = memory(pd.scratchpad_desc(), plan->engine);
  slot = std::move(plan);
  return *slot;
}

bool dense(const halide_buffer_t* b) {
  int64_t stride = 1;
  for (int d = 0; d < b->dimensions; ++d) {
    if (b->dim[d].stride != stride || b->dim[d].min != 0) return false;
    stride *= b->dim[d].extent;
  }
  return true;
}

}  // namespace

// out = conv2d(in, weights) in NCHW / OIHW (Halide order: x, y, channel, image). Shapes and
// parameters come as arguments so that a bounds query can say what the whole stage reads; the
// stage is computed at root, for its whole output.
extern "C" int hjit_extern_conv2d(halide_buffer_t* in, halide_buffer_t* weights, int32_t c, int32_t h, int32_t w, int32_t kh,
                                  int32_t kw, int32_t sh, int32_t sw, int32_t ph, int32_t pw, int32_t dh, int32_t dw,
                                  halide_buffer_t* out) {
  const int32_t n = out->dim[3].extent, o = out->dim[2].extent, oh = out->dim[1].extent, ow = out->dim[0].extent;
  if (!in->host || !weights->host || !out->host) {
    const int32_t in_extent[4] = {w, h, c, n}, w_extent[4] = {kw, kh, c, o};
    for (int d = 0; d < 4; ++d) {
      if (!in->host) in->dim[d].min = 0, in->dim[d].extent = in_extent[d];
      if (!weights->host) weights->dim[d].min = 0, weights->dim[d].extent = w_extent[d];
    }
    return 0;
  }
  if (!dense(in) || !dense(weights) || !dense(out)) return -1;
  try {
    ConvPlan& p = conv_plan(ConvKey{n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow});
    std::lock_guard lock(p.mu);
    p.src_user.set_data_handle(in->host);
    p.weights_user.set_data_handle(weights->host);
    p.dst_user.set_data_handle(out->host);
    if (p.to_src) p.to_src->execute(p.stream, p.src_user, p.src);
    if (p.to_weights) p.to_weights->execute(p.stream, p.weights_user, p.weights);
    p.conv.execute(p.stream, {{DNNL_ARG_SRC, p.to_src ? p.src : p.src_user},
                              {DNNL_ARG_WEIGHTS, p.to_weights ? p.weights : p.weights_user},
                              {DNNL_ARG_DST, p.from_dst ? p.dst : p.dst_user},
                              {DNNL_ARG_SCRATCHPAD, p.scratchpad}});
    if (p.from_dst) p.from_dst->execute(p.stream, p.dst, p.dst_user);
    p.stream.wait();
    return 0;
  } catch (const std::exception&) {
    return -1;
  }
}
#endif
