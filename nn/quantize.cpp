// nn::quantize (quantize.h): calibrate each Linear's and Conv2d's input, then their weights and
// inputs in 8 bits.
#include <hjit/nn/quantize.h>

#include <set>
#include <string>
#include <vector>

#include <hjit/error.h>
#include <hjit/nn/layers.h>
#include <hjit/ops.h>

namespace hjit::nn {

namespace {

struct Quantizable {
  std::string path;
  Int8State* int8;
  const Tensor* weight;
  bool linear;
};

void collect(Module& m, const std::string& path, std::set<const Module*>& seen, std::vector<Quantizable>& out) {
  if (!seen.insert(&m).second) return;  // a module shared by two parents, once
  if (auto* l = dynamic_cast<Linear*>(&m)) out.push_back({path, &l->int8, &l->weight, true});
  if (auto* c = dynamic_cast<Conv2d*>(&m)) out.push_back({path, &c->int8, &c->weight, false});
  for (auto& [name, child] : m.named_children()) collect(*child, path.empty() ? name : path + "." + name, seen, out);
}

// Sets a buffer: in place where it has the value's shape and dtype (functions jitted before see
// the new values), else a new tensor.
void set(Tensor& slot, const Tensor& value) {
  if (slot.defined() && slot.shape() == value.shape() && slot.dtype() == value.dtype())
    slot.assign(value);
  else
    slot = value;
}

// The weight in i8 (output channels on axis 0), and the scale of the sums: the weight's times the
// input's, one per output channel.
void set_weight(Int8State& s, const Tensor& weight, const QuantizeOptions& options, double input_scale) {
  const QuantizedWeight w = quantize_weight(weight, 0, options);
  set(s.weight, w.q);
  set(s.scale, (w.scale * input_scale).astype(DType::F32) * Tensor::ones({weight.dim(0)}));
}

}  // namespace

void Int8State::observe(const Tensor& x, const char* layer) const {
  if (calibrating) calibrating->observe(x, std::string("the input of an nn::") + layer);
}

Int8State::Input Int8State::quantize_input(const Tensor& x) const {
  const Tensor xf = x.astype(DType::F32);
  Tensor x_scale = input_scale, zero_point = input_zero_point;
  if (!input_scale.defined()) {  // dynamic: the range of this x, widened to hold 0
    const Tensor lo = minimum(min(xf), 0.0), hi = maximum(max(xf), 0.0);
    x_scale = where(hi > lo, (hi - lo) / 255.0, Tensor::scalar(1.0f));
    zero_point = clamp(round(-lo / x_scale), 0, 255).astype(DType::U8);
  }
  const Tensor q = clamp(round(xf / x_scale) + zero_point.astype(DType::F32), 0, 255).astype(DType::U8);
  return {q, zero_point, input_scale.defined() ? scale : scale * x_scale};
}

int quantize(Module& model, const std::function<void()>& calibrate, const QuantizeOptions& options) {
  options.check("nn::quantize");
  std::vector<Quantizable> layers;
  std::set<const Module*> seen;
  collect(model, "", seen, layers);
  for (Quantizable& q : layers) q.int8->calibrating = std::make_shared<ActivationRange>(options);
  struct StopCalibrating {  // however calibrate ends
    std::vector<Quantizable>& layers;
    ~StopCalibrating() {
      for (Quantizable& q : layers) q.int8->calibrating.reset();
    }
  };
  std::vector<std::shared_ptr<ActivationRange>> ranges;
  {
    StopCalibrating stop{layers};
    calibrate();
    for (Quantizable& q : layers) ranges.push_back(q.int8->calibrating);
  }
  for (size_t i = 0; i < layers.size(); ++i)
    if (!ranges[i]->observed())
      throw ValueError("nn::quantize: the calibration never ran layer '" + (layers[i].path.empty() ? std::string("(the model)") : layers[i].path) +
                       "': calibrate must call the model on inputs that reach every Linear and Conv2d");
  for (size_t i = 0; i < layers.size(); ++i) {
    Int8State& s = *layers[i].int8;
    const auto [x_scale, x_zero_point] = ranges[i]->scale_and_zero_point();
    set_weight(s, *layers[i].weight, options, x_scale);
    set(s.input_scale, Tensor::scalar(x_scale, DType::F32));
    set(s.input_zero_point, Tensor::scalar(x_zero_point, DType::U8));
  }
  return int(layers.size());
}

int quantize_dynamic(Module& model, const QuantizeOptions& options) {
  std::vector<Quantizable> layers;
  std::set<const Module*> seen;
  collect(model, "", seen, layers);
  int n = 0;
  for (Quantizable& q : layers) {
    if (!q.linear) continue;
    set_weight(*q.int8, *q.weight, options, 1.0);
    q.int8->input_scale = Tensor();
    q.int8->input_zero_point = Tensor();
    ++n;
  }
  return n;
}

}  // namespace hjit::nn
