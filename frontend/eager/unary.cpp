// Elementwise kernels of one operand.
#include "frontend/eager/loops.h"
#include "support/thread_pool.h"

namespace hjit::eager {
namespace {

template <class T, class F>
void unary_loop(const KernelArgs& a, F f) {
  const T* x = static_cast<const T*>(a.in[0].data);
  T* o = static_cast<T*>(a.out.data);
  const int64_t n = a.out.type->numel();
  parallel_loop(n, n >= kParallelGrain, [&](int64_t i) { o[i] = T(f(C<T>(x[i]))); });
}

template <class F>
void float_unary(const KernelArgs& a, F f) {
  dispatch_float(a.out.type->dtype, [&](auto tag) { unary_loop<typename decltype(tag)::type>(a, f); });
}

template <class F>
void numeric_unary(const KernelArgs& a, F f) {
  dispatch_numeric(a.out.type->dtype, [&](auto tag) { unary_loop<typename decltype(tag)::type>(a, f); });
}

}  // namespace

void Neg(const KernelArgs& a) {
  numeric_unary(a, [](auto x) {
    if constexpr (std::is_integral_v<decltype(x)>) return wrapping(decltype(x)(0), x, std::minus<>{});  // -INT_MIN: INT_MIN
    else return decltype(x)(-x);
  });
}
void Abs(const KernelArgs& a) {
  numeric_unary(a, [](auto x) {
    if constexpr (std::is_unsigned_v<decltype(x)>) return x;
    else if constexpr (std::is_floating_point_v<decltype(x)>) return std::fabs(x);  // abs(-0.0) is +0.0
    else if constexpr (std::is_integral_v<decltype(x)>) return x < 0 ? wrapping(decltype(x)(0), x, std::minus<>{}) : x;
    else return decltype(x)(x < 0 ? -x : x);
  });
}
void Sign(const KernelArgs& a) {
  numeric_unary(a, [](auto x) {
    if constexpr (std::is_unsigned_v<decltype(x)>) return decltype(x)(x > 0);
    else return decltype(x)((x > 0) - (x < 0));  // NaN gives 0, as PyTorch's sign
  });
}
// PyTorch's relu: x < 0 ? 0 : x, so NaN and -0.0 pass through.
void Relu(const KernelArgs& a) {
  numeric_unary(a, [](auto x) {
    if constexpr (std::is_unsigned_v<decltype(x)>) return x;
    else return x < decltype(x)(0) ? decltype(x)(0) : x;
  });
}
void Floor(const KernelArgs& a) { float_unary(a, [](auto x) { return std::floor(x); }); }
void Ceil(const KernelArgs& a) { float_unary(a, [](auto x) { return std::ceil(x); }); }
void Round(const KernelArgs& a) { float_unary(a, [](auto x) { return std::nearbyint(x); }); }
void Exp(const KernelArgs& a) { float_unary(a, [](auto x) { return std::exp(x); }); }
void Log(const KernelArgs& a) { float_unary(a, [](auto x) { return std::log(x); }); }
void Log1p(const KernelArgs& a) { float_unary(a, [](auto x) { return std::log1p(x); }); }
void Sqrt(const KernelArgs& a) { float_unary(a, [](auto x) { return std::sqrt(x); }); }
void Rsqrt(const KernelArgs& a) { float_unary(a, [](auto x) { return decltype(x)(1) / std::sqrt(x); }); }
void Sin(const KernelArgs& a) { float_unary(a, [](auto x) { return std::sin(x); }); }
void Cos(const KernelArgs& a) { float_unary(a, [](auto x) { return std::cos(x); }); }
void Tanh(const KernelArgs& a) { float_unary(a, [](auto x) { return std::tanh(x); }); }
void Sigmoid(const KernelArgs& a) {
  float_unary(a, [](auto x) { return decltype(x)(1) / (decltype(x)(1) + std::exp(-x)); });
}
void Erf(const KernelArgs& a) { float_unary(a, [](auto x) { return std::erf(x); }); }
// PyTorch's hardswish: x * min(max(x + 3, 0), 6) / 6, NaN passing through (and -inf giving NaN).
void Hardswish(const KernelArgs& a) {
  float_unary(a, [](auto x) {
    using T = decltype(x);
    T r = x + T(3);
    if (r < T(0)) r = T(0);
    if (r > T(6)) r = T(6);
    return x * r / T(6);
  });
}
void Atan(const KernelArgs& a) { float_unary(a, [](auto x) { return std::atan(x); }); }
void Asin(const KernelArgs& a) { float_unary(a, [](auto x) { return std::asin(x); }); }
void Acos(const KernelArgs& a) { float_unary(a, [](auto x) { return std::acos(x); }); }
void Not(const KernelArgs& a) { unary_loop<bool>(a, [](bool x) { return !x; }); }

}  // namespace hjit::eager
