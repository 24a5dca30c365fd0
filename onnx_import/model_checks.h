// What hjit checks in a model before ONNX's own library reads it. ONNX's version converter and
// shape inference trust the structure they are given: an opset-6 Add with one input crashes the
// converter, a Conv with strides [0, 0] divides by zero in shape inference, and both pass ONNX's
// checker (which runs after the converter anyway). So every node's arity is held to its schema and
// every attribute that divides or counts to be positive, everywhere a graph nests, before either
// runs; and a declared size must be a size.
#pragma once
#include <string>

#include "onnx/onnx_pb.h"

namespace hjit::onnx_import {

// ValueError, starting with `who` and naming the node (or the value) and what is wrong, for the
// first node whose inputs or outputs are more or fewer than its schema takes at the model's opset,
// whose strides, dilations, kernel_shape, blocksize or group is not positive, or whose declared
// shapes (graph inputs, outputs, value_info) have a negative dimension.
void check_structure(const ::onnx::ModelProto& model, const std::string& who);

}  // namespace hjit::onnx_import
