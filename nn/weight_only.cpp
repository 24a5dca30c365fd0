// Weight-only quantization (quantize.h): i8 or i4 weights with f32 scales per row or per group of
// input features, dequantized by the products that read them.
#include <string>
#include <vector>

#include <hjit/error.h>
#include <hjit/nn/gpt2.h>
#include <hjit/nn/layers.h>
#include <hjit/nn/quantize.h>
#include <hjit/ops.h>

#include "nn/symmetric_levels.h"

namespace hjit::nn {

void WeightOnlyOptions::check(const std::string& who) const {
  if (bits != 8 && bits != 4) throw ValueError(who + ": bits must be 8 or 4, given " + std::to_string(bits));
  if (group_size < 0) throw ValueError(who + ": group_size must be 0 (one scale a row) or positive, given " + std::to_string(group_size));
  if (bits == 4 && (group_size == 0 || group_size % 32 != 0))
    throw ValueError(who + ": 4-bit weights need groups of a multiple of 32 input features (32, 64 or 128), given " + std::to_string(group_size));
}

namespace {

// i4 values pair up within blocks of 32 input features: byte j holds features j and j + 16.
constexpr int64_t kI4Block = 32;

// The levels of i4 bytes [..., 16] as f32 [..., 32] (each byte's low half, then its high half):
// in f32 because the graph has no bit operations; every step is exact for bytes.
Tensor unpack_i4(const Tensor& bytes) {
  const Tensor f = bytes.astype(DType::F32);
  const Tensor high = floor(f * 0.0625);
  return concat({f - high * 16.0, high}, -1) - 8.0;
}

}  // namespace

WeightOnlyState WeightOnlyState::of(const Tensor& weight, int axis, const WeightOnlyOptions& options, const std::string& layer) {
  if (weight.ndim() != 2) throw ShapeError("nn::quantize_weights: " + layer + ": a 2-D weight, given " + shape_str(weight.shape()));
  if (axis != 0 && axis != 1) throw ValueError("nn::quantize_weights: " + layer + ": the input-feature axis must be 0 or 1");
  // [out, in] whatever the layer's layout: a product of a few rows then reads each output's
  // weights as one contiguous run (dot products along K), the memory's best pattern.
  const Tensor w = (axis == 1 ? weight : transpose(weight)).astype(DType::F32);
  const int64_t out = w.dim(0), in = w.dim(1);
  const int64_t group = options.group_size > 0 ? options.group_size : in;
  if (in == 0 || in % group != 0)
    throw ValueError("nn::quantize_weights: " + layer + " has " + std::to_string(in) + " input features, not a multiple of group_size " +
                     std::to_string(group));
  const Tensor grouped = w.reshape({out, in / group, group});
  const auto [levels, scale] = symmetric_levels(grouped, 2, options.bits == 8 ? 127 : 7);
  WeightOnlyState s;
  s.bits = options.bits, s.group = options.group_size, s.axis = axis, s.shape = weight.shape();
  if (options.bits == 8) {
    s.q = levels.astype(DType::I8);
    if (options.group_size == 0) s.q = s.q.reshape({out, in});
  } else {
    const Tensor blocks = levels.reshape({out, in / kI4Block, kI4Block});
    const Tensor low = slice(blocks, 2, 0, kI4Block / 2), high = slice(blocks, 2, kI4Block / 2, kI4Block);
    s.q = ((low + 8.0) + (high + 8.0) * 16.0).astype(DType::U8);
  }
  s.scale = options.group_size == 0 ? scale.reshape({out}) : scale;
  return s;
}

namespace {

// The f32 weight [out, in] of levels [n, ...] (q's layout, n = out or a subset of its rows) and
// their scales.
Tensor dequantize(const WeightOnlyState& s, const Tensor& q, const Tensor& scale, int64_t in) {
  const int64_t n = q.dim(0);
  if (s.group == 0) return q.astype(DType::F32) * scale.reshape({n, 1});
  const Tensor levels = s.bits == 8 ? q.astype(DType::F32) : unpack_i4(q).reshape({n, in / s.group, s.group});
  return (levels * scale).reshape({n, in});
}

}  // namespace

Tensor WeightOnlyState::weight() const {
  const Tensor w = dequantize(*this, q, scale, shape[size_t(axis)]);
  return axis == 1 ? w : transpose(w);
}

Tensor WeightOnlyState::matmul(const Tensor& x) const {
  const int64_t in = shape[size_t(axis)], out = shape[size_t(1 - axis)];
  if (x.ndim() == 0 || x.shape().back() != in)
    throw ShapeError("nn: a weight-only quantized layer takes inputs [..., " + std::to_string(in) + "], given " + shape_str(x.shape()));
  const Tensor rows = x.reshape({-1, in});
  // Without groups the row's scale is applied after the sum: one multiply an output.
  const Tensor y = group == 0 ? hjit::matmul(rows, transpose(q.astype(DType::F32))) * scale
                              : hjit::matmul(rows, transpose(dequantize(*this, q, scale, in)));
  Shape s = x.shape();
  s.back() = out;
  return y.reshape(s);
}

Tensor WeightOnlyState::rows(const Tensor& ids) const {
  if (axis != 1) throw ValueError("nn: rows of a weight-only quantized weight need its input features on axis 1");
  const int64_t in = shape[1];
  const Tensor at = ids.reshape({-1});
  Shape s = ids.shape();
  s.push_back(in);
  return dequantize(*this, take(q, at, 0), take(scale, at, 0), in).reshape(s);
}

namespace {

struct Quantizable {
  std::string path;
  WeightOnlyState* state;
  Tensor* weight;
  int axis;
  const Int8State* int8;
};

// The quantizable layers of `model`, each once (Module::named_modules: a tied embedding shared by
// two parents is one layer), with their paths.
std::vector<Quantizable> collect(Module& model) {
  std::vector<Quantizable> out;
  for (const auto& [path, owned] : model.named_modules()) {
    Module* m = const_cast<Module*>(owned);  // (the modules of `model`, which the caller may change)
    if (auto* l = dynamic_cast<Linear*>(m)) out.push_back({path, &l->weight_only, &l->weight, 1, &l->int8});
    if (auto* e = dynamic_cast<Embedding*>(m)) out.push_back({path, &e->weight_only, &e->weight, 1, nullptr});
    if (auto* c = dynamic_cast<GPT2Conv1D*>(m)) out.push_back({path, &c->weight_only, &c->weight, 0, nullptr});
  }
  return out;
}

}  // namespace

int quantize_weights(Module& model, const WeightOnlyOptions& options) {
  options.check("nn::quantize_weights");
  const std::vector<Quantizable> layers = collect(model);
  // Every layer checked and quantized before any changes: a refusal leaves the model as it was.
  std::vector<WeightOnlyState> states;
  for (const Quantizable& l : layers) {
    const std::string name = "layer '" + (l.path.empty() ? std::string("(the model)") : l.path) + "'";
    if (l.int8 && l.int8->weight.defined())
      throw ValueError("nn::quantize_weights: " + name + " is quantized to int8 already (nn::quantize): quantize a float model");
    if (!l.weight->defined())
      throw ValueError("nn::quantize_weights: " + name + " holds quantized weights only (its float weight was released): quantize a float model, "
                       "or keep_float to quantize again");
    states.push_back(WeightOnlyState::of(*l.weight, l.axis, options, name));
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    WeightOnlyState& s = *layers[i].state;
    const WeightOnlyState& fresh = states[i];
    s.q = fresh.q, s.scale = fresh.scale, s.bits = fresh.bits, s.group = fresh.group, s.axis = fresh.axis, s.shape = fresh.shape;
    if (!options.keep_float) *layers[i].weight = Tensor();
  }
  return int(layers.size());
}

}  // namespace hjit::nn
