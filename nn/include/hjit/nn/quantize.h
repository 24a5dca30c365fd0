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
#include <string>

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

// Weight-only quantization, for inference whose speed is the weights' bytes (a decode step reads
// every weight once a token): the weights in i8 or i4, symmetric, an f32 scale per output channel
// or per group of input features; the activations stay f32 and the products dequantize the
// weights as they load them (a matrix-vector product streams the narrow values).
struct WeightOnlyOptions {
  int bits = 8;            // 8 (i8, [-127, 127]) or 4 (i4, [-7, 7], two to a byte)
  int64_t group_size = 0;  // input features a scale covers; 0: the whole row. 4 bits: a multiple of 32
  // The f32 weights are released by default (the model then holds the narrow ones only, and
  // saves them); kept, the model can be quantized again.
  bool keep_float = false;
  // ValueError naming `who` for bits other than 8 or 4, a negative group size, 4 bits without
  // groups of a multiple of 32.
  void check(const std::string& who) const;
};

// Quantizes the weight of every Linear, Embedding and GPT2Conv1D in `model` (itself included),
// groups along each weight's input features (an Embedding's: its columns), in place. A layer whose
// input features the group size does not divide is a ValueError naming it. Returns how many layers
// were quantized. jit the model's calls after quantizing (a function jitted before keeps its trace).
int quantize_weights(Module& model, const WeightOnlyOptions& options = {});

// What a weight-only quantized layer holds (Linear::weight_only, ...): nothing until quantized.
// Buffers `weight_q` and `weight_scale` (saved by checkpoints; load them into a model quantized
// with the same options).
struct WeightOnlyState {
  // Stored [out, in] whatever the layer's layout, so that a product of a few rows reads each
  // output's weights as one run. bits 8: i8 [out, in], or [out, groups, group] with groups.
  // bits 4: u8 [out, in / 32, 16], byte j of a block of 32 features holds feature j's level + 8
  // in its low half and feature j + 16's in its high half.
  Tensor q;
  Tensor scale;  // f32: [out] without groups, else [out, groups, 1]
  int bits = 0;
  int64_t group = 0;  // 0: one scale a row
  int axis = 1;       // the f32 weight's input-feature axis: 1 for [out, in], 0 for [in, out]
  Shape shape;        // the f32 weight's

  bool on() const { return q.defined(); }
  // The weight in f32, `shape`.
  Tensor weight() const;
  // x @ W^T (axis 1) or x @ W (axis 0) over x's last axis, with every row of x one row of a
  // single product (a batch's tokens share each pass over the weight).
  Tensor matmul(const Tensor& x) const;
  // The rows of an axis-1 weight at `ids` (an embedding's lookup), [ids..., in].
  Tensor rows(const Tensor& ids) const;
  // Quantizes `w` (f32, 2-D) with its input features on `axis`.
  static WeightOnlyState of(const Tensor& w, int axis, const WeightOnlyOptions& options, const std::string& layer);
};

}  // namespace hjit::nn
