// Element-wise ONNX ops: arithmetic, comparisons, logic, activations, casts.
#include <cmath>
#include <limits>

#include "onnx_import/ops/ops.h"
#include "onnx_import/tensor_proto.h"

namespace hjit::onnx_import {

namespace {

using V = std::vector<Tensor>;

// The result of an arithmetic op in the operands' dtype (ONNX ops take and give one dtype).
V same(const NodeContext& n, const Tensor& r) { return {as_dtype(r, n.input(0).dtype())}; }

V Add(const NodeContext& n) { return same(n, n.input(0) + n.input(1)); }
V Sub(const NodeContext& n) { return same(n, n.input(0) - n.input(1)); }
V Mul(const NodeContext& n) { return same(n, n.input(0) * n.input(1)); }
// Integer division truncates towards zero (C's and ONNX's reference), computed exactly in f64
// for operands up to 2^53.
V Div(const NodeContext& n) {
  const Tensor &a = n.input(0), &b = n.input(1);
  if (is_float(a.dtype())) return {a / b};
  const Tensor q = astype(a, DType::F64) / astype(b, DType::F64);
  return {astype(where(q < 0.0, ceil(q), floor(q)), a.dtype())};
}
V Pow(const NodeContext& n) { return same(n, pow(n.input(0), n.input(1))); }
// Python's modulo (the sign of the divisor) for fmod = 0, C's fmod (the sign of the dividend) for 1.
V Mod(const NodeContext& n) {
  const Tensor &a = n.input(0), &b = n.input(1);
  const Tensor af = astype(a, DType::F64), bf = astype(b, DType::F64);
  const Tensor q = af / bf;
  const bool c_fmod = n.attr_int("fmod", 0) != 0;
  if (!c_fmod && !is_float(a.dtype())) return {astype(af - floor(q) * bf, a.dtype())};
  Tensor r = af - where(q < 0.0, ceil(q), floor(q)) * bf;  // fmod
  if (!c_fmod) r = where(logical_and(r != 0.0, (r < 0.0) != (bf < 0.0)), r + bf, r);
  return {astype(r, a.dtype())};
}

// BitShift on unsigned integers: a multiplication or division by 2^shift (exact: the powers and
// quotients of these widths are exact in f64 up to 2^53, and left shifts wrap as the type does).
V BitShift(const NodeContext& n) {
  const Tensor &x = n.input(0), &s = n.input(1);
  if (dtype_info(x.dtype()).kind != DTypeKind::UnsignedInt) n.fail("shifts unsigned integers");
  const Tensor power = pow(Tensor::scalar(2, DType::F64), astype(s, DType::F64));
  const std::string dir = n.attr_string("direction", "");
  if (dir == "LEFT") return {as_dtype(x * astype(power, x.dtype()), x.dtype())};
  if (dir == "RIGHT") return {astype(floor(astype(x, DType::F64) / power), x.dtype())};
  n.fail("has direction '" + dir + "' (LEFT or RIGHT)");
}

// Max, Min, Sum, Mean: any number of inputs, broadcast together.
template <Tensor (*Combine)(const Tensor&, const Tensor&)>
V variadic(const NodeContext& n) {
  Tensor acc = n.input(0);
  for (size_t k = 1; k < n.num_inputs(); ++k) acc = Combine(acc, n.input(k));
  if (n.num_inputs() == 1) acc = acc + scalar_like(acc, 0);  // a new value, not the input's handle
  return same(n, acc);
}
Tensor add2(const Tensor& a, const Tensor& b) { return a + b; }
V Mean(const NodeContext& n) {
  Tensor s = variadic<add2>(n)[0];
  return same(n, s / double(n.num_inputs()));
}

V Equal(const NodeContext& n) { return {n.input(0) == n.input(1)}; }
V Less(const NodeContext& n) { return {n.input(0) < n.input(1)}; }
V LessOrEqual(const NodeContext& n) { return {n.input(0) <= n.input(1)}; }
V Greater(const NodeContext& n) { return {n.input(0) > n.input(1)}; }
V GreaterOrEqual(const NodeContext& n) { return {n.input(0) >= n.input(1)}; }
V And(const NodeContext& n) { return {logical_and(n.input(0), n.input(1))}; }
V Or(const NodeContext& n) { return {logical_or(n.input(0), n.input(1))}; }
V Xor(const NodeContext& n) { return {n.input(0) != n.input(1)}; }
V Not(const NodeContext& n) { return {logical_not(n.input(0))}; }
V Where(const NodeContext& n) { return {where(n.input(0), n.input(1), n.input(2))}; }

V Abs(const NodeContext& n) { return {abs(n.input(0))}; }
V Neg(const NodeContext& n) { return {-n.input(0)}; }
V Sign(const NodeContext& n) { return {sign(n.input(0))}; }
V Floor(const NodeContext& n) { return {floor(n.input(0))}; }
V Ceil(const NodeContext& n) { return {ceil(n.input(0))}; }
V Round(const NodeContext& n) { return {round(n.input(0))}; }
V Exp(const NodeContext& n) { return {exp(n.input(0))}; }
V Log(const NodeContext& n) { return {log(n.input(0))}; }
V Sqrt(const NodeContext& n) { return {sqrt(n.input(0))}; }
V Reciprocal(const NodeContext& n) { return {1.0 / n.input(0)}; }
V Sin(const NodeContext& n) { return {sin(n.input(0))}; }
V Cos(const NodeContext& n) { return {cos(n.input(0))}; }
V Tan(const NodeContext& n) { return {sin(n.input(0)) / cos(n.input(0))}; }
V Sinh(const NodeContext& n) { return {(exp(n.input(0)) - exp(-n.input(0))) * 0.5}; }
V Cosh(const NodeContext& n) { return {(exp(n.input(0)) + exp(-n.input(0))) * 0.5}; }
V Asinh(const NodeContext& n) {
  const Tensor& x = n.input(0);
  return {sign(x) * log(abs(x) + sqrt(x * x + 1.0))};
}
V Acosh(const NodeContext& n) {
  const Tensor& x = n.input(0);
  return {log(x + sqrt(x * x - 1.0))};
}
V Atanh(const NodeContext& n) {
  const Tensor& x = n.input(0);
  return {(log1p(x) - log1p(-x)) * 0.5};
}
V Tanh(const NodeContext& n) { return {tanh(n.input(0))}; }
V Atan(const NodeContext& n) { return {atan(n.input(0))}; }
V Asin(const NodeContext& n) { return {asin(n.input(0))}; }
V Acos(const NodeContext& n) { return {acos(n.input(0))}; }
V Sigmoid(const NodeContext& n) { return {sigmoid(n.input(0))}; }
V Erf(const NodeContext& n) { return {erf(n.input(0))}; }
V Relu(const NodeContext& n) { return {relu(n.input(0))}; }
V Identity(const NodeContext& n) { return {n.input(0) + scalar_like(n.input(0), 0)}; }
V IsNaN(const NodeContext& n) { return {n.input(0) != n.input(0)}; }
V IsInf(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const double inf = std::numeric_limits<double>::infinity();
  const bool pos = n.attr_int("detect_positive", 1) != 0, neg = n.attr_int("detect_negative", 1) != 0;
  if (pos && neg) return {abs(x) == inf};
  if (pos) return {x == inf};
  if (neg) return {x == -inf};
  return {x != x && x == x};
}

V LeakyRelu(const NodeContext& n) {
  const Tensor& x = n.input(0);
  return {where(x < 0.0, x * n.attr_float("alpha", 0.01), x)};
}
// A slope of one value per channel ([C] against [N, C, ...], as opset 6 models converted up have
// it) applies per channel; any other broadcasts numpy's way.
V PRelu(const NodeContext& n) {
  const Tensor& x = n.input(0);
  Tensor slope = n.input(1);
  const Shape& s = x.shape();
  if (slope.shape().size() == 1 && s.size() > 2 && slope.shape()[0] == s[1] && slope.shape()[0] != s.back() && slope.shape()[0] != 1) {
    Shape per_channel(s.size() - 1, 1);
    per_channel[0] = s[1];
    slope = reshape(slope, per_channel);
  }
  return {where(x < 0.0, x * slope, x)};
}
V Elu(const NodeContext& n) {
  const Tensor& x = n.input(0);
  return {where(x < 0.0, (exp(x) - 1.0) * n.attr_float("alpha", 1.0), x)};
}
V Celu(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const double alpha = n.attr_float("alpha", 1.0);
  return {relu(x) + minimum((exp(x / alpha) - 1.0) * alpha, 0.0)};
}
V Selu(const NodeContext& n) {
  const Tensor& x = n.input(0);
  const double alpha = n.attr_float("alpha", 1.67326319217681884765625), gamma = n.attr_float("gamma", 1.05070102214813232421875);
  return {where(x <= 0.0, (exp(x) - 1.0) * alpha, x) * gamma};
}
V ThresholdedRelu(const NodeContext& n) {
  const Tensor& x = n.input(0);
  return {where(x > n.attr_float("alpha", 1.0), x, 0.0)};
}
V HardSigmoid(const NodeContext& n) {
  const Tensor& x = n.input(0);
  return {clamp(x * n.attr_float("alpha", 0.2) + n.attr_float("beta", 0.5), 0.0, 1.0)};
}
V HardSwish(const NodeContext& n) { return {hardswish(n.input(0))}; }
// log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|).
Tensor softplus(const Tensor& x) { return relu(x) + log1p(exp(-abs(x))); }
V Softplus(const NodeContext& n) { return {softplus(n.input(0))}; }
V Softsign(const NodeContext& n) { return {n.input(0) / (abs(n.input(0)) + 1.0)}; }
V Mish(const NodeContext& n) { return {n.input(0) * tanh(softplus(n.input(0)))}; }
V Clip(const NodeContext& n) {
  const Tensor& x = n.input(0);
  if (n.opset() < 11) {
    const double lo = n.attr_float("min", -std::numeric_limits<double>::infinity());
    const double hi = n.attr_float("max", std::numeric_limits<double>::infinity());
    return {clamp(x, lo, hi)};
  }
  Tensor y = x;
  if (auto lo = n.optional_input(1)) y = where(y < *lo, *lo, y);
  if (auto hi = n.optional_input(2)) y = where(y > *hi, *hi, y);
  return same(n, y + scalar_like(y, 0));
}

V Cast(const NodeContext& n) {
  const DType to = dtype_from_onnx(int(n.attr_int("to")), "hjit::onnx: " + n.where() + " attribute 'to'");
  return {astype(n.input(0), to)};
}
V CastLike(const NodeContext& n) { return {astype(n.input(0), n.input(1).dtype())}; }

}  // namespace

void add_elementwise_ops(ConverterTable& t) {
#define HJIT_ONNX_OP(name) t[#name] = name;
  HJIT_ONNX_OP(Add) HJIT_ONNX_OP(BitShift) HJIT_ONNX_OP(Sub) HJIT_ONNX_OP(Mul) HJIT_ONNX_OP(Div) HJIT_ONNX_OP(Pow) HJIT_ONNX_OP(Mod)
  HJIT_ONNX_OP(Mean) HJIT_ONNX_OP(Equal) HJIT_ONNX_OP(Less) HJIT_ONNX_OP(LessOrEqual) HJIT_ONNX_OP(Greater)
  HJIT_ONNX_OP(GreaterOrEqual) HJIT_ONNX_OP(And) HJIT_ONNX_OP(Or) HJIT_ONNX_OP(Xor) HJIT_ONNX_OP(Not) HJIT_ONNX_OP(Where)
  HJIT_ONNX_OP(Abs) HJIT_ONNX_OP(Neg) HJIT_ONNX_OP(Sign) HJIT_ONNX_OP(Floor) HJIT_ONNX_OP(Ceil) HJIT_ONNX_OP(Round)
  HJIT_ONNX_OP(Exp) HJIT_ONNX_OP(Log) HJIT_ONNX_OP(Sqrt) HJIT_ONNX_OP(Reciprocal) HJIT_ONNX_OP(Sin) HJIT_ONNX_OP(Cos)
  HJIT_ONNX_OP(Tan) HJIT_ONNX_OP(Sinh) HJIT_ONNX_OP(Cosh) HJIT_ONNX_OP(Asinh) HJIT_ONNX_OP(Acosh) HJIT_ONNX_OP(Atanh)
  HJIT_ONNX_OP(Tanh) HJIT_ONNX_OP(Atan) HJIT_ONNX_OP(Asin) HJIT_ONNX_OP(Acos) HJIT_ONNX_OP(Sigmoid) HJIT_ONNX_OP(Erf) HJIT_ONNX_OP(Relu) HJIT_ONNX_OP(Identity)
  HJIT_ONNX_OP(IsNaN) HJIT_ONNX_OP(IsInf) HJIT_ONNX_OP(LeakyRelu) HJIT_ONNX_OP(PRelu) HJIT_ONNX_OP(Elu)
  HJIT_ONNX_OP(Celu) HJIT_ONNX_OP(Selu) HJIT_ONNX_OP(ThresholdedRelu) HJIT_ONNX_OP(HardSigmoid) HJIT_ONNX_OP(HardSwish)
  HJIT_ONNX_OP(Softplus) HJIT_ONNX_OP(Softsign) HJIT_ONNX_OP(Mish) HJIT_ONNX_OP(Clip) HJIT_ONNX_OP(Cast) HJIT_ONNX_OP(CastLike)
#undef HJIT_ONNX_OP
  t["Max"] = variadic<maximum>;
  t["Min"] = variadic<minimum>;
  t["Sum"] = variadic<add2>;
}

}  // namespace hjit::onnx_import
