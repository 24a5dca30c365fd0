// hjit-bench --models DIR: real architectures exported by tools/models/reference_models.py (one
// folder per model, in the layout of ONNX's test data), each run by hjit with correctness against
// PyTorch's output and timed cold, warm and steady, beside tuned PyTorch and OpenCV's DNN module
// measured in the same sitting.
#pragma once
#include <hjit/tensor.h>

#include <string>
#include <vector>

namespace bench {

// The table: every folder of `dir` holding a model.onnx (or the ones named in `only`).
int model_rows(const std::string& self, const std::string& dir, const std::string& only, bool quick);

// A folder's test_data_set_0/<prefix>K.pb tensors, K = 0, 1, ... while they exist ("input_", "output_").
std::vector<hjit::Tensor> read_set(const std::string& folder, const std::string& prefix);

// The child processes the table runs: hjit (cold or warm, by the cache it is given) and OpenCV.
int model_child(const std::string& folder, bool quick);
int opencv_child(const std::string& folder, bool quick);

// --models DIR --int8 / --bf16: each model quantized (hjit::onnx::quantize) or loaded with
// LoadOptions::autocast = bf16, against its f32 self, both with frozen weights, timed alternately
// in a child process per model; kind is "int8" or "bf16".
int low_precision_model_rows(const std::string& self, const std::string& dir, const std::string& kind, const std::string& only, bool quick);
int low_precision_child(const std::string& folder, const std::string& kind, bool quick);

}  // namespace bench
