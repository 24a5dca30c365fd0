#include "halide_backend/lowering/lower_extern.h"

#include <algorithm>

#include "graph/op_def.h"
#include "halide_backend/lowering/lower.h"

namespace hjit::backend {

using Halide::Expr;
using Halide::Func;
using Halide::Var;

namespace {

// The argument an extern stage reads for graph node `in`: graph inputs as they are, computed
// values as Funcs (which the schedule computes at root).
Halide::ExternFuncArgument extern_input(const Graph& g, LoweredPipeline& p, int in) {
  const Node& o = g.node(in);
  if (o.op == OpKind::Parameter) return p.params[size_t(o.attrs.i("index"))];
  if (o.op == OpKind::Constant) return p.stages[size_t(in)].constant;
  return p.stages[size_t(in)].func;
}

// A bf16 operand as the library reads it, its stored bits: graph inputs and constants are bound so;
// a computed value (its Func holds f32 values rounded to bf16) is narrowed into a helper, stored
// (and scheduled) at root.
Halide::ExternFuncArgument bf16_bits(LowerCtx& ctx, Stage& s, int in, size_t operand, const Halide::ExternFuncArgument& arg) {
  const Node& o = ctx.g.node(in);
  if (o.op == OpKind::Parameter || o.op == OpKind::Constant) return arg;
  Helper bits;
  bits.role = "bf16 bits";
  bits.func = Func(helper_name(s, operand == 0 ? "_left_bits" : "_right_bits"));
  const Shape& shape = o.type.shape;
  for (size_t d = shape.size(); d-- > 0;) bits.vars.push_back(Var("b" + std::to_string(d))), bits.extents.push_back(shape[d]);
  const std::vector<Var> row_major = to_row_major(bits.vars);
  bits.func(bits.vars) = to_storage(DType::BF16, ctx.at(in, Coords(row_major.begin(), row_major.end())));
  s.helpers.push_back(bits);
  return bits.func;
}

// A matmul's constant right operand shared by its batch, packed when compiling into the layout
// oneDNN's primitive reads (a frozen weight: packed once, not on every call); else the zero header
// that says there is none.
Halide::ImageParam packed_weights(LowerCtx& ctx, ExternKind kind, const Node& n, int64_t k) {
  const Node& w = ctx.g.node(n.inputs[1]);
  const Shape& shape = w.type.shape;
  const size_t matrix_rank = kind == ExternKind::IntGemm ? 3 : 2;
  std::vector<uint8_t> packed;
  if (w.op == OpKind::Constant && (shape.size() == matrix_rank || shape[0] == 1))
    packed = pack_constant_weights(kind, k, shape[shape.size() - (matrix_rank == 3 ? 2 : 1)], ctx.g.constants[size_t(w.constant)].data);
  if (packed.empty()) packed.assign(size_t(kernel_abi::kPackedHeaderBytes), 0);
  auto bytes = std::make_shared<std::vector<uint8_t>>(std::move(packed));
  const ConstData data{bytes, bytes->data(), bytes->size()};
  return bind_constant_param(ctx.p, TensorType{DType::U8, {int64_t(bytes->size())}}, data);
}

// An int_conv2d's constant weights packed when compiling (lowering knows no part's rows: they are
// packed for all of them, the layout oneDNN picks for a part too, or the kernel packs on the
// call); else the zero header that says there are none.
Halide::ImageParam packed_conv_weights(LowerCtx& ctx, const Node& n, const IntConvProblem& problem) {
  const Node& w = ctx.g.node(n.inputs[1]);
  std::vector<uint8_t> packed;
  if (w.op == OpKind::Constant) packed = pack_int_conv_weights(problem, int32_t(n.type.shape[2]), ctx.g.constants[size_t(w.constant)].data);
  if (packed.empty()) packed.assign(size_t(kernel_abi::kPackedHeaderBytes), 0);
  auto bytes = std::make_shared<std::vector<uint8_t>>(std::move(packed));
  const ConstData data{bytes, bytes->data(), bytes->size()};
  return bind_constant_param(ctx.p, TensorType{DType::U8, {int64_t(bytes->size())}}, data);
}

}  // namespace

void lower_extern(LowerCtx& ctx, Stage& s, const Node& n, const std::optional<ConvChain>& chain, int layout) {
  const Graph& g = ctx.g;
  LoweredPipeline& p = ctx.p;
  const Node& head = chain ? g.node(chain->conv) : n;
  std::vector<Halide::ExternFuncArgument> args;
  for (int in : head.inputs) args.push_back(extern_input(g, p, in));
  auto arg = [&](int64_t v) { args.emplace_back(Expr(int32_t(v))); };
  const Shape& x = g.type(head.inputs[0]).shape;
  const auto& attr = [&](const char* name) { return head.attrs.ints(name); };
  s.extern_kind = extern_stage_kind(head);
  const ExternKind kind = extern_rule(head)->kind;
  if (kind == ExternKind::Sgemm) {
    arg(x[1]);
    s.func.define_extern(kernel_abi::kSgemmSymbol, args, Halide::Float(32), s.vars, Halide::NameMangling::C);
  } else if (kind == ExternKind::IntGemm || kind == ExternKind::Bf16Gemm) {
    const bool int8 = kind == ExternKind::IntGemm;
    if (!int8)
      for (size_t i = 0; i < 2; ++i) args[i] = bf16_bits(ctx, s, head.inputs[i], i, args[i]);
    const Shape& w = g.type(head.inputs[1]).shape;
    args.emplace_back(packed_weights(ctx, kind, head, x.back()));
    arg(x.back());
    arg(w.size() == (int8 ? 4u : 3u) && w[0] > 1);  // a matrix per batch, not one shared
    // (bf16 results come back as f32 values rounded to bf16, as the Funcs of bf16 nodes hold them.)
    s.func.define_extern(int8 ? kernel_abi::kIntGemmSymbol : kernel_abi::kBf16GemmSymbol, args,
                         int8 ? Halide::Int(32) : Halide::Float(32), s.vars, Halide::NameMangling::C);
  } else if (kind == ExternKind::IntConv) {
    if (head.inputs.size() < 3) {  // no offsets: the sums start at 0
      Func none(helper_name(s, "_no_offsets"));
      Var c("c");
      none(c) = 0;
      none.compute_root();  // (a buffer for the library call)
      args.emplace_back(none);
    }
    const IntConvProblem problem = int_conv_problem(g, head);
    args.emplace_back(packed_conv_weights(ctx, head, problem));
    for (int32_t v : problem) arg(v);
    s.func.define_extern(kernel_abi::kIntConvSymbol, args, Halide::Int(32), s.vars, Halide::NameMangling::C);
  } else if (kind == ExternKind::Conv) {
    // The leading affine post-ops fold into the weights and a bias; the rest stay post-ops, their
    // per-channel operands rows of one Func after the bias.
    Var c("c"), k("k");
    auto value = [&](int node) { return ctx.at(node, LowerCtx::broadcast({0, c, 0, 0}, g.type(node).shape)); };
    const size_t folded = affine_prefix(*chain);
    Expr scale = 1.0f, bias = 0.0f;
    for (size_t i = 0; i < folded; ++i) {
      const PostOp& op = chain->post_ops[i];
      Expr v = value(op.operand);
      if (op.kind == PostOp::Add) bias = bias + v;
      if (op.kind == PostOp::Sub) bias = bias - v;
      if (op.kind == PostOp::Mul) scale = scale * v, bias = bias * v;
      if (op.kind == PostOp::Div) scale = scale / v, bias = bias / v;
    }
    std::vector<Expr> rows{bias};
    int residual = -1;
    for (size_t i = folded; i < chain->post_ops.size(); ++i) {
      const PostOp& op = chain->post_ops[i];
      if (op.kind == PostOp::Sum) residual = op.operand;
      else if (op.operand >= 0) rows.push_back(value(op.operand));
    }
    Func per_channel(helper_name(s, "_per_channel"));
    Expr row = rows.back();
    for (size_t r = rows.size() - 1; r-- > 0;) row = select(k == int(r), rows[r], row);
    per_channel(c, k) = row;
    // Halide computes no Func inline inside an extern call: these are stored, whatever the schedule.
    per_channel.compute_root();
    if (folded > 0) {
      Func scaled(helper_name(s, "_weights"));
      Var kx("kx"), ky("ky"), ci("ci"), co("co");
      Func a(helper_name(s, "_scale"));
      a(c) = scale;
      a.compute_root();
      scaled(kx, ky, ci, co) = ctx.at(head.inputs[1], {co, ci, ky, kx}) * a(co);
      scaled.compute_root();
      args[1] = scaled;
    }
    args.emplace_back(per_channel);
    if (residual >= 0) {
      args.push_back(extern_input(g, p, residual));
    } else {  // an element the library call does not read
      Func unused(helper_name(s, "_no_residual"));
      unused(s.vars) = 0.0f;
      unused.compute_root();
      args.emplace_back(unused);
    }
    const Shape& w = g.type(head.inputs[1]).shape;
    for (int64_t v : {x[1], x[2], x[3], w[2], w[3], attr("stride")[0], attr("stride")[1], attr("padding")[0],
                      attr("padding")[1], attr("dilation")[0], attr("dilation")[1]})
      arg(v);
    arg(post_op_code(*chain, folded));
    arg(layout);
    s.func.define_extern(kernel_abi::kConvSymbol, args, Halide::Float(32), s.vars, Halide::NameMangling::C);
    s.helpers.push_back(Helper{"per_channel", per_channel, {c, k}, {w[0], int64_t(rows.size())}, {}, {}});
  } else {  // Conv2dWeightGrad(x, output gradient)
    const Shape& gs = g.type(head.inputs[1]).shape;
    for (int64_t v : {x[0], x[2], x[3], gs[2], gs[3], attr("stride")[0], attr("stride")[1], attr("padding")[0],
                      attr("padding")[1], attr("dilation")[0], attr("dilation")[1]})
      arg(v);
    s.func.define_extern(kernel_abi::kConvWeightGradSymbol, args, Halide::Float(32), s.vars, Halide::NameMangling::C);
  }
  s.is_extern = true;
}

std::map<int, std::optional<ConvChain>> extern_chains(const Graph& g, const std::set<int>& externs) {
  std::map<int, std::optional<ConvChain>> out;
  if (externs.empty()) return out;
  const std::set<int> gemms = extern_gemm_nodes(g), convs = extern_conv_nodes(g), int_gemms = extern_int_gemm_nodes(g),
                      bf16_gemms = extern_bf16_gemm_nodes(g), int_convs = extern_int_conv_nodes(g);
  for (int id : externs) {
    if (id < 0 || size_t(id) >= g.nodes.size())
      throw ValueError("hjit: schedule: node " + std::to_string(id) + " is not in the graph, so it cannot be an extern stage");
    const Node& n = g.node(id);
    std::optional<ConvChain> chain;
    const std::optional<ExternRule> rule = extern_rule(n);
    const bool ok = rule && rule->kind == ExternKind::Sgemm           ? gemms.count(id) > 0
                    : rule && rule->kind == ExternKind::IntGemm        ? int_gemms.count(id) > 0
                    : rule && rule->kind == ExternKind::Bf16Gemm       ? bf16_gemms.count(id) > 0
                    : rule && rule->kind == ExternKind::IntConv        ? int_convs.count(id) > 0
                    : rule && rule->kind == ExternKind::ConvWeightGrad ? convs.count(id) > 0
                                                                      : extern_conv_available() && (chain = conv_chain_ending_at(g, id));
    if (!ok) throw ValueError("hjit: schedule: node " + std::to_string(id) + " (" + op_name(n.op) + ") cannot be an extern stage");
    out[id] = chain;
  }
  return out;
}

}  // namespace hjit::backend
