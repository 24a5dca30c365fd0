// The layers of layers.h: parameters made and initialized as torch.nn makes them, forward passes
// through the functional ops.
#include <cctype>
#include <cmath>
#include <string>

#include <hjit/autocast.h>
#include <hjit/distributed.h>
#include <hjit/error.h>
#include <hjit/nn/init.h>
#include <hjit/nn/layers.h>
#include <hjit/random.h>

namespace hjit::nn {

namespace {

void check_sizes(const char* layer, std::initializer_list<int64_t> sizes) {
  for (int64_t s : sizes)
    if (s < 1) throw ValueError(std::string("nn::") + layer + ": sizes must be positive, given " + std::to_string(s));
}

// PyTorch's reset_parameters for Linear and the convolutions: kaiming_uniform_(a = sqrt(5)),
// which is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the bias from the same interval.
void torch_default_init(Tensor& weight, Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const int64_t fan_in = init::fans(weight.shape()).first;
    const double bound = fan_in > 0 ? 1 / std::sqrt(double(fan_in)) : 0;
    init::uniform_(bias, -bound, bound);
  }
}

// An input of another floating dtype than the layer's parameters is a DTypeError, as PyTorch's
// "expected scalar type": promoted silently, an f64 input ran the whole model in f64 (and a bf16
// one in f32). Under autocast the contractions cast their operands by its rules instead.
void check_input_dtype(const char* layer, const Tensor& x, const Tensor& param) {
  if (!param.defined() || autocast_dtype() || !is_floating(x.dtype()) || !is_floating(param.dtype()) || x.dtype() == param.dtype()) return;
  std::string enumerator = dtype_name(param.dtype());
  for (char& c : enumerator) c = char(std::toupper(static_cast<unsigned char>(c)));
  throw DTypeError(std::string("nn::") + layer + ": the input is " + dtype_name(x.dtype()) + " but the layer's parameters are " +
                   dtype_name(param.dtype()) + "; convert one to the other (x.astype(DType::" + enumerator +
                   ") in the caller's code), or run under hjit::autocast");
}

void check_groups(const char* layer, int64_t in, int64_t out, int64_t groups) {
  if (groups < 1 || in % groups != 0 || out % groups != 0)
    throw ValueError(std::string("nn::") + layer + ": " + std::to_string(in) + " input and " + std::to_string(out) +
                     " output channels must both split in " + std::to_string(groups) + " groups");
}

// The buffers of a quantizable layer, undefined (and so unlisted) until nn::quantize sets them.
constexpr std::pair<const char*, Tensor Int8State::*> kInt8Buffers[] = {
    {"int8_weight", &Int8State::weight},
    {"int8_scale", &Int8State::scale},
    {"input_scale", &Int8State::input_scale},
    {"input_zero_point", &Int8State::input_zero_point}};

// A per-channel vector shaped to broadcast over [N, C, ...] of rank `rank`.
Tensor per_channel(const Tensor& v, int rank) {
  Shape s(size_t(rank), 1);
  s[1] = v.shape()[0];
  return v.reshape(s);
}

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias) {
  if (in_features < 0 || out_features < 0) throw ValueError("nn::Linear: sizes must not be negative");
  weight = Tensor::empty({out_features, in_features});
  if (with_bias) bias = Tensor::empty({out_features});
  torch_default_init(weight, bias);
  register_parameter("weight", weight);
  register_parameter("bias", bias);
  for (auto [name, member] : kInt8Buffers) register_buffer(name, int8.*member);
  register_buffer("weight_q", weight_only.q), register_buffer("weight_scale", weight_only.scale);
}

Tensor Linear::forward(const Tensor& x) {
  const int64_t in = weight_only.on() ? weight_only.shape[1] : weight.shape()[1];
  if (x.ndim() == 0 || x.shape().back() != in)
    throw ShapeError("nn::Linear: takes inputs [..., " + std::to_string(in) + "], given " + shape_str(x.shape()));
  check_input_dtype("Linear", x, weight);
  int8.observe(x, "Linear");
  Tensor y;
  if (weight_only.on()) {
    y = weight_only.matmul(x);
  } else if (int8.on()) {
    const Int8State::Input q = int8.quantize_input(x);
    y = int_matmul(q.q, transpose(int8.weight), q.zero_point, Tensor::scalar(0, DType::I8)).astype(DType::F32) * q.sum_scale;
  } else {
    return linear(x, weight, bias.defined() ? std::optional<Tensor>(bias) : std::nullopt);
  }
  return bias.defined() ? y + bias : y;
}

ConvLayer::ConvLayer(const char* layer, int64_t in, int64_t out, std::vector<int64_t> kernel, int64_t groups, bool with_bias,
                     bool transposed) {
  check_sizes(layer, {in, out});
  for (int64_t k : kernel) check_sizes(layer, {k});
  check_groups(layer, in, out, groups);
  Shape shape = transposed ? Shape{in, out / groups} : Shape{out, in / groups};
  shape.insert(shape.end(), kernel.begin(), kernel.end());
  weight = Tensor::empty(shape);
  if (with_bias) bias = Tensor::empty({out});
  torch_default_init(weight, bias);
  register_parameter("weight", weight);
  register_parameter("bias", bias);
}

namespace {
std::optional<Tensor> optional(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }
}  // namespace

Conv1d::Conv1d(int64_t in, int64_t out, int64_t k, int64_t stride_, int64_t padding_, int64_t dilation_, int64_t groups_, bool with_bias)
    : ConvLayer("Conv1d", in, out, {k}, groups_, with_bias, false), stride(stride_), padding(padding_), dilation(dilation_), groups(groups_) {}

Tensor Conv1d::forward(const Tensor& x) {
  check_input_dtype("Conv1d", x, weight);
  return conv1d(x, weight, optional(bias), stride, padding, dilation, groups);
}

Conv2d::Conv2d(int64_t in, int64_t out, Size2 k, Size2 stride_, Size2 padding_, Size2 dilation_, int64_t groups_, bool with_bias)
    : ConvLayer("Conv2d", in, out, {k[0], k[1]}, groups_, with_bias, false), stride(stride_), padding(padding_), dilation(dilation_),
      groups(groups_) {
  for (auto [name, member] : kInt8Buffers) register_buffer(name, int8.*member);
}

Tensor Conv2d::forward(const Tensor& x) {
  check_input_dtype("Conv2d", x, weight);
  int8.observe(x, "Conv2d");
  if (!int8.on() || (x.ndim() != 4 && x.ndim() != 3)) return conv2d(x, weight, optional(bias), stride, padding, dilation, groups);
  // An unbatched [C, H, W] input is a batch of one.
  const Tensor x4 = x.ndim() == 4 ? x : x.reshape({1, x.dim(0), x.dim(1), x.dim(2)});
  const Int8State::Input q = int8.quantize_input(x4);
  Tensor y = int_conv2d(q.q, int8.weight, q.zero_point, stride, padding, dilation, groups).astype(DType::F32) * per_channel(q.sum_scale, 4);
  if (bias.defined()) y = y + per_channel(bias, 4);
  return x.ndim() == 4 ? y : y.reshape({y.dim(1), y.dim(2), y.dim(3)});
}

Conv3d::Conv3d(int64_t in, int64_t out, Size3 k, Size3 stride_, Size3 padding_, Size3 dilation_, int64_t groups_, bool with_bias)
    : ConvLayer("Conv3d", in, out, {k[0], k[1], k[2]}, groups_, with_bias, false), stride(stride_), padding(padding_), dilation(dilation_),
      groups(groups_) {}

Tensor Conv3d::forward(const Tensor& x) {
  check_input_dtype("Conv3d", x, weight);
  return conv3d(x, weight, optional(bias), stride, padding, dilation, groups);
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, Size2 k, Size2 stride_, Size2 padding_, Size2 output_padding_, int64_t groups_,
                                 bool with_bias, Size2 dilation_)
    : ConvLayer("ConvTranspose2d", in, out, {k[0], k[1]}, groups_, with_bias, true), stride(stride_), padding(padding_),
      output_padding(output_padding_), dilation(dilation_), groups(groups_) {}

Tensor ConvTranspose2d::forward(const Tensor& x) {
  check_input_dtype("ConvTranspose2d", x, weight);
  return conv_transpose2d(x, weight, optional(bias), stride, padding, output_padding, groups, dilation);
}

BatchNorm::BatchNorm(int64_t num_features, double eps_, double momentum_, bool affine, bool track_running_stats)
    : eps(eps_), momentum(momentum_) {
  check_sizes("BatchNorm", {num_features});
  if (!(eps > 0) || !(momentum >= 0 && momentum <= 1))
    throw ValueError("nn::BatchNorm: eps must be positive and momentum in [0, 1], given " + std::to_string(eps) + " and " + std::to_string(momentum));
  if (affine) weight = Tensor::ones({num_features}), bias = Tensor::zeros({num_features});
  if (track_running_stats) {
    running_mean = Tensor::zeros({num_features}), running_var = Tensor::ones({num_features});
    num_batches_tracked = Tensor::zeros({}, DType::I64);
  }
  register_parameter("weight", weight);
  register_parameter("bias", bias);
  register_buffer("running_mean", running_mean);
  register_buffer("running_var", running_var);
  register_buffer("num_batches_tracked", num_batches_tracked);
}

void BatchNorm::check_input(const Tensor& x) const {
  const int64_t C = weight.defined() ? weight.shape()[0] : running_mean.defined() ? running_mean.shape()[0] : -1;
  if (x.ndim() < 2 || (C >= 0 && x.shape()[1] != C))
    throw ShapeError("nn::BatchNorm: takes [N, " + std::to_string(C) + ", ...], given " + shape_str(x.shape()));
  check_input_dtype("BatchNorm", x, weight.defined() ? weight : running_mean);
}

Tensor BatchNorm::forward(const Tensor& x) {
  check_input(x);
  if (training() && num_batches_tracked.defined()) num_batches_tracked.assign(num_batches_tracked + int64_t(1));
  if (training() || !running_mean.defined())
    return batch_norm_training(x, optional(running_mean), optional(running_var), optional(weight), optional(bias), momentum, eps);
  return batch_norm(x, running_mean, running_var, optional(weight), optional(bias), eps);
}

// SyncBatchNorm: the statistics of the whole batch across the ranks, then BatchNorm's
// normalization with them (batch_norm) and its running statistics' update.
Tensor SyncBatchNorm::forward(const Tensor& x) {
  if (!training() || dist::world_size() == 1) return BatchNorm::forward(x);
  check_input(x);
  // 16-bit floats' statistics are computed in f32, as batch norm's are.
  const Tensor v = x.dtype() == DType::F16 || x.dtype() == DType::BF16 ? x.astype(DType::F32) : x;
  const int64_t C = v.shape()[1];
  if (v.numel() == 0)
    throw ValueError("nn::SyncBatchNorm: rank " + std::to_string(dist::rank()) + " has an empty batch " + shape_str(v.shape()) +
                     " (every rank needs values of every channel)");
  std::vector<int> axes{0};
  for (int d = 2; d < v.ndim(); ++d) axes.push_back(d);
  // This rank's mean, biased variance and count, gathered from every rank as rows [mean | var | n].
  const Tensor mean_here = mean(v, axes, true), centered = v - mean_here;
  const Tensor var_here = mean(centered * centered, axes);
  const Tensor count_here = numel(v, axes, v.dtype());
  const Tensor rows = dist::all_gather(concat({mean_here.reshape({C}), var_here, count_here.reshape({1})}).reshape({1, 2 * C + 1}), 0);
  const Tensor means = slice(rows, 1, 0, C), vars = slice(rows, 1, C, 2 * C), counts = slice(rows, 1, 2 * C, 2 * C + 1);
  // Chan et al.'s combination: the whole batch's mean, and its variance as the ranks' variances
  // plus their means' spread, each weighted by its count (no sum of squares to cancel).
  const Tensor total = sum(counts), share = counts / total;
  const Tensor batch_mean = sum(share * means, {0});
  const Tensor spread = means - batch_mean;
  const Tensor batch_var = sum(share * (vars + spread * spread), {0});
  if (num_batches_tracked.defined()) num_batches_tracked.assign(num_batches_tracked + int64_t(1));
  if (running_mean.defined()) running_mean.assign((1 - momentum) * running_mean + momentum * batch_mean.astype(running_mean.dtype()));
  if (running_var.defined())
    running_var.assign((1 - momentum) * running_var + momentum * (batch_var * (total / (total - 1.0))).astype(running_var.dtype()));
  return batch_norm(x, batch_mean, batch_var, optional(weight), optional(bias), eps);
}

LayerNorm::LayerNorm(Shape shape, double eps_, bool elementwise_affine, bool with_bias) : normalized_shape(std::move(shape)), eps(eps_) {
  if (normalized_shape.empty()) throw ValueError("nn::LayerNorm: normalized_shape must name at least one axis");
  for (int64_t s : normalized_shape) check_sizes("LayerNorm", {s});
  if (elementwise_affine) {
    weight = Tensor::ones(normalized_shape);
    if (with_bias) bias = Tensor::zeros(normalized_shape);
  }
  register_parameter("weight", weight);
  register_parameter("bias", bias);
}

Tensor LayerNorm::forward(const Tensor& x) {
  const size_t k = normalized_shape.size();
  if (size_t(x.ndim()) < k || !std::equal(normalized_shape.begin(), normalized_shape.end(), x.shape().end() - long(k)))
    throw ShapeError("nn::LayerNorm: takes inputs ending in " + shape_str(normalized_shape) + ", given " + shape_str(x.shape()));
  check_input_dtype("LayerNorm", x, weight);
  if (k == 1) return layer_norm(x, optional(weight), optional(bias), eps);
  int64_t inner = 1;
  for (int64_t s : normalized_shape) inner *= s;
  Shape flat(x.shape().begin(), x.shape().end() - long(k));
  flat.push_back(inner);
  auto flat_opt = [&](const Tensor& t) { return t.defined() ? std::optional<Tensor>(t.reshape({inner})) : std::nullopt; };
  return layer_norm(x.reshape(flat), flat_opt(weight), flat_opt(bias), eps).reshape(x.shape());
}

RMSNorm::RMSNorm(int64_t dim, double eps_, bool elementwise_affine) : eps(eps_) {
  check_sizes("RMSNorm", {dim});
  if (elementwise_affine) weight = Tensor::ones({dim});
  register_parameter("weight", weight);
}

Tensor RMSNorm::forward(const Tensor& x) {
  check_input_dtype("RMSNorm", x, weight);
  return rms_norm(x, optional(weight), eps);
}

GroupNorm::GroupNorm(int64_t groups, int64_t channels, double eps_, bool affine) : num_groups(groups), eps(eps_) {
  check_sizes("GroupNorm", {groups, channels});
  if (channels % groups != 0)
    throw ValueError("nn::GroupNorm: " + std::to_string(channels) + " channels do not split in " + std::to_string(groups) + " groups");
  if (affine) weight = Tensor::ones({channels}), bias = Tensor::zeros({channels});
  register_parameter("weight", weight);
  register_parameter("bias", bias);
}

Tensor GroupNorm::forward(const Tensor& x) {
  const int64_t C = weight.defined() ? weight.shape()[0] : -1;
  if (x.ndim() < 2 || x.shape()[1] % num_groups != 0 || (C >= 0 && x.shape()[1] != C))
    throw ShapeError("nn::GroupNorm: takes [N, C, ...] with C " + (C >= 0 ? "= " + std::to_string(C) : "a multiple of " + std::to_string(num_groups)) +
                     ", given " + shape_str(x.shape()));
  check_input_dtype("GroupNorm", x, weight);
  int64_t per_group = x.shape()[1] / num_groups;
  for (int d = 2; d < x.ndim(); ++d) per_group *= x.shape()[size_t(d)];
  Tensor y = layer_norm(x.reshape({x.shape()[0], num_groups, per_group}), std::nullopt, std::nullopt, eps).reshape(x.shape());
  if (weight.defined()) y = y * per_channel(weight, x.ndim()) + per_channel(bias, x.ndim());
  return y;
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim, std::optional<int64_t> pad) : padding_idx(pad) {
  check_sizes("Embedding", {num_embeddings, dim});
  if (padding_idx && *padding_idx < 0) *padding_idx += num_embeddings;
  if (padding_idx && (*padding_idx < 0 || *padding_idx >= num_embeddings))
    throw ValueError("nn::Embedding: padding_idx " + std::to_string(*pad) + " is not a row of " + std::to_string(num_embeddings));
  weight = Tensor::empty({num_embeddings, dim});
  init::normal_(weight);
  if (padding_idx) weight.assign_slice(0, *padding_idx, *padding_idx + 1, Tensor::zeros({1, dim}));
  register_parameter("weight", weight);
  register_buffer("weight_q", weight_only.q), register_buffer("weight_scale", weight_only.scale);
}

Tensor Embedding::forward(const Tensor& ids) {
  Tensor y = weight_only.on() ? weight_only.rows(ids) : embedding(weight, ids);
  if (!padding_idx) return y;
  // Rows of padding ids read the zero row and pass no gradient to it.
  return y * unsqueeze(ne(ids, Tensor::scalar(double(*padding_idx), ids.dtype())), -1).astype(y.dtype());
}

Dropout::Dropout(double p_, std::optional<Tensor> key_) : p(p_), key(key_ ? *key_ : next_key()) {
  if (!(p >= 0 && p <= 1)) throw ValueError("nn::Dropout: p must be in [0, 1], given " + std::to_string(p));
  register_key("key", key);
}

Tensor Dropout::forward(const Tensor& x) {
  if (!training() || p == 0) return x;
  if (p == 1) return Tensor::zeros(x.shape(), x.dtype());  // torch's Dropout(1): all dropped
  auto [next, drawn] = random::split(key);
  key.assign(next);
  return dropout(drawn, x, p);
}

Tensor Flatten::forward(const Tensor& x) {
  const int r = std::max(x.ndim(), 1);
  const int s = start_ < 0 ? start_ + r : start_, e = end_ < 0 ? end_ + r : end_;
  if (s < 0 || e >= r || s > e)
    throw ValueError("nn::Flatten: axes " + std::to_string(start_) + " to " + std::to_string(end_) + " of " + shape_str(x.shape()));
  if (x.ndim() == 0) return x.reshape({1});
  Shape out(x.shape().begin(), x.shape().begin() + s);
  int64_t merged = 1;
  for (int d = s; d <= e; ++d) merged *= x.shape()[size_t(d)];
  out.push_back(merged);
  out.insert(out.end(), x.shape().begin() + e + 1, x.shape().end());
  return x.reshape(out);
}

MaxPool2d::MaxPool2d(Size2 k, std::optional<Size2> s, Size2 p) : kernel_(k), stride_(s ? Pair(*s) : Pair(k)), padding_(p) {}
AvgPool2d::AvgPool2d(Size2 k, std::optional<Size2> s, Size2 p) : kernel_(k), stride_(s ? Pair(*s) : Pair(k)), padding_(p) {}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& layer : layers_) y = layer->forward(y);
  return y;
}

Layer& Sequential::operator[](size_t i) const {
  if (i >= layers_.size())
    throw IndexError("nn::Sequential: layer " + std::to_string(i) + " of " + std::to_string(layers_.size()));
  return *layers_[i];
}

}  // namespace hjit::nn
