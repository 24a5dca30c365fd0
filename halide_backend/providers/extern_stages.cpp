#include "halide_backend/providers/extern_stages.h"

#include <HalideRuntime.h>

#include "graph/op_def.h"

#if defined(HJIT_HAVE_DNNL)
#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

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

std::optional<ExternRule> extern_rule(ScheduleClass c) {
  using C = ScheduleClass;
  switch (c) {
    case C::Matmul: return ExternRule{ExternKind::Sgemm, "sgemm", 2};
    case C::Convolution: return ExternRule{ExternKind::Conv, "conv", 4};
    case C::ConvolutionWeightGrad: return ExternRule{ExternKind::ConvWeightGrad, "conv_weight_grad", 4};
    case C::Source: case C::Elementwise: case C::LongLatency: case C::ScalarCall: case C::Check: case C::Reduction:
    case C::ArgReduction: case C::Scan: case C::Sort: case C::Pooling: case C::PoolingGrad: case C::Attention: case C::Movement:
    case C::Gather: case C::Random: case C::ControlFlow: case C::Collective:
      return std::nullopt;
  }
  throw InternalError("hjit: no extern rule for schedule class " + std::to_string(int(c)));
}

namespace {

// An operand an extern stage can read: an f32 graph input, or a computed value (not a constant,
// which has no Func of its own to compute at root).
bool extern_operand(const Graph& g, int id, int rank) {
  const Node& o = g.node(id);
  return o.type.rank() == rank && o.type.dtype == DType::F32 && o.type.numel() > 0 &&
         (o.op == OpKind::Parameter || !has_trait(o.op, Source));
}

// Node n is of schedule class c, which a library computes: f32 of its rule's rank, not empty,
// with operands as above; of one group where it has groups (convolutions, their gradients).
bool extern_node(const Graph& g, const Node& n, ScheduleClass c) {
  const std::optional<ExternRule> rule = extern_rule(c);
  if (!rule || schedule_class(n.op) != c) return false;
  if (n.type.dtype != DType::F32 || n.type.rank() != rule->rank || n.type.numel() == 0) return false;
  if (n.attrs.has("groups") && n.attrs.i("groups") != 1) return false;
  for (int in : n.inputs)
    if (!extern_operand(g, in, rule->rank)) return false;
  return true;
}

std::set<int> nodes_where(const Graph& g, ScheduleClass c) {
  std::set<int> out;
  for (size_t id = 0; id < g.nodes.size(); ++id)
    if (extern_node(g, g.nodes[id], c)) out.insert(int(id));
  return out;
}

}  // namespace

std::set<int> extern_gemm_nodes(const Graph& g) {
  if (!*extern_gemm_library()) return {};
  return nodes_where(g, ScheduleClass::Matmul);
}

namespace {

// Whether oneDNN's forward convolution with these input and output channel counts computes in the
// 16-channel blocked layout (whole blocks only).
bool blocked_activations(int64_t in_channels, int64_t out_channels) { return in_channels % 16 == 0 && out_channels % 16 == 0; }

// How many nodes read each node's value, with outputs and updates counted as readers.
std::vector<int> uses(const Graph& g) {
  std::vector<int> n(g.nodes.size(), 0);
  for (const Node& node : g.nodes)
    for (int in : node.inputs) ++n[size_t(in)];
  for (int o : g.outputs) ++n[size_t(o)];
  for (const Update& u : g.updates) ++n[size_t(u.value)];
  return n;
}

bool conv_extern(const Graph& g, const Node& n) { return extern_node(g, n, ScheduleClass::Convolution); }

// Constant along images, rows and columns of an NCHW value of `out` shape: a per-channel operand.
bool per_channel(const TensorType& t, const Shape& out) {
  if (t.dtype != DType::F32 || t.rank() > 4 || t.numel() == 0) return false;
  for (int d = 0; d < t.rank(); ++d) {
    const int64_t axis = 4 - t.rank() + d, extent = t.shape[size_t(d)];
    if (extent != 1 && (axis != 1 || extent != out[1])) return false;
  }
  return true;
}

// Node `id` as a post-op of the chain value it reads as input `chain`: the element-wise ops oneDNN's
// post-ops express (by op, not schedule class: what oneDNN can do, not how hjit schedules).
std::optional<PostOp> as_post_op(const Graph& g, int id, size_t chain) {
  const Node& n = g.node(id);
  if (n.type.dtype != DType::F32 || n.type.rank() != 4 || chain >= n.inputs.size()) return std::nullopt;
  if (n.op == OpKind::Relu) return PostOp{PostOp::Relu, id, -1};
  if (n.inputs.size() != 2 || g.type(n.inputs[chain]).shape != n.type.shape) return std::nullopt;
  const int operand = n.inputs[1 - chain];
  if (operand == n.inputs[chain]) return std::nullopt;
  const TensorType& t = g.type(operand);
  if (n.op == OpKind::Add && t == n.type && extern_operand(g, operand, 4)) return PostOp{PostOp::Sum, id, operand};
  // oneDNN subtracts and divides only with the chain value on the left.
  if (!per_channel(t, n.type.shape) || (chain == 1 && n.op != OpKind::Add && n.op != OpKind::Mul)) return std::nullopt;
  switch (n.op) {
    case OpKind::Add: return PostOp{PostOp::Add, id, operand};
    case OpKind::Sub: return PostOp{PostOp::Sub, id, operand};
    case OpKind::Mul: return PostOp{PostOp::Mul, id, operand};
    case OpKind::Div: return PostOp{PostOp::Div, id, operand};
    default: return std::nullopt;
  }
}

bool has_sum(const ConvChain& c) {
  for (const PostOp& op : c.post_ops)
    if (op.kind == PostOp::Sum) return true;
  return false;
}

// The chain ending at `at`, walking back through values read only by the next post-op (either
// input of a sum may be the chain's).
std::optional<ConvChain> chain_to(const Graph& g, const std::vector<int>& n_uses, int at) {
  const Node& n = g.node(at);
  if (schedule_class(n.op) == ScheduleClass::Convolution)
    return conv_extern(g, n) ? std::optional<ConvChain>(ConvChain{at, {}}) : std::nullopt;
  for (size_t chain = 0; chain < n.inputs.size(); ++chain) {
    std::optional<PostOp> op = as_post_op(g, at, chain);
    const int prev = op ? n.inputs[chain] : -1;
    if (!op || n_uses[size_t(prev)] != 1) continue;  // an earlier value read elsewhere is not absorbed
    std::optional<ConvChain> c = chain_to(g, n_uses, prev);
    if (!c || c->post_ops.size() == kMaxPostOps || (op->kind == PostOp::Sum && has_sum(*c))) continue;
    c->post_ops.push_back(*op);
    return c;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ConvChain> conv_chain_ending_at(const Graph& g, int end) { return chain_to(g, uses(g), end); }

size_t affine_prefix(const ConvChain& c) {
  size_t n = 0;
  while (n < c.post_ops.size() && c.post_ops[n].kind != PostOp::Relu && c.post_ops[n].kind != PostOp::Sum) ++n;
  return n;
}

int32_t post_op_code(const ConvChain& c, size_t first) {
  int32_t code = 0;
  for (size_t i = first; i < c.post_ops.size(); ++i) code |= int32_t(c.post_ops[i].kind) << (3 * (i - first));
  return code;
}

std::map<int, int> conv_layouts(const Graph& g, const std::vector<ConvChain>& chains) {
  auto blocked = [&](int conv) {
    const Node& n = g.node(conv);
    return blocked_activations(g.type(n.inputs[0]).shape[1], n.type.shape[1]);
  };
  const std::vector<int> n_uses = uses(g);
  std::map<int, int> layout;
  for (const ConvChain& reader : chains)
    for (const ConvChain& writer : chains) {
      const int value = writer.end();
      if (g.node(reader.conv).inputs[0] == value && g.node(reader.conv).inputs[1] != value && n_uses[size_t(value)] == 1 &&
          blocked(reader.conv) && blocked(writer.conv)) {
        layout[reader.end()] |= kBlockedInput;
        layout[value] |= kBlockedOutput;
      }
    }
  return layout;
}

std::set<int> extern_conv_nodes(const Graph& g) {
  if (!extern_conv_available()) return {};
  const std::vector<int> n_uses = uses(g);
  std::vector<std::vector<int>> readers(g.nodes.size());
  for (size_t id = 0; id < g.nodes.size(); ++id)
    for (int in : g.nodes[id].inputs) readers[size_t(in)].push_back(int(id));
  std::set<int> out = nodes_where(g, ScheduleClass::ConvolutionWeightGrad);
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    if (!conv_extern(g, g.nodes[id])) continue;
    // The chain grows while its value has one reader that is a post-op reading it as the chain.
    ConvChain chain{int(id), {}};
    while (chain.post_ops.size() < kMaxPostOps && n_uses[size_t(chain.end())] == 1 && readers[size_t(chain.end())].size() == 1) {
      const int next = readers[size_t(chain.end())][0];
      const std::vector<int>& in = g.node(next).inputs;
      const size_t at = size_t(std::find(in.begin(), in.end(), chain.end()) - in.begin());
      std::optional<PostOp> op = as_post_op(g, next, at);
      if (!op || (op->kind == PostOp::Sum && has_sum(chain))) break;
      chain.post_ops.push_back(*op);
    }
    const int end = chain.end();
    out.insert(end);
  }
  return out;
}

const char* extern_stage_kind(OpKind op) {
  const std::optional<ExternRule> rule = extern_rule(schedule_class(op));
  return rule ? rule->name : "";
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

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

// A user array (hjit's dense NCHW / OIHW) and, where the primitive wants another layout, its own
// copy with the reorder between them.
struct Operand {
  int arg;      // DNNL_ARG_SRC, ...; for a residual, DNNL_ARG_DST
  bool output;  // written by the primitive: reordered back after it runs
  memory user, internal;
  std::optional<dnnl::reorder> reorder;
  bool residual = false;  // copied into the destination before the primitive adds to it (sum post-op)
};

// One convolution (forward, or the gradient of its weights) of one shape, planned once: oneDNN
// picks its own blocked layouts, and reorders run around the primitive.
struct ConvPlan {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::primitive prim;
  std::vector<Operand> operands;
  memory scratchpad;
  std::mutex mu;  // one call at a time uses the plan's buffers

  void add(int arg, bool output, const memory::desc& user, const memory::desc& wanted) {
    Operand o{arg, output, memory(user, engine, nullptr), {}, {}};
    if (wanted != user) {
      o.internal = memory(wanted, engine);
      o.reorder = output ? dnnl::reorder(o.internal, o.user) : dnnl::reorder(o.user, o.internal);
    }
    operands.push_back(std::move(o));
  }
  // The value a sum post-op adds, copied (reordered) into what the primitive writes first.
  void add_residual(const memory::desc& user, const memory::desc& dst) {
    Operand o{DNNL_ARG_DST, false, memory(user, engine, nullptr), {}, {}};
    o.reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine, user, engine, dst));
    o.residual = true;
    operands.push_back(std::move(o));
  }

  // Runs the primitive on the arrays given in the order the operands were added.
  void run(const std::vector<void*>& data) {
    std::lock_guard lock(mu);
    std::unordered_map<int, memory> args{{DNNL_ARG_SCRATCHPAD, scratchpad}};
    auto it = data.begin();
    for (Operand& o : operands) {
      o.user.set_data_handle(*it++);
      if (o.residual) {
        o.reorder->execute(stream, o.user, args.at(DNNL_ARG_DST));
        continue;
      }
      if (o.reorder && !o.output) o.reorder->execute(stream, o.user, o.internal);
      args[o.arg] = o.reorder ? o.internal : o.user;
    }
    prim.execute(stream, args);
    for (Operand& o : operands)
      if (o.reorder && o.output) o.reorder->execute(stream, o.internal, o.user);
    stream.wait();
  }
};

// The shape of a convolution: NCHW input, OIHW weights, output size, its parameters, and the
// post-ops after it (post_op_code()).
struct ConvShape {
  int64_t n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw;
  int32_t post_ops = 0;
  int32_t layout = 0;  // ConvLayout bits: which of src and dst hjit hands over blocked
  memory::dims src() const { return {n, c, h, w}; }
  memory::dims weights() const { return {o, c, kh, kw}; }
  memory::dims dst() const { return {n, o, oh, ow}; }
  // PyTorch pads both sides alike and drops what does not fill a window: the right padding that
  // gives the same output size. oneDNN counts dilation from 0.
  memory::dims pad_r() const { return {(oh - 1) * sh + (kh - 1) * dh + 1 - h - ph, (ow - 1) * sw + (kw - 1) * dw + 1 - w - pw}; }
  memory::dims dilation() const { return {dh - 1, dw - 1}; }
  // Activations 16-channel blocked where the channels fill whole blocks: oneDNN's own choice here
  // (channels-last) convolves as fast, but its reorders from and to NCHW take three times as long
  // (W8's 3x3 64-channel convolution with both reorders: 2.26 ms against 2.46, Zen 5).
  dnnl::convolution_forward::desc forward(dnnl::prop_kind kind, bool bias = false) const {
    const tag activations = hjit::backend::blocked_activations(c, o) ? tag::nChw16c : tag::any;
    const memory::desc s(src(), f32, activations), w(weights(), f32, tag::any), d(dst(), f32, activations);
    if (bias)
      return {kind, dnnl::algorithm::convolution_direct, s, w, memory::desc({o}, f32, tag::a), d, {sh, sw}, dilation(), {ph, pw}, pad_r()};
    return {kind, dnnl::algorithm::convolution_direct, s, w, d, {sh, sw}, dilation(), {ph, pw}, pad_r()};
  }
  std::vector<int64_t> key(int kind) const { return {kind, n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, post_ops, layout}; }
  // The post-ops' kinds, in order.
  std::vector<hjit::backend::PostOp::Kind> post_op_kinds() const {
    std::vector<hjit::backend::PostOp::Kind> out;
    for (int32_t code = post_ops; code; code >>= 3) out.push_back(hjit::backend::PostOp::Kind(code & 7));
    return out;
  }
  int64_t binary_post_ops() const {
    int64_t k = 0;
    for (auto kind : post_op_kinds()) k += kind != hjit::backend::PostOp::Relu && kind != hjit::backend::PostOp::Sum;
    return k;
  }
  bool sum() const {
    for (auto kind : post_op_kinds())
      if (kind == hjit::backend::PostOp::Sum) return true;
    return false;
  }
};

dnnl::post_ops make_post_ops(const ConvShape& s) {
  using hjit::backend::PostOp;
  dnnl::post_ops po;
  const memory::desc per_channel({1, s.o, 1, 1}, f32, tag::nchw);
  for (PostOp::Kind kind : s.post_op_kinds()) {
    switch (kind) {
      case PostOp::Add: po.append_binary(dnnl::algorithm::binary_add, per_channel); break;
      case PostOp::Sub: po.append_binary(dnnl::algorithm::binary_sub, per_channel); break;
      case PostOp::Mul: po.append_binary(dnnl::algorithm::binary_mul, per_channel); break;
      case PostOp::Div: po.append_binary(dnnl::algorithm::binary_div, per_channel); break;
      case PostOp::Relu: po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f); break;
      case PostOp::Sum: po.append_sum(1.0f); break;
    }
  }
  return po;
}

enum PlanKind { kForward, kWeightGrad };

std::unique_ptr<ConvPlan> make_plan(const ConvShape& s, PlanKind kind) {
  auto plan = std::make_unique<ConvPlan>();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const memory::desc src(s.src(), f32, tag::nchw), wts(s.weights(), f32, tag::oihw), dst(s.dst(), f32, tag::nchw);
  if (kind == kForward) {
    attr.set_post_ops(make_post_ops(s));
    using hjit::backend::kBlockedInput, hjit::backend::kBlockedOutput;
    const memory::desc src_given(s.src(), f32, s.layout & kBlockedInput ? tag::nChw16c : tag::nchw),
        dst_given(s.dst(), f32, s.layout & kBlockedOutput ? tag::nChw16c : tag::nchw);
    dnnl::convolution_forward::primitive_desc pd(s.forward(dnnl::prop_kind::forward_inference, true), attr, plan->engine);
    plan->prim = dnnl::convolution_forward(pd);
    plan->add(DNNL_ARG_SRC, false, src_given, pd.src_desc());
    plan->add(DNNL_ARG_WEIGHTS, false, wts, pd.weights_desc());
    plan->add(DNNL_ARG_DST, true, dst_given, pd.dst_desc());
    const memory::desc bias({s.o}, f32, tag::a), per_channel({1, s.o, 1, 1}, f32, tag::nchw);
    plan->add(DNNL_ARG_BIAS, false, bias, pd.bias_desc());
    if (s.sum()) plan->add_residual(memory::desc(s.dst(), f32, tag::nchw), pd.dst_desc());
    const auto kinds = s.post_op_kinds();
    for (size_t i = 0; i < kinds.size(); ++i)
      if (kinds[i] != hjit::backend::PostOp::Relu && kinds[i] != hjit::backend::PostOp::Sum)
        plan->add(DNNL_ARG_ATTR_MULTIPLE_POST_OP(int(i)) | DNNL_ARG_SRC_1, false, per_channel, per_channel);
    plan->scratchpad = memory(pd.scratchpad_desc(), plan->engine);
  } else {
    // The weights' gradient is planned against the forward convolution it differentiates.
    dnnl::convolution_forward::primitive_desc hint(s.forward(dnnl::prop_kind::forward_training), plan->engine);
    dnnl::convolution_backward_weights::desc d(dnnl::algorithm::convolution_direct, memory::desc(s.src(), f32, tag::any),
                                               memory::desc(s.weights(), f32, tag::any), memory::desc(s.dst(), f32, tag::any),
                                               {s.sh, s.sw}, s.dilation(), {s.ph, s.pw}, s.pad_r());
    dnnl::convolution_backward_weights::primitive_desc pd(d, attr, plan->engine, hint);
    plan->prim = dnnl::convolution_backward_weights(pd);
    plan->add(DNNL_ARG_SRC, false, src, pd.src_desc());
    plan->add(DNNL_ARG_DIFF_DST, false, dst, pd.diff_dst_desc());
    plan->add(DNNL_ARG_DIFF_WEIGHTS, true, wts, pd.diff_weights_desc());
    plan->scratchpad = memory(pd.scratchpad_desc(), plan->engine);
  }
  return plan;
}

ConvPlan& conv_plan(const ConvShape& s, PlanKind kind) {
  static std::mutex mu;
  static std::map<std::vector<int64_t>, std::unique_ptr<ConvPlan>> plans;
  std::lock_guard lock(mu);
  std::unique_ptr<ConvPlan>& slot = plans[s.key(kind)];
  if (!slot) slot = make_plan(s, kind);
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

// In a bounds query (some host pointer null) an extern convolution reads its whole operands:
// the extents given in Halide order.
bool bounds_query(std::initializer_list<std::pair<halide_buffer_t*, std::array<int64_t, 4>>> operands) {
  bool query = false;
  for (auto& [b, extent] : operands)
    if (!b->host) {
      query = true;
      for (int d = 0; d < 4; ++d) b->dim[d].min = 0, b->dim[d].extent = int32_t(extent[size_t(d)]);
    }
  return query;
}

}  // namespace

// out = the post-ops of conv2d(in, weights) + bias in NCHW / OIHW (Halide order: x, y, channel,
// image), or in oneDNN's blocked layout where `layout` says so (conv_layouts). per_channel holds the
// bias, then the binary post-ops' operands, one row of output channels each; residual, what a sum
// post-op adds (NCHW), or one unused element. Shapes and parameters come as arguments so that a bounds query can say what the
// whole stage reads; the stage is computed at root, for its whole output.
extern "C" int hjit_extern_conv2d(halide_buffer_t* in, halide_buffer_t* weights, halide_buffer_t* per_channel,
                                  halide_buffer_t* residual, int32_t c,
                                  int32_t h, int32_t w, int32_t kh, int32_t kw, int32_t sh, int32_t sw, int32_t ph,
                                  int32_t pw, int32_t dh, int32_t dw, int32_t post_ops, int32_t layout,
                                  halide_buffer_t* out) {
  ConvShape s{out->dim[3].extent, c, h, w, out->dim[2].extent, kh, kw, out->dim[1].extent, out->dim[0].extent,
              sh, sw, ph, pw, dh, dw};
  s.post_ops = post_ops, s.layout = layout;
  // The residual a sum post-op adds is the output's shape; without one, a single element.
  const std::array<int64_t, 4> out_extent{s.ow, s.oh, s.o, s.n};
  bool query = bounds_query({{in, {w, h, c, s.n}}, {weights, {kw, kh, c, s.o}}});
  if (!residual->host) {
    query = true;
    for (int d = 0; d < residual->dimensions; ++d)
      residual->dim[d].min = 0, residual->dim[d].extent = s.sum() ? int32_t(out_extent[size_t(d)]) : 1;
  }
  if (!per_channel->host) {
    query = true;
    per_channel->dim[0].min = 0, per_channel->dim[0].extent = int32_t(s.o);
    per_channel->dim[1].min = 0, per_channel->dim[1].extent = int32_t(1 + s.binary_post_ops());
  }
  if (query || !out->host) return 0;
  if (!dense(in) || !dense(weights) || !dense(per_channel) || !dense(out) || (s.sum() && !dense(residual))) return -1;
  try {
    float* row = reinterpret_cast<float*>(per_channel->host);
    std::vector<void*> data{in->host, weights->host, out->host};
    for (int64_t k = 0; k <= s.binary_post_ops(); ++k) data.push_back(row + k * s.o);
    if (s.sum()) data.push_back(residual->host);
    conv_plan(s, kForward).run(data);
    return 0;
  } catch (const std::exception&) {
    return -1;
  }
}

// out = conv2d_weight_grad(in, grad): the gradient of conv2d's OIHW weights (Halide order: kx, ky,
// input channel, output channel) given its NCHW input and the gradient of its output.
extern "C" int hjit_extern_conv2d_weight_grad(halide_buffer_t* in, halide_buffer_t* grad, int32_t n, int32_t h, int32_t w,
                                              int32_t oh, int32_t ow, int32_t sh, int32_t sw, int32_t ph, int32_t pw,
                                              int32_t dh, int32_t dw, halide_buffer_t* out) {
  const ConvShape s{n, out->dim[2].extent, h, w, out->dim[3].extent, out->dim[1].extent, out->dim[0].extent, oh, ow,
                    sh, sw, ph, pw, dh, dw};
  if (bounds_query({{in, {w, h, s.c, n}}, {grad, {ow, oh, s.o, n}}}) || !out->host) return 0;
  if (!dense(in) || !dense(grad) || !dense(out)) return -1;
  try {
    conv_plan(s, kWeightGrad).run({in->host, grad->host, out->host});
    return 0;
  } catch (const std::exception&) {
    return -1;
  }
}
#endif
