// ONNX's TensorProto <-> hjit::Tensor: every numeric element type, raw or typed fields, checked
// against the declared shape (a tensor whose data does not fill its shape is a ValueError).
#pragma once
#include <string>

#include <hjit/tensor.h>

#include "onnx/onnx_pb.h"

namespace hjit::onnx_import {

// The hjit dtype of an ONNX TensorProto element type; ValueError (naming `what`) for strings,
// complex numbers and unknown codes.
DType dtype_from_onnx(int onnx_type, const std::string& what);
int onnx_type_of(DType dtype);

// The tensor's values; external data must have been read into raw_data already (model_file.h).
Tensor to_tensor(const ::onnx::TensorProto& proto, const std::string& what);
::onnx::TensorProto to_proto(const Tensor& tensor, const std::string& name);

}  // namespace hjit::onnx_import
