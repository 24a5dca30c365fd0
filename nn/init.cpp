// torch.nn.init's distributions over hjit's keyed random numbers.
#include <cmath>
#include <mutex>
#include <string>

#include <hjit/error.h>
#include <hjit/nn/init.h>
#include <hjit/ops.h>
#include <hjit/random.h>

namespace hjit::nn {

namespace {

std::mutex key_mu;
Tensor& process_key() {
  static Tensor key = random::key(0);
  return key;
}

// Draws are made in f32 (f64 for an f64 tensor) and rounded once to the tensor's dtype.
DType draw_dtype(const Tensor& t, const char* fn) {
  if (!t.defined()) throw ValueError(std::string("nn::init::") + fn + ": the tensor is undefined");
  if (!is_floating(t.dtype())) throw DTypeError(std::string("nn::init::") + fn + ": takes a floating tensor, given " + dtype_name(t.dtype()));
  return t.dtype() == DType::F64 ? DType::F64 : DType::F32;
}

Tensor& set(Tensor& t, const Tensor& value) { return t.assign(value.astype(t.dtype())); }

}  // namespace

void manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(key_mu);
  process_key() = random::key(seed);
}

Tensor next_key() {
  std::lock_guard<std::mutex> lock(key_mu);
  auto [next, drawn] = random::split(process_key());
  process_key() = next;
  return drawn;
}

Tensor process_key_now() {
  std::lock_guard<std::mutex> lock(key_mu);
  return process_key().clone();
}

void set_process_key(const Tensor& key) {
  const Tensor shape_of = random::key(0);
  if (key.dtype() != shape_of.dtype() || key.shape() != shape_of.shape())
    throw ValueError("nn::set_process_key: a key is " + std::string(dtype_name(shape_of.dtype())) + shape_str(shape_of.shape()) + ", given " +
                     dtype_name(key.dtype()) + shape_str(key.shape()));
  std::lock_guard<std::mutex> lock(key_mu);
  process_key() = key.clone();
}

namespace init {

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::Linear: case Nonlinearity::Conv: case Nonlinearity::Sigmoid: return 1;
    case Nonlinearity::Tanh: return 5.0 / 3;
    case Nonlinearity::Relu: return std::sqrt(2.0);
    case Nonlinearity::LeakyRelu: return std::sqrt(2.0 / (1 + param * param));
    case Nonlinearity::Selu: return 3.0 / 4;
  }
  return 1;
}

std::pair<int64_t, int64_t> fans(const Shape& shape) {
  if (shape.size() < 2) throw ValueError("nn::init: fan in and fan out need a tensor of rank 2 or more, given " + shape_str(shape));
  int64_t field = 1;
  for (size_t d = 2; d < shape.size(); ++d) field *= shape[d];
  return {shape[1] * field, shape[0] * field};
}

Tensor& uniform_(Tensor& t, double lo, double hi, std::optional<Tensor> key) {
  const DType d = draw_dtype(t, "uniform_");
  if (!(lo <= hi) || !std::isfinite(lo) || !std::isfinite(hi))
    throw ValueError("nn::init::uniform_: bounds [" + std::to_string(lo) + ", " + std::to_string(hi) + ") are not an interval");
  return set(t, random::uniform(key ? *key : next_key(), t.shape(), d, lo, hi));
}

Tensor& normal_(Tensor& t, double mean, double std, std::optional<Tensor> key) {
  const DType d = draw_dtype(t, "normal_");
  if (!(std >= 0) || !std::isfinite(std) || !std::isfinite(mean))
    throw ValueError("nn::init::normal_: std " + std::to_string(std) + " and mean " + std::to_string(mean) + " must be finite, std >= 0");
  return set(t, random::normal(key ? *key : next_key(), t.shape(), d) * std + mean);
}

Tensor& constant_(Tensor& t, double value) {
  if (!t.defined()) throw ValueError("nn::init::constant_: the tensor is undefined");
  return t.assign(Tensor::full(t.shape(), value, t.dtype()));
}
Tensor& zeros_(Tensor& t) { return constant_(t, 0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1); }

Tensor& xavier_uniform_(Tensor& t, double gain, std::optional<Tensor> key) {
  auto [in, out] = fans(t.shape());
  const double a = gain * std::sqrt(6.0 / double(std::max<int64_t>(in + out, 1)));
  return uniform_(t, -a, a, std::move(key));
}

Tensor& xavier_normal_(Tensor& t, double gain, std::optional<Tensor> key) {
  auto [in, out] = fans(t.shape());
  return normal_(t, 0, gain * std::sqrt(2.0 / double(std::max<int64_t>(in + out, 1))), std::move(key));
}

namespace {
double kaiming_std(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity) {
  auto [in, out] = fans(t.shape());
  const int64_t fan = mode == FanMode::FanIn ? in : out;
  if (fan == 0) throw ValueError("nn::init: kaiming initialization of " + shape_str(t.shape()) + ", which has a fan of 0");
  return calculate_gain(nonlinearity, a) / std::sqrt(double(fan));
}
}  // namespace

Tensor& kaiming_uniform_(Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity, std::optional<Tensor> key) {
  const double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nonlinearity);
  return uniform_(t, -bound, bound, std::move(key));
}

Tensor& kaiming_normal_(Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity, std::optional<Tensor> key) {
  return normal_(t, 0, kaiming_std(t, a, mode, nonlinearity), std::move(key));
}

}  // namespace init
}  // namespace hjit::nn
