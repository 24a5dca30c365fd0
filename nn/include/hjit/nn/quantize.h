// Post-training static quantization of a module's Linear and Conv2d layers, in place (PyTorch's
// eager-mode prepare, calibrate and convert in one call): weights in i8, symmetric, one scale per
// output channel; each layer's input in u8 with one scale and zero point, from the range it took
// while `calibrate` ran. The layers then compute on the integer kernels (hjit::int_matmul,
// hjit::int_conv2d: VNNI's dot products where the CPU has them), exact in i32, and scale their
// sums once in f32. jit, Module and export compile them like any layer, and the quantized state
// is buffers (int8_weight, int8_scale, input_scale, input_zero_point) that checkpoints save (load
// such a checkpoint into a model quantized the same way). For inference: the integer kernels have
// no gradient.
#pragma once
#include <functional>
#include <memory>

#include <hjit/calibration.h>
#include <hjit/nn/module.h>
#include <hjit/tensor.h>

namespace hjit::nn {

using hjit::QuantizeOptions;

// Quantizes every Linear and Conv2d in `model` (itself included): `calibrate` calls the model
// eagerly (not through jit: the ranges are read from the values) on representative inputs, in
// eval mode. Returns how many layers were quantized; a layer the calibration never reached is a
// ValueError naming it. A quantized model quantized again is recalibrated (in float). A function
// jitted before keeps the trace it made, in float: jit the model's calls after quantizing.
int quantize(Module& model, const std::function<void()>& calibrate, const QuantizeOptions& options = {});

// Dynamic quantization (torch.ao.quantization.quantize_dynamic's): every Linear in `model`, its
// weight in i8 now and its input in u8 at each call, with the scale and zero point of that input's
// own range (ONNX's DynamicQuantizeLinear). No calibration; for inputs whose range varies (a
// language model's activations). Returns how many layers were quantized.
int quantize_dynamic(Module& model, const QuantizeOptions& options = {});

// What a quantizable layer holds (Linear::int8, Conv2d::int8): undefined tensors until quantized.
struct Int8State {
  Tensor weight;            // i8, the float weight's shape
  Tensor scale;             // f32 [out]: the input's scale times the weight's, per output channel
                            // (the weight's alone when the input is quantized dynamically)
  Tensor input_scale;       // f32 scalar; undefined: the input is quantized dynamically
  Tensor input_zero_point;  // u8 scalar
  std::shared_ptr<ActivationRange> calibrating;  // set while nn::quantize runs `calibrate`

  bool on() const { return weight.defined() && !calibrating; }
  // Called by the layer's forward with its input: observed while calibrating.
  void observe(const Tensor& x, const char* layer) const;
  // x in u8 with the input's scale and zero point (ONNX's QuantizeLinear), and the scale of the
  // i32 sums of each output channel.
  struct Input {
    Tensor q, zero_point, sum_scale;
  };
  Input quantize_input(const Tensor& x) const;
};

}  // namespace hjit::nn
