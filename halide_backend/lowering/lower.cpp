#include "halide_backend/lowering/lower.h"

#include <algorithm>
#include <climits>
#include <map>
#include <optional>
#include <set>

#include "graph/op_def.h"
#include "halide_backend/providers/extern_stages.h"
#include "halide_backend/lowering/lower_extern.h"
#include "halide_backend/lowering/ieee_math.h"
#include "halide_backend/lowering/lower_ctx.h"

namespace hjit::backend {

using Halide::Expr;
using Halide::Func;
using Halide::ImageParam;
using Halide::Var;

Halide::Type compute_type(DType t) {
  switch (t) {
    case DType::Bool: return Halide::Bool();
    case DType::I8: return Halide::Int(8);
    case DType::I16: return Halide::Int(16);
    case DType::I32: return Halide::Int(32);
    case DType::I64: return Halide::Int(64);
    case DType::U8: return Halide::UInt(8);
    case DType::U16: return Halide::UInt(16);
    case DType::U32: return Halide::UInt(32);
    case DType::U64: return Halide::UInt(64);
    case DType::F16:
    case DType::BF16:
    case DType::F32: return Halide::Float(32);
    case DType::F64: return Halide::Float(64);
  }
  throw InternalError("compute_type: unknown dtype");
}

// 16-bit floats are stored as their bits: hjit converts them itself (ieee_math.h), because Halide
// 14's float16 conversion turns NaN into infinity.
Halide::Type storage_type(DType t) {
  switch (t) {
    case DType::Bool: return Halide::UInt(8);
    case DType::F16:
    case DType::BF16: return Halide::UInt(16);
    default: return compute_type(t);
  }
}

Expr to_storage(DType t, const Expr& computed) {
  if (t == DType::F16 || t == DType::BF16) return ieee::narrow_bits(t, computed);
  return Halide::cast(storage_type(t), computed);
}

Expr from_storage(DType t, const Expr& stored) {
  if (t == DType::Bool) return stored != Halide::cast(stored.type(), 0);
  if (t == DType::F16 || t == DType::BF16) return ieee::widen_bits(t, stored);
  return Halide::cast(compute_type(t), stored);
}

void LowerCtx::define(Stage& s, Expr e) {
  // A 16-bit float is rounded at every op that computes new values, as eager execution stores
  // it (ops that only move or select values keep them exact).
  const bool narrow = s.dtype == DType::F16 || s.dtype == DType::BF16;
  if (narrow && !has_trait(s.op, Movement) && !has_trait(s.op, Source)) e = ieee::round_to(s.dtype, e);
  s.func(std::vector<Expr>(s.vars.begin(), s.vars.end())) = e;
}

namespace {
Expr affine_expr(const Affine& a, const std::vector<Expr>& symbols) {
  Expr e = Expr(int(a.constant));
  for (size_t k = 0; k < a.coef.size(); ++k)
    if (a.coef[k] != 0) e = e + int(a.coef[k]) * symbols[k];
  return Halide::Internal::simplify(e);
}
}  // namespace

std::optional<ValueRange> LowerCtx::range(int node) { return value_ranges()(node); }
ValueRanges& LowerCtx::value_ranges() {
  if (!ranges) ranges = std::make_shared<ValueRanges>(g);
  return *ranges;
}

Expr LowerCtx::extent(int node, int d) const {
  if (p.dynamic) {
    const Affine& a = p.dynamic->extents[size_t(node)][size_t(d)];
    if (!a.is_constant()) return affine_expr(a, p.symbols);
  }
  return Expr(int(g.type(node).shape[size_t(d)]));
}

Expr LowerCtx::attr(int node, const std::string& name, size_t i) const {
  if (p.dynamic) {
    const auto& varying = p.dynamic->attrs[size_t(node)];
    if (auto it = varying.find(name); it != varying.end() && !it->second[i].is_constant()) return affine_expr(it->second[i], p.symbols);
  }
  return Expr(int(g.node(node).attrs.ints(name)[i]));
}

Coords LowerCtx::broadcast(const Coords& out, const Shape& shape) {
  Coords c;
  const size_t lead = out.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) c.push_back(shape[i] == 1 ? Expr(0) : out[lead + i]);
  return c;
}

namespace {

// e with every reference to a buffer's field (in0.extent.1) by name alone. A constraint on an
// ImageParam that refers to the ImageParam itself (a stride that is its own extent) through Halide's
// Variable, which holds the Parameter, is a cycle of reference counts that is never freed
// (LeakSanitizer); by name, the pipeline's own definition of the field is what it reads.
Expr by_name(const Expr& e) {
  struct Detach : Halide::Internal::IRMutator {
    using IRMutator::visit;
    Expr visit(const Halide::Internal::Variable* v) override {
      return v->param.defined() ? Halide::Internal::Variable::make(v->type, v->name) : Expr(v);
    }
  };
  return Detach().mutate(e);
}

// Dense row-major layout, known at compile time: Halide specializes every loop to it. With
// dynamic sizes, extents (and the strides outside them) are expressions; `free` (Halide order)
// marks the dimensions that are symbols' own sources, left unconstrained.
template <class Dims>
void constrain(Dims dims_of, const Shape& shape, const std::vector<Expr>& extents = {}, const std::vector<bool>& free = {}) {
  if (extents.empty()) {
    int64_t stride = 1;
    const Shape halide_shape = to_halide_order(shape);
    for (int i = 0; i < int(halide_shape.size()); ++i) {
      dims_of(i).set_bounds(0, int(halide_shape[size_t(i)])).set_stride(int(stride));
      stride *= halide_shape[size_t(i)];
    }
    return;
  }
  const std::vector<Expr> halide_extents = to_halide_order(extents);
  Expr stride = 1;
  for (int i = 0; i < int(halide_extents.size()); ++i) {
    const bool own = size_t(i) < free.size() && free[size_t(i)];
    if (own) dims_of(i).set_min(0).set_stride(by_name(stride));
    else dims_of(i).set_bounds(0, by_name(halide_extents[size_t(i)])).set_stride(by_name(stride));
    stride = Halide::Internal::simplify(stride * (own ? dims_of(i).extent() : halide_extents[size_t(i)]));
  }
}

std::vector<Expr> extents_of(const LowerCtx& ctx, int node) {
  if (!ctx.p.dynamic || !ctx.p.dynamic->extent_varies(node)) return {};
  std::vector<Expr> e;
  for (int d = 0; d < ctx.g.type(node).rank(); ++d) e.push_back(ctx.extent(node, d));
  return e;
}

// The ops whose lowerings take every extent that can vary as an expression (ctx.extent); others
// read sizes as numbers and compile only for fixed sizes. (A slice's step, and a
// concatenation's axis, must not vary: checked below; a slice's start may, as from the end.)
bool takes_dynamic_sizes(OpKind op) {
  if (has_trait(op, Elementwise) || has_trait(op, Source)) return true;
  switch (op) {
    case OpKind::Reshape: case OpKind::Transpose: case OpKind::BroadcastTo: case OpKind::Slice: case OpKind::Concat:
    case OpKind::Matmul: case OpKind::IntMatmul: case OpKind::ReduceSum: case OpKind::ReduceMax: case OpKind::ReduceMin: case OpKind::Attention:
    case OpKind::Take: case OpKind::Numel:
      return true;
    default: return false;
  }
}

// Convolutions and pooling (and their gradients) define each image of the batch alike and read
// extents only of the others: the batch (the first dimension of these operands, and of the output
// where it has one: a weight gradient sums over it) may vary; weights and biases may not.
std::vector<size_t> batched_operands(OpKind op) {
  switch (op) {
    case OpKind::Conv2d: case OpKind::MaxPool2d: case OpKind::AvgPool2d: return {0};
    case OpKind::MaxPool2dGrad: case OpKind::Conv2dWeightGrad: return {0, 1};
    default: return {};
  }
}
bool takes_dynamic_batch(OpKind op) { return !batched_operands(op).empty(); }
bool has_batch(OpKind op) { return op != OpKind::Conv2dWeightGrad; }  // (its output is the weights')

bool only_batch_varies(const Graph& g, const SymbolicSizes& d, int id) {
  if (!d.attrs[size_t(id)].empty()) return false;
  auto batch_only = [&](int node, size_t from) {
    const std::vector<Affine>& e = d.extents[size_t(node)];
    for (size_t dim = from; dim < e.size(); ++dim)
      if (!e[dim].is_constant()) return false;
    return true;
  };
  const Node& n = g.node(id);
  const std::vector<size_t> batched = batched_operands(n.op);
  for (size_t k = 0; k < n.inputs.size(); ++k)
    if (!batch_only(n.inputs[k], std::find(batched.begin(), batched.end(), k) != batched.end() ? 1 : 0)) return false;
  return batch_only(id, has_batch(n.op) ? 1 : 0);
}

// Which nodes see a varying size (their own, an operand's or an attribute): each must be lowered by
// an op that takes dynamic sizes.
void check_dynamic(const Graph& g, const SymbolicSizes& d) {
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    bool varies = d.varies(int(id));
    for (int in : n.inputs) varies |= d.extent_varies(in);
    if (!varies) continue;
    if (!takes_dynamic_sizes(n.op) && !(takes_dynamic_batch(n.op) && only_batch_varies(g, d, int(id))))
      throw ValueError(std::string(op_name(n.op)) + " (node %" + std::to_string(id) + ") compiles for fixed sizes only" +
                       (takes_dynamic_batch(n.op) ? " (of any batch: only its first dimension may vary)" : ""));
    // A broadcast decided on a size of 1 at the traced size would hold at that size only.
    for (int in : n.inputs)
      for (int dim = 0; dim < g.type(in).rank(); ++dim)
        if (!d.extents[size_t(in)][size_t(dim)].is_constant() && g.type(in).shape[size_t(dim)] < 2)
          throw ValueError("a dynamic size is " + std::to_string(g.type(in).shape[size_t(dim)]) + " where traced");
    if (n.op == OpKind::Slice && d.attr_varies(int(id), "steps")) throw ValueError("a slice whose step depends on a dynamic size");
    if (n.op == OpKind::Concat && d.extent_varies(int(id))) {
      const int64_t axis = n.attrs.i("axis");
      for (int in : n.inputs)
        if (!d.extents[size_t(in)][size_t(axis)].is_constant()) throw ValueError("a concatenation along a dynamic axis");
    }
  }
}

// aligned: the caller promises 64-byte aligned storage (hjit's tensors; not constants' bytes).
ImageParam make_param(const TensorType& t, const std::string& name, bool aligned) {
  ImageParam p(storage_type(t.dtype), t.rank(), name);
  constrain([&](int i) { return p.dim(i); }, t.shape);
  if (aligned) p.set_host_alignment(64);
  return p;
}

}  // namespace

ImageParam bind_constant_param(LoweredPipeline& p, const TensorType& type, ConstData data) {
  ImageParam c = make_param(type, "const" + std::to_string(p.const_params.size()), false);
  p.const_params.push_back(c);
  p.const_data.push_back(std::move(data));
  p.const_types.push_back(type);
  return c;
}

Expr bind_constant(LoweredPipeline& p, const TensorType& type, ConstData data, const std::vector<Expr>& args) {
  return from_storage(type.dtype, bind_constant_param(p, type, std::move(data))(args));
}

namespace {

// An extern convolution reads the convolution's operands and its post-ops' per-channel values; the
// nodes it absorbs are read by nothing else. The chains of the extern stages, their layouts, and
// every stage's consumers.
struct ExternPlan {
  std::map<int, std::optional<ConvChain>> chains;  // by the node whose value the stage computes
  std::map<int, int> layouts;
};
ExternPlan plan_extern_stages(const Graph& g, const std::set<int>& externs, LoweredPipeline& p) {
  ExternPlan plan;
  plan.chains = extern_chains(g, externs);
  std::vector<ConvChain> conv_chains;
  for (const auto& [end, chain] : plan.chains)
    if (chain) conv_chains.push_back(*chain);
  plan.layouts = conv_layouts(g, conv_chains);
  for (const auto& [end, chain] : plan.chains) {
    if (!chain) continue;
    if (chain->conv != end) p.stages[size_t(chain->conv)].absorbed = true;
    for (const PostOp& op : chain->post_ops)
      if (op.node != end) p.stages[size_t(op.node)].absorbed = true;
  }
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    if (p.stages[id].absorbed) continue;
    std::vector<int> reads = g.nodes[id].inputs;
    if (auto it = plan.chains.find(int(id)); it != plan.chains.end() && it->second) {
      reads = g.node(it->second->conv).inputs;
      for (const PostOp& op : it->second->post_ops)
        if (op.operand >= 0) reads.push_back(op.operand);
    }
    if (has_trait(g.nodes[id].op, ShapeOnly)) continue;  // (reads extents, not the operand's stage)
    for (int in : reads) p.stages[size_t(in)].consumers.push_back(int(id));
  }
  return plan;
}

bool used(const LoweredPipeline& p, const std::vector<int>& wanted, int node) {
  return !p.stages[size_t(node)].consumers.empty() || std::find(wanted.begin(), wanted.end(), node) != wanted.end();
}

// Dynamic sizes: the inputs first. Each symbol is the extent of its source input's dimension, and
// every input's constraints are expressions of the symbols (a source's own dimension stays free).
void bind_dynamic_inputs(LowerCtx& ctx, const SymbolicSizes& dynamic, const std::vector<int>& wanted) {
  const Graph& g = ctx.g;
  LoweredPipeline& p = ctx.p;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const int node = g.inputs[i];
    bool needed = used(p, wanted, node);
    for (const SymbolicSizes::Source& src : dynamic.sources) needed |= src.input == int(i);
    if (needed) p.params[i] = ImageParam(storage_type(g.type(node).dtype), g.type(node).rank(), "in" + std::to_string(i));
  }
  for (const SymbolicSizes::Source& src : dynamic.sources)
    p.symbols.push_back(p.params[size_t(src.input)].dim(g.type(g.inputs[size_t(src.input)]).rank() - 1 - src.dim).extent());
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    if (!p.params[i].defined()) continue;
    const int node = g.inputs[i];
    const TensorType& t = g.type(node);
    std::vector<Expr> extents;
    for (int d = 0; d < t.rank(); ++d) extents.push_back(ctx.extent(node, d));
    std::vector<bool> own(size_t(t.rank()), false);
    for (const SymbolicSizes::Source& src : dynamic.sources)
      if (src.input == int(i)) own[size_t(t.rank() - 1 - src.dim)] = true;
    ImageParam& param = p.params[i];
    constrain([&](int d) { return param.dim(d); }, t.shape, extents, own);
    param.set_host_alignment(64);
  }
}

// Whether node `id` is the first node of an extern stage, whose library call reads its inputs as
// they are bound (a product the schedule hands to oneDNN reads no packed panels).
bool heads_extern_stage(const ExternPlan& externs, int id) {
  return std::any_of(externs.chains.begin(), externs.chains.end(),
                     [&](const auto& stage) { return (stage.second ? stage.second->conv : stage.first) == id; });
}

// A constant only matmuls read, each as panels it packs when compiling: bound as well, its bytes
// would be copied into the compiled pipeline (and the disk cache) beside the panels, unread.
bool read_only_packed(const LowerCtx& ctx, const ExternPlan& externs, const std::vector<int>& wanted, int node) {
  const std::vector<int>& readers = ctx.p.stages[size_t(node)].consumers;
  if (readers.empty() || std::find(wanted.begin(), wanted.end(), node) != wanted.end()) return false;
  return std::all_of(readers.begin(), readers.end(), [&](int c) {
    const Node& reader = ctx.g.node(c);
    return reader.inputs[0] != node && !heads_extern_stage(externs, c) && reads_right_operand_packed(ctx.g, ctx.p.target, reader);
  });
}

// One Func per node, in the graph's order: inputs, constants, extern stages, and every other op
// through its entry of the lowering table.
void define_stages(LowerCtx& ctx, const ExternPlan& externs, const std::vector<int>& wanted) {
  const Graph& g = ctx.g;
  LoweredPipeline& p = ctx.p;
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    Stage& s = p.stages[id];
    s.node = int(id);
    s.op = n.op;
    s.dtype = n.type.dtype;
    s.func = Func("n" + std::to_string(id) + "_" + op_name(n.op));
    s.extents = to_halide_order(n.type.shape);
    for (int d = 0; d < n.type.rank(); ++d) s.vars.emplace_back("d" + std::to_string(d));
    if (n.op == OpKind::Parameter) {
      const size_t index = size_t(n.attrs.i("index"));
      if (used(p, wanted, int(id)) && n.type.numel() > 0) {
        if (!p.params[index].defined()) p.params[index] = make_param(n.type, "in" + std::to_string(index), true);
        LowerCtx::define(s, from_storage(n.type.dtype, p.params[index](std::vector<Expr>(s.vars.begin(), s.vars.end()))));
      }
      continue;
    }
    if (n.op == OpKind::Constant) {
      if (read_only_packed(ctx, externs, wanted, int(id))) continue;  // (its matmuls bind their panels)
      s.constant = bind_constant_param(p, n.type, g.constants[size_t(n.constant)]);
      LowerCtx::define(s, from_storage(n.type.dtype, s.constant(std::vector<Expr>(s.vars.begin(), s.vars.end()))));
      continue;
    }
    if (s.absorbed) continue;
    if (auto it = externs.chains.find(int(id)); it != externs.chains.end()) {
      auto layout = externs.layouts.find(int(id));
      lower_extern(ctx, s, n, it->second, layout == externs.layouts.end() ? 0 : layout->second);
      continue;
    }
    lowering_for(n.op)(ctx, s, n);
  }
}

// A constant that a lowering packed into another (a bf16 convolution's weights, in pairs) may be
// read by no Func: it is no argument, and its bytes are not kept with the compiled code.
void drop_unread_constants(LoweredPipeline& p) {
  std::vector<Func> outputs;
  for (const Func& f : p.outputs)
    if (f.defined()) outputs.push_back(f);
  if (outputs.empty() || p.const_params.empty()) return;
  std::set<std::string> read;
  for (const Halide::Argument& a : Halide::Pipeline(outputs).infer_arguments())
    if (a.is_buffer()) read.insert(a.name);
  size_t kept = 0;
  for (size_t i = 0; i < p.const_params.size(); ++i) {
    if (!read.count(p.const_params[i].name())) continue;
    p.const_params[kept] = p.const_params[i], p.const_data[kept] = p.const_data[i], p.const_types[kept] = p.const_types[i];
    ++kept;
  }
  p.const_params.resize(kept), p.const_data.resize(kept), p.const_types.resize(kept);
}

// A stage no output reaches, though the graph reads it: its reader's lowering read past it (a
// quantized conversion rounds its operand's bits, not the round stage's value). Its Func is
// dropped, as an absorbed stage's, so that no schedule names a Func the pipeline does not have.
void drop_unreached_stages(LoweredPipeline& p) {
  std::set<std::string> reached;
  for (const Func& f : p.outputs) {
    if (!f.defined()) continue;
    reached.insert(f.name());
    for (const auto& [name, fn] : Halide::Internal::find_transitive_calls(f.function())) reached.insert(name);
  }
  for (Stage& s : p.stages)
    if (s.func.defined() && !s.is_output && !s.is_extern && !s.reduction.defined() && s.helpers.empty() && !reached.count(s.func.name()))
      s.func = Func(), s.absorbed = true;
}

// The pipeline's outputs, one per wanted value (outputs, then updates): the stage's own Func, or a
// wrapper where the value is already an output, a source, or stored in another type.
void define_outputs(LowerCtx& ctx, const std::vector<int>& wanted) {
  const Graph& g = ctx.g;
  LoweredPipeline& p = ctx.p;
  std::vector<bool> is_output(g.nodes.size(), false);
  for (int node : wanted) {
    const Node& n = g.node(node);
    Stage& s = p.stages[size_t(node)];
    if (n.type.numel() == 0) {  // nothing to compute: the caller's buffer stays empty
      p.outputs.emplace_back();
      p.output_node.push_back(node);
      p.output_is_wrapper.push_back(false);
      continue;
    }
    Func out;
    bool wrapper = is_output[size_t(node)] || has_trait(n.op, Source) || storage_type(n.type.dtype) != compute_type(n.type.dtype);
    if (wrapper) {
      out = Func("out" + std::to_string(p.outputs.size()) + "_n" + std::to_string(node));
      std::vector<Expr> args(s.vars.begin(), s.vars.end());
      out(s.vars) = to_storage(n.type.dtype, s.func(args));
    } else {
      out = s.func;
      s.is_output = true;
    }
    is_output[size_t(node)] = true;
    constrain([&](int i) { return out.output_buffer().dim(i); }, n.type.shape, extents_of(ctx, node));
    out.output_buffer().set_host_alignment(64);
    p.outputs.push_back(out);
    p.output_node.push_back(node);
    p.output_is_wrapper.push_back(wrapper);
  }
}

}  // namespace

LoweredPipeline lower(const Graph& g, const Halide::Target& target, const std::set<int>& externs,
                      const SymbolicSizes* dynamic) {
  for (const Node& n : g.nodes)
    if (n.type.numel() > INT_MAX)
      throw CompileError("hjit compiles tensors of at most 2^31-1 elements; " + n.type.str() + " is larger");
  if (dynamic) {
    if (!externs.empty()) throw ValueError("library calls (extern stages) compile for fixed sizes only");
    check_dynamic(g, *dynamic);
  }
  LoweredPipeline p;
  p.graph = &g;
  p.dynamic = dynamic;
  p.target = target;
  p.stages.resize(g.nodes.size());
  p.params.resize(g.inputs.size());
  const ExternPlan extern_plan = plan_extern_stages(g, externs, p);
  std::vector<int> wanted(g.outputs);  // what some output or update needs
  for (const Update& u : g.updates) wanted.push_back(u.value);
  LowerCtx ctx{g, p};
  if (dynamic) bind_dynamic_inputs(ctx, *dynamic, wanted);
  define_stages(ctx, extern_plan, wanted);
  define_outputs(ctx, wanted);
  drop_unreached_stages(p);
  drop_unread_constants(p);
  return p;
}

}  // namespace hjit::backend
