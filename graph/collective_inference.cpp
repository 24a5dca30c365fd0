// Shape and dtype inference of the collectives: what each rank gets back, given that every rank
// passes the same shape (checked when the collective runs, where all the ranks' shapes are known).
#include <hjit/reduce_op.h>

#include "graph/shape_inference.h"

namespace hjit {
namespace {

dist::ReduceOp checked_reduce_op(const char* op, const InferArgs& a) {
  const int64_t r = a.attrs.i("op");
  if (r < 0 || r >= dist::kNumReduceOps)
    throw ValueError(std::string(op) + ": reduce op " + std::to_string(r) + " is not one of sum, mean, max, min, prod");
  const auto reduce = dist::ReduceOp(r);
  if (reduce == dist::ReduceOp::Mean && !is_floating(a.in[0]->dtype))
    throw DTypeError(std::string(op) + ": a mean of " + a.in[0]->str() +
                     " would round; take the sum, or convert to a floating point dtype first");
  return reduce;
}

int64_t checked_world(const char* op, const InferArgs& a) {
  const int64_t w = a.attrs.i("world");
  if (w < 1) throw ValueError(std::string(op) + ": a world of " + std::to_string(w) + " ranks");
  return w;
}

int64_t checked_axis(const char* op, const InferArgs& a) {
  const int64_t axis = a.attrs.i("axis"), rank = int64_t(a.in[0]->shape.size());
  if (axis < 0 || axis >= rank)
    throw ShapeError(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for " + a.in[0]->str() +
                     (rank == 0 ? " (a scalar has no axis to gather along: reshape it to [1])" : ""));
  return axis;
}

int64_t checked_rank(const char* op, const char* what, int64_t r, bool may_be_none) {
  if (r < (may_be_none ? -1 : 0))
    throw ValueError(std::string(op) + ": " + what + " " + std::to_string(r) + " is not a rank");
  return r;
}

}  // namespace

TensorType infer_all_reduce(const InferArgs& a) {
  checked_reduce_op("all_reduce", a);
  checked_rank("all_reduce", "root", a.attrs.i("root"), true);
  return *a.in[0];
}

TensorType infer_all_gather(const InferArgs& a) {
  const int64_t axis = checked_axis("all_gather", a), world = checked_world("all_gather", a);
  TensorType t = *a.in[0];
  t.shape[size_t(axis)] *= world;
  return t;
}

TensorType infer_reduce_scatter(const InferArgs& a) {
  const dist::ReduceOp op = checked_reduce_op("reduce_scatter", a);
  if (op != dist::ReduceOp::Sum && op != dist::ReduceOp::Mean)
    throw ValueError(std::string("reduce_scatter: ") + dist::reduce_op_name(op) + " is not supported (sum or mean)");
  const int64_t axis = checked_axis("reduce_scatter", a), world = checked_world("reduce_scatter", a);
  TensorType t = *a.in[0];
  if (t.shape[size_t(axis)] % world != 0)
    throw ShapeError("reduce_scatter: axis " + std::to_string(axis) + " of " + t.str() + " does not split into " +
                     std::to_string(world) + " equal parts, one per rank");
  t.shape[size_t(axis)] /= world;
  return t;
}

TensorType infer_send(const InferArgs& a) {
  checked_rank("send", "peer", a.attrs.i("peer"), false);
  a.attrs.i("tag");
  return TensorType{DType::Bool, {0}};
}

TensorType infer_recv(const InferArgs& a) {
  checked_rank("recv", "peer", a.attrs.i("peer"), false);
  a.attrs.i("tag");
  const Shape& s = a.attrs.ints("shape");
  for (int64_t d : s)
    if (d < 0) throw ShapeError("recv: negative dimension in shape " + shape_str(s));
  return TensorType{a.attrs.dtype("dtype"), s};
}

}  // namespace hjit
