#include "tests/onnx_models.h"

#include <hjit/onnx.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "tests/support.h"

namespace fs = std::filesystem;

namespace test::onnx_model {

::onnx::TensorProto proto_of(const std::string& name, const hjit::Tensor& t) {
  const std::string path = (fs::path(test::scratch_dir("onnx_proto")) / "t.pb").string();
  hjit::onnx::save_tensor(path, t, name);
  ::onnx::TensorProto p;
  std::ifstream in(path, std::ios::binary);
  if (!p.ParseFromIstream(&in)) throw std::runtime_error("cannot read back " + path);
  return p;
}

void add_value(::onnx::ValueInfoProto* v, const std::string& name, int elem, const std::vector<std::string>& dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (const std::string& d : dims) {
    auto* dim = shape->add_dim();
    if (!d.empty() && (std::isdigit(static_cast<unsigned char>(d[0])) || d[0] == '-')) dim->set_dim_value(std::stoll(d));
    else dim->set_dim_param(d);
  }
}

::onnx::NodeProto* add_node(::onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& in,
                            const std::vector<std::string>& out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(op + "_" + (out.empty() ? std::string("none") : out[0]));
  for (const auto& s : in) n->add_input(s);
  for (const auto& s : out) n->add_output(s);
  return n;
}

namespace {
::onnx::AttributeProto* attribute(::onnx::NodeProto* n, const std::string& name, ::onnx::AttributeProto::AttributeType type) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(type);
  return a;
}
}  // namespace

void add_ints(::onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = attribute(n, name, ::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void add_int(::onnx::NodeProto* n, const std::string& name, int64_t v) { attribute(n, name, ::onnx::AttributeProto::INT)->set_i(v); }
void add_float(::onnx::NodeProto* n, const std::string& name, float v) { attribute(n, name, ::onnx::AttributeProto::FLOAT)->set_f(v); }
void add_tensor(::onnx::NodeProto* n, const std::string& name, const hjit::Tensor& v) {
  *attribute(n, name, ::onnx::AttributeProto::TENSOR)->mutable_t() = proto_of(name, v);
}
void add_string(::onnx::NodeProto* n, const std::string& name, const std::string& v) {
  attribute(n, name, ::onnx::AttributeProto::STRING)->set_s(v);
}
void add_graph(::onnx::NodeProto* n, const std::string& name, const ::onnx::GraphProto& g) {
  *attribute(n, name, ::onnx::AttributeProto::GRAPH)->mutable_g() = g;
}

::onnx::ModelProto empty_model(const std::string& name, int64_t opset) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  m.mutable_graph()->set_name(name);
  return m;
}

::onnx::ModelProto small_cnn(const std::string& batch) {
  ::onnx::ModelProto m = empty_model("small_cnn");
  m.set_producer_name("hjit-test");
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", ::onnx::TensorProto::FLOAT, {batch, "3", "8", "8"});
  add_value(g->add_output(), "y", ::onnx::TensorProto::FLOAT, {batch, "5"});
  *g->add_initializer() = proto_of("w", test::random({4, 3, 3, 3}, hjit::DType::F32, 1) * 0.3);
  *g->add_initializer() = proto_of("b", test::random({4}, hjit::DType::F32, 2));
  *g->add_initializer() = proto_of("fc", test::random({5, 4}, hjit::DType::F32, 3));
  *g->add_initializer() = proto_of("fcb", test::random({5}, hjit::DType::F32, 4));
  auto* conv = add_node(g, "Conv", {"x", "w", "b"}, {"c"});
  add_ints(conv, "pads", {1, 1, 1, 1});
  add_ints(conv, "kernel_shape", {3, 3});
  add_node(g, "Relu", {"c"}, {"r"});
  add_node(g, "GlobalAveragePool", {"r"}, {"p"});
  add_node(g, "Flatten", {"p"}, {"f"});
  add_int(add_node(g, "Gemm", {"f", "fc", "fcb"}, {"y"}), "transB", 1);
  return m;
}

std::string write_model(const ::onnx::ModelProto& m, const std::string& dir_name) {
  const fs::path dir = fs::path(test::scratch_dir(dir_name));
  const std::string path = (dir / "model.onnx").string();
  std::ofstream out(path, std::ios::binary);
  if (!m.SerializeToOstream(&out)) throw std::runtime_error("cannot write " + path);
  return path;
}

}  // namespace test::onnx_model
