// Shape and dtype inference, one function per row of the op table (graph/op_defs.cpp). Each throws
// ShapeError / DTypeError / ValueError naming the op and the values that were wrong.
#pragma once
#include <array>
#include <vector>

#include "graph/op_def.h"

namespace hjit {

TensorType infer_source(const InferArgs& a);
TensorType infer_iota(const InferArgs& a);
TensorType infer_unary(const InferArgs& a);
TensorType infer_cast(const InferArgs& a);
TensorType infer_binary(const InferArgs& a);
TensorType infer_compare(const InferArgs& a);
TensorType infer_where(const InferArgs& a);
TensorType infer_reduce(const InferArgs& a);
TensorType infer_arg_reduce(const InferArgs& a);
TensorType infer_numel(const InferArgs& a);
TensorType infer_matmul(const InferArgs& a);
TensorType infer_int_matmul(const InferArgs& a);
TensorType infer_int_conv2d(const InferArgs& a);
TensorType infer_int_depthwise2d(const InferArgs& a);
TensorType infer_reshape(const InferArgs& a);
TensorType infer_transpose(const InferArgs& a);
TensorType infer_broadcast_to(const InferArgs& a);
TensorType infer_slice(const InferArgs& a);
TensorType infer_concat(const InferArgs& a);
TensorType infer_pad(const InferArgs& a);
TensorType infer_conv2d(const InferArgs& a);
TensorType infer_attention(const InferArgs& a);
TensorType infer_pool2d(const InferArgs& a);
TensorType infer_cumsum(const InferArgs& a);
TensorType infer_argsort(const InferArgs& a);
TensorType infer_take(const InferArgs& a);
TensorType infer_flip(const InferArgs& a);
TensorType infer_slice_update(const InferArgs& a);
TensorType infer_check_index(const InferArgs& a);
TensorType infer_random_bits(const InferArgs& a);
TensorType infer_cond(const InferArgs& a);
TensorType infer_while(const InferArgs& a);
TensorType infer_scan(const InferArgs& a);
TensorType infer_checkpoint(const InferArgs& a);
TensorType infer_conv2d_weight_grad(const InferArgs& a);
TensorType infer_max_pool2d_grad(const InferArgs& a);
// collectives (graph/collective_inference.cpp)
TensorType infer_all_reduce(const InferArgs& a);
TensorType infer_all_gather(const InferArgs& a);
TensorType infer_reduce_scatter(const InferArgs& a);
TensorType infer_send(const InferArgs& a);
TensorType infer_recv(const InferArgs& a);

// Output extent of a sliding window: floor((n + 2 * pad - dilation * (k - 1) - 1) / stride) + 1.
int64_t window_output_size(int64_t n, int64_t k, int64_t stride, int64_t pad, int64_t dilation);

// numpy broadcasting of two shapes; nullopt-like failure reported by the caller's message.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out);

// A matmul operand that is one matrix for every matrix of the other's batch: rank 2, or batch
// dimensions all 1 (the op API lifts a 2-D weight to the other operand's rank so).
bool shared_matrix(const Shape& s);

// How a reshape of `in` to `out` matches dimensions: groups of equal element count, from the
// innermost outward, each [in first, in last, out first, out last]; a size-1 dimension is a group
// of its own, with -1 for the side that has none. Both shapes hold the same number of elements.
std::vector<std::array<int, 4>> reshape_groups(const Shape& in, const Shape& out);

}  // namespace hjit
