// The op API. Every function works eagerly (computes now) and inside hjit::jit (records a node):
// both paths share one shape/dtype inference, so an error reads the same in both.
//
// Type promotion follows PyTorch's result_type: bool < integers < floats between tensors; a 0-d
// tensor, and below it a C++ number (a "weak" scalar), only widen a tensor's dtype when their
// kind is higher (f16[4] * f32[] and f16[4] * 2.0 stay f16, i32[4] + i64[] stays i32, an integer
// tensor times 0.5 gives f32, a bool tensor plus 1 gives i64). Division and the transcendental
// functions turn integer tensors into f32. Bool tensors add as or and multiply as and.
//
// Results never share storage with operands in a way assign() could show: an op with nothing to
// do (a reshape to the same shape, astype to the same dtype) hands back a new handle whose first
// assign copies. Tensor::clone copies; slice_update / Tensor::assign_slice write into a slice.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <hjit/tensor.h>

namespace hjit {

// A C++ number standing in for a tensor operand: kept weak for type promotion.
struct Scalar {
  double value;
  DTypeKind kind;
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Scalar(T v)  // NOLINT: implicit on purpose, so that x * 2 and 2.0 * x read naturally
      : value(double(v)),
        kind(std::is_same_v<T, bool> ? DTypeKind::Bool
             : std::is_floating_point_v<T> ? DTypeKind::Float
                                           : DTypeKind::SignedInt) {}
};

// ---- arithmetic and comparison (numpy broadcasting)
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);  // NaN-propagating, like PyTorch
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// PyTorch's clamp: the result dtype promotes x with the bounds (an integer tensor clamped by
// integers stays integer), NaN stays NaN, hi wins when lo > hi.
Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi);

// Tensor-with-scalar forms: the scalar is weak (see above).
Tensor add(const Tensor& a, Scalar b);
Tensor add(Scalar a, const Tensor& b);
Tensor sub(const Tensor& a, Scalar b);
Tensor sub(Scalar a, const Tensor& b);
Tensor mul(const Tensor& a, Scalar b);
Tensor mul(Scalar a, const Tensor& b);
Tensor div(const Tensor& a, Scalar b);
Tensor div(Scalar a, const Tensor& b);
// pow of integers is integer (wrapping; PyTorch's rule for negative exponents of tensors, and a
// ValueError for a negative C++ integer exponent); a scalar exponent takes PyTorch's shortcuts
// (2: x * x, 0.5: sqrt, -1: 1 / x, ...).
Tensor pow(const Tensor& a, Scalar b);
Tensor pow(Scalar a, const Tensor& b);
Tensor maximum(const Tensor& a, Scalar b);
Tensor minimum(const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
Tensor where(const Tensor& cond, Scalar a, Scalar b);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
inline Tensor operator+(Scalar a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(Scalar a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(Scalar a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(Scalar a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, Scalar b);
Tensor operator<=(const Tensor& a, Scalar b);
Tensor operator>(const Tensor& a, Scalar b);
Tensor operator>=(const Tensor& a, Scalar b);
Tensor operator==(const Tensor& a, Scalar b);
Tensor operator!=(const Tensor& a, Scalar b);
inline Tensor operator&&(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
inline Tensor operator||(const Tensor& a, const Tensor& b) { return logical_or(a, b); }
inline Tensor operator!(const Tensor& a) { return logical_not(a); }

// ---- elementwise functions
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);  // half to even
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor asin(const Tensor& x);  // NaN outside [-1, 1]
Tensor acos(const Tensor& x);
Tensor hardswish(const Tensor& x);  // x * relu6(x + 3) / 6, torch.nn.functional.hardswish (MobileNetV3)
Tensor gelu(const Tensor& x, bool tanh_approximation = false);
Tensor astype(const Tensor& x, DType dtype);

// ---- reductions (axes = {} means every axis; negative axes count from the end)
Tensor sum(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor mean(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor max(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor min(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
// The number of elements of x along axes, as a 0-d tensor of dtype: unlike x.numel() (a C++ number,
// fixed when the function is traced), it follows dynamic sizes (JitOptions::dynamic_dims), so that
// sum(x) / numel(x) is a mean one pipeline serves at every size.
Tensor numel(const Tensor& x, std::vector<int> axes = {}, DType dtype = DType::F32);
Tensor argmax(const Tensor& x, int axis, bool keepdims = false);  // i64 indices, first occurrence
Tensor argmin(const Tensor& x, int axis, bool keepdims = false);

// ---- linear algebra: numpy's matmul (1-D operands promoted and squeezed, batch dims broadcast)
Tensor matmul(const Tensor& a, const Tensor& b);
// torch.nn.functional.linear: x @ weight^T (+ bias), weight [out, in], bias [out].
Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt);
// Exact integer matmul of 8-bit operands (u8 or i8, in any pair) into i32, with matmul's shapes
// (torch._int_mm, ONNX's MatMulInteger without zero points). Compiled, it runs on x86's VNNI dot
// products (vpdpbusd) where the CPU has them; the right operand is packed for them, once when it
// is a constant (an ONNX initializer, a frozen weight).
Tensor int_matmul(const Tensor& a, const Tensor& b);
// The same of the operands less their zero points (ONNX's MatMulInteger), exact: sum((a - za)(b - zb)).
// a_zero_point is one value or one per row of a (broadcast to a with its last axis 1), b_zero_point
// one value or one per column of b (broadcast to b with its second to last axis 1).
Tensor int_matmul(const Tensor& a, const Tensor& b, const Tensor& a_zero_point, const Tensor& b_zero_point);

// ---- shape
Tensor reshape(const Tensor& x, Shape shape);  // one -1 allowed
Tensor transpose(const Tensor& x, std::vector<int> perm = {});
Tensor broadcast_to(const Tensor& x, Shape shape);
Tensor unsqueeze(const Tensor& x, int axis);
Tensor squeeze(const Tensor& x, std::vector<int> axes = {});  // {} = every size-1 axis
// Python slicing of one axis, x[start:stop:step]: negative indices count from the end and
// out-of-range bounds are clipped; step must be positive.
Tensor slice(const Tensor& x, int axis, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step = 1);
// x with x[start:stop:step] (along axis) replaced by value (broadcast to the slice): JAX's
// x.at[...].set(value), PyTorch's x[...] = value without the mutation.
Tensor slice_update(const Tensor& x, const Tensor& value, int axis, std::optional<int64_t> start, std::optional<int64_t> stop,
                    int64_t step = 1);
Tensor concat(const std::vector<Tensor>& xs, int axis = 0);
// Pieces of x along axis, the inverse of concat: of the given sizes (summing to the axis's size),
// or of `size` each but the last (torch.split); chunk: `chunks` pieces as equal as torch.chunk
// makes them (ceil(n / chunks) each, fewer pieces when n runs out). Splitting a fused projection:
//   auto qkv = hjit::split(hjit::matmul(x, w_qkv), {C, C, C}, -1);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int axis);
std::vector<Tensor> split(const Tensor& x, int64_t size, int axis);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int axis = 0);
Tensor stack(const std::vector<Tensor>& xs, int axis = 0);
// Negative widths crop (as PyTorch's F.pad).
Tensor pad(const Tensor& x, std::vector<std::pair<int64_t, int64_t>> widths, double value = 0);

// ---- neural network functions (over the last axis unless an axis is given)
Tensor softmax(const Tensor& x, int axis = -1);
Tensor log_softmax(const Tensor& x, int axis = -1);
Tensor layer_norm(const Tensor& x, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                  double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const std::optional<Tensor>& weight, double eps = 1e-6);
Tensor silu(const Tensor& x);
Tensor cumsum(const Tensor& x, int axis = -1);  // integers accumulate in i64, like PyTorch
// What a gathering op does with an index out of range. Check (PyTorch's behaviour, the default):
// an IndexError, eagerly and from compiled code alike (a constant index when the function is
// traced or compiled, others when it runs: the call fails, nothing written past a buffer). Clamp
// (JAX's mode="clip"): a negative index counts from the end, then every index is clamped into
// the axis, so a call never fails on one.
enum class IndexMode : uint8_t { Check, Clamp };

// x[..., indices, ...] along `axis`: out has x's shape with that axis replaced by indices' shape.
// Indices are i32 or i64; negative ones count from the end.
Tensor take(const Tensor& x, const Tensor& indices, int axis = 0, IndexMode mode = IndexMode::Check);
// Python's indexing, x[at] (see Tensor::operator[]), and the functional form of x[at] = value
// (JAX's x.at[at].set(value)): value broadcast to x[at], converted to x's dtype. Assignment takes
// integers, slices, ... and None; index tensors there: scatter.
Tensor index(const Tensor& x, const std::vector<Index>& at);
Tensor index_update(const Tensor& x, const std::vector<Index>& at, const Tensor& value);
// torch.flip: x with the order of its elements along each of `axes` reversed.
Tensor flip(const Tensor& x, const std::vector<int>& axes);
Tensor embedding(const Tensor& table, const Tensor& ids, IndexMode mode = IndexMode::Check);
// torch.gather: out[i][j] = x[i][indices[i][j]] (for axis 1), indices of x's rank and at most its
// size along the other axes, in [-extent, extent) along `axis` (IndexError otherwise, or clamped
// with IndexMode::Clamp).
Tensor gather(const Tensor& x, int axis, const Tensor& indices, IndexMode mode = IndexMode::Check);
// torch.scatter and torch.scatter_add: x with src[i][j] written to (added at) x[i][indices[i][j]]
// (for axis 1); src has the indices' shape. Two updates of one position: scatter writes their sum
// (PyTorch leaves which one wins undefined).
Tensor scatter(const Tensor& x, int axis, const Tensor& indices, const Tensor& src);
Tensor scatter_add(const Tensor& x, int axis, const Tensor& indices, const Tensor& src);
// torch.argsort and torch.sort (stable=True): the i64 positions that order x along `axis`, and
// (sort) the values in that order. Equal values keep their order; NaN comes after every number
// (before, descending); -0.0 equals +0.0. Any dtype; sort's values are differentiable.
Tensor argsort(const Tensor& x, int axis = -1, bool descending = false);
std::pair<Tensor, Tensor> sort(const Tensor& x, int axis = -1, bool descending = false);
// torch.topk: the k largest (or smallest) values along `axis`, in order, and their i64 indices
// (the lowest index first among equal values; NaN the largest). A few rounds of argmax for small
// k, a sort for larger ones.
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int axis = -1, bool largest = true);
// indices (any integer dtype) as one-hot vectors of num_classes along a new last axis
// (torch.nn.functional.one_hot; an index outside [0, num_classes) is an IndexError).
Tensor one_hot(const Tensor& indices, int64_t num_classes, DType dtype = DType::F32);  // take(table, ids, 0), ids in [0, rows)
// indices unchanged, or an IndexError "<what> <index> is out of range [lo, hi)" (eagerly, or when
// the compiled function runs): how a gathering composite checks its indices.
Tensor check_index(const Tensor& indices, int64_t lo, int64_t hi, const std::string& what);
// The lower (upper) triangle of the last two dimensions, k diagonals above (below) the main one.
Tensor tril(const Tensor& x, int64_t k = 0);
Tensor triu(const Tensor& x, int64_t k = 0);
// Counts along `axis` of a tensor of `shape`: inside a traced function, a node of the graph
// (not a constant of the size of the tensor). Tensor::arange(n) is iota({n}, 0).
Tensor iota(Shape shape, int axis, DType dtype = DType::F32);

// ---- layers, with the semantics of torch.nn.functional (NCHW, OIHW weights)
using Pair = std::array<int64_t, 2>;
Tensor conv2d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt, Pair stride = {1, 1},
              Pair padding = {0, 0}, Pair dilation = {1, 1}, int64_t groups = 1);
// Exact integer 2-d convolution of 8-bit values (an NCHW input and its zero point, u8 or i8; an
// OIHW weight, i8 or u8) into i32: sum((x - x_zero_point) w) over each window, the input padded
// with its zero point (ONNX's ConvInteger with a weight zero point of 0). Groups of one with an i8
// weight run on VNNI's dot products where the CPU has them, four input channels to a lane; grouped
// (depthwise) ones and u8 weights in i32.
Tensor int_conv2d(const Tensor& x, const Tensor& weight, const Tensor& x_zero_point, Pair stride = {1, 1}, Pair padding = {0, 0},
                  Pair dilation = {1, 1}, int64_t groups = 1);
using Triple = std::array<int64_t, 3>;
// [N, C, L] with weight [O, C / groups, k] (torch.nn.functional.conv1d).
Tensor conv1d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt, int64_t stride = 1,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
// [N, C, D, H, W] with weight [O, C / groups, kd, kh, kw]: a sum of 2-d convolutions over the
// kernel's depth.
Tensor conv3d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt, Triple stride = {1, 1, 1},
              Triple padding = {0, 0, 0}, Triple dilation = {1, 1, 1}, int64_t groups = 1);
// Transposed convolutions (the gradient of a convolution with respect to its input), weight
// [C_in, C_out / groups, k...], with PyTorch's arguments: the output of size
// (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt, int64_t stride = 1,
                        int64_t padding = 0, int64_t output_padding = 0, int64_t groups = 1, int64_t dilation = 1);
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt, Pair stride = {1, 1},
                        Pair padding = {0, 0}, Pair output_padding = {0, 0}, int64_t groups = 1, Pair dilation = {1, 1});
Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
                        Triple stride = {1, 1, 1}, Triple padding = {0, 0, 0}, Triple output_padding = {0, 0, 0},
                        int64_t groups = 1, Triple dilation = {1, 1, 1});
// The general form, 1 to 3 spatial dimensions, ONNX's ConvTranspose: padding given apart at each
// end of each dimension (a negative one adds output positions no input reaches).
Tensor conv_transpose(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias, const std::vector<int64_t>& stride,
                      const std::vector<int64_t>& pad_begin, const std::vector<int64_t>& pad_end,
                      const std::vector<int64_t>& dilation, int64_t groups = 1);
// stride {0, 0} means the kernel size (PyTorch's stride=None).
Tensor max_pool2d(const Tensor& x, Pair kernel, Pair stride = {0, 0}, Pair padding = {0, 0});
Tensor avg_pool2d(const Tensor& x, Pair kernel, Pair stride = {0, 0}, Pair padding = {0, 0}, bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& x, Pair output_size);  // PyTorch's windows; (1, 1): the global average
// Inference: normalizes with the running statistics (torch.nn.functional.batch_norm with
// training=False).
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, double eps = 1e-5);
// Training: normalizes with the batch's statistics and, when running_mean / running_var are
// given, updates them in place through assign (momentum-weighted, the variance unbiased), as
// PyTorch does; inside jit the update is part of the compiled call.
Tensor batch_norm_training(const Tensor& x, const std::optional<Tensor>& running_mean,
                           const std::optional<Tensor>& running_var, const std::optional<Tensor>& weight,
                           const std::optional<Tensor>& bias, double momentum = 0.1, double eps = 1e-5);
// Training form returning the batch statistics (mean and biased variance, per channel).
struct BatchNormResult {
  Tensor y, mean, var;
};
BatchNormResult batch_norm_stats(const Tensor& x, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                                 double eps = 1e-5);
// Mean over the batch of -log_softmax(logits)[i, labels[i]]; logits [N, C], labels [N] of i32/i64.
// Rows labelled ignore_index do not count (PyTorch's default -100); other labels outside [0, C)
// are an IndexError.
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, int64_t ignore_index = -100);
// softmax(q @ k^T * scale (+ causal mask)) @ v on [..., S, D], [..., T, D], [..., T, Dv] (batch
// dimensions broadcast); scale defaults to 1/sqrt(D). Compiled, it never holds the whole [S, T]
// score matrix.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal = false,
                                    std::optional<double> scale = std::nullopt);

}  // namespace hjit
