// ONNX models built with ONNX's protobuf classes, for the tests that load models (test_onnx) and
// the ones that attack the loader (test_hostile): values, nodes, attributes and whole models.
#pragma once
#include <string>
#include <vector>

#include <hjit/hjit.h>

#include "onnx/onnx-data_pb.h"
#include "onnx/onnx_pb.h"

namespace test::onnx_model {

// A tensor as a file holds it (written by hjit::onnx::save_tensor, read back by protobuf).
::onnx::TensorProto proto_of(const std::string& name, const hjit::Tensor& t);
// An input or output of tensor type; a dim that starts with a digit or '-' is a size, else a name.
void add_value(::onnx::ValueInfoProto* v, const std::string& name, int elem, const std::vector<std::string>& dims);
::onnx::NodeProto* add_node(::onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& in,
                            const std::vector<std::string>& out);
void add_ints(::onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v);
void add_int(::onnx::NodeProto* n, const std::string& name, int64_t v);
void add_float(::onnx::NodeProto* n, const std::string& name, float v);
void add_tensor(::onnx::NodeProto* n, const std::string& name, const hjit::Tensor& v);  // (a Constant's value)
void add_string(::onnx::NodeProto* n, const std::string& name, const std::string& v);
void add_graph(::onnx::NodeProto* n, const std::string& name, const ::onnx::GraphProto& g);
// A model of opset 13 (default domain) whose graph, named `name`, the caller fills.
::onnx::ModelProto empty_model(const std::string& name, int64_t opset = 13);
// A small CNN: Conv(3x3, pad 1) + Relu + GlobalAveragePool + Flatten + Gemm, batch named `batch`.
::onnx::ModelProto small_cnn(const std::string& batch = "N");
// Written as dir/model.onnx under a scratch directory named dir_name: the path.
std::string write_model(const ::onnx::ModelProto& m, const std::string& dir_name);

}  // namespace test::onnx_model
