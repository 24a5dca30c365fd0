#include "graph/passes/fold_constants.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "graph/op_def.h"
#include "graph/rewriter.h"

namespace hjit {
namespace {

// Sources other than parameters have values known at compile time. An iota is left to the
// pipeline, where it is an index expression and costs nothing: folded, it would be a stored
// constant whose size is fixed, which a pipeline serving every size (dynamic_dims) cannot hold.
bool is_const(const Node& n) { return has_trait(n.op, Source) && n.op != OpKind::Parameter && n.op != OpKind::Iota; }

// The value a full of movement op `n` takes when all its operands are fulls, if there is one.
bool moved_full_value(const Graph& out, const Node& n, const std::vector<int>& in, double* value) {
  double v = out.node(in[0]).attrs.f("value");
  for (int i : in)
    if (out.node(i).attrs.f("value") != v) return false;  // a concat of different fulls
  if (n.op == OpKind::Pad && n.attrs.f("value") != v) return false;
  *value = v;
  return true;
}

// The value every element of a constant holds, where they are all the same bits and a full of
// that value has them too (a per-channel zero point of zeros, a layer norm's frozen unit scale).
std::optional<double> uniform_value(const TensorType& type, const ConstData& c) {
  const size_t size = size_t(dtype_size(type.dtype)), n = size_t(type.numel());
  if (n == 0 || c.nbytes < n * size) return std::nullopt;
  const auto* bytes = static_cast<const unsigned char*>(c.data);
  for (size_t i = 1; i < n; ++i)
    if (std::memcmp(bytes, bytes + i * size, size) != 0) return std::nullopt;
  const double v = read_scalar(type.dtype, bytes);
  const ConstData one = fill_bytes(TensorType{type.dtype, {}}, v);
  if (one.nbytes != size || std::memcmp(one.data, bytes, size) != 0) return std::nullopt;  // (NaN payloads, i64 beyond 2^53)
  return v;
}

}  // namespace

Graph fold_constants(const Graph& g, const ConstEvaluator& eval, int64_t max_elements) {
  Rewriter rw(g);
  Graph& out = rw.out();
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node& n = g.nodes[id];
    if (n.op == OpKind::Constant && n.type.numel() == 1) {  // one value: a full, printed as a literal
      rw.map(int(id), out.add_full(n.type, read_scalar(n.type.dtype, g.constants[size_t(n.constant)].data)));
      continue;
    }
    // One value repeated: a full too, so that simplify's rules for fulls apply (an integer
    // product with a zero point of zeros is 0, and the row sums it weighed are not computed).
    if (n.op == OpKind::Constant)
      if (const std::optional<double> v = uniform_value(n.type, g.constants[size_t(n.constant)])) {
        rw.map(int(id), out.add_full(n.type, *v));
        continue;
      }
    if (has_trait(n.op, Source)) {
      rw.copy(int(id));
      continue;
    }
    std::vector<int> in = rw.mapped_inputs(int(id));
    bool all_const = true, all_full = true;
    for (int i : in) {
      all_const &= is_const(out.node(i));
      all_full &= out.node(i).op == OpKind::Full;
    }
    // A loop over constants is still a loop, and a collective still talks to the other ranks: they
    // run when called, not while compiling.
    if (!all_const || is_host_step(n.op)) {
      rw.copy(int(id));
      continue;
    }
    if (all_full && has_trait(n.op, Elementwise)) {
      Node scalar = n;
      scalar.type.shape.clear();
      std::vector<TensorType> types;
      std::vector<ConstData> data;
      for (int i : in) {
        types.push_back(TensorType{out.type(i).dtype, {}});
        data.push_back(fill_bytes(types.back(), out.node(i).attrs.f("value")));
      }
      ConstData r = eval(scalar, types, data);
      rw.map(int(id), out.add_full(n.type, read_scalar(n.type.dtype, r.data)));
      continue;
    }
    double v = 0;
    if (all_full && has_trait(n.op, Movement) && moved_full_value(out, n, in, &v)) {
      rw.map(int(id), out.add_full(n.type, v));
      continue;
    }
    // Large constants fold too where the result is no more than twice the largest operand: a
    // weight converted, summed, transposed or packed for a kernel (int_conv2d's [O/B, C/4, KH, KW, B, 4]
    // of a 128 x 128 x 3 x 3 weight: packed at every call, 3.7 of the 4 ms of the convolution), so
    // that the pipeline holds one copy in the layout it reads. A broadcast of a small constant to a
    // large shape is left to the pipeline.
    int64_t largest = 0;
    for (int i : in) largest = std::max(largest, out.type(i).numel());
    if (n.type.numel() > std::max(max_elements, 2 * largest) || largest > (int64_t(1) << 28)) {
      rw.copy(int(id));
      continue;
    }
    std::vector<TensorType> types;
    std::vector<ConstData> data;
    for (int i : in) {
      const Node& c = out.node(i);
      types.push_back(c.type);
      data.push_back(c.op == OpKind::Full       ? fill_bytes(c.type, c.attrs.f("value"))
                     : c.op == OpKind::Constant ? out.constants[size_t(c.constant)]
                                                : eval(c, {}, {}));
    }
    rw.map(int(id), out.add_constant(n.type, eval(n, types, data)));
  }
  return rw.finish();
}

}  // namespace hjit
