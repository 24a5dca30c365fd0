// Building blocks of the eager kernels: dtype dispatch, compute types, broadcasting loops and the
// strided copy every data-movement kernel reduces to.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>
#include <vector>

#include <hjit/graph.h>
#include <hjit/half.h>

#include "frontend/eager/kernel.h"
#include "support/thread_pool.h"

namespace hjit::eager {

// 16-bit floats are computed in f32 and stored narrow, as PyTorch does on the CPU.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<f16> { using type = float; };
template <> struct compute_type<bf16> { using type = float; };
template <class T> using C = typename compute_type<T>::type;

template <class T> struct Tag { using type = T; };

// Integer arithmetic wraps like the compiled code (and PyTorch): computed in an unsigned type of
// at least int's width, where C++ defines the wrap (signed overflow, -INT_MIN included, is
// undefined behaviour; UBSan found the eager negation of INT_MIN). Other types as they are.
template <class T, class Op>
T wrapping(T x, T y, Op op) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using W = std::common_type_t<std::make_unsigned_t<T>, unsigned>;
    return T(std::make_unsigned_t<T>(op(W(std::make_unsigned_t<T>(x)), W(std::make_unsigned_t<T>(y)))));
  } else {
    return T(op(x, y));
  }
}

#define HJIT_DISPATCH_CASE(e, name, T, kind) \
  case DType::e: f(Tag<T>{}); return;

// Calls f(Tag<T>{}) with the storage type of t.
template <class F>
void dispatch_all(DType t, F&& f) {
  switch (t) { HJIT_DTYPES(HJIT_DISPATCH_CASE) }
}

template <class F>
void dispatch_numeric(DType t, F&& f) {
  switch (t) {
    case DType::Bool: throw InternalError("numeric kernel called on bool");
    default: dispatch_all(t, f);
  }
}

template <class F>
void dispatch_float(DType t, F&& f) {
  switch (t) {
    case DType::F16: f(Tag<f16>{}); return;
    case DType::BF16: f(Tag<bf16>{}); return;
    case DType::F32: f(Tag<float>{}); return;
    case DType::F64: f(Tag<double>{}); return;
    default: throw InternalError(std::string("float kernel called on ") + dtype_name(t));
  }
}

// The values of p as type A (converted into buf by way of C<T>; as they are when T is A).
template <class A, class T>
const A* converted(const T* p, int64_t n, std::vector<A>& buf) {
  if constexpr (std::is_same_v<T, A>) {
    return p;
  } else {
    buf.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) buf[size_t(i)] = A(C<T>(p[i]));
    return buf.data();
  }
}
// The values of p as C<T> (16-bit floats widened into buf; other types as they are).
template <class T>
const C<T>* widened(const T* p, int64_t n, std::vector<C<T>>& buf) { return converted<C<T>>(p, n, buf); }

// Below this many elements a kernel runs on one thread: OpenMP's fork costs more than it saves.
inline constexpr int64_t kParallelGrain = 1 << 15;

// Row-major strides in elements.
std::vector<int64_t> strides_of(const Shape& shape);

// Elementwise iteration of an output over broadcast operands, with adjacent dimensions merged
// where every operand allows it, so the innermost loop is as long as possible.
struct BroadcastPlan {
  std::vector<int64_t> shape;                 // merged output shape, at least one dimension
  std::vector<std::vector<int64_t>> strides;  // per operand, 0 on broadcast dimensions
  int64_t inner() const { return shape.back(); }
  int64_t outer() const;
  // Offsets of row j (all dimensions but the innermost) in each operand.
  void row_offsets(int64_t j, int64_t* offsets) const;
};
BroadcastPlan plan_broadcast(const Shape& out, const std::vector<const Shape*>& operands);

// Calls body(row, offsets, inner) for every row of the plan, in parallel when it is large.
template <class Body>
void for_each_row(const BroadcastPlan& p, Body&& body) {
  const int64_t outer = p.outer(), inner = p.inner();
  const size_t n = p.strides.size();
  parallel_loop(outer, outer * inner >= kParallelGrain && outer > 1, [&](int64_t j) {
    int64_t off[4];
    p.row_offsets(j, off);
    body(j, off, inner);
  });
  (void)n;
}

// dst[i...] = src[i...] over `shape`, with strides in elements of `elem` bytes. Every movement
// kernel (transpose, broadcast, slice, concat, pad) is one or more of these.
void strided_copy(void* dst, const std::vector<int64_t>& dst_strides, const void* src,
                  const std::vector<int64_t>& src_strides, const Shape& shape, int elem);

// NaN-propagating max and min, as PyTorch's maximum/max: the same definition the Halide lowering uses.
template <class T>
inline T max_nan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return (a != a || a > b) ? a : b;
  else return a > b ? a : b;
}
template <class T>
inline T min_nan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return (a != a || a < b) ? a : b;
  else return a < b ? a : b;
}

}  // namespace hjit::eager
