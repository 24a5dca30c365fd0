// The converters, one file per family of ONNX ops; each adds its ops to the table
// (onnx/ops/table.cpp), keyed by op type.
#pragma once
#include <map>
#include <optional>
#include <string>

#include "onnx_import/node_context.h"

namespace hjit::onnx_import {

using ConverterTable = std::map<std::string, Converter>;
using ValueConverterTable = std::map<std::string, ValueConverter>;

void add_elementwise_ops(ConverterTable& table);
void add_shape_ops(ConverterTable& table);
void add_reduce_ops(ConverterTable& table);
void add_nn_ops(ConverterTable& table);
void add_indexing_ops(ConverterTable& table);
void add_resize_ops(ConverterTable& table);
void add_quantized_ops(ConverterTable& table);
void add_einsum_ops(ConverterTable& table);
void add_control_flow_ops(ConverterTable& table);
void add_recurrent_ops(ConverterTable& table);
void add_value_shaped_ops(ConverterTable& table);
void add_training_ops(ConverterTable& table);  // ai.onnx.preview.training
void add_grid_sample_ops(ConverterTable& table);
void add_spectral_ops(ConverterTable& table);
void add_linalg_ops(ConverterTable& table);
void add_roi_align_ops(ConverterTable& table);
// Ops refused with their reason (strings, random draws): not in supported_ops().
void add_refused_ops(ConverterTable& table);
// Ops over sequences and nones, and the control flow that may carry them.
void add_sequence_ops(ValueConverterTable& table);
void add_control_flow_value_ops(ValueConverterTable& table);

// ONNX ops keep their operands' dtype where hjit's (PyTorch's) promotion would widen it: an i32
// sum stays i32, an integer division stays integer.
inline Tensor as_dtype(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : astype(t, dtype); }
inline bool is_float(DType t) { return is_floating(t); }

// The product along axes (ONNX's ReduceProd, the mul reduction of scatters), through logarithms of
// the magnitudes, the sign from the parity of negative factors, zero where a factor is zero
// (exact for integers whose products fit an f64's 53 bits).
Tensor product_along(const Tensor& x, const std::vector<int>& axes, bool keepdims);
// MatMul's (Gemm's, with its transpositions) product where both operands are DequantizeLinear
// outputs of 8-bit values, a per tensor, b per tensor or per column: the integer product exact in
// i32 (hjit::int_matmul), converted to f32, and its scale. nullopt for any other operands.
std::optional<Factored> dequantized_product(const NodeContext& n, bool trans_a, bool trans_b);
// Conv's result where its input and weight are DequantizeLinear outputs of 8-bit values (the input
// per tensor, the weight per tensor or per output channel) and hjit::int_conv2d computes it: the
// integer convolution exact in i32 converted to f32, its scale, and the bias. nullopt otherwise.
std::optional<Factored> dequantized_conv(const NodeContext& n);
// The 2-d integer convolution sum((x - x_zero_point)(w - w_zero_point)) of a node with ONNX's conv
// attributes (symmetric explicit pads), exact in i32 on hjit::int_conv2d; nullopt where it does not
// apply (other ranks or types, asymmetric or automatic pads, a zero point per input channel).
std::optional<Tensor> integer_conv(const NodeContext& n, const Tensor& x, const Tensor& x_zero_point, const Tensor& w,
                                   const std::optional<Tensor>& w_zero_point);

// The rank-0 tensor of x's dtype holding v (a weak scalar could not carry an integer dtype).
inline Tensor scalar_like(const Tensor& x, double v) { return Tensor::scalar(v, x.dtype()); }

}  // namespace hjit::onnx_import
