// The op API. Every function works eagerly (computes now) and inside hjit::jit (records a node):
// both paths share one shape/dtype inference, so an error reads the same in both.
//
// Type promotion follows PyTorch: bool < integers < floats between tensors; a C++ number is a
// "weak" scalar that does not widen a tensor's dtype (f16 tensor * 2.0 stays f16) unless its kind is
// higher (an integer tensor times 0.5 gives f32, a bool tensor plus 1 gives i64). Division and the
// transcendental functions turn integer tensors into f32.
#pragma once
#include <optional>
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
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi);

// Tensor-with-scalar forms: the scalar is weak (see above).
Tensor add(const Tensor& a, Scalar b);
Tensor add(Scalar a, const Tensor& b);
Tensor sub(const Tensor& a, Scalar b);
Tensor sub(Scalar a, const Tensor& b);
Tensor mul(const Tensor& a, Scalar b);
Tensor mul(Scalar a, const Tensor& b);
Tensor div(const Tensor& a, Scalar b);
Tensor div(Scalar a, const Tensor& b);
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
Tensor gelu(const Tensor& x, bool tanh_approximation = false);
Tensor astype(const Tensor& x, DType dtype);

// ---- reductions (axes = {} means every axis; negative axes count from the end)
Tensor sum(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor mean(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor max(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor min(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor argmax(const Tensor& x, int axis, bool keepdims = false);  // i64 indices, first occurrence
Tensor argmin(const Tensor& x, int axis, bool keepdims = false);

// ---- linear algebra: numpy's matmul (1-D operands promoted and squeezed, batch dims broadcast)
Tensor matmul(const Tensor& a, const Tensor& b);

// ---- shape
Tensor reshape(const Tensor& x, Shape shape);  // one -1 allowed
Tensor transpose(const Tensor& x, std::vector<int> perm = {});
Tensor broadcast_to(const Tensor& x, Shape shape);
Tensor unsqueeze(const Tensor& x, int axis);
Tensor squeeze(const Tensor& x, std::vector<int> axes = {});  // {} = every size-1 axis
// Python slicing of one axis, x[start:stop:step]: negative indices count from the end and
// out-of-range bounds are clipped; step must be positive.
Tensor slice(const Tensor& x, int axis, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step = 1);
Tensor concat(const std::vector<Tensor>& xs, int axis = 0);
Tensor stack(const std::vector<Tensor>& xs, int axis = 0);
Tensor pad(const Tensor& x, std::vector<std::pair<int64_t, int64_t>> widths, double value = 0);

// ---- neural network functions (over the last axis unless an axis is given)
Tensor softmax(const Tensor& x, int axis = -1);
Tensor log_softmax(const Tensor& x, int axis = -1);
Tensor layer_norm(const Tensor& x, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                  double eps = 1e-5);

}  // namespace hjit
