#include <algorithm>

#include "onnx_import/ops/ops.h"

namespace hjit::onnx_import {

namespace {

const ConverterTable& table() {
  static const ConverterTable t = [] {
    ConverterTable t;
    add_elementwise_ops(t);
    add_shape_ops(t);
    add_reduce_ops(t);
    add_nn_ops(t);
    add_indexing_ops(t);
    add_resize_ops(t);
    add_quantized_ops(t);
    add_einsum_ops(t);
    add_control_flow_ops(t);
    add_recurrent_ops(t);
    add_value_shaped_ops(t);
    add_grid_sample_ops(t);
    add_spectral_ops(t);
    add_linalg_ops(t);
    add_roi_align_ops(t);
    return t;
  }();
  return t;
}

const ConverterTable& refused_table() {
  static const ConverterTable t = [] {
    ConverterTable t;
    add_refused_ops(t);
    return t;
  }();
  return t;
}

const ValueConverterTable& value_table() {
  static const ValueConverterTable t = [] {
    ValueConverterTable t;
    add_sequence_ops(t);
    add_control_flow_value_ops(t);
    return t;
  }();
  return t;
}

}  // namespace

ValueConverter find_value_converter(const std::string& op_type) {
  auto it = value_table().find(op_type);
  return it == value_table().end() ? nullptr : it->second;
}

Converter find_converter(const std::string& op_type) {
  if (auto it = table().find(op_type); it != table().end()) return it->second;
  auto it = refused_table().find(op_type);
  return it == refused_table().end() ? nullptr : it->second;
}

Converter find_training_converter(const std::string& op_type) {
  static const ConverterTable t = [] {
    ConverterTable t;
    add_training_ops(t);
    return t;
  }();
  auto it = t.find(op_type);
  return it == t.end() ? nullptr : it->second;
}

std::vector<std::string> converted_ops() {
  std::vector<std::string> ops;
  for (const auto& [name, fn] : table()) ops.push_back(name);
  for (const auto& [name, fn] : value_table())
    if (!table().count(name)) ops.push_back(name);
  std::sort(ops.begin(), ops.end());
  return ops;
}

}  // namespace hjit::onnx_import
