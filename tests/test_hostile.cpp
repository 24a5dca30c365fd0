// The hostile-input suite: models and programs written as an attacker would write them (crafted
// structures, attributes and sizes that make no sense, sizes that disagree, indices out of range,
// huge declared sizes, loops that never end, files that are not files). Each case runs in a child
// process under a time limit, through every door: a model through Model::read + info(), an eager
// run, onnx::load + one compiled call, and the hjit-onnx tool's `info` and `run`. Every door must
// end in a right answer or a typed hjit::Error (hjit-onnx: exit status 0 or 1): no signal, no hang,
// and a peak memory under twice the file's size + 256 MB.
#include <hjit/io.h>
#include <hjit/onnx.h>

#include <cxxabi.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <random>

#include "support/child_process.h"
#include "tests/onnx_models.h"
#include "tests/support.h"

namespace fs = std::filesystem;
using hjit::DType;
using hjit::Tensor;
using namespace test::onnx_model;

namespace {

constexpr int F32 = ::onnx::TensorProto::FLOAT, I64 = ::onnx::TensorProto::INT64, BOOL = ::onnx::TensorProto::BOOL;
constexpr double kTimeLimitS = 30;  // a case's door; the slowest right answer takes a few seconds
constexpr int64_t kSlackBytes = int64_t(256) << 20;

Tensor i64s(std::vector<int64_t> v) {
  const int64_t n = int64_t(v.size());
  return Tensor::from_vector(v, {n});
}

// One graph, built a node at a time: inputs declared, constants as initializers, outputs of any
// size.
struct Net {
  ::onnx::ModelProto model;
  ::onnx::GraphProto* g;
  explicit Net(int64_t opset = 13) : model(empty_model("hostile", opset)), g(model.mutable_graph()) {}
  Net& input(const std::string& name, const std::vector<std::string>& dims, int elem = F32) {
    add_value(g->add_input(), name, elem, dims);
    return *this;
  }
  Net& constant(const std::string& name, const Tensor& t) {
    *g->add_initializer() = proto_of(name, t);
    return *this;
  }
  // Of any size: each dimension a name of its own (ONNX's checker wants the rank).
  Net& output(const std::string& name, int rank, int elem = F32) {
    std::vector<std::string> dims;
    for (int k = 0; k < rank; ++k) dims.push_back(name + "_" + std::to_string(k));
    add_value(g->add_output(), name, elem, dims);
    return *this;
  }
  ::onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out = {"y"}) {
    return add_node(g, op, in, out);
  }
  std::string bytes() const { return model.SerializeAsString(); }
};

// A node of `op` on x f32[1,3,8,8] (and a weight for Conv) with attributes set by `attrs`.
std::string image_op(const std::string& op, const std::function<void(::onnx::NodeProto*)>& attrs) {
  Net n;
  n.input("x", {"1", "3", "8", "8"}).output("y", 4);
  std::vector<std::string> in{"x"};
  if (op == "Conv" || op == "ConvTranspose") {
    n.constant("w", test::random({3, 3, 3, 3}, DType::F32, 1));
    in.push_back("w");
  }
  attrs(n.node(op, in));
  return n.bytes();
}

// A Loop of `trips` (absent when < 0) whose body hands back a constant true condition (or its
// own when pass_through), carries v and, with scan, stacks v at every trip.
std::string loop(int64_t trips, bool pass_through, bool scan) {
  Net n(13);
  n.input("v", {"2"}).output("out", 1);
  if (scan) n.output("stacked", 2);
  if (trips >= 0) n.constant("M", Tensor::scalar(double(trips), DType::I64));
  n.constant("go", Tensor::scalar(1, DType::Bool));
  ::onnx::GraphProto body;
  body.set_name("body");
  add_value(body.add_input(), "i", I64, {});
  add_value(body.add_input(), "c", BOOL, {});
  add_value(body.add_input(), "v_in", F32, {"2"});
  add_value(body.add_output(), "c_out", BOOL, {});
  add_value(body.add_output(), "v_out", F32, {"2"});
  if (scan) add_value(body.add_output(), "s", F32, {"2"});
  if (pass_through) add_node(&body, "Identity", {"c"}, {"c_out"});
  else add_tensor(add_node(&body, "Constant", {}, {"c_out"}), "value", Tensor::scalar(1, DType::Bool));
  add_node(&body, "Identity", {"v_in"}, {"v_out"});
  if (scan) add_node(&body, "Identity", {"v_in"}, {"s"});
  std::vector<std::string> outs{"out"};
  if (scan) outs.push_back("stacked");
  add_graph(n.node("Loop", {trips >= 0 ? "M" : "", "go", "v"}, outs), "body", body);
  return n.bytes();
}

// A model whose one node reads constants only (the eager run has no inputs to make).
std::string constants_op(const std::string& op, const std::vector<Tensor>& constants, int rank = 1, int outputs = 1,
                         const std::function<void(::onnx::NodeProto*)>& attrs = {}, int64_t opset = 13) {
  Net n(opset);
  std::vector<std::string> in, out;
  for (size_t k = 0; k < constants.size(); ++k) {
    n.constant("c" + std::to_string(k), constants[k]);
    in.push_back("c" + std::to_string(k));
  }
  for (int k = 0; k < outputs; ++k) {
    out.push_back("y" + std::to_string(k));
    n.output(out.back(), rank);
  }
  auto* node = n.node(op, in, out);
  if (attrs) attrs(node);
  return n.bytes();
}

// x f32[dims] through `op` with constants after it.
std::string data_op(const std::string& op, const std::vector<std::string>& dims, const std::vector<Tensor>& constants,
                    const std::function<void(::onnx::NodeProto*)>& attrs = {}, int64_t opset = 13, int rank = -1) {
  Net n(opset);
  n.input("x", dims).output("y", rank < 0 ? int(dims.size()) : rank);
  std::vector<std::string> in{"x"};
  for (size_t k = 0; k < constants.size(); ++k) {
    n.constant("c" + std::to_string(k), constants[k]);
    in.push_back("c" + std::to_string(k));
  }
  auto* node = n.node(op, in);
  if (attrs) attrs(node);
  return n.bytes();
}

std::string nested_ifs(int depth) {
  ::onnx::GraphProto leaf;  // the else branch at every level: x itself
  leaf.set_name("leaf");
  add_value(leaf.add_output(), "x", F32, {"2"});
  ::onnx::GraphProto inner = leaf;
  for (int d = 0; d < depth; ++d) {
    ::onnx::GraphProto outer;
    outer.set_name("level" + std::to_string(d));
    add_value(outer.add_output(), "r" + std::to_string(d), F32, {"2"});
    auto* n = add_node(&outer, "If", {"c"}, {"r" + std::to_string(d)});
    add_graph(n, "then_branch", inner);
    add_graph(n, "else_branch", leaf);
    inner = std::move(outer);
  }
  Net n;
  n.input("x", {"2"}).constant("c", Tensor::scalar(1, DType::Bool)).output("y", 1);
  auto* top = n.node("If", {"c"}, {"y"});
  add_graph(top, "then_branch", inner);
  add_graph(top, "else_branch", leaf);
  return n.bytes();
}

// The file a model's initializer would hold, declaring `dims` with `values` present.
std::string declared_initializer(const std::vector<int64_t>& dims, int values, bool raw) {
  ::onnx::TensorProto big;
  big.set_name("w");
  big.set_data_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : dims) big.add_dims(d);
  if (raw) big.set_raw_data(std::string(size_t(values) * 4, '\0'));
  else
    for (int k = 0; k < values; ++k) big.add_float_data(1.0f);
  Net n;
  *n.g->add_initializer() = big;
  n.output("y", int(dims.size())).node("Relu", {"w"});
  return n.bytes();
}

constexpr int64_t kAbsent = std::numeric_limits<int64_t>::min();

std::string external_data(const std::string& location, int64_t offset, int64_t length) {
  ::onnx::TensorProto w;
  w.set_name("w");
  w.set_data_type(::onnx::TensorProto::FLOAT);
  w.add_dims(4);
  w.set_data_location(::onnx::TensorProto::EXTERNAL);
  auto entry = [&](const std::string& key, const std::string& value) {
    auto* e = w.add_external_data();
    e->set_key(key);
    e->set_value(value);
  };
  entry("location", location);
  if (offset != kAbsent) entry("offset", std::to_string(offset));
  if (length != kAbsent) entry("length", std::to_string(length));
  Net n;
  *n.g->add_initializer() = w;
  n.output("y", 1).node("Relu", {"w"});
  return n.bytes();
}

struct ModelCase {
  std::string name;
  std::string bytes;
  bool refused = true;  // the eager run must raise (else it may answer)
};

std::vector<ModelCase> model_cases() {
  using Node = ::onnx::NodeProto*;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor s23 = test::random({2, 3}, DType::F32, 3);
  std::vector<ModelCase> c;
  // Files that are not models.
  c.push_back({"empty file", ""});
  c.push_back({"text", "this is not a model\n"});
  c.push_back({"random bytes", [] {
                 std::string b(100000, '\0');
                 uint64_t s = 5;
                 for (char& ch : b) ch = char((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 56);
                 return b;
               }()});
  c.push_back({"truncated model", small_cnn("1").SerializeAsString().substr(0, 300)});
  c.push_back({"nested subgraphs 200 deep", nested_ifs(200)});
  c.push_back({"If nested 20 deep (legal)", nested_ifs(20), false});
  // Structures ONNX's converter and shape inference crashed on, and more arities.
  c.push_back({"opset 6 Add with one input", [] {
                 Net n(6);
                 n.input("a", {"2"}).output("y", 1).node("Add", {"a"});
                 return n.bytes();
               }()});
  c.push_back({"opset 1 Mul with none", [] {
                 Net n(1);
                 n.output("y", 1).node("Mul", {});
                 return n.bytes();
               }()});
  c.push_back({"Relu with three inputs", data_op("Relu", {"2"}, {s23, s23})});
  c.push_back({"Gemm with one input", data_op("Gemm", {"2", "3"}, {})});
  c.push_back({"Conv with no weight", data_op("Conv", {"1", "3", "8", "8"}, {})});
  c.push_back({"node with no outputs", [] {
                 Net n;
                 n.input("x", {"2"}).output("x", 1).node("Relu", {"x"}, {});
                 return n.bytes();
               }()});
  c.push_back({"two nodes write one value", [] {
                 Net n;
                 n.input("x", {"2"}).output("y", 1);
                 n.node("Relu", {"x"});
                 n.node("Neg", {"x"});
                 return n.bytes();
               }()});
  c.push_back({"a cycle", [] {
                 Net n;
                 n.input("x", {"2"}).output("y", 1);
                 n.node("Add", {"x", "z"}, {"y"});
                 n.node("Relu", {"y"}, {"z"});
                 return n.bytes();
               }()});
  c.push_back({"reads an undefined value", data_op("Add", {"2"}, {}, [](Node n) { n->add_input("nowhere"); })});
  c.push_back({"opset 1000", data_op("Relu", {"2"}, {}, {}, 1000)});
  c.push_back({"opset 0", data_op("Relu", {"2"}, {}, {}, 0)});
  c.push_back({"opset -3", data_op("Relu", {"2"}, {}, {}, -3)});
  c.push_back({"unknown op", data_op("NoSuchOp", {"2"}, {})});
  c.push_back({"unknown domain", [] {
                 Net n;
                 n.input("x", {"2"}).output("y", 1).node("Relu", {"x"})->set_domain("com.example.evil");
                 return n.bytes();
               }()});
  // Attributes that make no sense.
  for (const char* op : {"Conv", "MaxPool", "AveragePool"}) {
    c.push_back({std::string(op) + " strides 0", image_op(op, [](Node n) {
                   add_ints(n, "kernel_shape", {3, 3});
                   add_ints(n, "strides", {0, 0});
                 })});
    c.push_back({std::string(op) + " kernel -3", image_op(op, [](Node n) { add_ints(n, "kernel_shape", {-3, 3}); })});
  }
  c.push_back({"Conv dilations 0", image_op("Conv", [](Node n) { add_ints(n, "dilations", {0, 0}); })});
  c.push_back({"Conv strides 2^62 (one output row)", image_op("Conv", [](Node n) { add_ints(n, "strides", {int64_t(1) << 62, 1}); }), false});
  c.push_back({"Conv pads -1e12", image_op("Conv", [](Node n) { add_ints(n, "pads", {-1'000'000'000'000, 0, 0, 0}); })});
  c.push_back({"Conv pads 1e9", image_op("Conv", [](Node n) { add_ints(n, "pads", {1'000'000'000, 1'000'000'000, 0, 0}); })});
  c.push_back({"Conv group 0", image_op("Conv", [](Node n) { add_int(n, "group", 0); })});
  c.push_back({"Conv group -1", image_op("Conv", [](Node n) { add_int(n, "group", -1); })});
  c.push_back({"Conv group 2 of 3 channels", image_op("Conv", [](Node n) { add_int(n, "group", 2); })});
  c.push_back({"Conv strides of the wrong rank", image_op("Conv", [](Node n) { add_ints(n, "strides", {1, 1, 1, 1, 1}); })});
  c.push_back({"Conv strides as a float", image_op("Conv", [](Node n) { add_float(n, "strides", 2.0f); })});
  c.push_back({"DepthToSpace blocksize 0", image_op("DepthToSpace", [](Node n) { add_int(n, "blocksize", 0); })});
  c.push_back({"SpaceToDepth blocksize -2", image_op("SpaceToDepth", [](Node n) { add_int(n, "blocksize", -2); })});
  c.push_back({"LRN size 0", image_op("LRN", [](Node n) { add_int(n, "size", 0); })});
  c.push_back({"Softmax axis 9", data_op("Softmax", {"2", "3"}, {}, [](Node n) { add_int(n, "axis", 9); })});
  c.push_back({"Concat axis -7", data_op("Concat", {"2", "3"}, {s23}, [](Node n) { add_int(n, "axis", -7); })});
  c.push_back({"Transpose perm repeated", data_op("Transpose", {"2", "3"}, {}, [](Node n) { add_ints(n, "perm", {0, 0}); })});
  c.push_back({"Transpose perm out of range", data_op("Transpose", {"2", "3"}, {}, [](Node n) { add_ints(n, "perm", {1, 5}); })});
  c.push_back({"ReduceSum axes out of range", data_op("ReduceSum", {"2", "3"}, {i64s({4})})});
  c.push_back({"Flatten axis 5", data_op("Flatten", {"2", "3"}, {}, [](Node n) { add_int(n, "axis", 5); })});
  c.push_back({"Cast to type 999", data_op("Cast", {"2"}, {}, [](Node n) { add_int(n, "to", 999); })});
  c.push_back({"Einsum malformed", data_op("Einsum", {"2", "3"}, {}, [](Node n) { add_string(n, "equation", "ij,,->->k"); }, 13)});
  c.push_back({"TopK k 1e12", data_op("TopK", {"2", "3"}, {i64s({1'000'000'000'000})})});
  c.push_back({"TopK k -1", data_op("TopK", {"2", "3"}, {i64s({-1})})});
  c.push_back({"Slice step 0", data_op("Slice", {"6"}, {i64s({0}), i64s({6}), i64s({0}), i64s({0})})});
  c.push_back({"Squeeze a dim of 3", data_op("Squeeze", {"2", "3"}, {i64s({1})}, {}, 13, 1)});
  // Values that make no sense.
  c.push_back({"Range to inf", constants_op("Range", {Tensor::scalar(0.0), Tensor::scalar(inf), Tensor::scalar(1.0)})});
  c.push_back({"Range to 1e30", constants_op("Range", {Tensor::scalar(0.0), Tensor::scalar(1e30), Tensor::scalar(1.0)})});
  c.push_back({"Range delta NaN", constants_op("Range", {Tensor::scalar(0.0), Tensor::scalar(4.0), Tensor::scalar(nan)})});
  c.push_back({"Range delta 0", constants_op("Range", {Tensor::scalar(0.0), Tensor::scalar(4.0), Tensor::scalar(0.0)})});
  c.push_back({"Split sizes 1e12 and -1e12+4", constants_op("Split", {Tensor::zeros({4}), i64s({1'000'000'000'000, -1'000'000'000'000 + 4})}, 1, 2)});
  c.push_back({"Split sizes that do not add up", constants_op("Split", {Tensor::zeros({4}), i64s({1, 1})}, 1, 2)});
  c.push_back({"declared dim -5", data_op("Relu", {"-5"}, {})});
  c.push_back({"Reshape to two -1", data_op("Reshape", {"2", "3"}, {i64s({-1, -1})})});
  c.push_back({"Reshape to 7 elements", data_op("Reshape", {"2", "3"}, {i64s({7})}, {}, 13, 1)});
  c.push_back({"Reshape to 2^62 x 4", data_op("Reshape", {"2", "3"}, {i64s({int64_t(1) << 62, 4})})});
  // Sizes too large to allocate, declared or computed.
  c.push_back({"2^30 floats declared, one present", declared_initializer({int64_t(1) << 30}, 1, false)});
  c.push_back({"2^31 floats declared, one present", declared_initializer({int64_t(1) << 31}, 1, false)});
  c.push_back({"2^40 x 2^40 declared", declared_initializer({int64_t(1) << 40, int64_t(1) << 40}, 1, true)});
  c.push_back({"negative dim declared", declared_initializer({-4}, 4, true)});
  c.push_back({"raw data of the wrong size", declared_initializer({4}, 3, true)});
  c.push_back({"external data outside the folder", external_data("../../../../etc/passwd", kAbsent, kAbsent)});
  c.push_back({"external data absolute path", external_data("/etc/passwd", kAbsent, kAbsent)});
  c.push_back({"external data past the end", external_data("weights.bin", 1'000'000, 16)});
  c.push_back({"external data length 2^60", external_data("weights.bin", 0, int64_t(1) << 60)});
  c.push_back({"external data offset -8", external_data("weights.bin", -8, 16)});
  c.push_back({"Expand to [1e12]", data_op("Expand", {"1"}, {i64s({1'000'000'000'000})})});
  c.push_back({"Expand to [1e6, 1e6, 1e6]", data_op("Expand", {"1"}, {i64s({1'000'000, 1'000'000, 1'000'000})}, {}, 13, 3)});
  c.push_back({"ConstantOfShape [2^20, 2^20]", constants_op("ConstantOfShape", {i64s({1 << 20, 1 << 20})}, 2)});
  c.push_back({"ConstantOfShape [-3]", constants_op("ConstantOfShape", {i64s({-3})})});
  c.push_back({"Tile 1e12 times", data_op("Tile", {"2"}, {i64s({1'000'000'000'000})})});
  c.push_back({"Pad edge by 1e9", data_op("Pad", {"1", "3", "4", "4"}, {i64s({0, 0, 1'000'000'000, 1'000'000'000, 0, 0, 1'000'000'000, 1'000'000'000})},
                                          [](Node n) { add_string(n, "mode", "edge"); })});
  c.push_back({"Pad by -1e9", data_op("Pad", {"1", "3", "4", "4"}, {i64s({0, 0, -1'000'000'000, 0, 0, 0, 0, 0})})});
  c.push_back({"Resize by 1e9", data_op("Resize", {"1", "3", "4", "4"}, {Tensor::zeros({0}), Tensor::from_vector(std::vector<float>{1, 1, 1e9f, 1e9f}, {4})})});
  c.push_back({"Resize to sizes 2^40", data_op("Resize", {"1", "3", "4", "4"}, {Tensor::zeros({0}), Tensor::zeros({0}), i64s({1, 3, int64_t(1) << 40, 4})})});
  c.push_back({"Resize by -2", data_op("Resize", {"1", "3", "4", "4"}, {Tensor::zeros({0}), Tensor::from_vector(std::vector<float>{1, 1, -2, 2}, {4})})});
  c.push_back({"OneHot depth 1e12", constants_op("OneHot", {i64s({1, 2}), i64s({1'000'000'000'000}), Tensor::from_vector(std::vector<float>{0, 1}, {2})}, 2)});
  c.push_back({"OneHot depth -4", constants_op("OneHot", {i64s({1, 2}), i64s({-4}), Tensor::from_vector(std::vector<float>{0, 1}, {2})}, 2)});
  c.push_back({"Loop of 1e12 trips with a scan output", loop(1'000'000'000'000, true, true)});
  c.push_back({"Loop of 1e12 trips, condition a Constant", loop(1'000'000'000'000, false, false)});
  c.push_back({"Loop without end, condition a Constant", loop(-1, false, false)});
  c.push_back({"Loop of 1e12 trips, condition handed back", loop(1'000'000'000'000, true, false)});
  c.push_back({"Loop of 5 trips (legal)", loop(5, true, true), false});
  // Indices out of range.
  c.push_back({"Gather index 7 of 5", data_op("Gather", {"5", "3"}, {i64s({7})})});
  c.push_back({"Gather index -9 of 5", data_op("Gather", {"5", "3"}, {i64s({-9})})});
  c.push_back({"Gather index -5 of 5 (legal)", data_op("Gather", {"5", "3"}, {i64s({-5})}), false});
  c.push_back({"GatherElements index 3 of 3", data_op("GatherElements", {"2", "3"}, {Tensor::from_vector(std::vector<int64_t>{0, 3}, {2, 1})},
                                                      [](Node n) { add_int(n, "axis", 1); })});
  c.push_back({"GatherND index 2^40", data_op("GatherND", {"2", "3"}, {Tensor::from_vector(std::vector<int64_t>{int64_t(1) << 40}, {1, 1})})});
  c.push_back({"ScatterND index 9", data_op("ScatterND", {"4"}, {Tensor::from_vector(std::vector<int64_t>{9}, {1, 1}), Tensor::ones({1})})});
  c.push_back({"ScatterElements index -4 of 3", data_op("ScatterElements", {"3"}, {i64s({-4}), Tensor::ones({1})})});
  c.push_back({"Gather index 2^62", data_op("Gather", {"5", "3"}, {i64s({int64_t(1) << 62})})});
  // Found by the structure-aware fuzzing below.
  c.push_back({"opset 6 Expand without outputs (the version converter crashed)", [] {
                 Net n(6);
                 n.input("x", {"1"}).constant("s", i64s({2, 3})).output("y", 2).node("Expand", {"x", "s"}, {});
                 return n.bytes();
               }()});
  c.push_back({"MaxPool kernel 2^62 (counted its taps)", image_op("MaxPool", [](Node n) { add_ints(n, "kernel_shape", {int64_t(1) << 62, 2}); })});
  c.push_back({"Pad constant_value with no element", data_op("Pad", {"2"}, {i64s({1, 1}), Tensor::zeros({0})})});
  c.push_back({"Range from an empty start", constants_op("Range", {Tensor::zeros({0}), Tensor::scalar(4.0), Tensor::scalar(1.0)})});
  return c;
}

// What a door ended with, reported by the child through a file.
struct Report {
  bool ran = false;  // a report was written
  std::string kind;  // "" a right answer, else the error's class
  std::string message;
  int64_t grew_bytes = 0;  // peak resident memory above what the child had when the case began
};

int64_t status_kb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  return 0;
}

std::string class_name(const std::exception& e) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status), std::free);
  return status == 0 ? name.get() : typeid(e).name();
}

// Runs body in a child: its peak memory counted from where it began (the parent's pages it
// shares are not the case's), its end and its report.
std::pair<hjit::ChildEnd, Report> in_child(const std::string& report_path, const std::function<void()>& body) {
  fs::remove(report_path);
  hjit::ChildProcess child = hjit::ChildProcess::fork([&] {
    const int64_t before = status_kb("VmRSS");
    { std::ofstream("/proc/self/clear_refs") << "5"; }  // the high-water mark starts again here
    std::string kind, message;
    try {
      body();
    } catch (const hjit::Error& e) {
      kind = class_name(e), message = e.what();
    } catch (const std::exception& e) {
      kind = "untyped " + class_name(e), message = e.what();
    }
    std::ofstream out(report_path);
    out << (status_kb("VmHWM") - before) * 1024 << "\n" << kind << "\n" << message;
  });
  const hjit::ChildEnd end = child.wait(kTimeLimitS);
  Report r;
  std::ifstream in(report_path);
  if (std::string line; std::getline(in, line)) {
    r.ran = true;
    r.grew_bytes = std::stoll(line);
    std::getline(in, r.kind);
    r.message.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return {end, r};
}

// A typed error or an answer; under the time and memory limits.
void check_door(const std::string& door, const hjit::ChildEnd& end, const Report& r, int64_t file_bytes, bool refused) {
  INFO(door << ": " << end.str() << "; " << (r.kind.empty() ? "an answer" : r.kind) << " " << r.message);
  CHECK(end.ok());
  CHECK(r.ran);
  CHECK(r.kind.rfind("untyped", 0) == std::string::npos);
  if (refused && door == "run") CHECK(!r.kind.empty());
#if !HJIT_SANITIZED  // a sanitizer's shadow memory and quarantine are not the case's
  CHECK(r.grew_bytes < 2 * file_bytes + kSlackBytes);
#endif
}

std::vector<Tensor> zeros_for(const std::vector<hjit::TensorType>& types) {
  std::vector<Tensor> in;
  for (const hjit::TensorType& t : types) in.push_back(Tensor::zeros(t.shape, t.dtype));
  return in;
}

std::string tool_path() { return HJIT_ONNX_TOOL; }

}  // namespace

TEST_CASE("hostile models: every door gives a typed error or an answer, in time and in bounded memory") {
  const std::vector<ModelCase> cases = model_cases();
  // A sanitizer's build (sanitize-ci) runs every case through the in-process doors, and the
  // compiled door and the tool's every fourth (HJIT_TEST_FULL=1: all of them): instrumented
  // compiles and tool starts take seconds each.
  const size_t every = HJIT_SANITIZED && !hjit::setting::flag(hjit::setting::Id::TestFull) ? 4 : 1;
  CHECK(cases.size() >= 60);
  const fs::path dir = test::scratch_dir("hostile_models");
  test::write_file((dir / "weights.bin").string(), std::string(64, '\0'));
  int refused = 0, answered = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    const ModelCase& mc = cases[k];
    CAPTURE(mc.name);
    const std::string path = (dir / ("case" + std::to_string(k) + ".onnx")).string();
    test::write_file(path, mc.bytes);
    const std::string report = (dir / "report.txt").string();
    const int64_t size = int64_t(mc.bytes.size());
    auto [e1, info] = in_child(report, [&] { (void)hjit::onnx::Model::read(path).info().str(); });
    check_door("info", e1, info, size, false);
    auto [e2, run] = in_child(report, [&] {
      const hjit::onnx::Model m = hjit::onnx::Model::read(path);
      (void)m(zeros_for(m.input_types()));
    });
    check_door("run", e2, run, size, mc.refused);
    (run.kind.empty() ? answered : refused) += 1;
    if (k % every != 0) continue;
    if (info.kind.empty()) {  // the compiled door reads the file as info does
      auto [e3, load] = in_child(report, [&] {
        const hjit::Module m = hjit::onnx::load(path);
        (void)m.call(zeros_for(m.input_types()));
      });
      check_door("load", e3, load, size, false);
    }
    for (const char* command : {"info", "run"}) {
      if (!info.kind.empty() && std::string(command) == "run") continue;
      hjit::ChildProcess::Program program;
      program.argv = {tool_path(), command, path};
      program.capture_output = true;
      hjit::ChildProcess tool = hjit::ChildProcess::spawn(program);
      const hjit::ChildEnd end = tool.wait(kTimeLimitS);
      INFO("hjit-onnx " << command << ": " << end.str() << "\n" << tool.output());
      CHECK((end.how == hjit::ChildEnd::Exited && end.code <= 1));
#if !HJIT_SANITIZED
      CHECK(end.max_rss_kb * 1024 < 2 * size + kSlackBytes);
#endif
    }
  }
  MESSAGE(cases.size() << " hostile models: " << refused << " refused by the eager run, " << answered << " answered");
}

namespace {

struct ProgramCase {
  std::string name;
  std::function<void()> body;  // in the child: throws a typed error, or answers (and checks it)
};

Tensor mm(const Tensor& a, const Tensor& b) { return hjit::matmul(a, b); }

// The answer a program gives must be eager's: a wrong one is thrown as an untyped error.
void expect_same(const Tensor& got, const Tensor& want) {
  if (!test::compare(got, want, test::tolerance(want.dtype())).empty()) throw std::runtime_error("a wrong answer: " + test::compare(got, want, 1e-5));
}

std::vector<ProgramCase> program_cases(const fs::path& dir) {
  std::vector<ProgramCase> c;
  const Tensor x = test::random({5, 3}, DType::F32, 1);
  auto contract = [](int64_t k, int64_t j) {
    return [k, j] {
      hjit::ModuleOptions o;
      o.dynamic_dims = {{0, 1}, {1, 0}};
      const hjit::Module m = hjit::make_module("contract", o, hjit::SaveOptions{}, mm, Tensor::randn({2, 8}, 1), Tensor::randn({8, 5}, 2));
      (void)m(Tensor::zeros({2, k}), Tensor::zeros({j, 5}));
    };
  };
  c.push_back({"module matmul K=3, J=4", contract(3, 4)});
  c.push_back({"module matmul K=10^7, J=3", contract(10'000'000, 3)});
  c.push_back({"jit matmul K=100, J=3", [] {
                 hjit::JitOptions o;
                 o.dynamic_dims = {{0, 1}, {1, 0}};
                 auto f = hjit::jit(mm, o);
                 (void)f(Tensor::randn({2, 8}, 1), Tensor::randn({8, 5}, 2));
                 (void)f(Tensor::zeros({2, 100}), Tensor::zeros({3, 5}));
               }});
  for (int64_t k : {int64_t(7), int64_t(-9), int64_t(1) << 40})
    c.push_back({"jit take index " + std::to_string(k), [x, k] {
                   (void)hjit::jit([k](const Tensor& t) { return hjit::take(t, i64s({k}), 0) * 2.0; })(x);
                 }});
  c.push_back({"jit take index -5 (legal)", [x] {
                 expect_same(hjit::jit([](const Tensor& t) { return hjit::take(t, i64s({-5}), 0); })(x), hjit::take(x, i64s({0}), 0));
               }});
  c.push_back({"jit embedding of index tensor 100", [x] {
                 (void)hjit::jit([](const Tensor& t, const Tensor& ids) { return hjit::embedding(t, ids); })(x, i64s({1, 100}));
               }});
  c.push_back({"module embedding, indices random past the end", [x] {
                 const hjit::Module m = hjit::make_module("embed", hjit::ModuleOptions{}, hjit::SaveOptions{},
                                                          [](const Tensor& t, const Tensor& ids) { return hjit::embedding(t, ids); }, x, i64s({0, 1}));
                 (void)m(x, i64s({3, -1'000'000}));
               }});
  c.push_back({"jit gather index 3 of 3", [x] {
                 (void)hjit::jit([](const Tensor& t, const Tensor& i) { return hjit::gather(t, 1, i); })(x, Tensor::from_vector<int64_t>({0, 1, 2, 3, 0}, {5, 1}));
               }});
  c.push_back({"jit scatter_add index 9", [x] {
                 (void)hjit::jit([](const Tensor& t, const Tensor& i, const Tensor& s) { return hjit::scatter_add(t, 0, i, s); })(
                     x, Tensor::from_vector<int64_t>({9, 0, 0}, {1, 3}), Tensor::ones({1, 3}));
               }});
  c.push_back({"jit one_hot of 12 in 10 classes", [] { (void)hjit::jit([](const Tensor& i) { return hjit::one_hot(i, 10); })(i64s({1, 12})); }});
  c.push_back({"tensor of 2^40 x 2^40", [] { (void)Tensor::zeros({int64_t(1) << 40, int64_t(1) << 40}); }});
  c.push_back({"tensor of 2^36 floats", [] { (void)Tensor::zeros({int64_t(1) << 36}); }});
  c.push_back({"a compiled temporary past a memory limit of 64 MB", [] {
                 hjit::set_memory_limit(int64_t(64) << 20);
                 const Tensor a = Tensor::ones({1024, 1024});  // 4 MB; a (x) a would be 4 GB
                 const Tensor y = hjit::jit([](const Tensor& t) { return hjit::sum(hjit::reshape(t, {1024, 1024, 1}) * hjit::reshape(t, {1, 1024, 1024}), {1}); })(a);
                 expect_same(y, Tensor::full({1024, 1024}, 1024.0));  // fused: no temporary of that size was needed
               }});
  c.push_back({"Module::load of garbage", [dir] {
                 test::write_file((dir / "garbage.hjit").string(), std::string(1000, 'x'));
                 (void)hjit::Module::load((dir / "garbage.hjit").string());
               }});
  c.push_back({"Module::load of a truncated module", [dir] {
                 const std::string path = (dir / "whole.hjit").string();
                 hjit::make_module("relu", hjit::ModuleOptions{}, hjit::SaveOptions{}, [](const Tensor& t) { return hjit::relu(t); }, Tensor::zeros({4})).save(path);
                 const std::string bytes = test::read_file(path);
                 test::write_file(path, bytes.substr(0, bytes.size() / 2));
                 (void)hjit::Module::load(path)(Tensor::zeros({4}));
               }});
  c.push_back({"a tensor file declaring 2^40 floats", [dir] {
                 ::onnx::TensorProto t;
                 t.set_data_type(::onnx::TensorProto::FLOAT);
                 t.add_dims(int64_t(1) << 40);
                 t.set_raw_data(std::string(16, '\0'));
                 test::write_file((dir / "big.pb").string(), t.SerializeAsString());
                 (void)hjit::onnx::read_tensor((dir / "big.pb").string());
               }});
  c.push_back({"an npy file declaring 2^40 floats", [dir] {
                 std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }";
                 header.resize(118, ' ');
                 header += '\n';
                 test::write_file((dir / "big.npy").string(), std::string("\x93NUMPY\x01\x00", 8) + char(header.size() & 0xff) + char(header.size() >> 8) + header + std::string(16, '\0'));
                 (void)hjit::load_npy((dir / "big.npy").string());
               }});
  c.push_back({"an npz file of garbage", [dir] {
                 test::write_file((dir / "bad.npz").string(), "PK\x03\x04" + std::string(200, '\xff'));
                 (void)hjit::load_npz((dir / "bad.npz").string());
               }});
  for (const char* file : {"/dev/zero", "/dev/urandom", "/", "fifo"})
    c.push_back({std::string("a model read from ") + file, [dir, file] {
                   std::string path = file;
                   if (path == "fifo") {
                     path = (dir / "fifo").string();
                     fs::remove(path);
                     if (mkfifo(path.c_str(), 0600) != 0) throw std::runtime_error("mkfifo");
                   }
                   (void)hjit::onnx::Model::read(path);
                 }});
  c.push_back({"a tensor file read from /dev/zero", [] { (void)hjit::onnx::read_tensor("/dev/zero"); }});
  c.push_back({"an npy file read from /dev/zero", [] { (void)hjit::load_npy("/dev/zero"); }});
  c.push_back({"an npz file read from /dev/zero", [] { (void)hjit::load_npz("/dev/zero"); }});
  c.push_back({"a module read from /dev/zero", [] { (void)hjit::Module::load("/dev/zero"); }});
  c.push_back({"a module called with the wrong arguments", [] {
                 const hjit::Module m = hjit::make_module("add", hjit::ModuleOptions{}, hjit::SaveOptions{}, [](const Tensor& a, const Tensor& b) { return a + b; },
                                                          Tensor::zeros({4}), Tensor::zeros({4}));
                 for (auto call : std::vector<std::function<void()>>{[&] { (void)m.call({Tensor::zeros({4})}); },
                                                                     [&] { (void)m(Tensor::zeros({4}, DType::I32), Tensor::zeros({4})); },
                                                                     [&] { (void)m(Tensor::zeros({4, 1}), Tensor::zeros({4})); }}) {
                   try {
                     call();
                     throw std::runtime_error("a wrong call answered");
                   } catch (const hjit::Error&) {
                   }
                 }
                 throw hjit::ValueError("each call refused");
               }});
  return c;
}

}  // namespace

TEST_CASE("hostile programs: sizes that disagree, indices out of range, huge sizes and files that are not files") {
  const fs::path dir = test::scratch_dir("hostile_programs");
  const std::vector<ProgramCase> cases = program_cases(dir);
  int refused = 0;
  for (const ProgramCase& pc : cases) {
    CAPTURE(pc.name);
    auto [end, r] = in_child((dir / "report.txt").string(), pc.body);
    check_door("program", end, r, 0, false);
    refused += !r.kind.empty();
  }
  CHECK(refused >= int(cases.size()) - 2);  // all but the legal ones
  MESSAGE(cases.size() << " hostile programs: " << refused << " refused with a typed error");
}

namespace {

// One structural mutation of a model: an attribute's value (0, negative, huge, not a number), an
// attribute added, dropped or retyped, an input or output added or dropped, a node's op or wiring
// changed, the opset, a declared dim, an initializer's dims or type.
void mutate(::onnx::ModelProto& m, std::mt19937_64& rng) {
  static const std::vector<int64_t> ints{0, -1, -2, 1, 2, 3, 7, 1'000'000'000'000, int64_t(1) << 62, std::numeric_limits<int64_t>::min(), 1 << 20};
  static const std::vector<float> floats{0.0f, -1.0f, 1e30f, -1e30f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 0.5f};
  static const std::vector<std::string> ops{"Conv", "Relu", "Gather", "Reshape", "Expand", "Pad", "Resize", "Loop", "If", "Split", "Concat",
                                            "MaxPool", "Gemm", "MatMul", "Slice", "Transpose", "Range", "ConstantOfShape", "Tile", "TopK",
                                            "Identity", "ScatterND", "OneHot", "Einsum", "Cast", "Squeeze", "NoSuchOp"};
  auto pick = [&](auto& v) -> decltype(v[0]) { return v[size_t(rng() % v.size())]; };
  ::onnx::GraphProto* g = m.mutable_graph();
  ::onnx::NodeProto* n = g->node_size() ? g->mutable_node(int(rng() % uint64_t(g->node_size()))) : nullptr;
  switch (rng() % 10) {
    case 0:
    case 1:
      if (n && n->attribute_size()) {
        ::onnx::AttributeProto* a = n->mutable_attribute(int(rng() % uint64_t(n->attribute_size())));
        if (a->ints_size()) a->set_ints(int(rng() % uint64_t(a->ints_size())), pick(ints));
        else if (a->type() == ::onnx::AttributeProto::FLOAT) a->set_f(pick(floats));
        else a->set_i(pick(ints));
      }
      break;
    case 2:
      if (n) {
        const char* names[] = {"strides", "pads", "dilations", "kernel_shape", "group", "axis", "axes", "perm", "blocksize", "to", "mode", "value"};
        ::onnx::AttributeProto* a = n->add_attribute();
        a->set_name(names[rng() % 12]);
        if (rng() % 2) a->set_type(::onnx::AttributeProto::INTS), a->add_ints(pick(ints)), a->add_ints(pick(ints));
        else if (rng() % 2) a->set_type(::onnx::AttributeProto::INT), a->set_i(pick(ints));
        else a->set_type(::onnx::AttributeProto::STRING), a->set_s("edge");
      }
      break;
    case 3:
      if (n && n->attribute_size()) {
        if (rng() % 2) n->mutable_attribute()->DeleteSubrange(int(rng() % uint64_t(n->attribute_size())), 1);
        else n->mutable_attribute(0)->set_type(::onnx::AttributeProto::FLOAT);
      }
      break;
    case 4:
      if (n) {
        if (n->input_size() && rng() % 2) n->mutable_input()->RemoveLast();
        else n->add_input(g->input_size() && rng() % 3 ? g->input(0).name() : std::string());
      }
      break;
    case 5:
      if (n) {
        if (n->output_size() && rng() % 2) n->mutable_output()->RemoveLast();
        else n->add_output("extra" + std::to_string(rng() % 4));
      }
      break;
    case 6:
      if (n) n->set_op_type(pick(ops));
      break;
    case 7:
      if (n && n->input_size()) {
        const ::onnx::NodeProto& other = g->node(int(rng() % uint64_t(g->node_size())));
        n->set_input(int(rng() % uint64_t(n->input_size())), other.output_size() ? other.output(0) : std::string("nowhere"));
      }
      break;
    case 8: {
      static const std::vector<int64_t> opsets{-1, 0, 1, 6, 7, 9, 11, 12, 13, 15, 17, 18, 1000};
      m.mutable_opset_import(0)->set_version(pick(opsets));
      break;
    }
    default:
      if (g->input_size() && rng() % 2) {
        auto* shape = g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
        if (shape->dim_size()) shape->mutable_dim(int(rng() % uint64_t(shape->dim_size())))->set_dim_value(pick(ints));
      } else if (g->initializer_size()) {
        ::onnx::TensorProto* t = g->mutable_initializer(int(rng() % uint64_t(g->initializer_size())));
        if (t->dims_size() && rng() % 2) t->set_dims(int(rng() % uint64_t(t->dims_size())), pick(ints));
        else t->set_data_type(int(rng() % 17));
      }
  }
}

}  // namespace

TEST_CASE("the model reader, structure-aware: 10,000 mutated structures give a model or a typed error") {
  // Bounds that keep a mutation that asks for gigabytes or millions of trips quick to refuse.
  hjit::set_memory_limit(int64_t(1) << 30);
  std::vector<::onnx::ModelProto> seeds{small_cnn("N")};
  for (const std::string& bytes : {loop(5, true, true), loop(3, false, false), nested_ifs(3),
                                   data_op("Gather", {"5", "3"}, {i64s({1, -2})}),
                                   data_op("Pad", {"1", "3", "4", "4"}, {i64s({0, 0, 1, 1, 0, 0, 1, 1})}, [](::onnx::NodeProto* n) { add_string(n, "mode", "edge"); }),
                                   data_op("Resize", {"1", "3", "4", "4"}, {Tensor::zeros({0}), Tensor::from_vector(std::vector<float>{1, 1, 2, 2}, {4})}),
                                   data_op("Reshape", {"2", "3"}, {i64s({3, 2})}), data_op("Expand", {"1"}, {i64s({2, 3})}, {}, 13, 2),
                                   image_op("MaxPool", [](::onnx::NodeProto* n) { add_ints(n, "kernel_shape", {2, 2}), add_ints(n, "strides", {2, 2}); }),
                                   constants_op("Range", {Tensor::scalar(0.0), Tensor::scalar(4.0), Tensor::scalar(1.0)}),
                                   constants_op("Split", {Tensor::zeros({4}), i64s({1, 3})}, 1, 2)}) {
    ::onnx::ModelProto m;
    REQUIRE(m.ParseFromString(bytes));
    seeds.push_back(m);
  }
  // HJIT_TEST_SEED explores other mutations (a crash found there becomes a case of its own).
  std::mt19937_64 rng(uint64_t(hjit::setting::count(hjit::setting::Id::TestSeed).value_or(50)));
  hjit::onnx::LoadOptions options{.dims = {{"N", 1}}, .max_loop_trips = 1000};
  auto [ran, rejected] = test::fuzz(10000, [&](int k) {
    ::onnx::ModelProto m = seeds[size_t(k) % seeds.size()];
    const int edits = 1 + int(rng() % 3);
    for (int e = 0; e < edits; ++e) mutate(m, rng);
    const std::string bytes = m.SerializeAsString();
    const hjit::onnx::Model model = hjit::onnx::Model::parse(bytes, "", options);
    std::vector<Tensor> in;
    for (const hjit::TensorType& t : model.input_types()) {
      if (t.numel() > 100000) throw hjit::ValueError("too big to run in a fuzz case");
      in.push_back(Tensor::zeros(t.shape, t.dtype));
    }
    (void)model.run(std::vector<hjit::onnx::Value>(in.begin(), in.end()));
  });
  hjit::set_memory_limit(0);
  MESSAGE(ran << " mutated structures read and ran, " << rejected << " refused with hjit::Error");
  CHECK(ran > 0);
  CHECK(rejected > 0);
}
