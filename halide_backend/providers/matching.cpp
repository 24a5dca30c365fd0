#include "halide_backend/providers/matching.h"

#include <algorithm>

#include "graph/op_def.h"
#include "halide_backend/providers/provider.h"

namespace hjit::backend {

const char* extern_gemm_library() {
  const KernelProvider* p = provider_for(ExternKind::Sgemm);
  return p ? p->name : "";
}

bool extern_conv_available() { return provider_for(ExternKind::Conv) != nullptr; }

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

std::optional<ExternRule> extern_rule(const Node& n) {
  if (n.op == OpKind::IntMatmul) return ExternRule{ExternKind::IntGemm, "int_gemm", 0};
  if (n.op == OpKind::Matmul && n.type.dtype == DType::BF16) return ExternRule{ExternKind::Bf16Gemm, "bf16_gemm", 0};
  if (n.op == OpKind::IntConv2d) return ExternRule{ExternKind::IntConv, "int_conv", 0};
  return extern_rule(schedule_class(n.op));
}

namespace {

// A graph input or a computed value: what an extern stage reads as a buffer (a constant has no
// Func of its own to compute at root; only its bound parameter, which the int gemm reads).
bool input_or_computed(const Node& o) { return o.op == OpKind::Parameter || !has_trait(o.op, Source); }

// An operand an extern stage can read: an f32 graph input, or a computed value.
bool extern_operand(const Graph& g, int id, int rank) {
  const Node& o = g.node(id);
  return o.type.rank() == rank && o.type.dtype == DType::F32 && o.type.numel() > 0 && input_or_computed(o);
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

// The products of `kind` oneDNN's matmul computes on AMX (extern_int_gemm_nodes,
// extern_bf16_gemm_nodes): a right operand `extra` dimensions deeper than the left one (int8's is
// packed [.., K, N, 4]), shared by the batch or one per matrix.
std::set<int> amx_gemm_nodes(const Graph& g, ExternKind kind, int64_t least_multiply_adds) {
  if (!provider_for(kind) || !gemm_on_amx(kind)) return {};
  constexpr int64_t kTileRows = 16;
  const bool int8 = kind == ExternKind::IntGemm;
  const OpKind op = int8 ? OpKind::IntMatmul : OpKind::Matmul;
  const DType a_dtype = int8 ? DType::U8 : DType::BF16, b_dtype = int8 ? DType::I8 : DType::BF16;
  const int extra = int8 ? 1 : 0;
  auto readable = [&](int id) {
    const Node& o = g.node(id);
    return o.type.numel() > 0 && (o.op == OpKind::Constant || input_or_computed(o));
  };
  std::set<int> out;
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    const int r = n.type.rank();
    if (n.op != op || n.type.numel() == 0 || r < 2 || r > 3) continue;
    const TensorType &a = g.type(n.inputs[0]), &b = g.type(n.inputs[1]);
    if (a.dtype != a_dtype || b.dtype != b_dtype || a.rank() != r || a.shape.front() != n.type.shape.front()) continue;
    const bool shared = b.rank() == 2 + extra || (b.rank() == 3 + extra && b.shape[0] == 1);
    if (!shared && (b.rank() != 3 + extra || r != 3 || b.shape[0] != n.type.shape[0])) continue;
    if (!readable(n.inputs[0]) || !readable(n.inputs[1])) continue;
    const int64_t rows = shared ? n.type.numel() / n.type.shape.back() : n.type.shape[1];
    if (rows >= kTileRows && n.type.numel() * a.shape.back() >= least_multiply_adds) out.insert(int(id));
  }
  return out;
}

}  // namespace

std::set<int> extern_int_gemm_nodes(const Graph& g) {
  // Smaller products gain too little for what a library call costs besides: a BERT-like encoder's
  // (4 x 128 x 256, at most 2^27 multiply-adds a product) ran no faster, and slower with its weights
  // packed once (28-64 against 16-42 ms, a noisy host): a call's operand and result are stored
  // whole, where hjit's tiles requantize each tile as they finish it.
  return amx_gemm_nodes(g, ExternKind::IntGemm, int64_t(1) << 28);
}

std::set<int> extern_bf16_gemm_nodes(const Graph& g) {
  // No weights to pack (oneDNN reads bf16 ones as they lie): the library pays from a 128^3 product
  // on (2^21 multiply-adds: 0.034-0.037 against 0.040-0.046 ms for the widened f32 tiles; 1024^3
  // 4.8 against 15.6 ms), level with them at 64 x 128 x 128.
  return amx_gemm_nodes(g, ExternKind::Bf16Gemm, int64_t(1) << 21);
}

IntConvProblem int_conv_problem(const Graph& g, const Node& n) {
  const Shape &x = g.type(n.inputs[0]).shape, &w = g.type(n.inputs[1]).shape;  // [N, C/4, H, W, 4], [O/B, C/4, KH, KW, B, 4]
  const auto &stride = n.attrs.ints("stride"), &dilation = n.attrs.ints("dilation");
  const int64_t values[] = {x[1], x[2], x[3], n.type.shape[1], w[4], w[2], w[3], stride[0], stride[1], dilation[0], dilation[1]};
  IntConvProblem out{};
  for (size_t i = 0; i < out.size(); ++i) {
    if (values[i] > INT32_MAX) return IntConvProblem{};  // (no kernel for it: the sizes say 0)
    out[i] = int32_t(values[i]);
  }
  return out;
}

std::set<int> extern_int_conv_nodes(const Graph& g) {
  if (!provider_for(ExternKind::IntConv) || !gemm_on_amx(ExternKind::IntGemm)) return {};
  // Smaller convolutions gain too little for what a library call costs besides.
  constexpr int64_t kLeastMultiplyAdds = int64_t(1) << 24;
  std::set<int> out;
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    if (n.op != OpKind::IntConv2d || n.type.numel() == 0) continue;
    const bool readable = std::all_of(n.inputs.begin(), n.inputs.end(), [&](int in) {
      const Node& o = g.node(in);
      return o.type.numel() > 0 && (o.op == OpKind::Constant || input_or_computed(o));
    });
    const Shape& w = g.type(n.inputs[1]).shape;
    const int64_t multiply_adds = n.type.numel() * w[1] * 4 * w[2] * w[3];
    if (readable && multiply_adds >= kLeastMultiplyAdds && int_conv_on_amx(int_conv_problem(g, n))) out.insert(int(id));
  }
  return out;
}

std::vector<int> value_uses(const Graph& g) {
  std::vector<int> n(g.nodes.size(), 0);
  for (const Node& node : g.nodes)
    for (int in : node.inputs) ++n[size_t(in)];
  for (int o : g.outputs) ++n[size_t(o)];
  for (const Update& u : g.updates) ++n[size_t(u.value)];
  return n;
}

namespace {

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

std::optional<ConvChain> conv_chain_ending_at(const Graph& g, int end) { return chain_to(g, value_uses(g), end); }

std::set<int> extern_conv_nodes(const Graph& g) {
  if (!extern_conv_available()) return {};
  const std::vector<int> n_uses = value_uses(g);
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

const char* extern_stage_kind(const Node& n) {
  const std::optional<ExternRule> rule = extern_rule(n);
  return rule ? rule->name : "";
}

}  // namespace hjit::backend
