// What the op API's functions share: PyTorch's type promotion, axis normalization, and the few
// ways an op hands back a tensor without computing anything.
#pragma once
#include <string>
#include <vector>

#include <hjit/ops.h>

#include "frontend/tensor/dispatch.h"
#include "graph/op_def.h"

namespace hjit::detail {

// ---- type promotion (PyTorch's result_type; see hjit/dtype.h)
Operand operand_of(const Tensor& t);  // 0-d tensors are their own category
Operand operand_of(Scalar s);         // a weak scalar
// The dtype `op` computes in for these operands: their result_type, made f32 for an op that takes
// only floating point (division, exp, ...). DTypeError naming the op when no dtype holds them.
DType result_dtype(OpKind op, const std::vector<Operand>& operands);
// A C++ number as a 0-d tensor of dtype t, converted as PyTorch converts a scalar operand
// (integers wrap: i32 tensor + 1e10 wraps like PyTorch's), never rejected.
Tensor weak_scalar(Scalar s, DType t);

// ---- values that need no computation. An op's result never shares storage with its operands
// in a way assign() could reveal: where an op has nothing to do, it returns same_value(x), a new
// handle on x's value (eagerly it borrows x's storage until the first assign; while tracing it is
// a new tracer of the same graph value).
Tensor same_value(const Tensor& x);
Tensor cast_to(const Tensor& x, DType d);  // same_value when x already has dtype d
Tensor floating(const Tensor& x);          // integers and bool as f32, floats as they are

// 16-bit floats computed in f32 and rounded once at the end, as PyTorch's kernels do for the
// composite functions (gelu, softmax, layer_norm, ...): fn gets x in f32 and its result is
// converted back to x's dtype. Other dtypes pass straight through.
template <class Fn>
Tensor in_f32(const Tensor& x, Fn&& fn) {
  const DType t = x.dtype();
  if (t != DType::F16 && t != DType::BF16) return fn(x);
  return cast_to(fn(cast_to(x, DType::F32)), t);
}

// ---- indices
// IndexMode::Clamp's indices: i64, negative ones counted from the end, then clamped into [0, extent).
Tensor clamped_indices(const Tensor& indices, int64_t extent);

// ---- axes
int norm_axis(int axis, int rank, const char* op);  // negative axes count from the end
// Sorted, distinct, non-negative axes; {} means all.
std::vector<int64_t> norm_axes(const std::vector<int>& axes, int rank, const char* op);

}  // namespace hjit::detail
