// Reading a model: the protobuf, the weights in external data files beside it (never outside its
// folder), the opset range, then ONNX's own checker and shape inference.
#pragma once
#include <string>

#include "onnx/onnx_pb.h"

namespace hjit::onnx_import {

// The opsets of the default domain ONNX 1.12 defines, which the converters implement.
inline constexpr int64_t kMinOpset = 7;
inline constexpr int64_t kMaxOpset = 17;
// ONNX's preview training domain, whose optimizer ops (Adagrad, Adam, Momentum) hjit converts.
inline constexpr const char* kTrainingDomain = "ai.onnx.preview.training";
// Older models are brought to this opset by ONNX's version converter first.
inline constexpr int64_t kUpgradeOpset = 9;

// Parses, resolves external data against base_dir ("" : a model naming external data is an error),
// checks and infers shapes. Every failure is a ValueError starting with `who`; the bytes and the
// external data together past max_bytes (0: hjit's memory limit) a ResourceError.
::onnx::ModelProto read_model(const std::string& bytes, const std::string& base_dir, const std::string& who, int64_t max_bytes = 0);

// The opset of the default domain the model imports (ValueError outside [kMinOpset, kMaxOpset]).
int64_t default_opset(const ::onnx::ModelProto& model, const std::string& who);

// A regular file's bytes, refused (ResourceError) before reading when it holds more than max_bytes
// (0: hjit's memory limit).
std::string read_file(const std::string& path, const std::string& what, int64_t max_bytes = 0);
// max_bytes, or hjit's memory limit when that is less or max_bytes is 0.
int64_t byte_limit(int64_t max_bytes);

}  // namespace hjit::onnx_import
