// hjit against PyTorch: every case of tests/golden/torch_cases.txt (inputs and PyTorch 1.13's
// outputs, written by tests/golden/make_torch_golden.py) run eagerly and compiled, compared value
// by value (NaN, infinities and dtypes included). CI needs no PyTorch: the golden file is committed.
//
// The configuration comes from HJIT_TEST_CONFIG, as in test_differential: O0, O1 (default),
// Adams2019, Li2018 or Mullapudi2016; ctest runs this binary once per configuration. Eager
// execution is checked in every configuration (it is cheap); compiled code runs the cases of an op
// together, a few dozen per jitted function, so that one compile checks many cases.
//
// Where hjit deliberately differs from PyTorch, kDeliberate below says so and why (the README
// lists the same), and the case checks hjit's documented behaviour instead.
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "support/settings.h"
#include "tests/support.h"

using hjit::DType;
using hjit::Shape;
using hjit::Tensor;

namespace {

// ---- the golden file

struct CaseAttrs {
  std::map<std::string, std::string> v;
  bool has(const std::string& k) const { return v.count(k) != 0; }
  const std::string& s(const std::string& k) const {
    auto it = v.find(k);
    if (it == v.end()) throw std::runtime_error("golden case: no attribute " + k);
    return it->second;
  }
  int64_t i(const std::string& k) const { return std::stoll(s(k)); }
  double f(const std::string& k) const {
    const std::string& x = s(k);
    if (x == "nan") return NAN;
    if (x == "inf") return INFINITY;
    if (x == "-inf") return -INFINITY;
    return std::stod(x);
  }
  bool none(const std::string& k) const { return s(k) == "none"; }
  std::vector<int64_t> ints(const std::string& k) const {
    std::vector<int64_t> out;
    if (s(k) == "-") return out;
    std::stringstream ss(s(k));
    for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoll(item));
    return out;
  }
  hjit::Pair pair(const std::string& k) const {
    auto v = ints(k);
    return {v.at(0), v.at(1)};
  }
  std::vector<int> axes(const std::string& k) const {
    std::vector<int> out;
    for (int64_t a : ints(k)) out.push_back(int(a));
    return out;
  }
};

struct Case {
  int line = 0;
  std::string op;
  CaseAttrs attrs;
  std::vector<Tensor> in, out;
  std::string error;        // the exception PyTorch raised, if it did
  std::string reference;  // "f32" or "f64" when the reference was not PyTorch's own kernel
  std::string describe() const {
    std::ostringstream os;
    os << op << " (line " << line << ")";
    for (const auto& [k, v] : attrs.v) os << " " << k << "=" << v;
    for (const Tensor& t : in) os << " " << hjit::dtype_name(t.dtype()) << hjit::shape_str(t.shape());
    return os.str();
  }
};

std::vector<unsigned char> base64(const std::string& s) {
  static const std::string digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<unsigned char> out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    acc = (acc << 6) | uint32_t(digits.find(c));
    bits += 6;
    if (bits >= 8) out.push_back((unsigned char)(acc >> (bits -= 8)));
  }
  return out;
}

std::vector<Case> load_cases() {
  std::ifstream f(HJIT_GOLDEN_DIR "/torch_cases.txt");
  REQUIRE_MESSAGE(f.good(), "cannot read " HJIT_GOLDEN_DIR "/torch_cases.txt");
  std::vector<Tensor> tensors;
  std::vector<Case> cases;
  Case c;
  int line_no = 0;
  for (std::string line; std::getline(f, line);) {
    ++line_no;
    std::istringstream ls(line);
    std::string word;
    ls >> word;
    if (word == "tensor") {
      std::string id, dtype, shape, data;
      ls >> id >> dtype >> shape >> data;
      Shape s;
      if (shape != "-") {
        std::stringstream ss(shape);
        for (std::string d; std::getline(ss, d, ',');) s.push_back(std::stoll(d));
      }
      std::vector<unsigned char> bytes = data == "-" ? std::vector<unsigned char>{} : base64(data);
      tensors.push_back(Tensor::from_bytes(bytes.data(), bytes.size(), s, hjit::dtype_from_name(dtype)));
    } else if (word == "case") {
      c = Case{};
      c.line = line_no;
      ls >> c.op;
    } else if (word == "attr") {
      std::string k, v;
      ls >> k >> v;
      c.attrs.v[k] = v;
    } else if (word == "in" || word == "out") {
      size_t id = 0;
      ls >> id;
      (word == "in" ? c.in : c.out).push_back(tensors.at(id));
    } else if (word == "error") {
      ls >> c.error;
    } else if (word == "ref") {
      ls >> c.reference;
    } else if (word == "end") {
      cases.push_back(c);
    }
  }
  return cases;
}

// ---- hjit's side of each case

using Adapter = std::function<std::vector<Tensor>(const std::vector<Tensor>&, const CaseAttrs&)>;

hjit::Scalar scalar_of(const CaseAttrs& a, const std::string& key) {
  const std::string& kind = a.s("kind");
  const double v = a.f(key);
  if (kind == "bool") return hjit::Scalar(v != 0);
  if (kind == "int") return hjit::Scalar(int64_t(v));
  return hjit::Scalar(v);
}

const std::map<std::string, Adapter>& adapters() {
  using V = std::vector<Tensor>;
  using A = const CaseAttrs&;
  auto unary = [](Tensor (*f)(const Tensor&)) { return Adapter([f](const V& in, A) { return V{f(in[0])}; }); };
  auto binary = [](Tensor (*f)(const Tensor&, const Tensor&)) { return Adapter([f](const V& in, A) { return V{f(in[0], in[1])}; }); };
  static const std::map<std::string, Adapter> table = {
      {"neg", unary(hjit::neg)}, {"abs", unary(hjit::abs)}, {"sign", unary(hjit::sign)}, {"relu", unary(hjit::relu)},
      {"floor", unary(hjit::floor)}, {"ceil", unary(hjit::ceil)}, {"round", unary(hjit::round)}, {"exp", unary(hjit::exp)},
      {"log", unary(hjit::log)}, {"log1p", unary(hjit::log1p)}, {"sqrt", unary(hjit::sqrt)}, {"rsqrt", unary(hjit::rsqrt)},
      {"sin", unary(hjit::sin)}, {"cos", unary(hjit::cos)}, {"tanh", unary(hjit::tanh)}, {"sigmoid", unary(hjit::sigmoid)},
      {"erf", unary(hjit::erf)}, {"silu", unary(hjit::silu)}, {"hardswish", unary(hjit::hardswish)}, {"atan", unary(hjit::atan)},
      {"asin", unary(hjit::asin)}, {"acos", unary(hjit::acos)},
      {"logical_not", unary(hjit::logical_not)},
      {"gelu", [](const V& in, A) { return V{hjit::gelu(in[0])}; }},
      {"gelu_tanh", [](const V& in, A) { return V{hjit::gelu(in[0], true)}; }},
      {"astype", [](const V& in, A a) { return V{in[0].astype(hjit::dtype_from_name(a.s("dtype")))}; }},
      {"add", binary(hjit::add)}, {"sub", binary(hjit::sub)}, {"mul", binary(hjit::mul)}, {"div", binary(hjit::div)},
      {"pow", binary(hjit::pow)}, {"maximum", binary(hjit::maximum)}, {"minimum", binary(hjit::minimum)},
      {"eq", binary(hjit::eq)}, {"ne", binary(hjit::ne)}, {"lt", binary(hjit::lt)}, {"le", binary(hjit::le)},
      {"gt", binary(hjit::gt)}, {"ge", binary(hjit::ge)}, {"logical_and", binary(hjit::logical_and)},
      {"logical_or", binary(hjit::logical_or)},
      {"add_scalar", [](const V& in, A a) { return V{in[0] + scalar_of(a, "value")}; }},
      {"sub_scalar", [](const V& in, A a) { return V{in[0] - scalar_of(a, "value")}; }},
      {"mul_scalar", [](const V& in, A a) { return V{in[0] * scalar_of(a, "value")}; }},
      {"div_scalar", [](const V& in, A a) { return V{in[0] / scalar_of(a, "value")}; }},
      {"pow_scalar", [](const V& in, A a) { return V{hjit::pow(in[0], scalar_of(a, "value"))}; }},
      {"rsub_scalar", [](const V& in, A a) { return V{scalar_of(a, "value") - in[0]}; }},
      {"rdiv_scalar", [](const V& in, A a) { return V{scalar_of(a, "value") / in[0]}; }},
      {"rpow_scalar", [](const V& in, A a) { return V{hjit::pow(scalar_of(a, "value"), in[0])}; }},
      {"maximum_scalar", [](const V& in, A a) { return V{hjit::maximum(in[0], scalar_of(a, "value"))}; }},
      {"gt_scalar", [](const V& in, A a) { return V{in[0] > scalar_of(a, "value")}; }},
      {"eq_scalar", [](const V& in, A a) { return V{in[0] == scalar_of(a, "value")}; }},
      {"where", [](const V& in, A) { return V{hjit::where(in[0], in[1], in[2])}; }},
      {"clamp",
       [](const V& in, A a) {
         std::optional<hjit::Scalar> lo, hi;
         if (!a.none("lo")) lo = scalar_of(a, "lo");
         if (!a.none("hi")) hi = scalar_of(a, "hi");
         return V{hjit::clamp(in[0], lo, hi)};
       }},
      {"sum", [](const V& in, A a) { return V{hjit::sum(in[0], a.axes("axes"), a.i("keepdims"))}; }},
      {"mean", [](const V& in, A a) { return V{hjit::mean(in[0], a.axes("axes"), a.i("keepdims"))}; }},
      {"amax", [](const V& in, A a) { return V{hjit::max(in[0], a.axes("axes"), a.i("keepdims"))}; }},
      {"amin", [](const V& in, A a) { return V{hjit::min(in[0], a.axes("axes"), a.i("keepdims"))}; }},
      {"argmax", [](const V& in, A a) { return V{hjit::argmax(in[0], int(a.i("axis")), a.i("keepdims"))}; }},
      {"argmin", [](const V& in, A a) { return V{hjit::argmin(in[0], int(a.i("axis")), a.i("keepdims"))}; }},
      {"cumsum", [](const V& in, A a) { return V{hjit::cumsum(in[0], int(a.i("axis")))}; }},
      {"matmul", binary(hjit::matmul)},
      {"reshape", [](const V& in, A a) { return V{in[0].reshape(a.ints("shape"))}; }},
      {"transpose", [](const V& in, A a) { return V{in[0].transpose(a.axes("perm"))}; }},
      {"broadcast_to", [](const V& in, A a) { return V{hjit::broadcast_to(in[0], a.ints("shape"))}; }},
      {"unsqueeze", [](const V& in, A a) { return V{hjit::unsqueeze(in[0], int(a.i("axis")))}; }},
      {"squeeze", [](const V& in, A a) { return V{hjit::squeeze(in[0], a.axes("axes"))}; }},
      {"slice",
       [](const V& in, A a) {
         std::optional<int64_t> b, e;
         if (!a.none("start")) b = a.i("start");
         if (!a.none("stop")) e = a.i("stop");
         return V{hjit::slice(in[0], int(a.i("axis")), b, e, a.i("step"))};
       }},
      {"concat", [](const V& in, A a) { return V{hjit::concat(in, int(a.i("axis")))}; }},
      {"stack", [](const V& in, A a) { return V{hjit::stack(in, int(a.i("axis")))}; }},
      {"pad",
       [](const V& in, A a) {
         auto w = a.ints("widths");
         std::vector<std::pair<int64_t, int64_t>> widths;
         for (size_t d = 0; d + 1 < w.size(); d += 2) widths.emplace_back(w[d], w[d + 1]);
         return V{hjit::pad(in[0], widths, a.f("value"))};
       }},
      {"tril", [](const V& in, A a) { return V{hjit::tril(in[0], a.i("k"))}; }},
      {"triu", [](const V& in, A a) { return V{hjit::triu(in[0], a.i("k"))}; }},
      {"take", [](const V& in, A a) { return V{hjit::take(in[0], in[1], int(a.i("axis")))}; }},
      {"embedding", [](const V& in, A) { return V{hjit::embedding(in[0], in[1])}; }},
      {"softmax", [](const V& in, A a) { return V{hjit::softmax(in[0], int(a.i("axis")))}; }},
      {"log_softmax", [](const V& in, A a) { return V{hjit::log_softmax(in[0], int(a.i("axis")))}; }},
      {"layer_norm",
       [](const V& in, A a) {
         std::optional<Tensor> w, b;
         if (in.size() > 1) w = in[1], b = in[2];
         return V{hjit::layer_norm(in[0], w, b, a.f("eps"))};
       }},
      {"rms_norm", [](const V& in, A a) { return V{hjit::rms_norm(in[0], in[1], a.f("eps"))}; }},
      {"batch_norm", [](const V& in, A a) { return V{hjit::batch_norm(in[0], in[1], in[2], in[3], in[4], a.f("eps"))}; }},
      {"batch_norm_training",
       [](const V& in, A a) {
         Tensor rm = in[1].clone(), rv = in[2].clone();
         Tensor y = hjit::batch_norm_training(in[0], rm, rv, in[3], in[4], a.f("momentum"), a.f("eps"));
         return V{y, rm, rv};
       }},
      {"cross_entropy", [](const V& in, A a) { return V{hjit::cross_entropy(in[0], in[1], a.i("ignore_index"))}; }},
      {"conv2d",
       [](const V& in, A a) {
         std::optional<Tensor> bias;
         if (in.size() > 2) bias = in[2];
         return V{hjit::conv2d(in[0], in[1], bias, a.pair("stride"), a.pair("padding"), a.pair("dilation"), a.i("groups"))};
       }},
      {"max_pool2d", [](const V& in, A a) { return V{hjit::max_pool2d(in[0], a.pair("kernel"), a.pair("stride"), a.pair("padding"))}; }},
      {"avg_pool2d",
       [](const V& in, A a) {
         return V{hjit::avg_pool2d(in[0], a.pair("kernel"), a.pair("stride"), a.pair("padding"), a.i("count_include_pad"))};
       }},
      {"adaptive_avg_pool2d", [](const V& in, A a) { return V{hjit::adaptive_avg_pool2d(in[0], a.pair("size"))}; }},
      {"attention", [](const V& in, A a) { return V{hjit::scaled_dot_product_attention(in[0], in[1], in[2], a.i("causal"))}; }},
  };
  return table;
}

// ---- where hjit differs on purpose

// What hjit does instead of what PyTorch does, for the cases `applies` selects.
enum class Instead {
  Computes,   // PyTorch raises; hjit computes a value (compiled checked against eager)
  Raises,     // PyTorch computes; hjit raises an hjit::Error
  Reference,  // hjit's values are libm's (`reference`, in f64, rounded to the dtype), not PyTorch's
};
struct Deliberate {
  const char* what;  // the README's words
  std::function<bool(const Case&)> applies;
  Instead instead;
  std::function<double(const std::vector<double>& operands)> reference = nullptr;
};

bool any_input(const Case& c, DType t) {
  for (const Tensor& x : c.in)
    if (x.dtype() == t) return true;
  return false;
}
bool float_out(const Case& c) { return !c.out.empty() && hjit::is_floating(c.out[0].dtype()); }

const std::vector<Deliberate>& deliberate() {
  static const std::vector<Deliberate> table = {
      {"softmax, log_softmax, gelu, silu and hardswish of integer tensors compute in f32 (PyTorch has no integer kernel "
       "and raises)",
       [](const Case& c) {
         return (c.op == "softmax" || c.op == "log_softmax" || c.op == "gelu" || c.op == "gelu_tanh" || c.op == "silu" ||
                 c.op == "hardswish") &&
                !hjit::is_floating(c.in[0].dtype()) && !c.error.empty();
       },
       Instead::Computes},
      {"max_pool2d and adaptive_avg_pool2d of integer tensors compute (PyTorch 1.13 has no CPU kernel and raises)",
       [](const Case& c) {
         return (c.op == "max_pool2d" || c.op == "adaptive_avg_pool2d") && !hjit::is_floating(c.in[0].dtype()) && !c.error.empty();
       },
       Instead::Computes},
      {"conv2d of an input with an empty spatial dimension gives an empty result (PyTorch raises)",
       [](const Case& c) { return c.op == "conv2d" && c.in[0].numel() == 0 && !c.error.empty(); }, Instead::Computes},
      {"argmax / argmin of bool and matmul of bool raise DTypeError even where no element is compared (PyTorch raises only "
       "when its kernel runs)",
       [](const Case& c) { return (c.op == "argmax" || c.op == "argmin" || c.op == "matmul") && any_input(c, DType::Bool) && c.error.empty(); },
       Instead::Raises},
      {"log1p of the largest finite values is finite (88.72 for f32's largest); PyTorch's vectorized log1p returns inf",
       [](const Case& c) { return c.op == "log1p" && float_out(c); }, Instead::Reference,
       [](const std::vector<double>& x) { return std::log1p(x[0]); }},
      {"pow of f64 at the extremes is libm's (pow(DBL_MAX, 1) is DBL_MAX); PyTorch's vectorized pow returns inf",
       [](const Case& c) { return (c.op == "pow" && c.out[0].dtype() == DType::F64 && c.in[0].shape() == c.in[1].shape()) ||
                                  (c.op == "pow_scalar" && c.attrs.s("kind") == "bool" && float_out(c)); },
       Instead::Reference, [](const std::vector<double>& x) { return std::pow(x[0], x[1]); }},
      {"a C++ number divided by a tensor is a division (s / x); PyTorch multiplies by the reciprocal (s * (1 / x)), "
       "which overflows for the smallest subnormal x",
       [](const Case& c) { return c.op == "rdiv_scalar" && float_out(c); }, Instead::Reference,
       [](const std::vector<double>& x) { return x[1] / x[0]; }},
  };
  return table;
}

const Deliberate* deliberate_for(const Case& c) {
  for (const Deliberate& d : deliberate())
    if (d.applies(c)) return &d;
  return nullptr;
}

// The reference of an Instead::Reference case: d.reference over the (same-shaped) operands, the
// case's scalar attribute "value" appended as the last operand, rounded to PyTorch's dtype.
Tensor libm_reference(const Deliberate& d, const Case& c) {
  std::vector<std::vector<double>> ops;
  for (const Tensor& t : c.in) ops.push_back(t.to_vector<double>());
  std::vector<double> out(ops[0].size());
  for (size_t i = 0; i < out.size(); ++i) {
    std::vector<double> x;
    for (const auto& o : ops) x.push_back(o[i]);
    // The C++ number converted to the tensor's dtype first, as hjit does (1e10 is inf in f16).
    if (c.attrs.has("value")) x.push_back(Tensor::scalar(c.attrs.f("value"), DType::F64).astype(c.out[0].dtype()).item<double>());
    out[i] = d.reference(x);
  }
  return Tensor::from_vector(out, c.out[0].shape()).astype(c.out[0].dtype());
}

// ---- comparison

// |got - want| <= tol * max(1, |want|), exact for integers and bool, NaN where PyTorch has NaN and
// infinities of the same sign. 16-bit floats: two units in the last place.
double tolerance(DType t, const Case& c) {
  double tol = 0;
  switch (t) {
    case DType::F64: tol = 1e-12; break;
    case DType::F32: tol = 2e-6; break;
    case DType::F16: tol = 2e-3; break;
    case DType::BF16: tol = 1.6e-2; break;
    default: return 0;
  }
  // Sums and products of many terms: the order of the additions differs from PyTorch's.
  static const std::set<std::string> accumulating = {"sum", "mean", "cumsum", "matmul", "conv2d", "avg_pool2d",
                                                     "adaptive_avg_pool2d", "softmax", "log_softmax", "layer_norm",
                                                     "rms_norm", "batch_norm", "batch_norm_training", "cross_entropy",
                                                     "attention", "pow", "pow_scalar", "rpow_scalar"};
  if (accumulating.count(c.op)) tol *= t == DType::F64 ? 1e3 : 10;
  return tol;
}

std::string value_str(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

std::string compare(const Tensor& got, const Tensor& want, const Case& c) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return std::string("got ") + hjit::dtype_name(got.dtype()) + hjit::shape_str(got.shape()) + ", PyTorch " +
           hjit::dtype_name(want.dtype()) + hjit::shape_str(want.shape());
  const double tol = tolerance(want.dtype(), c);
  if (!hjit::is_floating(want.dtype())) {
    std::vector<int64_t> a = got.to_vector<int64_t>(), b = want.to_vector<int64_t>();
    if (want.dtype() == DType::U64) a = std::vector<int64_t>(a.size()), b = a;  // PyTorch has no u64
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i]) return "element " + std::to_string(i) + ": got " + std::to_string(a[i]) + ", PyTorch " + std::to_string(b[i]);
    return "";
  }
  std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    const bool same = a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])) ||
                      (std::isfinite(b[i]) && std::isfinite(a[i]) && std::fabs(a[i] - b[i]) <= tol * std::max(1.0, std::fabs(b[i])));
    if (!same) return "element " + std::to_string(i) + ": got " + value_str(a[i]) + ", PyTorch " + value_str(b[i]);
  }
  return "";
}

std::string config() {
  return *hjit::setting::text(hjit::setting::Id::TestConfig);
}

hjit::JitOptions options(const std::string& name) {
  hjit::JitOptions o;
  o.name = name;
  const std::string c = config();
  if (c == "O0") o.opt_level = 0;
  else if (c == "O1") o.opt_level = 1;
  else o.opt_level = 2, o.autoscheduler = c;
  return o;
}

bool autoscheduled() { return config() != "O0" && config() != "O1"; }

// Whether run() raises the hjit::Error matching what PyTorch raised: an index out of range in a
// gather is an IndexError in both; PyTorch's other errors (RuntimeError for shapes, dtypes and
// values alike, IndexError for a reduction over an empty axis) are any hjit::Error.
bool raises_matching(const std::function<void()>& run, const Case& c, std::string* what) {
  const bool gather = c.op == "take" || c.op == "embedding" || c.op == "cross_entropy";
  try {
    run();
  } catch (const hjit::IndexError& e) {
    *what = e.what();
    return true;
  } catch (const hjit::Error& e) {
    *what = e.what();
    return !(gather && c.error == "IndexError");
  }
  *what = "no exception";
  return false;
}

struct Tally {
  int checked = 0, failed = 0;
  std::map<std::string, int> failures_by_op;
};

void record(Tally& t, const Case& c, const std::string& where, const std::string& diff) {
  ++t.checked;
  if (diff.empty()) return;
  ++t.failed;
  if (t.failures_by_op[c.op]++ < (hjit::setting::flag(hjit::setting::Id::GoldenAll) ? 100000 : 4)) FAIL_CHECK(where << ": " << c.describe() << ": " << diff);
}

// What hjit's result k must be: PyTorch's, or the libm reference where hjit differs on purpose.
Tensor expected(const Case& c, size_t k) {
  const Deliberate* d = deliberate_for(c);
  return d && d->instead == Instead::Reference ? libm_reference(*d, c) : c.out[k];
}

std::string summary(const Tally& t) {
  std::string s;
  for (const auto& [op, n] : t.failures_by_op) s += (s.empty() ? " (" : ", ") + op + ": " + std::to_string(n);
  return s.empty() ? s : s + ")";
}

}  // namespace

TEST_CASE("eager execution equals PyTorch on every golden case") {
  const std::vector<Case> cases = load_cases();
  REQUIRE(cases.size() > 1000);
  Tally tally;
  for (const Case& c : cases) {
    auto it = adapters().find(c.op);
    REQUIRE_MESSAGE(it != adapters().end(), "no adapter for " << c.op);
    const Deliberate* d = deliberate_for(c);
    if ((!c.error.empty() && !d) || (d && d->instead == Instead::Raises)) {
      std::string what;
      bool ok = raises_matching([&] { it->second(c.in, c.attrs); }, c, &what);
      record(tally, c, "eager", ok ? "" : (d ? std::string("hjit should raise (") + d->what + ")" : "PyTorch raised " + c.error) +
                                       ", hjit: " + what);
      continue;
    }
    if (d && d->instead == Instead::Computes) {
      std::string diff;
      try {
        it->second(c.in, c.attrs);
      } catch (const std::exception& e) {
        diff = std::string("hjit should compute (") + d->what + ") but raised: " + e.what();
      }
      record(tally, c, "eager", diff);
      continue;
    }
    std::vector<Tensor> got;
    try {
      got = it->second(c.in, c.attrs);
    } catch (const std::exception& e) {
      record(tally, c, "eager", std::string("raised: ") + e.what());
      continue;
    }
    std::string diff = got.size() == c.out.size() ? "" : "wrong number of results";
    for (size_t k = 0; k < got.size() && diff.empty(); ++k) diff = compare(got[k], expected(c, k), c);
    record(tally, c, "eager", diff);
  }
  MESSAGE(tally.checked << " golden cases checked eagerly, " << tally.failed << " differ from PyTorch" << summary(tally));
  CHECK(tally.failed == 0);
}

namespace {

bool has_special_values(const Case& c) {
  for (const Tensor& t : c.in)
    if (hjit::is_floating(t.dtype()))
      for (double v : t.to_vector<double>())
        if (!std::isfinite(v) || v == 0) return true;
  return false;
}

// The cases compiled code runs: compiling costs ~60 ms a case, so not all 7000 of them. Per op, at
// most `cap` cases (24 with the built-in schedule, 16 unfused, 4 with an autoscheduler): first one per combination of input and output dtypes (special values first),
// then one per further combination of attributes, ranks and empty / special inputs.
std::vector<const Case*> compiled_selection(const std::vector<Case>& cases, size_t cap) {
  std::map<std::string, std::vector<const Case*>> by_op;
  for (const Case& c : cases) by_op[c.op].push_back(&c);
  std::vector<const Case*> chosen;
  for (auto& [op, list] : by_op) {
    std::stable_partition(list.begin(), list.end(), [](const Case* c) { return has_special_values(*c); });
    std::set<std::string> seen;
    std::set<const Case*> taken;
    auto pick = [&](auto key_of) {
      for (const Case* c : list) {
        if (taken.size() >= cap) return;
        if (taken.count(c) || !seen.insert(key_of(*c)).second) continue;
        taken.insert(c);
        chosen.push_back(c);
      }
    };
    auto dtypes = [](const Case& c) {
      std::string k;
      for (const Tensor& t : c.in) k += std::string(hjit::dtype_name(t.dtype())) + ",";
      for (const Tensor& t : c.out) k += std::string(hjit::dtype_name(t.dtype())) + ";";
      return k + c.error;
    };
    pick(dtypes);
    pick([&](const Case& c) {
      std::string k = dtypes(c) + "|";
      for (const auto& [a, v] : c.attrs.v) k += a + "=" + v + ",";
      for (const Tensor& t : c.in) k += std::to_string(t.ndim()) + (t.numel() == 0 ? "e" : "") + ",";
      return k + (has_special_values(c) ? "s" : "");
    });
  }
  return chosen;
}

}  // namespace

TEST_CASE("compiled code equals PyTorch on the golden cases") {
  const std::vector<Case> cases = load_cases();
  const std::vector<const Case*> selected = compiled_selection(cases, autoscheduled() ? 4 : config() == "O0" ? 16 : 24);
  std::map<std::string, std::vector<const Case*>> by_op;
  std::vector<const Case*> alone;  // errors are checked one case at a time
  for (const Case* cp : selected) {
    const Case& c = *cp;
    const Deliberate* d = deliberate_for(c);
    if (!c.error.empty() || (d && d->instead != Instead::Reference)) alone.push_back(&c);
    else by_op[c.op].push_back(&c);
  }
  Tally tally;
  constexpr size_t kChunk = 64;
  for (const auto& [op, list] : by_op) {
    const Adapter& adapter = adapters().at(op);
    for (size_t first = 0; first < list.size(); first += kChunk) {
      std::vector<const Case*> chunk(list.begin() + std::ptrdiff_t(first),
                                     list.begin() + std::ptrdiff_t(std::min(list.size(), first + kChunk)));
      std::vector<Tensor> inputs;
      for (const Case* c : chunk) inputs.insert(inputs.end(), c->in.begin(), c->in.end());
      auto all = [&](const std::vector<Tensor>& in) {
        std::vector<Tensor> out;
        size_t k = 0;
        for (const Case* c : chunk) {
          std::vector<Tensor> mine(in.begin() + std::ptrdiff_t(k), in.begin() + std::ptrdiff_t(k + c->in.size()));
          k += c->in.size();
          std::vector<Tensor> r = adapter(mine, c->attrs);
          out.insert(out.end(), r.begin(), r.end());
        }
        return out;
      };
      std::vector<Tensor> got;
      try {
        got = hjit::jit(all, options("golden_" + op))(inputs);
      } catch (const std::exception& e) {
        for (const Case* c : chunk) record(tally, *c, config(), std::string("the group raised: ") + e.what());
        continue;
      }
      size_t k = 0;
      for (const Case* c : chunk) {
        std::string diff;
        for (size_t j = 0; j < c->out.size() && diff.empty(); ++j) diff = compare(got[k + j], expected(*c, j), *c);
        k += c->out.size();
        record(tally, *c, config(), diff);
      }
    }
  }
  for (const Case* c : alone) {
    const Adapter& adapter = adapters().at(c->op);
    auto one = [&](const std::vector<Tensor>& in) { return adapter(in, c->attrs); };
    const Deliberate* d = deliberate_for(*c);
    if (d && d->instead == Instead::Computes) {
      std::string diff;
      try {
        std::vector<Tensor> got = hjit::jit(one, options("golden_" + c->op))(c->in), want = one(c->in);
        for (size_t j = 0; j < got.size() && diff.empty(); ++j) diff = test::compare(got[j], want[j], test::tolerance(want[j].dtype()));
      } catch (const std::exception& e) {
        diff = std::string("hjit should compute (") + d->what + ") but raised: " + e.what();
      }
      record(tally, *c, config(), diff);
      continue;
    }
    std::string what;
    bool ok = raises_matching([&] { hjit::jit(one, options("golden_" + c->op))(c->in); }, *c, &what);
    const std::string expected = d ? std::string("hjit raises (") + d->what + ")" : "PyTorch raised " + c->error;
    record(tally, *c, config(), ok ? "" : expected + ", compiled hjit: " + what);
  }
  MESSAGE(tally.checked << " golden cases checked with " << config() << ", " << tally.failed << " differ from PyTorch" << summary(tally));
  CHECK(tally.failed == 0);
}
