// hjit::onnx beyond the conformance suite: tensor files, models built here with ONNX's protobuf
// classes (loaded, run eagerly, inside jit and grad, as modules saved, frozen and exported),
// symbolic dimensions, external data, every kind of bad file, and 10,000 mutations of a model.
#include <hjit/onnx.h>

#include <array>
#include <filesystem>
#include <numeric>
#include <set>
#include <thread>
#include <fstream>
#include <limits>
#include <random>
#include <tuple>

#include <spdlog/sinks/ostream_sink.h>

#include "onnx/onnx-data_pb.h"
#include "support/binary_io.h"
#include "support/log.h"
#include "support/settings.h"
#include "tests/onnx_models.h"
#include "tests/support.h"

namespace fs = std::filesystem;
using hjit::DType;
using hjit::Tensor;
using namespace test::onnx_model;

namespace {

// The same network written with hjit's ops: the reference.
Tensor small_cnn_reference(const hjit::onnx::Model& model, const Tensor& x) {
  const std::vector<Tensor> p = model.parameters();  // w, b, fc, fcb in file order
  Tensor c = hjit::relu(hjit::conv2d(x, p[0], p[1], {1, 1}, {1, 1}));
  Tensor f = hjit::mean(c, {2, 3});
  return hjit::matmul(f, hjit::transpose(p[2])) + p[3];
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data());
  return std::vector<uint8_t>(p, p + t.numel() * hjit::dtype_size(t.dtype()));
}

template <class E = hjit::ValueError>
void check_throws_containing(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    FAIL("no exception; expected one saying '" << part << "'");
  } catch (const E& e) {
    INFO(std::string(e.what()));
    CHECK(std::string(e.what()).find(part) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("tensor files: every dtype, 0-d and empty tensors round-trip exactly") {
  const fs::path dir = fs::path(test::scratch_dir("onnx_tensors"));
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8, DType::I16, DType::I32, DType::I64, DType::U8,
                  DType::U16, DType::U32, DType::U64, DType::Bool}) {
    for (const hjit::Shape& s : std::vector<hjit::Shape>{{}, {0, 3}, {2, 3, 5}}) {
      const Tensor x = test::random(s, t, 7);
      const std::string path = (dir / "x.pb").string();
      hjit::onnx::save_tensor(path, x, "x");
      const Tensor y = hjit::onnx::read_tensor(path);
      INFO(hjit::dtype_name(t) << hjit::shape_str(s));
      CHECK(y.dtype() == t);
      CHECK(y.shape() == s);
      CHECK(bytes_of(y) == bytes_of(x));
    }
  }
}

TEST_CASE("tensor files: typed fields read as the raw bytes would, and data that does not fill the shape is an error") {
  ::onnx::TensorProto p;
  p.set_data_type(::onnx::TensorProto::FLOAT16);
  p.add_dims(2);
  p.add_int32_data(hjit::f16(1.5f).bits);
  p.add_int32_data(hjit::f16(-2.0f).bits);
  const Tensor h = hjit::onnx::parse_tensor(p.SerializeAsString());
  CHECK(h.dtype() == DType::F16);
  CHECK(h.to_vector<float>() == std::vector<float>{1.5f, -2.0f});
  p.add_dims(2);  // now [2, 2] with 2 values
  check_throws_containing([&] { hjit::onnx::parse_tensor(p.SerializeAsString()); }, "declares 4 elements");
  ::onnx::TensorProto huge;
  huge.set_data_type(::onnx::TensorProto::FLOAT);
  huge.add_dims(int64_t(1) << 40);
  huge.add_dims(int64_t(1) << 40);
  check_throws_containing([&] { hjit::onnx::parse_tensor(huge.SerializeAsString()); }, "more elements than can be addressed");
  ::onnx::TensorProto str;
  str.set_data_type(::onnx::TensorProto::STRING);
  check_throws_containing([&] { hjit::onnx::parse_tensor(str.SerializeAsString()); }, "STRING");
  check_throws_containing([&] { hjit::onnx::read_tensor("/nonexistent/x.pb"); }, "cannot open");
  check_throws_containing([&] { hjit::onnx::parse_tensor(std::string("\xff\xff\xff", 3)); }, "not a TensorProto");
}

TEST_CASE("LoadOptions::autocast, or loading inside an autocast scope: the model's Conv and Gemm in bf16, frozen or not") {
  const std::string path = write_model(small_cnn("2"), "onnx_cnn_bf16");
  const hjit::onnx::Model model = hjit::onnx::Model::read(path);
  const Tensor x = test::random({2, 3, 8, 8}, DType::F32, 19);
  const Tensor want = small_cnn_reference(model, x);
  for (bool freeze : {false, true})
    for (bool by_option : {false, true}) {
      CAPTURE(freeze);
      CAPTURE(by_option);
      std::optional<hjit::Module> m;
      if (by_option) {
        m.emplace(hjit::onnx::load(path, {.freeze = freeze, .autocast = DType::BF16}));
      } else {
        auto scope = hjit::autocast(DType::BF16);
        m.emplace(hjit::onnx::load(path, {.freeze = freeze}));
      }
      const std::string graph = m->str();
      CHECK(graph.find(":bf16[2,4,8,8] = conv2d") != std::string::npos);
      // Called outside any scope: the rules were traced in. bf16 keeps 8 bits of each operand.
      const Tensor y = Tensor((*m)(x)).astype(DType::F32);
      CHECK(test::compare(y, want, 1.0 / 32) == "");
    }
  // The option holds for eager runs too; a dtype autocast has no rules for is refused.
  const hjit::onnx::Model mixed = hjit::onnx::Model::read(path, {.autocast = DType::BF16});
  CHECK(test::compare(mixed({x}).at(0).astype(DType::F32), want, 1.0 / 32) == "");
  CHECK(test::compare(mixed({x}).at(0).astype(DType::F32), model({x}).at(0), 0) != "");
  check_throws_containing([&] { hjit::onnx::Model::read(path, {.autocast = DType::F64}); }, "autocast must be bf16 or f16");
}

TEST_CASE("a model runs eagerly, as a module, inside jit and under grad, with one answer") {
  const std::string path = write_model(small_cnn("2"), "onnx_cnn");
  const hjit::onnx::Model model = hjit::onnx::Model::read(path);
  CHECK(model.info().inputs.at(0).str() == "x f32[2,3,8,8]");
  CHECK(model.info().op_counts.at("Conv") == 1);
  CHECK(model.info().parameters == 4 * 27 + 4 + 20 + 5);
  const Tensor x = test::random({2, 3, 8, 8}, DType::F32, 9);
  const Tensor want = small_cnn_reference(model, x);
  CHECK_CLOSE(model({x}).at(0), want);

  hjit::Module m = hjit::onnx::load(path);
  CHECK(m.parameters().size() == 4);
  CHECK_CLOSE(Tensor(m(x)), want);
  auto jitted = hjit::jit([&](const Tensor& v) { return model({v}).at(0) * 2.0; });
  CHECK_CLOSE(jitted(x), want * 2.0);
  auto via_module = hjit::jit([&](const Tensor& v) { return Tensor(m(v)) + 1.0; });
  CHECK_CLOSE(via_module(x), want + 1.0);

  // Gradients flow through the converted ops: d sum(y) / d x against the reference network's.
  const Tensor g = hjit::grad([&](const Tensor& v) { return hjit::sum(model({v}).at(0)); })(x);
  const Tensor g_ref = hjit::grad([&](const Tensor& v) { return hjit::sum(small_cnn_reference(model, v)); })(x);
  CHECK_CLOSE(g, g_ref);

  // Saved in hjit's format and loaded back; frozen; exported as a library.
  const std::string saved = (fs::path(test::scratch_dir("onnx_cnn_saved")) / "cnn.hjit").string();
  m.save(saved);
  CHECK_CLOSE(Tensor(hjit::Module::load(saved)(x)), want);
  const hjit::Module frozen = m.freeze();
  CHECK(frozen.parameters().empty());
  CHECK_CLOSE(Tensor(frozen(x)), want);
  const hjit::Module frozen_at_load = hjit::onnx::load(path, {.freeze = true});
  CHECK(frozen_at_load.parameters().empty());
  CHECK_CLOSE(Tensor(frozen_at_load(x)), want);
  const auto files = hjit::export_library(test::scratch_dir("onnx_cnn_export"), "cnn", m, x);
  REQUIRE(files.size() >= 2);
  CHECK(fs::file_size(files[0]) > 0);
}

TEST_CASE("symbolic dimensions are sized by LoadOptions::dims, or name themselves in the error") {
  const std::string path = write_model(small_cnn("N"), "onnx_cnn_symbolic");
  check_throws_containing([&] { hjit::onnx::load(path, {.dynamic = false}); }, "'N'");
  const hjit::Module m3 = hjit::onnx::load(path, {.dims = {{"N", 3}}, .dynamic = false});
  CHECK(m3.input_types().at(0).shape == hjit::Shape{3, 3, 8, 8});
  CHECK(m3.dynamic_dims().empty());
  const hjit::onnx::Model model = hjit::onnx::Model::read(path);
  const Tensor x = test::random({5, 3, 8, 8}, DType::F32, 10);
  CHECK_CLOSE(model({x}).at(0), small_cnn_reference(model, x));  // eagerly, any N
  CHECK_CLOSE(Tensor(model.module({{DType::F32, {5, 3, 8, 8}}})(x)), small_cnn_reference(model, x));
  check_throws_containing<hjit::ShapeError>([&] { model({test::random({5, 4, 8, 8}, DType::F32, 1)}); }, "f32[N,3,8,8]");
  check_throws_containing<hjit::DTypeError>([&] { model({test::random({5, 3, 8, 8}, DType::F64, 1)}); }, "given f64");
}

TEST_CASE("external data is read beside the model, and never from outside its folder") {
  ::onnx::ModelProto m = small_cnn("2");
  const fs::path dir = fs::path(test::scratch_dir("onnx_external"));
  // Move the conv weight into weights.bin, after 16 bytes of something else.
  ::onnx::TensorProto& w = *m.mutable_graph()->mutable_initializer(0);
  std::string bytes(16, 'x');
  bytes += w.raw_data();
  std::ofstream(dir / "weights.bin", std::ios::binary) << bytes;
  const std::string raw = w.raw_data();
  w.clear_raw_data();
  w.set_data_location(::onnx::TensorProto::EXTERNAL);
  auto set = [&](const std::string& location, int64_t offset, int64_t length) {
    w.clear_external_data();
    auto* kv = w.add_external_data();
    kv->set_key("location"), kv->set_value(location);
    kv = w.add_external_data();
    kv->set_key("offset"), kv->set_value(std::to_string(offset));
    kv = w.add_external_data();
    kv->set_key("length"), kv->set_value(std::to_string(length));
    const std::string path = (dir / "model.onnx").string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    m.SerializeToOstream(&out);
    return path;
  };
  const std::string good = set("weights.bin", 16, int64_t(raw.size()));
  const hjit::onnx::Model model = hjit::onnx::Model::read(good);
  CHECK(bytes_of(model.parameters().at(0)) == std::vector<uint8_t>(raw.begin(), raw.end()));
  std::ofstream(dir.parent_path() / "outside.bin", std::ios::binary) << bytes;
  check_throws_containing([&] { hjit::onnx::Model::read(set("../outside.bin", 16, int64_t(raw.size()))); }, "outside the model's folder");
  check_throws_containing([&] { hjit::onnx::Model::read(set((dir / "weights.bin").string(), 16, int64_t(raw.size()))); }, "relative");
  check_throws_containing([&] { hjit::onnx::Model::read(set("weights.bin", 16, int64_t(raw.size()) + 1)); }, "which holds");
  check_throws_containing([&] { hjit::onnx::Model::read(set("missing.bin", 0, 4)); }, "not a readable file");
  fs::create_symlink("/etc/hostname", dir / "link.bin");
  check_throws_containing([&] { hjit::onnx::Model::read(set("link.bin", 0, 1)); }, "outside the model's folder");
}

TEST_CASE("bad models are ValueErrors that say what is wrong, naming the node") {
  const std::string dir = test::scratch_dir("onnx_bad");
  check_throws_containing([&] { hjit::onnx::Model::parse("not a model at all"); }, "not an ONNX model");
  const std::string good = small_cnn("2").SerializeAsString();
  check_throws_containing([&] { hjit::onnx::Model::parse(good.substr(0, good.size() / 2)); }, "hjit::onnx: model");
  check_throws_containing([&] { hjit::onnx::Model::read(dir + "/none.onnx"); }, "cannot open");
  check_throws_containing([&] { hjit::onnx::Model::read(dir); }, "is a directory");
  {
    ::onnx::ModelProto m = small_cnn("2");
    m.mutable_opset_import(0)->set_version(18);
    check_throws_containing([&] { hjit::onnx::Model::parse(m.SerializeAsString()); }, "opset 18");
  }
  {
    ::onnx::ModelProto m = small_cnn("2");
    m.mutable_graph()->mutable_node(1)->set_op_type("NoSuchOp");
    check_throws_containing([&] { hjit::onnx::Model::parse(m.SerializeAsString()); }, "NoSuchOp");
  }
  {
    ::onnx::ModelProto m = small_cnn("2");
    m.mutable_graph()->mutable_node(1)->set_input(0, "nowhere");
    check_throws_containing([&] { hjit::onnx::Model::parse(m.SerializeAsString()); }, "nowhere");
  }
  {
    ::onnx::ModelProto m = small_cnn("2");
    m.mutable_graph()->mutable_initializer(0)->clear_raw_data();  // a weight without its data
    check_throws_containing([&] { hjit::onnx::Model::parse(m.SerializeAsString()); }, "tensor name: w");
  }
  {
    ::onnx::ModelProto m = small_cnn("2");  // the conv weight's channels no longer match the input's
    *m.mutable_graph()->mutable_initializer(0) = proto_of("w", test::random({4, 2, 3, 3}, DType::F32, 1));
    const hjit::onnx::Model model = hjit::onnx::Model::parse(m.SerializeAsString());
    check_throws_containing<hjit::Error>([&] { model({test::random({2, 3, 8, 8}, DType::F32, 1)}); }, "node 'Conv_c' (Conv)");
  }
  {
    ::onnx::ModelProto m = small_cnn("2");  // a cycle: the Relu reads the Gemm's output
    m.mutable_graph()->mutable_node(1)->set_input(0, "y");
    check_throws_containing([&] { hjit::onnx::Model::parse(m.SerializeAsString()); }, "hjit::onnx: model");
  }
  {
    ::onnx::ModelProto m = small_cnn("2");
    auto* n = m.mutable_graph()->mutable_node(1);
    n->set_domain("com.example");
    auto* op = m.add_opset_import();
    op->set_domain("com.example");
    op->set_version(1);
    check_throws_containing([&] { hjit::onnx::Model::parse(m.SerializeAsString())({test::random({2, 3, 8, 8}, DType::F32, 1)}); }, "com.example");
  }
}

TEST_CASE("the model reader: 10,000 mutations of a model give a model or a typed error") {
  const std::string seed = small_cnn("N").SerializeAsString();
  std::mt19937_64 rng(29);
  auto [read, rejected] = test::fuzz(10000, [&](int) {
    std::string p = seed;
    const int edits = 1 + int(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = size_t(rng() % p.size());
      switch (rng() % 3) {
        case 0: p[at] = char(rng() % 256); break;
        case 1: p.erase(at, 1 + rng() % 8); break;
        default: p[at] = char(p[at] ^ (1 << (rng() % 8)));
      }
    }
    const hjit::onnx::Model m = hjit::onnx::Model::parse(p, "", {.dims = {{"N", 1}}});
    std::vector<Tensor> in;
    for (const hjit::TensorType& t : m.input_types()) {
      if (t.numel() > 100000) throw hjit::ValueError("too big to run in a fuzz case");
      in.push_back(hjit::Tensor::zeros(t.shape, t.dtype));
    }
    m(in);
  });
  MESSAGE(read << " mutated models read and run, " << rejected << " rejected with hjit::Error");
  CHECK(rejected > 0);
  CHECK(read > 0);
}

namespace {

// Equal element for element (exact: sequences move tensors, they do not compute).
bool same(const Tensor& got, const Tensor& want) { return test::compare(got, want, 0).empty(); }

void add_sequence_value(::onnx::ValueInfoProto* v, const std::string& name, int elem) {
  v->set_name(name);
  v->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(elem);
}

// x f32[6,2] split into pieces of 2 and 4 rows, x put in front, then read back every way ONNX
// has: the sequence itself, its length, its last item, and its items concatenated and stacked.
::onnx::ModelProto sequence_model() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("sequences");
  add_value(g->add_input(), "x", ::onnx::TensorProto::FLOAT, {"6", "2"});
  *g->add_initializer() = proto_of("split", Tensor::from_vector<int64_t>({2, 4}, {2}));
  *g->add_initializer() = proto_of("front", Tensor::scalar(0, DType::I64));
  *g->add_initializer() = proto_of("last", Tensor::scalar(-1, DType::I64));
  add_node(g, "SplitToSequence", {"x", "split"}, {"pieces"});
  add_node(g, "SequenceInsert", {"pieces", "x", "front"}, {"seq"});
  add_node(g, "SequenceLength", {"seq"}, {"length"});
  add_node(g, "SequenceAt", {"seq", "last"}, {"at"});
  auto* cat = add_node(g, "ConcatFromSequence", {"seq"}, {"cat"});
  auto* a = cat->add_attribute();
  a->set_name("axis");
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(0);
  add_sequence_value(g->add_output(), "seq", ::onnx::TensorProto::FLOAT);
  add_value(g->add_output(), "length", ::onnx::TensorProto::INT64, {});
  add_value(g->add_output(), "at", ::onnx::TensorProto::FLOAT, {"4", "2"});
  add_value(g->add_output(), "cat", ::onnx::TensorProto::FLOAT, {"12", "2"});
  return m;
}

}  // namespace

TEST_CASE("sequences: resolved while converting, the same eagerly, as a module and inside jit") {
  const hjit::onnx::Model model = hjit::onnx::Model::parse(sequence_model().SerializeAsString());
  CHECK(model.info().outputs[0].sequence);
  CHECK(model.info().outputs[0].str() == "seq seq(f32[unk__1,2])");  // as ONNX's shape inference names it
  const Tensor x = test::random({6, 2}, DType::F32, 5);
  const std::vector<hjit::onnx::Value> out = model.run({x});
  REQUIRE(out.size() == 4);
  REQUIRE(out[0].is_sequence());
  REQUIRE(out[0].items().size() == 3);
  CHECK(same(out[0].items()[0], x));
  CHECK(same(out[0].items()[1], hjit::slice(x, 0, 0, 2)));
  CHECK(same(out[0].items()[2], hjit::slice(x, 0, 2, 6)));
  CHECK(out[1].tensor().item<int64_t>() == 3);
  CHECK(same(out[2].tensor(), hjit::slice(x, 0, 2, 6)));
  CHECK(same(out[3].tensor(), hjit::concat({x, x}, 0)));
  CHECK(out[0].str() == "seq(3: f32[6,2], f32[2,2], f32[4,2])");

  // As a module: the flattened outputs (the sequence's three items, then the three tensors).
  hjit::Module m = model.module_for({x});
  const std::vector<Tensor> flat = m.call({x});
  const std::vector<Tensor> want = hjit::onnx::flatten(out);
  REQUIRE(flat.size() == 6);
  for (size_t k = 0; k < flat.size(); ++k) CHECK(same(flat[k], want[k]));
  auto jitted = hjit::jit([&](const Tensor& t) { return hjit::onnx::flatten(model.run({t}))[5]; });
  CHECK(same(jitted(x), hjit::concat({x, x}, 0)));
  // A model with a sequence output cannot hand back plain tensors.
  check_throws_containing([&] { model({x}); }, "Model::run");
}

TEST_CASE("sequence and optional values: inputs, files, and the errors of each kind") {
  using hjit::onnx::Value;
  const Tensor a = Tensor::from_vector<float>({1, 2}, {2}), b = Tensor::from_vector<float>({3}, {1});
  const Value seq = Value::sequence({a, b}, DType::F32);
  CHECK(seq.items().size() == 2);
  CHECK(Value().is_none());
  CHECK(hjit::onnx::flatten({seq, Value(), a}).size() == 3);
  CHECK_THROWS_AS(Value::sequence({a, Tensor::from_vector<int32_t>({1}, {1})}, DType::F32), hjit::DTypeError);
  CHECK_THROWS_AS(Value().tensor(), hjit::ValueError);
  CHECK_THROWS_AS(Value(a).items(), hjit::ValueError);
  CHECK(Value::sequence({}, DType::I64).str() == "seq(0 x i64)");

  // Files: a SequenceProto and OptionalProtos read as declared; a mismatch is a typed error.
  hjit::onnx::ValueInfo as_seq{.name = "s", .dtype = DType::F32, .sequence = true};
  hjit::onnx::ValueInfo as_opt{.name = "o", .dtype = DType::F32, .optional = true};
  ::onnx::SequenceProto sp;
  sp.set_elem_type(::onnx::SequenceProto::TENSOR);
  *sp.add_tensor_values() = proto_of("", a);
  *sp.add_tensor_values() = proto_of("", b);
  const Value read = hjit::onnx::parse_value(sp.SerializeAsString(), as_seq);
  REQUIRE(read.is_sequence());
  CHECK(same(read.items()[1], b));
  ::onnx::OptionalProto empty, full;
  CHECK(hjit::onnx::parse_value(empty.SerializeAsString(), as_opt).is_none());
  *full.mutable_tensor_value() = proto_of("", a);
  CHECK(same(hjit::onnx::parse_value(full.SerializeAsString(), as_opt).tensor(), a));
  check_throws_containing([&] { hjit::onnx::parse_value(full.SerializeAsString(), {.name = "o", .sequence = true, .optional = true}); },
                          "another kind of value");
  check_throws_containing([&] { hjit::onnx::parse_value("\xff\xff\xff", as_seq); }, "not a SequenceProto");

  // A model taking a sequence: run with values, as a module for an example of its length.
  ::onnx::ModelProto mp;
  mp.set_ir_version(8);
  mp.add_opset_import()->set_version(17);
  auto* g = mp.mutable_graph();
  g->set_name("concat_sequence");
  add_sequence_value(g->add_input(), "s", ::onnx::TensorProto::FLOAT);
  add_node(g, "ConcatFromSequence", {"s"}, {"y"})->add_attribute()->CopyFrom([] {
    ::onnx::AttributeProto at;
    at.set_name("axis");
    at.set_type(::onnx::AttributeProto::INT);
    at.set_i(0);
    return at;
  }());
  add_value(g->add_output(), "y", ::onnx::TensorProto::FLOAT, {"?"});
  const hjit::onnx::Model model = hjit::onnx::Model::parse(mp.SerializeAsString());
  CHECK(model.info().inputs[0].sequence);
  CHECK(same(model.run({seq})[0].tensor(), Tensor::from_vector<float>({1, 2, 3}, {3})));
  check_throws_containing([&] { model.input_types(); }, "module_for");
  check_throws_containing([&] { model.run({a}); }, "is given f32[2]");
  CHECK(same(model.module_for({seq}).call({a, b})[0], Tensor::from_vector<float>({1, 2, 3}, {3})));

  // 2,000 mutations of the sequence file: a value or a typed error.
  const std::string good = sp.SerializeAsString();
  std::mt19937_64 rng(31);
  auto [ok, rejected] = test::fuzz(2000, [&](int) {
    std::string p = good;
    p[size_t(rng() % p.size())] = char(rng() % 256);
    hjit::onnx::parse_value(p, as_seq);
  });
  CHECK(ok + rejected == std::min<int64_t>(2000, hjit::setting::count(hjit::setting::Id::FuzzMutations).value_or(2000)));
}

TEST_CASE("RoiAlign: bins average their bilinear samples, or keep ONNX's largest weighted corner") {
  // A 2x2 map, one region over all of it (half_pixel), one bin of 2x2 samples at +-0.25 around
  // the centre of pixel (0, 0): bilinear values 1, 1.25, 1.5, 1.75; largest weighted corners 1,
  // 0.75, 0.75, 0.5625.
  for (const std::string mode : {"avg", "max"}) {
    ::onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(16);
    auto* g = m.mutable_graph();
    g->set_name("roi_align");
    add_value(g->add_input(), "x", ::onnx::TensorProto::FLOAT, {"1", "1", "2", "2"});
    *g->add_initializer() = proto_of("rois", Tensor::from_vector<float>({0, 0, 1, 1}, {1, 4}));
    *g->add_initializer() = proto_of("batch", Tensor::from_vector<int64_t>({0}, {1}));
    auto* n = add_node(g, "RoiAlign", {"x", "rois", "batch"}, {"y"});
    for (const auto& [name, v] : std::vector<std::pair<std::string, int64_t>>{{"output_height", 1}, {"output_width", 1}, {"sampling_ratio", 2}}) {
      auto* a = n->add_attribute();
      a->set_name(name);
      a->set_type(::onnx::AttributeProto::INT);
      a->set_i(v);
    }
    auto* a = n->add_attribute();
    a->set_name("mode");
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(mode);
    add_value(g->add_output(), "y", ::onnx::TensorProto::FLOAT, {"1", "1", "1", "1"});
    const hjit::onnx::Model model = hjit::onnx::Model::parse(m.SerializeAsString());
    const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
    const float want = mode == "avg" ? 1.375f : 1.0f;
    CHECK(model({x})[0].to_vector<float>() == std::vector<float>{want});
    CHECK(model.module().call({x})[0].to_vector<float>() == std::vector<float>{want});
  }
}

namespace {
// ONNX's GRU written out step by step (the operator's definition, gates z, r, h): Y [seq, dirs,
// batch, H] and Y_h [dirs, batch, H].
std::pair<Tensor, Tensor> gru_reference(const Tensor& x, const Tensor& W, const Tensor& R, const Tensor& B, const Tensor& h0, bool linear_before_reset) {
  using namespace hjit;
  const int64_t seq = x.shape()[0], dirs = W.shape()[0], H = R.shape()[2];
  std::vector<Tensor> ys(size_t(seq * dirs)), hs;
  for (int64_t d = 0; d < dirs; ++d) {
    auto part = [&](const Tensor& t, int64_t k) { return slice(squeeze(slice(t, 0, d, d + 1), {0}), 0, k * H, (k + 1) * H); };
    const Tensor Wz = part(W, 0), Wr = part(W, 1), Wh = part(W, 2), Rz = part(R, 0), Rr = part(R, 1), Rh = part(R, 2);
    const Tensor Wbz = part(B, 0), Wbr = part(B, 1), Wbh = part(B, 2), Rbz = part(B, 3), Rbr = part(B, 4), Rbh = part(B, 5);
    Tensor h = squeeze(slice(h0, 0, d, d + 1), {0});
    for (int64_t i = 0; i < seq; ++i) {
      const int64_t t = d == 0 ? i : seq - 1 - i;
      const Tensor xt = squeeze(slice(x, 0, t, t + 1), {0});
      const Tensor z = sigmoid(matmul(xt, transpose(Wz)) + matmul(h, transpose(Rz)) + Wbz + Rbz);
      const Tensor r = sigmoid(matmul(xt, transpose(Wr)) + matmul(h, transpose(Rr)) + Wbr + Rbr);
      const Tensor hh = linear_before_reset ? r * (matmul(h, transpose(Rh)) + Rbh) : matmul(r * h, transpose(Rh)) + Rbh;
      h = (1.0 - z) * tanh(matmul(xt, transpose(Wh)) + hh + Wbh) + z * h;
      ys[size_t(t * dirs + d)] = h;
    }
    hs.push_back(h);
  }
  return {reshape(stack(ys, 0), {seq, dirs, x.shape()[1], H}), stack(hs, 0)};
}
}  // namespace

TEST_CASE("GRU: both placements of the reset gate, both directions, eagerly and compiled, as ONNX defines them") {
  // (linear_before_reset: the reset gate scales R_h h, a block of the step's one product by R;
  // otherwise it scales h, which R_h then multiplies apart. The two give different answers.)
  const int64_t seq = 5, batch = 2, I = 3, H = 4;
  for (const std::string direction : {"forward", "bidirectional"}) {
    const int64_t dirs = direction == "forward" ? 1 : 2;
    const Tensor W = test::random({dirs, 3 * H, I}, DType::F32, 1) * 0.5, R = test::random({dirs, 3 * H, H}, DType::F32, 2) * 0.5;
    const Tensor B = test::random({dirs, 6 * H}, DType::F32, 3) * 0.5, h0 = test::random({dirs, batch, H}, DType::F32, 4);
    const Tensor x = test::random({seq, batch, I}, DType::F32, 5);
    std::vector<Tensor> outputs;
    std::vector<int> products;
    for (const int64_t lbr : {0, 1}) {
      CAPTURE(direction);
      CAPTURE(lbr);
      ::onnx::ModelProto m = empty_model("gru");
      auto* g = m.mutable_graph();
      add_value(g->add_input(), "x", ::onnx::TensorProto::FLOAT, {std::to_string(seq), std::to_string(batch), std::to_string(I)});
      *g->add_initializer() = proto_of("W", W);
      *g->add_initializer() = proto_of("R", R);
      *g->add_initializer() = proto_of("B", B);
      *g->add_initializer() = proto_of("h0", h0);
      auto* n = add_node(g, "GRU", {"x", "W", "R", "B", "", "h0"}, {"Y", "Y_h"});
      add_int(n, "hidden_size", H);
      add_int(n, "linear_before_reset", lbr);
      add_string(n, "direction", direction);
      add_value(g->add_output(), "Y", ::onnx::TensorProto::FLOAT, {std::to_string(seq), std::to_string(dirs), std::to_string(batch), std::to_string(H)});
      add_value(g->add_output(), "Y_h", ::onnx::TensorProto::FLOAT, {std::to_string(dirs), std::to_string(batch), std::to_string(H)});
      const auto [y, yh] = gru_reference(x, W, R, B, h0, lbr != 0);
      const hjit::onnx::Model model = hjit::onnx::Model::parse(m.SerializeAsString());
      const std::vector<Tensor> eager = model({x}), compiled = model.module().call({x});
      CHECK(test::compare(eager.at(0), y, 1e-5) == "");
      CHECK(test::compare(eager.at(1), yh, 1e-5) == "");
      CHECK(test::compare(compiled.at(0), y, 1e-5) == "");
      CHECK(test::compare(compiled.at(1), yh, 1e-5) == "");
      products.push_back(test::occurrences(model.module().str(), "= matmul "));
      outputs.push_back(compiled.at(0));
    }
    CHECK(test::compare(outputs[0], outputs[1], 1e-3) != "");
    CHECK(products[1] < products[0]);  // R_h h is a block of the step's one product by R
  }
}

TEST_CASE("a recurrent model over a symbolic sequence length compiles once and runs every length") {
  // A bidirectional GRU through hjit::onnx::load: its scans' trip count is the dynamic length.
  const int64_t batch = 2, I = 3, H = 4;
  const Tensor W = test::random({2, 3 * H, I}, DType::F32, 1) * 0.5, R = test::random({2, 3 * H, H}, DType::F32, 2) * 0.5;
  const Tensor B = test::random({2, 6 * H}, DType::F32, 3) * 0.5, h0 = test::random({2, batch, H}, DType::F32, 4);
  ::onnx::ModelProto m = empty_model("gru_any_length");
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", ::onnx::TensorProto::FLOAT, {"T", std::to_string(batch), std::to_string(I)});
  *g->add_initializer() = proto_of("W", W);
  *g->add_initializer() = proto_of("R", R);
  *g->add_initializer() = proto_of("B", B);
  *g->add_initializer() = proto_of("h0", h0);
  auto* n = add_node(g, "GRU", {"x", "W", "R", "B", "", "h0"}, {"Y", "Y_h"});
  add_int(n, "hidden_size", H);
  add_int(n, "linear_before_reset", 1);
  add_string(n, "direction", "bidirectional");
  add_value(g->add_output(), "Y", ::onnx::TensorProto::FLOAT, {"T", "2", std::to_string(batch), std::to_string(H)});
  add_value(g->add_output(), "Y_h", ::onnx::TensorProto::FLOAT, {"2", std::to_string(batch), std::to_string(H)});
  const hjit::Module module = hjit::onnx::load(write_model(m, "onnx_gru_any_length"));
  CHECK(module.dynamic_dims() == std::vector<std::pair<int, int>>{{0, 0}});  // one pipeline for every length
  for (int64_t seq : {8, 2, 31, 5}) {
    CAPTURE(seq);
    const Tensor x = test::random({seq, batch, I}, DType::F32, uint64_t(seq));
    const auto [y, yh] = gru_reference(x, W, R, B, h0, true);
    const hjit::ModuleResult got = module.call({x});
    CHECK(got.at(0).shape() == hjit::Shape{seq, 2, batch, H});
    CHECK(test::compare(got.at(0), y, 1e-5) == "");
    CHECK(test::compare(got.at(1), yh, 1e-5) == "");
  }
}

TEST_CASE("symbolic dimensions compile once: one module runs every batch size, and saves so") {
  const std::string path = write_model(small_cnn("N"), "onnx_cnn_dynamic");
  const hjit::onnx::Model model = hjit::onnx::Model::read(path);
  hjit::Module m = hjit::onnx::load(path);  // N traced at 8, dynamic
  REQUIRE(m.dynamic_dims() == std::vector<std::pair<int, int>>{{0, 0}});
  for (int64_t n : {8, 1, 3, 17, 2}) {
    const Tensor x = test::random({n, 3, 8, 8}, DType::F32, uint64_t(20 + n));
    const Tensor y = m(x);
    CHECK(y.shape() == hjit::Shape{n, 5});
    CHECK_CLOSE(y, small_cnn_reference(model, x));
  }
  check_throws_containing<hjit::ShapeError>([&] { m(test::random({2, 3, 9, 8}, DType::F32, 1)); }, "dynamic_dims");
  // Saved and loaded: still every size.
  const std::string saved = (fs::path(test::scratch_dir("onnx_cnn_dynamic_saved")) / "cnn.hjit").string();
  m.save(saved);
  hjit::Module back = hjit::Module::load(saved);
  CHECK(back.dynamic_dims() == m.dynamic_dims());
  const Tensor x5 = test::random({5, 3, 8, 8}, DType::F32, 5);
  CHECK_CLOSE(Tensor(back(x5)), small_cnn_reference(model, x5));
  // The batch given by LoadOptions::dims is where it is traced; any other still runs.
  hjit::Module m4 = hjit::onnx::load(path, {.dims = {{"N", 4}}});
  CHECK(m4.input_types().at(0).shape == hjit::Shape{4, 3, 8, 8});
  CHECK_CLOSE(Tensor(m4(x5)), small_cnn_reference(model, x5));
}

TEST_CASE("a MatMul declared [2,K] x [J,5] refuses K != J at the call, as eager does, from a file too") {
  ::onnx::ModelProto m = empty_model("contract");
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "a", ::onnx::TensorProto::FLOAT, {"2", "K"});
  add_value(g->add_input(), "b", ::onnx::TensorProto::FLOAT, {"J", "5"});
  add_value(g->add_output(), "y", ::onnx::TensorProto::FLOAT, {"2", "5"});
  add_node(g, "MatMul", {"a", "b"}, {"y"});
  const std::string path = write_model(m, "onnx_contract");
  const hjit::Module module = hjit::onnx::load(path);
  const std::string saved = (fs::path(path).parent_path() / "contract.hjit").string();
  module.save(saved);
  const hjit::Module back = hjit::Module::load(saved);
  for (const hjit::Module* mod : {&module, &back}) {
    for (auto [k, j] : {std::pair<int64_t, int64_t>{3, 4}, {100, 3}, {10'000'000, 3}})
      check_throws_containing<hjit::ShapeError>([&] { (*mod)(Tensor::zeros({2, k}), Tensor::zeros({j, 5})); },
                                                "contraction sizes differ");
    const Tensor a = test::random({2, 11}, DType::F32, 1), b = test::random({11, 5}, DType::F32, 2);
    CHECK_CLOSE(Tensor((*mod)(a, b)), hjit::matmul(a, b));
  }
}

TEST_CASE("a Gather whose initializer index is out of range is eager's IndexError from every door") {
  ::onnx::ModelProto m = empty_model("gather");
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", ::onnx::TensorProto::FLOAT, {"5", "3"});
  add_value(g->add_output(), "y", ::onnx::TensorProto::FLOAT, {"1", "3"});
  *g->add_initializer() = proto_of("i", Tensor::from_vector(std::vector<int64_t>{7}, {1}));
  add_node(g, "Gather", {"x", "i"}, {"y"});
  const std::string path = write_model(m, "onnx_gather_out_of_range");
  const Tensor x = test::random({5, 3}, DType::F32, 1);
  check_throws_containing<hjit::IndexError>([&] { hjit::onnx::load(path)(x); }, "index 7 is out of range");
  check_throws_containing<hjit::IndexError>([&] { hjit::onnx::load(path, {.freeze = true})(x); }, "index 7 is out of range");
  check_throws_containing<hjit::IndexError>([&] { hjit::onnx::Model::read(path)({x}); }, "index 7 is out of range");
}

TEST_CASE("structures that crash ONNX's own library are ValueErrors before it reads them") {
  auto model = [](int64_t opset) {
    ::onnx::ModelProto m = empty_model("hostile");
    m.mutable_opset_import(0)->set_version(opset);
    return m;
  };
  auto refused = [](const ::onnx::ModelProto& m, const std::string& part) {
    const std::string bytes = m.SerializeAsString();
    check_throws_containing([&] { hjit::onnx::Model::parse(bytes, "", {}); }, part);
  };
  {  // opset 6's Add with one input: the version converter dereferenced the missing one
    ::onnx::ModelProto m = model(6);
    add_value(m.mutable_graph()->add_input(), "a", ::onnx::TensorProto::FLOAT, {"2"});
    add_value(m.mutable_graph()->add_output(), "y", ::onnx::TensorProto::FLOAT, {"2"});
    add_node(m.mutable_graph(), "Add", {"a"}, {"y"});
    refused(m, "has 1 inputs; Add of opset 6 takes 2");
  }
  {  // opset 1's Mul with none
    ::onnx::ModelProto m = model(1);
    add_value(m.mutable_graph()->add_output(), "y", ::onnx::TensorProto::FLOAT, {"2"});
    add_node(m.mutable_graph(), "Mul", {}, {"y"});
    refused(m, "has 0 inputs");
  }
  for (const char* op : {"Conv", "MaxPool", "AveragePool"}) {  // strides 0: shape inference divided by it
    CAPTURE(op);
    ::onnx::ModelProto m = model(13);
    auto* g = m.mutable_graph();
    add_value(g->add_input(), "x", ::onnx::TensorProto::FLOAT, {"1", "3", "8", "8"});
    add_value(g->add_output(), "y", ::onnx::TensorProto::FLOAT, {});
    std::vector<std::string> in{"x"};
    if (std::string(op) == "Conv") {
      *g->add_initializer() = proto_of("w", test::random({4, 3, 3, 3}, DType::F32, 1));
      in.push_back("w");
    }
    auto* n = add_node(g, op, in, {"y"});
    add_ints(n, "kernel_shape", {3, 3});
    add_ints(n, "strides", {0, 0});
    refused(m, "has strides containing 0: each must be positive");
  }
  {  // a declared dimension of -5 is no size (it was read as unknown)
    ::onnx::ModelProto m = model(13);
    add_value(m.mutable_graph()->add_input(), "a", ::onnx::TensorProto::FLOAT, {"-5"});
    add_value(m.mutable_graph()->add_output(), "y", ::onnx::TensorProto::FLOAT, {"-5"});
    add_node(m.mutable_graph(), "Relu", {"a"}, {"y"});
    refused(m, "input 'a' declares dimension -5");
  }
}

TEST_CASE("sizes and values that make no sense are typed errors naming the node, before anything large is allocated") {
  auto one_node = [](const std::string& op, const std::vector<Tensor>& constants, const std::vector<std::string>& outputs) {
    ::onnx::ModelProto m = empty_model("values");
    auto* g = m.mutable_graph();
    std::vector<std::string> in;
    for (size_t k = 0; k < constants.size(); ++k) {
      *g->add_initializer() = proto_of("c" + std::to_string(k), constants[k]);
      in.push_back("c" + std::to_string(k));
    }
    for (const std::string& o : outputs)  // of any size
      add_value(g->add_output(), o, ::onnx::TensorProto::FLOAT, op == "ConstantOfShape" ? std::vector<std::string>{"n", "m"} : std::vector<std::string>{"n"});
    add_node(g, op, in, outputs);
    return m.SerializeAsString();
  };
  auto refused = [](const std::string& bytes, const std::string& part) {
    check_throws_containing<hjit::Error>([&] { hjit::onnx::Model::parse(bytes, "", {})({}); }, part);
  };
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (auto [start, limit, delta] : {std::tuple{0.0, inf, 1.0}, {0.0, 1e30, 1.0}, {0.0, 4.0, nan}, {0.0, 4.0, 0.0}}) {
    CAPTURE(limit);
    CAPTURE(delta);
    refused(one_node("Range", {Tensor::scalar(start), Tensor::scalar(limit), Tensor::scalar(delta)}, {"y"}),
            std::isfinite(limit) && std::isfinite(delta) ? (delta == 0 ? "delta must not be 0" : "too large") : "needs finite");
  }
  refused(one_node("Split", {Tensor::zeros({4}), Tensor::from_vector(std::vector<int64_t>{1'000'000'000'000, -1'000'000'000'000 + 4}, {2})},
                   {"a", "b"}),
          "has split size -999999999996");
  // A huge ConstantOfShape: hjit's memory limit, raised before the allocation, naming the node.
  hjit::set_memory_limit(int64_t(1) << 30);
  refused(one_node("ConstantOfShape", {Tensor::from_vector(std::vector<int64_t>{1 << 20, 1 << 20}, {2})}, {"y"}), "ConstantOfShape");
  check_throws_containing<hjit::ResourceError>(
      [&] { hjit::onnx::Model::parse(one_node("ConstantOfShape", {Tensor::from_vector(std::vector<int64_t>{1 << 20, 1 << 20}, {2})}, {"y"}), "", {})({}); },
      "memory limit");
  hjit::set_memory_limit(0);
  // A 100-byte file declaring 2^31 floats: refused from what it holds, before any allocation.
  ::onnx::TensorProto big;
  big.set_name("w");
  big.set_data_type(::onnx::TensorProto::FLOAT);
  big.add_dims(int64_t(1) << 31);
  big.add_float_data(1.0f);
  ::onnx::ModelProto m = empty_model("declared");
  *m.mutable_graph()->add_initializer() = big;
  add_value(m.mutable_graph()->add_output(), "y", ::onnx::TensorProto::FLOAT, {"n"});
  add_node(m.mutable_graph(), "Relu", {"w"}, {"y"});
  hjit::reset_peak_memory();
  refused(m.SerializeAsString(), "declares 2147483648 elements");
  CHECK(hjit::memory_stats().peak_bytes - hjit::memory_stats().current_bytes < (int64_t(64) << 20));
}

TEST_CASE("a model run eagerly after a module was made from it reports no rebound parameter") {
  std::ostringstream logged;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(logged);
  hjit::log().sinks().push_back(sink);
  const hjit::onnx::Model model = hjit::onnx::Model::parse(small_cnn("2").SerializeAsString());
  const hjit::Module module = model.module();
  const Tensor x = test::random({2, 3, 8, 8}, DType::F32, 1);
  const Tensor eager = model({x}).at(0);
  hjit::log().sinks().pop_back();
  CHECK(logged.str().find("rebound") == std::string::npos);
  CHECK_CLOSE(Tensor(module(x)), eager);
  CHECK_CLOSE(eager, small_cnn_reference(model, x));
}

namespace {
// The weight, scales and zero points of qdq_linear.
struct QdqWeights {
  Tensor w;  // i8 [K, N]
  std::vector<float> scales;
};
QdqWeights qdq_weights(int64_t K, int64_t N) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> w8(-127, 127);
  std::vector<int32_t> w(size_t(K * N));
  for (int32_t& v : w) v = w8(gen);
  std::vector<float> column_scales(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) column_scales[size_t(j)] = 0.002f + 0.0001f * float(j % 13);
  return {Tensor::from_vector(w, {K, N}).astype(DType::I8), column_scales};
}

// x (f32 [M, K]) quantized to u8 per tensor, times an i8 weight with per-column scales and zero
// points, dequantized: ONNX Runtime's QDQ form of a linear layer (a Gemm takes the weight
// transposed, [N, K], its scales along axis 0, as exporters write it). Outputs: the f32 product
// (y) and y quantized again (y_q, u8).
::onnx::ModelProto qdq_linear(int64_t M, int64_t K, int64_t N, bool gemm) {
  ::onnx::ModelProto m = empty_model("qdq_linear");
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", ::onnx::TensorProto::FLOAT, {std::to_string(M), std::to_string(K)});
  add_value(g->add_output(), "y", ::onnx::TensorProto::FLOAT, {std::to_string(M), std::to_string(N)});
  add_value(g->add_output(), "y_q", ::onnx::TensorProto::UINT8, {std::to_string(M), std::to_string(N)});
  const QdqWeights q = qdq_weights(K, N);
  *g->add_initializer() = proto_of("w_q", gemm ? hjit::transpose(q.w) : q.w);
  *g->add_initializer() = proto_of("w_scale", Tensor::from_vector(q.scales, {N}));
  *g->add_initializer() = proto_of("w_zp", Tensor::zeros({N}, DType::I8));
  *g->add_initializer() = proto_of("x_scale", Tensor::scalar(0.02));
  *g->add_initializer() = proto_of("x_zp", Tensor::scalar(120, DType::U8));
  *g->add_initializer() = proto_of("y_scale", Tensor::scalar(0.05));
  *g->add_initializer() = proto_of("y_zp", Tensor::scalar(128, DType::U8));
  add_node(g, "QuantizeLinear", {"x", "x_scale", "x_zp"}, {"x_q"});
  add_node(g, "DequantizeLinear", {"x_q", "x_scale", "x_zp"}, {"x_d"});
  add_int(add_node(g, "DequantizeLinear", {"w_q", "w_scale", "w_zp"}, {"w_d"}), "axis", gemm ? 0 : 1);
  if (gemm) add_int(add_node(g, "Gemm", {"x_d", "w_d"}, {"y"}), "transB", 1);
  else add_node(g, "MatMul", {"x_d", "w_d"}, {"y"});
  add_node(g, "QuantizeLinear", {"y", "y_scale", "y_zp"}, {"y_q"});
  return m;
}
}  // namespace

TEST_CASE("QDQ MatMul and Gemm run on the integer product, within f32 rounding of ONNX's literal computation, requantized with one multiplier") {
  const int64_t M = 24, K = 70, N = 40;
  const QdqWeights q = qdq_weights(K, N);
  const Tensor x = test::random({M, K}, DType::F32, 3) * 0.7;
  // ONNX's literal computation in f64: x quantized (half to even) and dequantized, the weight
  // dequantized, the product, then quantized again.
  const Tensor xd = (hjit::clamp(hjit::round(x.astype(DType::F64) / Tensor::scalar(0.02f).astype(DType::F64)) + 120, 0, 255) - 120) *
                    Tensor::scalar(0.02f).astype(DType::F64);
  const Tensor wd = q.w.astype(DType::F64) * Tensor::from_vector(q.scales, {N}).astype(DType::F64);
  const std::vector<double> y_literal = hjit::matmul(xd, wd).to_vector<double>();
  // The quantization of the product as an integer kernel requantizes (ONNX's QLinearMatMul): the
  // exact integer sum times one f32 multiplier, x_scale * w_scale / y_scale, rounded half to even.
  const Tensor xq = hjit::clamp(hjit::round(x / Tensor::scalar(0.02f)) + 120, 0, 255) - 120;
  const std::vector<int32_t> acc = hjit::matmul(xq.astype(DType::I32), q.w.astype(DType::I32)).to_vector<int32_t>();
  std::vector<int32_t> y_requantized(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) {
    const float multiplier = 0.02f * q.scales[i % size_t(N)] / 0.05f;
    y_requantized[i] = int32_t(std::clamp(std::nearbyint(float(acc[i]) * multiplier) + 128.0f, 0.0f, 255.0f));
  }
  for (bool gemm : {false, true}) {
    CAPTURE(gemm);
    const std::string path = write_model(qdq_linear(M, K, N, gemm), gemm ? "onnx_qdq_gemm" : "onnx_qdq_matmul");
    const hjit::Module frozen = hjit::onnx::load(path, {.freeze = true});  // the weight packed once, compiling
    const hjit::Module plain = hjit::onnx::load(path);                     // an argument, packed at each call
    CHECK(frozen.graph().str().find("int_matmul") != std::string::npos);
    CHECK(plain.graph().str().find("int_matmul") != std::string::npos);
    const std::vector<Tensor> eager = hjit::onnx::Model::read(path)({x});
    for (const hjit::ModuleResult& r : {frozen(x), plain(x)}) {
      REQUIRE(r.size() == 2);
      // The integer product scaled once: the compiled result is eager's, bit for bit.
      CHECK(r[0].to_vector<float>() == eager.at(0).to_vector<float>());
      CHECK(r[1].to_vector<int32_t>() == eager.at(1).to_vector<int32_t>());
      CHECK(r[1].to_vector<int32_t>() == y_requantized);
      const std::vector<double> y = r[0].to_vector<double>();
      const std::vector<int32_t> yq = r[1].to_vector<int32_t>();
      int off_by_one = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        CHECK(std::abs(y[i] - y_literal[i]) <= 1e-6 * (1 + std::abs(y_literal[i])));
        const double want_q = std::clamp(std::nearbyint(y_literal[i] / double(0.05f)) + 128, 0.0, 255.0);
        CHECK(std::abs(yq[i] - want_q) <= 1);
        off_by_one += yq[i] != int32_t(want_q);
      }
      CHECK(off_by_one <= int(y.size() / 100));  // a tie rounded the other way, rarely
    }
  }
}

TEST_CASE("a QDQ product's quantization rounds the integer sum times one multiplier, where the literal quotient can round the other way") {
  // acc = 125 x; x_scale * w_scale = 4e-5 and y_scale = 0.05: acc = 625 (x = 5) is 0.025 / 0.05,
  // a half in f32's literal two roundings (rounded to 1, odd), 0.49999997 through the one
  // multiplier, x_scale * w_scale / y_scale in f32 (0), as ONNX's QLinearMatMul and ONNX Runtime's
  // fused kernels compute it. Every x from 0 to 255, both roundings checked.
  ::onnx::ModelProto m = empty_model("qdq_one_multiplier");
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x_q", ::onnx::TensorProto::UINT8, {"256", "1"});
  add_value(g->add_output(), "y_q", ::onnx::TensorProto::UINT8, {"256", "1"});
  *g->add_initializer() = proto_of("x_scale", Tensor::scalar(0.02));
  *g->add_initializer() = proto_of("x_zp", Tensor::scalar(0, DType::U8));
  *g->add_initializer() = proto_of("w_q", Tensor::full({1, 1}, 125, DType::I8));
  *g->add_initializer() = proto_of("w_scale", Tensor::from_vector(std::vector<float>{0.002f}, {1}));
  *g->add_initializer() = proto_of("y_scale", Tensor::scalar(0.05));
  *g->add_initializer() = proto_of("y_zp", Tensor::scalar(10, DType::U8));
  add_node(g, "DequantizeLinear", {"x_q", "x_scale", "x_zp"}, {"x_d"});
  add_int(add_node(g, "DequantizeLinear", {"w_q", "w_scale"}, {"w_d"}), "axis", 1);
  add_node(g, "MatMul", {"x_d", "w_d"}, {"y"});
  add_node(g, "QuantizeLinear", {"y", "y_scale", "y_zp"}, {"y_q"});
  const std::string path = write_model(m, "onnx_qdq_one_multiplier");
  std::vector<int32_t> xs(256), want(256);
  const float multiplier = 0.02f * 0.002f / 0.05f;
  int literal_differs = 0;
  for (int32_t x = 0; x < 256; ++x) {
    xs[size_t(x)] = x;
    want[size_t(x)] = int32_t(std::min(255.0f, std::nearbyint(float(125 * x) * multiplier) + 10));
    literal_differs += want[size_t(x)] != int32_t(std::min(255.0f, std::nearbyint(float(125 * x) * (0.02f * 0.002f) / 0.05f) + 10));
  }
  CHECK(want[5] == 10);
  CHECK(literal_differs > 0);
  const Tensor x = Tensor::from_vector(xs, {256, 1}).astype(DType::U8);
  CHECK(hjit::onnx::Model::read(path)({x}).at(0).to_vector<int32_t>() == want);
  for (bool freeze : {false, true}) CHECK(Tensor(hjit::onnx::load(path, {.freeze = freeze})(x)).to_vector<int32_t>() == want);
}

TEST_CASE("a QDQ softmax's quantization multiplies each row by one reciprocal: compiled as eager, within a step of the literal") {
  const int64_t R = 37, L = 70;
  ::onnx::ModelProto m = empty_model("qdq_softmax");
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", ::onnx::TensorProto::FLOAT, {std::to_string(R), std::to_string(L)});
  add_value(g->add_output(), "y_q", ::onnx::TensorProto::UINT8, {std::to_string(R), std::to_string(L)});
  *g->add_initializer() = proto_of("x_scale", Tensor::scalar(0.1));
  *g->add_initializer() = proto_of("x_zp", Tensor::scalar(128, DType::U8));
  *g->add_initializer() = proto_of("y_scale", Tensor::scalar(1.0 / 256));
  *g->add_initializer() = proto_of("y_zp", Tensor::scalar(0, DType::U8));
  add_node(g, "QuantizeLinear", {"x", "x_scale", "x_zp"}, {"x_q"});
  add_node(g, "DequantizeLinear", {"x_q", "x_scale", "x_zp"}, {"x_d"});
  add_node(g, "Softmax", {"x_d"}, {"p"});
  add_node(g, "QuantizeLinear", {"p", "y_scale", "y_zp"}, {"y_q"});
  const std::string path = write_model(m, "onnx_qdq_softmax");
  const Tensor x = test::random({R, L}, DType::F32, 8) * 3.0;
  // The literal computation in f64 from the same 8-bit values.
  const Tensor xd = (hjit::clamp(hjit::round(x / Tensor::scalar(0.1f)) + 128, 0, 255) - 128).astype(DType::F64) * double(0.1f);
  const Tensor e = hjit::exp(xd - hjit::max(xd, {1}, true));
  const std::vector<double> literal = hjit::clamp(hjit::round(e / hjit::sum(e, {1}, true) * 256.0), 0, 255).to_vector<double>();
  const std::vector<int32_t> eager = hjit::onnx::Model::read(path)({x}).at(0).to_vector<int32_t>();
  int off_by_one = 0;
  for (size_t i = 0; i < literal.size(); ++i) {
    CHECK(std::abs(eager[i] - literal[i]) <= 1);
    off_by_one += eager[i] != int32_t(literal[i]);
  }
  CHECK(off_by_one <= int(literal.size() / 100));
  for (bool freeze : {false, true}) {
    const hjit::Module module = hjit::onnx::load(path, {.freeze = freeze});
    CHECK(Tensor(module(x)).to_vector<int32_t>() == eager);
    // One division a row: the reciprocal of its sum times the scale; none of the row's elements.
    const std::string graph = module.graph().str();
    int divisions = 0;
    for (size_t at = graph.find(" = div "); at != std::string::npos; at = graph.find(" = div ", at + 1)) {
      ++divisions;
      CHECK(graph.rfind("f32[" + std::to_string(R) + ",1]", at) > graph.rfind('\n', at));
    }
    CHECK(divisions >= 1);
  }
}

TEST_CASE("MatMulInteger and QLinearMatMul of 8-bit operands are exact, zero points per tensor, per row and per column") {
  ::onnx::ModelProto m = empty_model("integer");
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "a", ::onnx::TensorProto::UINT8, {"6", "9"});
  add_value(g->add_input(), "b", ::onnx::TensorProto::INT8, {"9", "5"});
  add_value(g->add_output(), "y", ::onnx::TensorProto::INT32, {"6", "5"});
  add_value(g->add_output(), "yq", ::onnx::TensorProto::UINT8, {"6", "5"});
  *g->add_initializer() = proto_of("a_zp", Tensor::from_vector(std::vector<int32_t>{3, 0, 255, 7, 128, 1}, {6}).astype(DType::U8));
  *g->add_initializer() = proto_of("b_zp", Tensor::from_vector(std::vector<int32_t>{-128, 0, 127, 5, -3}, {5}).astype(DType::I8));
  *g->add_initializer() = proto_of("a_zp1", Tensor::scalar(17, DType::U8));
  *g->add_initializer() = proto_of("b_zp1", Tensor::scalar(-9, DType::I8));
  *g->add_initializer() = proto_of("sa", Tensor::scalar(0.03));
  *g->add_initializer() = proto_of("sb", Tensor::scalar(0.01));
  *g->add_initializer() = proto_of("sy", Tensor::scalar(0.4));
  *g->add_initializer() = proto_of("zy", Tensor::scalar(100, DType::U8));
  add_node(g, "MatMulInteger", {"a", "b", "a_zp", "b_zp"}, {"y"});
  add_node(g, "QLinearMatMul", {"a", "sa", "a_zp1", "b", "sb", "b_zp1", "sy", "zy"}, {"yq"});
  const std::string path = write_model(m, "onnx_integer_matmul");
  const Tensor a = hjit::floor(Tensor::uniform({6, 9}, 1, 0, 256)).astype(DType::U8);
  const Tensor b = hjit::floor(Tensor::uniform({9, 5}, 2, -128, 128)).astype(DType::I8);
  const Tensor ai = a.astype(DType::I32), bi = b.astype(DType::I32);
  const Tensor za = Tensor::from_vector(std::vector<int32_t>{3, 0, 255, 7, 128, 1}, {6, 1});
  const Tensor zb = Tensor::from_vector(std::vector<int32_t>{-128, 0, 127, 5, -3}, {5});
  const std::vector<int32_t> want = hjit::matmul(ai - za, bi - zb).to_vector<int32_t>();
  const Tensor acc = hjit::matmul(ai - 17, bi + 9).astype(DType::F32);
  const std::vector<int32_t> want_q =
      hjit::clamp(hjit::round(acc * (Tensor::scalar(0.03f) * Tensor::scalar(0.01f) / Tensor::scalar(0.4f))) + 100, 0, 255)
          .to_vector<int32_t>();
  const hjit::Module module = hjit::onnx::load(path);
  CHECK(module.graph().str().find("int_matmul") != std::string::npos);
  for (const std::vector<Tensor>& r : {std::vector<Tensor>(module(a, b)), hjit::onnx::Model::read(path)({a, b})}) {
    CHECK(r.at(0).to_vector<int32_t>() == want);
    CHECK(r.at(1).to_vector<int32_t>() == want_q);
  }
}

TEST_CASE("QDQ Conv (per-channel weights, bias, stride and padding) runs on the integer convolution, within f32 rounding of the literal") {
  for (int64_t group : {int64_t(1), int64_t(8)}) {
    CAPTURE(group);
    const int64_t C = 8, O = 16, cg = C / group;
    ::onnx::ModelProto m = empty_model("qdq_conv");
    auto* g = m.mutable_graph();
    add_value(g->add_input(), "x", ::onnx::TensorProto::FLOAT, {"2", "8", "11", "10"});
    add_value(g->add_output(), "y", ::onnx::TensorProto::FLOAT, {"2", "16", "6", "5"});
    std::mt19937 gen(11);
    std::uniform_int_distribution<int> w8(-127, 127);
    std::vector<int32_t> wv(size_t(O * cg * 9));
    for (int32_t& v : wv) v = w8(gen);
    std::vector<float> ws(static_cast<size_t>(O)), bias(static_cast<size_t>(O));
    for (int64_t o = 0; o < O; ++o) ws[size_t(o)] = 0.003f + 0.0002f * float(o), bias[size_t(o)] = 0.1f * float(o % 5) - 0.2f;
    const Tensor w = Tensor::from_vector(wv, {O, cg, 3, 3}).astype(DType::I8);
    *g->add_initializer() = proto_of("w_q", w);
    *g->add_initializer() = proto_of("w_scale", Tensor::from_vector(ws, {O}));
    *g->add_initializer() = proto_of("w_zp", Tensor::zeros({O}, DType::I8));
    *g->add_initializer() = proto_of("b", Tensor::from_vector(bias, {O}));
    *g->add_initializer() = proto_of("x_scale", Tensor::scalar(0.02));
    *g->add_initializer() = proto_of("x_zp", Tensor::scalar(120, DType::U8));
    add_node(g, "QuantizeLinear", {"x", "x_scale", "x_zp"}, {"x_q"});
    add_node(g, "DequantizeLinear", {"x_q", "x_scale", "x_zp"}, {"x_d"});
    add_int(add_node(g, "DequantizeLinear", {"w_q", "w_scale", "w_zp"}, {"w_d"}), "axis", 0);
    auto* conv = add_node(g, "Conv", {"x_d", "w_d", "b"}, {"y"});
    add_ints(conv, "pads", {1, 1, 1, 1});
    add_ints(conv, "strides", {2, 2});
    add_int(conv, "group", group);
    const std::string path = write_model(m, "onnx_qdq_conv_g" + std::to_string(group));
    const Tensor x = test::random({2, 8, 11, 10}, DType::F32, 4) * 0.8;
    const Tensor s32 = Tensor::scalar(0.02f).astype(DType::F64);
    const Tensor xd = (hjit::clamp(hjit::round(x.astype(DType::F64) / s32) + 120, 0, 255) - 120) * s32;
    const Tensor wd = w.astype(DType::F64) * hjit::reshape(Tensor::from_vector(ws, {O}).astype(DType::F64), {O, 1, 1, 1});
    const std::vector<double> want =
        hjit::conv2d(xd, wd, Tensor::from_vector(bias, {O}).astype(DType::F64), {2, 2}, {1, 1}, {1, 1}, group).to_vector<double>();
    const hjit::Module module = hjit::onnx::load(path, {.freeze = true});
    if (group == 1) CHECK(module.graph().str().find("int_conv2d") != std::string::npos);
    const std::vector<double> got = Tensor(module(x)).to_vector<double>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= 1e-5 * (1 + std::abs(want[i])));
    // The weight an argument: packed at each call, the same sums (the scale's product and the bias
    // may fuse into one rounding instead of two).
    CHECK(test::compare(Tensor(hjit::onnx::load(path)(x)), Tensor(module(x)), 1e-6) == "");
  }
}

TEST_CASE("quantize writes an int8 QDQ model that loads onto integer kernels and stays close to the f32 model") {
  const std::string path = write_model(small_cnn("4"), "onnx_quantize_small_cnn");
  const std::string out = (fs::path(path).parent_path() / "int8.onnx").string();
  std::vector<std::vector<Tensor>> batches;
  for (uint64_t b = 0; b < 3; ++b) batches.push_back({test::random({4, 3, 8, 8}, DType::F32, 40 + b)});
  for (bool percentile : {false, true}) {
    CAPTURE(percentile);
    hjit::onnx::QuantizeOptions o;
    if (percentile) o.calibration = hjit::onnx::QuantizeOptions::Calibration::Percentile, o.percentile = 99.9;
    hjit::onnx::quantize(path, out, batches, o);
    // ONNX Runtime's form: Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm with the Relu gone
    // (the clamp of the convolution's quantized output) and a pair after the input, the
    // convolution, the pooling, the flattened value and the Gemm; both weights behind one.
    const std::map<std::string, int> ops = hjit::onnx::Model::read(out).info().op_counts;
    CHECK(ops.count("Relu") == 0);
    CHECK(ops.at("QuantizeLinear") == 5);
    CHECK(ops.at("DequantizeLinear") == 7);
    const hjit::Module q = hjit::onnx::load(out, {.freeze = true});
    const std::string graph = q.graph().str();
    CHECK(graph.find("int_conv2d") != std::string::npos);
    CHECK(graph.find("int_matmul") != std::string::npos);
    const Tensor x = test::random({4, 3, 8, 8}, DType::F32, 99);
    const std::vector<float> want = Tensor(hjit::onnx::load(path)(x)).to_vector<float>(), got = Tensor(q(x)).to_vector<float>();
    float span = 0;
    for (float v : want) span = std::max(span, std::abs(v));
    // (Percentile calibration clips the rare values past its percentile: a little further off there.)
    const float tolerance = percentile ? 0.1f : 0.05f;
    for (size_t i = 0; i < want.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= tolerance * span);
    // The same from the CLI's door: hjit-onnx quantize is this function.
    CHECK(Tensor(hjit::onnx::load(out)(x)).to_vector<float>().size() == want.size());
  }
  check_throws_containing<hjit::ValueError>([&] { hjit::onnx::quantize(path, out, {}); }, "calibration");
  hjit::onnx::QuantizeOptions bad;
  bad.calibration = hjit::onnx::QuantizeOptions::Calibration::Percentile, bad.percentile = 20;
  check_throws_containing<hjit::ValueError>([&] { hjit::onnx::quantize(path, out, batches, bad); }, "percentile");
  const std::string old = write_model(empty_model("old", 11), "onnx_quantize_old");
  check_throws_containing<hjit::ValueError>([&] { hjit::onnx::quantize(old, out, batches); }, "opset");
  // Its own output (any quantized model) is refused rather than quantized twice.
  const std::string twice = (fs::path(path).parent_path() / "int8_twice.onnx").string();
  check_throws_containing<hjit::ValueError>([&] { hjit::onnx::quantize(out, twice, batches); }, "already quantized");
}

TEST_CASE("quantize names what it adds apart from the names a model already uses") {
  // The bias and the Gemm's bias under the names quantize() would give the input's scale and the
  // convolution weight's i8 copy.
  ::onnx::ModelProto m = small_cnn("4");
  auto* g = m.mutable_graph();
  for (auto& t : *g->mutable_initializer()) {
    if (t.name() == "b") t.set_name("x_qdq_scale");
    if (t.name() == "fcb") t.set_name("w_q");
  }
  for (auto& n : *g->mutable_node())
    for (int k = 0; k < n.input_size(); ++k) {
      if (n.input(k) == "b") n.set_input(k, "x_qdq_scale");
      if (n.input(k) == "fcb") n.set_input(k, "w_q");
    }
  const std::string path = write_model(m, "onnx_quantize_names");
  const std::string out = (fs::path(path).parent_path() / "int8.onnx").string();
  std::vector<std::vector<Tensor>> batches;
  for (uint64_t b = 0; b < 3; ++b) batches.push_back({test::random({4, 3, 8, 8}, DType::F32, 40 + b)});
  hjit::onnx::quantize(path, out, batches);
  const hjit::onnx::Model q = hjit::onnx::Model::read(out);  // ONNX's checker: every name defined once
  CHECK(q.info().op_counts.at("QuantizeLinear") == 5);
  const Tensor x = test::random({4, 3, 8, 8}, DType::F32, 99);
  const std::vector<float> want = Tensor(hjit::onnx::load(path)(x)).to_vector<float>(), got = q({x}).at(0).to_vector<float>();
  float span = 0;
  for (float v : want) span = std::max(span, std::abs(v));
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= 0.05f * span);
}

TEST_CASE("quantize removes a Clip around 0 after a convolution as a Relu, and keeps one it cannot") {
  // small_cnn with a ReLU6 (PyTorch's export: the bounds are Constant nodes or initializers) in
  // place of its Relu, and a second model whose Clip starts above 0.
  auto with_clip = [](float lo, const std::string& dir) {
    ::onnx::ModelProto m = small_cnn("4");
    auto* g = m.mutable_graph();
    ::onnx::NodeProto* relu = g->mutable_node(1);
    REQUIRE(relu->op_type() == "Relu");
    relu->set_op_type("Clip");
    relu->add_input("lo");
    relu->add_input("hi");
    *g->add_initializer() = proto_of("hi", Tensor::scalar(6.0));
    ::onnx::NodeProto* constant = add_node(g, "Constant", {}, {"lo"});
    add_tensor(constant, "value", Tensor::scalar(double(lo)));
    for (int k = g->node_size() - 1; k > 0; --k) g->mutable_node()->SwapElements(k, k - 1);  // the Constant first
    return write_model(m, dir);
  };
  std::vector<std::vector<Tensor>> batches;
  for (uint64_t b = 0; b < 3; ++b) batches.push_back({test::random({4, 3, 8, 8}, DType::F32, 40 + b) * 4.0});
  const Tensor x = test::random({4, 3, 8, 8}, DType::F32, 99) * 4.0;
  for (float lo : {0.0f, 0.5f}) {
    CAPTURE(lo);
    const std::string path = with_clip(lo, "onnx_quantize_clip_" + std::to_string(int(lo * 2)));
    const std::string out = (fs::path(path).parent_path() / "int8.onnx").string();
    hjit::onnx::quantize(path, out, batches);
    const std::map<std::string, int> ops = hjit::onnx::Model::read(out).info().op_counts;
    CHECK(ops.count("Clip") == (lo == 0 ? 0u : 1u));
    // The clip's range is the quantized output's: the values above 6 saturate where they clamped.
    const std::vector<float> want = Tensor(hjit::onnx::load(path)(x)).to_vector<float>();
    const std::vector<float> got = Tensor(hjit::onnx::load(out, {.freeze = true})(x)).to_vector<float>();
    float span = 0;
    for (float v : want) span = std::max(span, std::abs(v));
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= 0.05f * span);
  }
}

namespace {

// A detector's tail: per-box features x f32[N,6] through a linear layer (w: a parameter) to boxes
// and scores, the boxes scored above 0 (NonZero: how many depends on the values), their boxes
// and scores gathered, then NonMaxSuppression over them (at most 4, IoU 0.5). No one graph
// computes it: the sizes after NonZero and NMS come from values.
::onnx::ModelProto detector_tail() {
  ::onnx::ModelProto m = empty_model("detector_tail");
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", ::onnx::TensorProto::FLOAT, {"N", "6"});
  *g->add_initializer() = proto_of("w", test::random({6, 5}, DType::F32, 91));
  *g->add_initializer() = proto_of("coords", Tensor::from_vector<int64_t>({0, 1, 2, 3}, {4}));
  *g->add_initializer() = proto_of("score_col", Tensor::scalar(4, DType::I64));
  *g->add_initializer() = proto_of("axis0", Tensor::from_vector<int64_t>({0}, {1}));
  *g->add_initializer() = proto_of("axes01", Tensor::from_vector<int64_t>({0, 1}, {2}));
  add_node(g, "MatMul", {"x", "w"}, {"s"});
  add_node(g, "Gather", {"s", "coords"}, {"boxes"})->add_attribute()->CopyFrom([] {
    ::onnx::AttributeProto a;
    a.set_name("axis"), a.set_type(::onnx::AttributeProto::INT), a.set_i(1);
    return a;
  }());
  auto* sc = add_node(g, "Gather", {"s", "score_col"}, {"score"});
  add_int(sc, "axis", 1);
  auto* zero = add_node(g, "Constant", {}, {"zero"});
  add_tensor(zero, "value", Tensor::scalar(0.0, DType::F32));
  add_node(g, "Greater", {"score", "zero"}, {"keep"});
  add_node(g, "NonZero", {"keep"}, {"nz"});
  add_node(g, "Squeeze", {"nz", "axis0"}, {"idx"});
  add_node(g, "Gather", {"boxes", "idx"}, {"kept_boxes"});
  add_node(g, "Gather", {"score", "idx"}, {"kept_scores"});
  add_node(g, "Unsqueeze", {"kept_boxes", "axis0"}, {"b3"});
  add_node(g, "Unsqueeze", {"kept_scores", "axes01"}, {"s3"});
  auto* most = add_node(g, "Constant", {}, {"most"});
  add_tensor(most, "value", Tensor::from_vector<int64_t>({4}, {1}));
  auto* iou = add_node(g, "Constant", {}, {"iou"});
  add_tensor(iou, "value", Tensor::from_vector<float>({0.5f}, {1}));
  add_node(g, "NonMaxSuppression", {"b3", "s3", "most", "iou"}, {"selected"});
  add_value(g->add_output(), "kept_boxes", ::onnx::TensorProto::FLOAT, {"K", "4"});
  add_value(g->add_output(), "kept_scores", ::onnx::TensorProto::FLOAT, {"K"});
  add_value(g->add_output(), "selected", ::onnx::TensorProto::INT64, {"M", "3"});
  return m;
}

}  // namespace

TEST_CASE("one door: a model that reads values as sizes loads as a module in segments, runs every input, saves and loads") {
  const std::string path = write_model(detector_tail(), "onnx_detector_tail");
  const hjit::onnx::Model model = hjit::onnx::Model::read(path);
  hjit::Module m = hjit::onnx::load(path);
  REQUIRE(m.segmented());
  CHECK(m.why_segmented().find("NonZero") != std::string::npos);
  CHECK(m.why_segmented().find("'keep'") != std::string::npos);
  CHECK(m.input_types() == std::vector<hjit::TensorType>{{DType::F32, {-1, 6}}});
  CHECK(m.parameters().size() == 1);
  check_throws_containing([&] { (void)m.graph(); }, "runs in segments");
  check_throws_containing([&] { (void)m.output_types(); }, "runs in segments");
  check_throws_containing([&] { (void)m.freeze(); }, "runs in segments");
  // Every size of N, and outputs whose sizes the values decide, as the model runs eagerly.
  std::set<int64_t> kept_sizes;
  auto check_against_eager = [&](const hjit::Module& mod) {
    for (int64_t n : {12, 1, 40, 12, 7, 0}) {
      const Tensor x = test::random({n, 6}, DType::F32, uint64_t(100 + n));
      const hjit::ModuleResult got = mod(x);
      const std::vector<Tensor> want = model({x});
      REQUIRE(got.size() == 3);
      for (size_t k = 0; k < 3; ++k) {
        INFO("n = " << n << ", output " << k);
        REQUIRE(got[k].shape() == want[k].shape());
        CHECK_CLOSE(got[k], want[k]);
      }
      kept_sizes.insert(got[0].shape()[0]);
    }
  };
  check_against_eager(m);
  CHECK(kept_sizes.size() >= 3);  // the values decided several sizes
  check_throws_containing<hjit::DTypeError>([&] { m(Tensor::zeros({3, 6}, DType::F64)); }, "must be f32[-1,6]");
  check_throws_containing<hjit::ShapeError>([&] { m(Tensor::zeros({3, 5})); }, "must be f32[-1,6]");
  // The parameters are the module's: a new value changes what it computes.
  hjit::Module twice = hjit::onnx::load(path);
  Tensor w = twice.parameters()[0];
  w.assign(w * 2.0);
  const Tensor x = test::random({9, 6}, DType::F32, 5);
  CHECK_CLOSE(Tensor(twice(x)[1]), Tensor(m(x)[1]) * 2.0);
  // Saved and loaded in another module: the same, parameters' values included.
  const std::string saved = (fs::path(test::scratch_dir("onnx_detector_tail_saved")) / "tail.hjit").string();
  twice.save(saved);
  const hjit::Module back = hjit::Module::load(saved);
  REQUIRE(back.segmented());
  CHECK(back.why_segmented() == m.why_segmented());
  CHECK_CLOSE(Tensor(back(x)[1]), Tensor(twice(x)[1]));
  m.save(saved);
  check_against_eager(hjit::Module::load(saved));
  // Inside a traced function the program records into that trace: a jit with fullgraph = false.
  auto outer = hjit::jit([&](const Tensor& v) { return std::vector<Tensor>(m(v * 1.0)); }, {.fullgraph = false});
  CHECK_CLOSE(outer(x)[2], model({x})[2]);
  // Called from several threads at once, each with its own sizes.
  std::vector<std::thread> threads;
  std::vector<int> wrong(2, 0);
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int64_t n : {5, 17, 30}) {
        const Tensor v = test::random({n + t, 6}, DType::F32, uint64_t(300 + 10 * n + t));
        const hjit::ModuleResult got = m(v);
        const std::vector<Tensor> want = model({v});
        for (size_t k = 0; k < 3; ++k) wrong[size_t(t)] += !(got[k].shape() == want[k].shape() && test::compare(got[k], want[k], 1e-5).empty());
      }
    });
  for (std::thread& t : threads) t.join();
  CHECK(wrong == std::vector<int>{0, 0});
  // One graph asked for: the strict refusal, naming the node and the input.
  check_throws_containing([&] { hjit::onnx::load(path, {.graph_breaks = false}); }, "input 0 ('keep')");
  // export_library needs one graph.
  check_throws_containing<hjit::Error>([&] { hjit::export_library(test::scratch_dir("onnx_tail_export"), "tail", m, x); },
                                       "'keep'");
}

TEST_CASE("saved modules in segments: mutations of the file load or throw a typed error") {
  const hjit::Module m = hjit::onnx::load(write_model(detector_tail(), "onnx_detector_tail_fuzz"));
  const std::string path = (fs::path(test::scratch_dir("onnx_detector_tail_fuzz")) / "m.hjit").string();
  m.save(path);
  constexpr char kMagic[9] = "HJITMODS";  // a module in segments (frontend/saving/module.cpp), version 1
  const std::string payload(hjit::unwrap_payload(test::read_file(path), kMagic, 1, "a saved module"));
  const Tensor x = test::random({5, 6}, DType::F32, 3);
  std::mt19937_64 rng(53);
  auto [loaded, rejected] = test::fuzz(2000, [&](int) {
    std::string p = payload;
    for (int e = 0, edits = 1 + int(rng() % 3); e < edits; ++e) {
      const size_t at = size_t(rng() % p.size());
      switch (rng() % 3) {
        case 0: p[at] = char(rng() % 256); break;
        case 1: p.erase(at, 1 + rng() % 8); break;
        default: p[at] = char(p[at] ^ (1 << (rng() % 8)));
      }
    }
    test::write_file(path, hjit::wrap_payload(kMagic, 1, p));
    (void)hjit::Module::load(path)(x);
  });
  MESSAGE(loaded << " mutated modules loaded and ran, " << rejected << " rejected with hjit::Error");
  CHECK(rejected > 0);
  // A program of a kind nothing reads.
  hjit::BinaryWriter w;
  w.str("m"), w.str("no such kind"), w.str(""), w.str(""), w.u64(0), w.u64(0);
  test::write_file(path, hjit::wrap_payload(kMagic, 1, w.out()));
  check_throws_containing([&] { hjit::Module::load(path); }, "no such kind");
}

namespace {

// ONNX's NonMaxSuppression as its text says it, every kept box compared: the reference for the
// converter's indexed search.
std::vector<int64_t> nms_reference(const std::vector<float>& boxes, const std::vector<float>& scores, int64_t n, int64_t most, float iou_max) {
  std::vector<int64_t> order(size_t(n), 0), kept;
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) { return scores[size_t(i)] > scores[size_t(j)]; });
  auto corners = [&](int64_t i) {  // y1, x1, y2, x2, in double as the converter reads them
    const float* p = &boxes[size_t(i * 4)];
    return std::array<double, 4>{std::min<double>(p[0], p[2]), std::min<double>(p[1], p[3]), std::max<double>(p[0], p[2]),
                                 std::max<double>(p[1], p[3])};
  };
  auto iou = [&](int64_t i, int64_t j) {
    const auto a = corners(i), b = corners(j);
    const double h = std::max(0.0, std::min(a[2], b[2]) - std::max(a[0], b[0]));
    const double w = std::max(0.0, std::min(a[3], b[3]) - std::max(a[1], b[1]));
    const double area = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - h * w;
    return area > 0 ? h * w / area : 0.0;
  };
  for (int64_t i : order) {
    if (int64_t(kept.size()) >= most) break;
    if (std::all_of(kept.begin(), kept.end(), [&](int64_t j) { return iou(i, j) <= iou_max; })) kept.push_back(i);
  }
  return kept;
}

}  // namespace

TEST_CASE("NonMaxSuppression over many boxes (torchvision's per-class offsets) keeps what the exhaustive search keeps") {
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<float> u(0, 1);
  for (int64_t n : {1, 50, 600}) {
    for (float iou_max : {0.0f, 0.3f, 0.7f}) {
      std::vector<float> boxes, scores;
      for (int64_t i = 0; i < n; ++i) {
        const float cls = float(rng() % 4) * 10;  // classes far apart, as batched_nms offsets them
        const float y = cls + u(rng) * 5, x = cls + u(rng) * 5, h = u(rng) * 3, w = u(rng) * 3;
        if (i % 2) boxes.insert(boxes.end(), {y, x, y + h, x + w});
        else boxes.insert(boxes.end(), {y + h, x + w, y, x});  // corners either way round
        scores.push_back(float(rng() % 50) / 50);  // ties: the stable order decides
      }
      ::onnx::ModelProto m = empty_model("nms");
      auto* g = m.mutable_graph();
      add_value(g->add_input(), "b", ::onnx::TensorProto::FLOAT, {"1", std::to_string(n), "4"});
      add_value(g->add_input(), "s", ::onnx::TensorProto::FLOAT, {"1", "1", std::to_string(n)});
      *g->add_initializer() = proto_of("most", Tensor::from_vector<int64_t>({1000}, {1}));
      *g->add_initializer() = proto_of("iou", Tensor::from_vector<float>({iou_max}, {1}));
      add_node(g, "NonMaxSuppression", {"b", "s", "most", "iou"}, {"sel"});
      add_value(g->add_output(), "sel", ::onnx::TensorProto::INT64, {"M", "3"});
      const hjit::onnx::Model model = hjit::onnx::Model::parse(m.SerializeAsString());
      const Tensor sel = model({Tensor::from_vector(boxes, {1, n, 4}), Tensor::from_vector(scores, {1, 1, n})})[0];
      const std::vector<int64_t> want = nms_reference(boxes, scores, n, 1000, iou_max);
      const std::vector<int64_t> got = sel.to_vector<int64_t>();
      REQUIRE(got.size() == want.size() * 3);
      for (size_t k = 0; k < want.size(); ++k) CHECK(got[k * 3 + 2] == want[k]);
    }
  }
}
