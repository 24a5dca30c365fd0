// Building graph nodes by name, for the gradient rules: the graph ops with their attributes
// spelled out, plus the few compositions gradients need (un-broadcasting, batch transposes).
// Operands must already agree in dtype (graph ops do not promote). Adding a node may move the
// graph's nodes: never hold a reference from type() across a call that adds one.
#pragma once
#include <vector>

#include <hjit/graph.h>

namespace hjit {

class Builder {
 public:
  explicit Builder(Graph& g) : g_(g) {}
  Graph& graph() { return g_; }
  const TensorType& type(int v) const { return g_.type(v); }

  int op(OpKind k, std::vector<int> in, Attrs attrs = {}) { return g_.add_op(k, std::move(in), std::move(attrs)); }
  int scalar(DType t, double v) { return g_.add_full(TensorType{t, {}}, v); }
  int like(int v, double value) { return scalar(type(v).dtype, value); }  // a 0-d fill of v's dtype

  int add(int a, int b) { return op(OpKind::Add, {a, b}); }
  int sub(int a, int b) { return op(OpKind::Sub, {a, b}); }
  int mul(int a, int b) { return op(OpKind::Mul, {a, b}); }
  int div(int a, int b) { return op(OpKind::Div, {a, b}); }
  int neg(int a) { return op(OpKind::Neg, {a}); }
  int mul(int a, double s) { return mul(a, like(a, s)); }
  int where(int c, int a, int b) { return op(OpKind::Where, {c, a, b}); }
  int cast(int a, DType t) { return type(a).dtype == t ? a : op(OpKind::Cast, {a}, Attrs{{"dtype", t}}); }

  int sum(int x, std::vector<int64_t> axes, bool keepdims);
  int reshape(int x, Shape s) { return type(x).shape == s ? x : op(OpKind::Reshape, {x}, Attrs{{"shape", s}}); }
  int transpose(int x, std::vector<int64_t> perm);
  int broadcast_to(int x, Shape s) { return type(x).shape == s ? x : op(OpKind::BroadcastTo, {x}, Attrs{{"shape", s}}); }
  // The sum of x over the axes along which a value of `shape` was broadcast to x's shape.
  int unbroadcast(int x, const Shape& shape);
  // Swaps the last two axes.
  int transpose_last2(int x);
  int matmul(int a, int b) { return op(OpKind::Matmul, {a, b}); }
  int pad(int x, std::vector<int64_t> lo, std::vector<int64_t> hi, double value = 0) {
    return op(OpKind::Pad, {x}, Attrs{{"lo", lo}, {"hi", hi}, {"value", value}});
  }
  int slice(int x, std::vector<int64_t> starts, std::vector<int64_t> stops, std::vector<int64_t> steps) {
    return op(OpKind::Slice, {x}, Attrs{{"starts", starts}, {"stops", stops}, {"steps", steps}});
  }
  int flip(int x, std::vector<int64_t> axes) { return op(OpKind::Flip, {x}, Attrs{{"axes", axes}}); }
  // Inserts (factor - 1) zeros after every element along `axis` (the adjoint of a strided slice).
  int spread(int x, int axis, int64_t factor);
  int iota(Shape shape, int64_t axis, DType t) {
    Node n;
    n.op = OpKind::Iota;
    n.type = TensorType{t, std::move(shape)};
    n.attrs.set("axis", axis);
    return g_.add(std::move(n));
  }

 private:
  Graph& g_;
};

}  // namespace hjit
