// The IR: the op table and its per-layer tables, the printer and parser, and the passes (IR text
// in, IR text out).
#include <cstdio>

#include "frontend/tracing/const_eval.h"
#include "frontend/eager/kernel.h"
#include "graph/autodiff/grad_rules.h"
#include "graph/op_def.h"
#include "graph/passes/cse.h"
#include "graph/passes/dce.h"
#include "graph/passes/fold_constants.h"
#include "graph/passes/optimize.h"
#include "graph/passes/simplify.h"
#include "graph/passes/sink_transposes.h"
#include "graph/passes/verify.h"
#include "graph/value_range.h"
#include "halide_backend/providers/extern_stages.h"
#include "halide_backend/lowering/lower_ctx.h"
#include "schedules/class_rules.h"
#include "tests/support.h"

using hjit::DType;
using hjit::Graph;
using hjit::OpKind;
using hjit::Tensor;

namespace {

// Parses `text`, runs the pass, and returns the printed result.
template <class Pass>
std::string run_pass(const std::string& text, Pass pass) {
  Graph g = Graph::parse(text);
  hjit::verify(g, "parse");
  Graph out = pass(g);
  hjit::verify(out, "the pass under test");
  return out.str();
}

hjit::ConstEvaluator evaluator() { return hjit::detail::evaluate_node; }

}  // namespace

TEST_CASE("every op has every layer: definition, eager kernel, lowering, gradient rule and schedule class") {
  using hjit::ScheduleClass;
  for (int i = 0; i < hjit::kNumOps; ++i) {
    OpKind op = OpKind(i);
    const hjit::OpDef& def = hjit::op_def(op);
    INFO("op " << def.name << ", schedule class " << hjit::schedule_class_name(def.schedule_class));
    CHECK(def.kind == op);
    CHECK(std::string(def.name).size() > 0);
    CHECK((def.infer != nullptr));
    CHECK(hjit::op_from_name(def.name) == op);
    CHECK((hjit::eager::kernel_for(op) != nullptr));
    CHECK((hjit::backend::lowering_for(op) != nullptr));
    CHECK((hjit::grad_rule_for(op) != nullptr));
    // The schedulers and the extern-stage matcher have an entry for its class.
    CHECK_NOTHROW(hjit::schedules::cpu_rules(def.schedule_class));
    CHECK_NOTHROW(hjit::schedules::gpu_rules(def.schedule_class));
    CHECK_NOTHROW(hjit::backend::extern_rule(def.schedule_class));
    // The class agrees with the op's traits.
    const ScheduleClass c = def.schedule_class;
    const bool tiled = hjit::schedules::cpu_rules(c).tile != hjit::schedules::Tile::None;
    CHECK(def.has(hjit::Contraction) == tiled);
    CHECK(def.has(hjit::Source) == (c == ScheduleClass::Source));
    CHECK(def.has(hjit::ControlFlow) == (c == ScheduleClass::ControlFlow));
    CHECK(def.has(hjit::Movement) == (c == ScheduleClass::Movement || c == ScheduleClass::Gather));
    if (def.has(hjit::Elementwise))
      CHECK((c == ScheduleClass::Elementwise || c == ScheduleClass::LongLatency || c == ScheduleClass::ScalarCall ||
             c == ScheduleClass::Check));
    if (def.has(hjit::Reduction)) CHECK(hjit::schedules::cpu_rules(c).fold != hjit::schedules::Fold::None);
  }
  for (int c = 0; c < hjit::kNumScheduleClasses; ++c) CHECK(std::string(hjit::schedule_class_name(ScheduleClass(c))).size() > 0);
  CHECK_THROWS_AS(hjit::op_from_name("no_such_op"), hjit::ValueError);
}

TEST_CASE("the printer reads like a jaxpr and states every type") {
  auto selu = [](const Tensor& x) {
    Tensor positive = x > 0;  // named steps: C++ leaves the order of argument evaluation open
    Tensor negative = 1.67 * hjit::exp(x) - 1.67;
    return 1.05 * hjit::where(positive, x, negative);
  };
  Graph g = hjit::make_graph(selu, Tensor::zeros({8}));
  CHECK(g.str() ==
        "{ lambda ; a:f32[8]. let\n"
        "    b:bool[8] = gt a 0.0:f32\n"
        "    c:f32[8] = exp a\n"
        "    d:f32[8] = mul 1.67:f32 c\n"
        "    e:f32[8] = sub d 1.67:f32\n"
        "    f:f32[8] = where b a e\n"
        "    g:f32[8] = mul 1.05:f32 f\n"
        "  in (g) }\n");
  Tensor w = Tensor::ones({3});
  Graph captured = hjit::make_graph([&](const Tensor& x) { return hjit::sum(x * w, {0}, true); }, Tensor::zeros({3}));
  CHECK(captured.str() ==
        "{ lambda a:f32[3] ; b:f32[3]. let\n"
        "    c:f32[3] = mul b a\n"
        "    d:f32[1] = reduce_sum[axes=(0) keepdims=1] c\n"
        "  in (d) }\n");
  CHECK(captured.to_dot().find("reduce_sum") != std::string::npos);
}

TEST_CASE("the parser reads back what the printer writes, constants and updates included") {
  Tensor counter = Tensor::zeros({}, DType::I64);
  auto fn = [&](const Tensor& x, const Tensor& y) {
    Tensor table = Tensor::from_vector<float>({1.5f, -2.0f, 3.25f});  // a constant with data
    counter.assign(counter + 1);
    Tensor r = hjit::matmul(x, y).reshape({-1}) + table;
    return std::make_pair(hjit::softmax(r), hjit::argmax(r, 0));
  };
  Graph g = hjit::make_graph(fn, Tensor::zeros({3, 2}), Tensor::zeros({2, 1}));
  std::string text = g.to_text();
  Graph back = Graph::parse(text);
  hjit::verify(back, "parse");
  CHECK(back.to_text() == text);
  CHECK(back.str() == g.str());
  REQUIRE(back.constants.size() == 1);
  std::vector<float> data(3);
  std::memcpy(data.data(), back.constants[0].data, 12);
  CHECK(data == std::vector<float>{1.5f, -2.0f, 3.25f});
  CHECK(back.updates.size() == 1);
  CHECK(back.num_captured() == 1);

  char path[] = "/tmp/hjit_graph_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  g.save(path);
  CHECK(Graph::load(path).to_text() == text);
  std::remove(path);
}

TEST_CASE("parse errors name the line and what was wrong") {
  try {
    Graph::parse("{ lambda ; a:f32[2]. let\n    b:f32[2] = frobnicate a\n  in (b) }\n");
    FAIL("parse accepted an unknown op");
  } catch (const hjit::ValueError& e) {
    CHECK(std::string(e.what()).find("line 2") != std::string::npos);
    CHECK(std::string(e.what()).find("frobnicate") != std::string::npos);
  }
  CHECK_THROWS_AS(Graph::parse("{ lambda ; a:f32[2]. let\n  in (z) }"), hjit::ValueError);
  CHECK_THROWS_AS(Graph::parse("{ lambda ; a:q32[2]. let\n  in (a) }"), hjit::ValueError);
  // A type that contradicts the op's inference.
  CHECK_THROWS_AS(Graph::parse("{ lambda ; a:f32[2]. let\n    b:f32[3] = exp a\n  in (b) }"), hjit::ValueError);
}

TEST_CASE("simplify: x*1, x+0, double transpose, reshape of reshape, identities") {
  const char* in =
      "{ lambda ; a:f32[2,3]. let\n"
      "    b:f32[2,3] = mul a 1.0:f32\n"
      "    c:f32[2,3] = add 0.0:f32 b\n"
      "    d:f32[3,2] = transpose[perm=(1,0)] c\n"
      "    e:f32[2,3] = transpose[perm=(1,0)] d\n"
      "    f:f32[6] = reshape[shape=(6)] e\n"
      "    g:f32[3,2] = reshape[shape=(3,2)] f\n"
      "    h:f32[3,2] = neg g\n"
      "    i:f32[3,2] = neg h\n"
      "    j:f32[3,2] = convert[dtype=f32] i\n"
      "  in (j) }\n";
  CHECK(run_pass(in, [](const Graph& g) { return hjit::dce(hjit::simplify(g)); }) ==
        "{ lambda ; a:f32[2,3]. let\n"
        "    b:f32[3,2] = reshape[shape=(3,2)] a\n"
        "  in (b) }\n");
  // x*1 where 1 broadcasts x to a larger shape is not x.
  const char* widening =
      "{ lambda ; a:f32[3]. let\n"
      "    b:f32[2,3] = full[value=1.0]\n"
      "    c:f32[2,3] = mul a b\n"
      "  in (c) }\n";
  CHECK(run_pass(widening, hjit::simplify).find("mul") != std::string::npos);
}

TEST_CASE("simplify: a clamp's side the value cannot pass is dropped, one it can pass kept") {
  // b = u8 as f32, in [0, 255]: where(b < 0, 0, b) and where(b > 300, 300, b) never take the bound;
  // where(b < 10, 10, b) and where(b > 200, 200, b) can; where(b <= 0, 0, b) can (at 0); a value
  // of unknown range (a) keeps its clamps.
  const char* in =
      "{ lambda ; a:f32[4] u:u8[4]. let\n"
      "    b:f32[4] = convert[dtype=f32] u\n"
      "    c:bool[4] = lt b 0.0:f32\n"
      "    d:f32[4] = where c 0.0:f32 b\n"
      "    e:bool[4] = gt d 300.0:f32\n"
      "    f:f32[4] = where e 300.0:f32 d\n"
      "    g:bool[4] = lt f 10.0:f32\n"
      "    h:f32[4] = where g 10.0:f32 f\n"
      "    i:bool[4] = gt h 200.0:f32\n"
      "    j:f32[4] = where i 200.0:f32 h\n"
      "    k:bool[4] = le b 0.0:f32\n"
      "    l:f32[4] = where k 0.0:f32 b\n"
      "    m:bool[4] = lt a 0.0:f32\n"
      "    n:f32[4] = where m 0.0:f32 a\n"
      "  in (j, l, n) }\n";
  const std::string out = run_pass(in, [](const Graph& g) { return hjit::dce(hjit::simplify(g)); });
  CAPTURE(out);
  CHECK(out.find("where") != std::string::npos);
  CHECK(out.find("0.0:f32 b") == std::string::npos);  // (the first clamp of b, gone)
  CHECK(out.find("300.0") == std::string::npos);
  CHECK(out.find("10.0:f32") != std::string::npos);
  CHECK(out.find("200.0:f32") != std::string::npos);
  CHECK(out.find("le ") != std::string::npos);
  CHECK(out.find("lt a") != std::string::npos);
  // The same values, eagerly, for every u8 and for a's NaN, infinities and negatives.
  const Graph g = Graph::parse(in), s = hjit::dce(hjit::simplify(g));
  std::vector<float> av{NAN, -INFINITY, -3.0f, 0.0f};
  for (int u0 = 0; u0 < 256; u0 += 4) {
    std::vector<int32_t> uv{u0, u0 + 1, u0 + 2, u0 + 3};
    const std::vector<hjit::Tensor> args{hjit::Tensor::from_vector(av, {4}), hjit::Tensor::from_vector(uv, {4}).astype(hjit::DType::U8)};
    const std::vector<hjit::Tensor> want = hjit::eval_graph(g, args), got = hjit::eval_graph(s, args);
    for (size_t k = 0; k < want.size(); ++k) CHECK(test::compare(got[k], want[k], 0) == "");
  }
}

TEST_CASE("simplify: a symmetric spatial zero pad before a convolution becomes its padding") {
  const char* in =
      "{ lambda ; a:f32[1,2,5,5] b:f32[3,2,3,3] g:f32[1,3,5,5]. let\n"
      "    c:f32[1,2,7,7] = pad[lo=(0,0,1,1) hi=(0,0,1,1) value=0.0] a\n"
      "    d:f32[1,3,5,5] = conv2d[stride=(1,1) padding=(0,0) dilation=(1,1) groups=1] c b\n"
      "    e:f32[3,2,3,3] = conv2d_weight_grad[kernel=(3,3) stride=(1,1) padding=(0,0) dilation=(1,1) groups=1] c g\n"
      "  in (d, e) }\n";
  CHECK(run_pass(in, [](const Graph& g) { return hjit::dce(hjit::simplify(g)); }) ==
        "{ lambda ; a:f32[1,2,5,5] b:f32[3,2,3,3] c:f32[1,3,5,5]. let\n"
        "    d:f32[1,3,5,5] = conv2d[stride=(1,1) padding=(1,1) dilation=(1,1) groups=1] a b\n"
        "    e:f32[3,2,3,3] = conv2d_weight_grad[kernel=(3,3) stride=(1,1) padding=(1,1) dilation=(1,1) groups=1] a c\n"
        "  in (d, e) }\n");
  // Padding on one side only, with a value, or of the channels stays a pad.
  const std::pair<const char*, const char*> kept_pads[] = {
      {"f32[1,1,6,8] = pad[lo=(0,0,1,0) hi=(0,0,0,3) value=0.0]", "f32[1,3,4,6]"},
      {"f32[1,1,7,7] = pad[lo=(0,0,1,1) hi=(0,0,1,1) value=1.0]", "f32[1,3,5,5]"},
      {"f32[1,3,7,7] = pad[lo=(0,1,1,1) hi=(0,1,1,1) value=0.0]", "f32[1,3,5,5]"}};
  for (auto [pad, out] : kept_pads) {
    const std::string text = std::string("{ lambda ; a:f32[1,1,5,5] b:f32[3,") + (pad[6] == '3' ? "3" : "1") +
                             ",3,3]. let\n    c:" + pad + " a\n    d:" + out +
                             " = conv2d[stride=(1,1) padding=(0,0) dilation=(1,1) groups=1] c b\n  in (d) }\n";
    CHECK(run_pass(text.c_str(), hjit::simplify).find("pad[") != std::string::npos);
  }
}

TEST_CASE("simplify: a batch of matrices times one matrix is one matmul over all their rows") {
  // The op API lifts a 2-D weight to the batch's rank with size-1 dimensions.
  CHECK(run_pass("{ lambda ; a:f32[2,3,4,5] b:f32[1,1,5,6]. let\n"
                 "    c:f32[2,3,4,6] = matmul a b\n"
                 "  in (c) }\n",
                 [](const Graph& g) { return hjit::dce(hjit::simplify(g)); }) ==
        "{ lambda ; a:f32[2,3,4,5] b:f32[1,1,5,6]. let\n"
        "    c:f32[24,5] = reshape[shape=(24,5)] a\n"
        "    d:f32[5,6] = reshape[shape=(5,6)] b\n"
        "    e:f32[24,6] = matmul c d\n"
        "    f:f32[2,3,4,6] = reshape[shape=(2,3,4,6)] e\n"
        "  in (f) }\n");
  // A right operand with a batch of its own stays a batched matmul.
  const char* batched =
      "{ lambda ; a:f32[2,4,5] b:f32[2,5,6]. let\n"
      "    c:f32[2,4,6] = matmul a b\n"
      "  in (c) }\n";
  CHECK(run_pass(batched, hjit::simplify) == batched);
}

TEST_CASE("simplify: a 1x1 convolution without padding or groups is a matmul, a strided one of a slice") {
  CHECK(run_pass("{ lambda ; a:f32[1,4,6,6] b:f32[8,4,1,1]. let\n"
                 "    c:f32[1,8,6,6] = conv2d[stride=(1,1) padding=(0,0) dilation=(1,1) groups=1] a b\n"
                 "  in (c) }\n",
                 [](const Graph& g) { return hjit::dce(hjit::simplify(g)); }) ==
        "{ lambda ; a:f32[1,4,6,6] b:f32[8,4,1,1]. let\n"
        "    c:f32[8,4] = reshape[shape=(8,4)] b\n"
        "    d:f32[4,36] = reshape[shape=(4,36)] a\n"
        "    e:f32[8,36] = matmul c d\n"
        "    f:f32[1,8,6,6] = reshape[shape=(1,8,6,6)] e\n"
        "  in (f) }\n");
  // Strided, over a batch: every stride-th pixel, the weight one matrix the batch broadcasts.
  CHECK(run_pass("{ lambda ; a:f64[2,4,7,6] b:f64[8,4,1,1]. let\n"
                 "    c:f64[2,8,4,2] = conv2d[stride=(2,3) padding=(0,0) dilation=(1,1) groups=1] a b\n"
                 "  in (c) }\n",
                 [](const Graph& g) { return hjit::dce(hjit::simplify(g)); }) ==
        "{ lambda ; a:f64[2,4,7,6] b:f64[8,4,1,1]. let\n"
        "    c:f64[2,4,4,2] = slice[starts=(0,0,0,0) stops=(2,4,7,6) steps=(1,1,2,3)] a\n"
        "    d:f64[1,8,4] = reshape[shape=(1,8,4)] b\n"
        "    e:f64[2,4,8] = reshape[shape=(2,4,8)] c\n"
        "    f:f64[2,8,8] = matmul d e\n"
        "    g:f64[2,8,4,2] = reshape[shape=(2,8,4,2)] f\n"
        "  in (g) }\n");
  // Padded (its own or a folded zero pad), grouped, wider kernels and integers stay convolutions.
  const char* kept[] = {
      "{ lambda ; a:f32[1,4,6,6] b:f32[8,4,1,1]. let\n    c:f32[1,8,8,8] = conv2d[stride=(1,1) padding=(1,1) dilation=(1,1) groups=1] a b\n  in (c) }\n",
      "{ lambda ; a:f32[1,4,6,6] b:f32[8,4,1,1]. let\n    c:f32[1,4,8,8] = pad[lo=(0,0,1,1) hi=(0,0,1,1) value=0.0] a\n"
      "    d:f32[1,8,8,8] = conv2d[stride=(1,1) padding=(0,0) dilation=(1,1) groups=1] c b\n  in (d) }\n",
      "{ lambda ; a:f32[1,4,6,6] b:f32[8,2,1,1]. let\n    c:f32[1,8,6,6] = conv2d[stride=(1,1) padding=(0,0) dilation=(1,1) groups=2] a b\n  in (c) }\n",
      "{ lambda ; a:f32[1,4,6,6] b:f32[8,4,3,3]. let\n    c:f32[1,8,4,4] = conv2d[stride=(1,1) padding=(0,0) dilation=(1,1) groups=1] a b\n  in (c) }\n",
      "{ lambda ; a:i32[1,4,6,6] b:i32[8,4,1,1]. let\n    c:i32[1,8,6,6] = conv2d[stride=(1,1) padding=(0,0) dilation=(1,1) groups=1] a b\n  in (c) }\n"};
  for (const char* text : kept) {
    CAPTURE(text);
    const std::string out = run_pass(text, [](const Graph& g) { return hjit::dce(hjit::simplify(g)); });
    CHECK(out.find("conv2d[") != std::string::npos);
    CHECK(out.find("matmul") == std::string::npos);
  }
}

// The epilogue of a reshaped product (a 1x1 convolution's bias, residual add and relu) moves
// before the reshape, onto the product's own shape, where its tiles compute it in registers; the
// other operands are reshaped to match, and the one reshape left is the result's.
TEST_CASE("simplify: an element-wise epilogue of a reshaped product runs on the product") {
  CHECK(run_pass("{ lambda ; a:f32[1,4,6,6] b:f32[8,4,1,1] c:f32[1,8,1,1] d:f32[1,8,6,6]. let\n"
                 "    e:f32[1,8,6,6] = conv2d[stride=(1,1) padding=(0,0) dilation=(1,1) groups=1] a b\n"
                 "    f:f32[1,8,6,6] = add e c\n"
                 "    g:f32[1,8,6,6] = add f d\n"
                 "    h:f32[1,8,6,6] = relu g\n"
                 "  in (h) }\n",
                 [](const Graph& g) { return hjit::dce(hjit::simplify(g)); }) ==
        "{ lambda ; a:f32[1,4,6,6] b:f32[8,4,1,1] c:f32[1,8,1,1] d:f32[1,8,6,6]. let\n"
        "    e:f32[8,4] = reshape[shape=(8,4)] b\n"
        "    f:f32[4,36] = reshape[shape=(4,36)] a\n"
        "    g:f32[8,36] = matmul e f\n"
        "    h:f32[8,1] = reshape[shape=(8,1)] c\n"
        "    i:f32[8,36] = add g h\n"
        "    j:f32[8,36] = reshape[shape=(8,36)] d\n"
        "    k:f32[8,36] = add i j\n"
        "    l:f32[8,36] = relu k\n"
        "    m:f32[1,8,6,6] = reshape[shape=(1,8,6,6)] l\n"
        "  in (m) }\n");
  // A scalar stays one; a batch of images keeps its batch dimension.
  CHECK(run_pass("{ lambda ; a:f32[2,4,6,6] b:f32[8,4,1,1]. let\n"
                 "    e:f32[2,8,6,6] = conv2d[stride=(1,1) padding=(0,0) dilation=(1,1) groups=1] a b\n"
                 "    f:f32[] = full[value=2.0]\n"
                 "    g:f32[2,8,6,6] = mul e f\n"
                 "  in (g) }\n",
                 [](const Graph& g) { return hjit::dce(hjit::simplify(g)); }) ==
        "{ lambda ; a:f32[2,4,6,6] b:f32[8,4,1,1]. let\n"
        "    c:f32[1,8,4] = reshape[shape=(1,8,4)] b\n"
        "    d:f32[2,4,36] = reshape[shape=(2,4,36)] a\n"
        "    e:f32[2,8,36] = matmul c d\n"
        "    f:f32[2,8,36] = mul e 2.0:f32\n"
        "    g:f32[2,8,6,6] = reshape[shape=(2,8,6,6)] f\n"
        "  in (g) }\n");
  // An operand that broadcasts across a merged group (one value per image row) cannot follow:
  // the op stays after the reshape. So does an op of a reshape that is not a product's, and one
  // of a batch folded into a product's rows.
  const std::pair<const char*, const char*> kept[] = {
      {"{ lambda ; a:f32[1,4,6,6] b:f32[8,4,1,1] c:f32[1,1,6,1]. let\n"
       "    e:f32[1,8,6,6] = conv2d[stride=(1,1) padding=(0,0) dilation=(1,1) groups=1] a b\n"
       "    f:f32[1,8,6,6] = add e c\n  in (f) }\n",
       "f32[1,8,6,6] = add"},
      {"{ lambda ; a:f32[8,36] c:f32[1,8,1,1]. let\n"
       "    e:f32[1,8,6,6] = reshape[shape=(1,8,6,6)] a\n"
       "    f:f32[1,8,6,6] = add e c\n  in (f) }\n",
       "f32[1,8,6,6] = add"},
      {"{ lambda ; a:f32[2,3,4] b:f32[1,4,5] c:f32[2,3,5]. let\n"
       "    d:f32[2,3,5] = matmul a b\n"
       "    e:f32[2,3,5] = add d c\n  in (e) }\n",
       "f32[2,3,5] = add"}};
  for (const auto& [text, op] : kept) {
    CAPTURE(text);
    const std::string out = run_pass(text, [](const Graph& g) { return hjit::dce(hjit::simplify(g)); });
    CHECK(out.find(op) != std::string::npos);
  }
}

TEST_CASE("sink_transposes: a quantization after a transpose across rows runs along the rows, and the bytes move") {
  auto sink = [](const Graph& g) { return hjit::dce(hjit::simplify(hjit::sink_transposes(g))); };
  // A QDQ model's keys: the transpose that feeds the scores' product, then QuantizeLinear.
  CHECK(run_pass("{ lambda ; a:f32[4,2,3] b:f32[]. let\n"
                 "    c:f32[2,3,4] = transpose[perm=(1,2,0)] a\n"
                 "    d:f32[2,3,4] = div c b\n"
                 "    e:bool[2,3,4] = lt d -120.0:f32\n"
                 "    f:f32[2,3,4] = where e -120.0:f32 d\n"
                 "    g:f32[2,3,4] = round f\n"
                 "    h:u8[2,3,4] = convert[dtype=u8] g\n"
                 "    i:i32[2,3,4] = convert[dtype=i32] h\n"
                 "  in (i) }\n",
                 sink) ==
        "{ lambda ; a:f32[4,2,3] b:f32[]. let\n"
        "    c:f32[4,2,3] = div a b\n"
        "    d:bool[4,2,3] = lt c -120.0:f32\n"
        "    e:f32[4,2,3] = where d -120.0:f32 c\n"
        "    f:f32[4,2,3] = round e\n"
        "    g:u8[4,2,3] = convert[dtype=u8] f\n"
        "    h:u8[2,3,4] = transpose[perm=(1,2,0)] g\n"
        "    i:i32[2,3,4] = convert[dtype=i32] h\n"
        "  in (i) }\n");
  // Kept: work that ends in no one-byte conversion (f32 models are untouched), a transpose that
  // keeps the innermost dimension, an operand of more than one element that is no transpose, and
  // a conversion that widens.
  const char* kept[] = {
      "{ lambda ; a:f32[4,2,3]. let\n"
      "    c:f32[2,3,4] = transpose[perm=(1,2,0)] a\n"
      "    d:f32[2,3,4] = mul c 2.0:f32\n  in (d) }\n",
      "{ lambda ; a:f32[2,4,3]. let\n"
      "    c:f32[4,2,3] = transpose[perm=(1,0,2)] a\n"
      "    d:u8[4,2,3] = convert[dtype=u8] c\n  in (d) }\n",
      "{ lambda ; a:f32[4,2,3] b:f32[2,3,4]. let\n"
      "    c:f32[2,3,4] = transpose[perm=(1,2,0)] a\n"
      "    d:f32[2,3,4] = add c b\n"
      "    e:u8[2,3,4] = convert[dtype=u8] d\n  in (e) }\n",
      "{ lambda ; a:u8[4,2,3]. let\n"
      "    c:u8[2,3,4] = transpose[perm=(1,2,0)] a\n"
      "    d:f32[2,3,4] = convert[dtype=f32] c\n"
      "    e:u8[2,3,4] = convert[dtype=u8] d\n  in (e) }\n"};
  for (const char* text : kept) {
    CAPTURE(text);
    CHECK(run_pass(text, sink) == run_pass(text, [](const Graph& g) { return hjit::dce(hjit::simplify(g)); }));
  }
  // Compiled, the moved graph computes what eager does (the jit optimizes with this pass).
  const Tensor x = test::random({6, 4, 40}, DType::F32, 5) * 100.0;
  auto quantized_keys = [](const Tensor& k) {
    const Tensor q = hjit::clamp(hjit::round(hjit::transpose(k, {1, 2, 0}) / 0.5), -128.0, 127.0) + 128.0;
    return hjit::astype(q, DType::U8);
  };
  CHECK_CLOSE(hjit::jit(quantized_keys)(x), quantized_keys(x));
}

TEST_CASE("simplify: a whole number f32 holds exactly, converted to i32 and back, is itself") {
  // A quantized depthwise convolution's taps: 8-bit values less their zero point, times 8-bit
  // weights, summed (at most 2 x 255 x 128 here).
  const std::string taps =
      "{ lambda ; a:u8[2,5] b:i8[5] c:f32[2,5]. let\n"
      "    d:f32[2,5] = convert[dtype=f32] a\n"
      "    e:f32[2,5] = sub d 128.0:f32\n"
      "    f:f32[5] = convert[dtype=f32] b\n"
      "    g:f32[2,5] = mul e f\n"
      "    h:f32[2,5] = add g %s\n"
      "    i:i32[2,5] = convert[dtype=i32] h\n"
      "    j:f32[2,5] = convert[dtype=f32] i\n"
      "  in (j) }\n";
  auto with = [&](const char* second) {
    char text[1024];
    std::snprintf(text, sizeof text, taps.c_str(), second);
    return run_pass(text, [](const Graph& g) { return hjit::dce(hjit::simplify(g)); });
  };
  CHECK(with("g").find("i32") == std::string::npos);
  CHECK(with("e").find("i32") == std::string::npos);
  // Kept: a term that need not be whole (an f32 input, a product by 0.5), and a sum that may pass
  // 2^24 (16-bit values squared), where the conversions round and saturate.
  CHECK(with("c").find("convert[dtype=i32]") != std::string::npos);
  CHECK(run_pass("{ lambda ; a:u8[3]. let\n"
                 "    b:f32[3] = convert[dtype=f32] a\n"
                 "    c:f32[3] = mul b 0.5:f32\n"
                 "    d:i32[3] = convert[dtype=i32] c\n"
                 "    e:f32[3] = convert[dtype=f32] d\n"
                 "  in (e) }\n",
                 hjit::simplify)
            .find("convert[dtype=i32]") != std::string::npos);
  CHECK(run_pass("{ lambda ; a:u16[3]. let\n"
                 "    b:f32[3] = convert[dtype=f32] a\n"
                 "    c:f32[3] = mul b b\n"
                 "    d:i32[3] = convert[dtype=i32] c\n"
                 "    e:f32[3] = convert[dtype=f32] d\n"
                 "  in (e) }\n",
                 hjit::simplify)
            .find("convert[dtype=i32]") != std::string::npos);
}

TEST_CASE("simplify: an integer product with 0 is 0, so a zero point of 0 computes no row sums; a float one stays") {
  const std::string out = run_pass(
      "{ lambda ; a:u8[4,8] b:f32[4]. let\n"
      "    c:i32[4,8] = convert[dtype=i32] a\n"
      "    d:i64[4,1] = reduce_sum[axes=(1) keepdims=1] c\n"
      "    e:i32[4,1] = convert[dtype=i32] d\n"
      "    f:i32[4,1] = mul 0.0:i32 e\n"
      "    g:i32[4,8] = sub c f\n"
      "    h:f32[4] = mul b 0.0:f32\n"
      "  in (g, h) }\n",
      [](const Graph& g) { return hjit::dce(hjit::simplify(hjit::simplify(g))); });
  CHECK(out.find("reduce_sum") == std::string::npos);
  CHECK(out.find("sub") == std::string::npos);
  CHECK(out.find("mul b 0.0:f32") != std::string::npos);  // 0 * NaN is NaN
}

TEST_CASE("value ranges: a requantized value is finite and within its clamp; what may not be is unknown") {
  const Graph g = Graph::parse(
      "{ lambda ; a:u8[4] b:f32[4] z:i32[4]. let\n"
      "    c:f32[4] = convert[dtype=f32] a\n"
      "    d:f32[4] = mul c 0.5:f32\n"
      "    e:f32[4] = round d\n"
      "    f:f32[4] = add e 3.0:f32\n"
      "    g:bool[4] = lt f 0.0:f32\n"
      "    h:f32[4] = where g 0.0:f32 f\n"
      "    i:bool[4] = gt h 255.0:f32\n"
      "    j:f32[4] = where i 255.0:f32 h\n"
      "    k:f32[4] = add c b\n"
      "    l:f32[4] = div c f\n"
      "    m:f32[4] = sub c 300.0:f32\n"
      "    n:f32[4] = div c m\n"
      "    o:f32[4] = div m c\n"
      "    p:f32[4] = convert[dtype=f32] z\n"
      "    q:bool[4] = gt b 2.0:f32\n"
      "    r:f32[4] = where q 2.0:f32 b\n"
      "    s:bool[4] = lt m -100.0:f32\n"
      "    t:f32[4] = where s -100.0:f32 m\n"
      "  in (j, k, l, m, n, o, p, r, t) }\n");
  hjit::ValueRanges ranges(g);
  auto range = [&](size_t k) { return ranges(g.outputs[k]); };
  // Between 3 and 3 + round(255 * 0.5): neither clamp ever holds.
  REQUIRE(range(0));
  CHECK(range(0)->lo == 3);
  CHECK(range(0)->hi == 131);
  CHECK(range(0)->whole);
  CHECK_FALSE(range(1));  // an f32 input: anything
  REQUIRE(range(2));      // over [3, 131]: a quotient, not whole
  CHECK(range(2)->lo <= 0);
  CHECK(range(2)->hi >= 85);
  CHECK(range(2)->hi < 85.01);
  CHECK_FALSE(range(2)->whole);
  REQUIRE(range(3));
  CHECK(range(3)->lo == -300);
  CHECK(range(3)->hi == -45);
  CHECK(range(3)->exact_in_any_order());  // whole terms of 255 and 300
  CHECK_FALSE(range(2)->exact_in_any_order());
  CHECK_FALSE(range(6)->exact_in_any_order());  // i32's values: not all exact in f32
  REQUIRE(range(4));      // c / m: m is never 0
  CHECK_FALSE(range(5));  // m / c: c may be 0
  REQUIRE(range(6));      // i32's largest value is 2^31 in f32
  CHECK(range(6)->hi == 2147483648.0);
  CHECK_FALSE(range(7));  // a clamp of an input that may be NaN
  REQUIRE(range(8));      // a clamp that holds for some elements: [-100, -45]
  CHECK(range(8)->lo == -100);
  CHECK(range(8)->hi == -45);
  // A product that is always 0 but whose factors, taken in another order, pass 2^24.
  const Graph p = Graph::parse(
      "{ lambda ; a:u16[4]. let\n"
      "    b:f32[4] = convert[dtype=f32] a\n"
      "    c:f32[4] = mul b 0.0:f32\n"
      "    d:f32[4] = mul c b\n"
      "  in (d) }\n");
  hjit::ValueRanges product_ranges(p);
  REQUIRE(product_ranges(p.outputs[0]));
  CHECK(product_ranges(p.outputs[0])->hi == 0);
  CHECK_FALSE(product_ranges(p.outputs[0])->exact_in_any_order());
}

TEST_CASE("value ranges: a softmax of finite values is within [0, 1], its row sums within [1, the row's length]; of anything, unknown") {
  const Graph g = Graph::parse(
      "{ lambda ; a:u8[2,5] b:f32[2,5]. let\n"
      "    c:f32[2,5] = convert[dtype=f32] a\n"
      "    d:f32[2,5] = mul c 0.5:f32\n"
      "    e:f32[2,1] = reduce_max[axes=(1) keepdims=1] d\n"
      "    f:f32[2,5] = sub d e\n"
      "    g:f32[2,5] = exp f\n"
      "    h:f32[2,1] = reduce_sum[axes=(1) keepdims=1] g\n"
      "    i:f32[2,5] = div g h\n"
      "    j:f32[2,5] = exp d\n"
      "    k:f32[1,5] = reduce_max[axes=(0) keepdims=1] d\n"
      "    l:f32[2,5] = sub d k\n"
      "    m:f32[2,5] = exp l\n"
      "    n:f32[2,1] = reduce_sum[axes=(1) keepdims=1] m\n"
      "    o:f32[2,5] = div m n\n"
      "    p:f32[2,1] = reduce_max[axes=(1) keepdims=1] b\n"
      "    q:f32[2,5] = sub b p\n"
      "    r:f32[2,5] = exp q\n"
      "    s:f32[2,1] = reduce_sum[axes=(1) keepdims=1] r\n"
      "    t:f32[2,5] = div r s\n"
      "    u:f32[2,1] = mul h 0.25:f32\n"
      "    v:f32[2,1] = div 1.0:f32 u\n"
      "    w:f32[2,5] = mul g v\n"
      "  in (f, g, i, j, o, t, w) }\n");
  hjit::ValueRanges ranges(g);
  auto range = [&](size_t k) { return ranges(g.outputs[k]); };
  REQUIRE(range(0));  // x - max(x): [-127.5, 0]
  CHECK(range(0)->hi == 0);
  CHECK(range(0)->lo <= -127.5);
  CHECK(range(0)->lo > -127.6);
  REQUIRE(range(1));  // its exponential: (0, 1]
  CHECK(range(1)->lo >= 0);
  CHECK(range(1)->hi >= 1);
  CHECK(range(1)->hi < 1.0001);
  REQUIRE(range(2));  // the softmax: [0, 1]
  CHECK(range(2)->lo == 0);
  CHECK(range(2)->hi >= 1);
  CHECK(range(2)->hi < 1.0001);
  const std::optional<hjit::ValueRange> sum = ranges(g.node(g.outputs[2]).inputs[1]);
  REQUIRE(sum);  // each row's sum holds e^0 = 1 and four terms of at most 1
  CHECK(sum->lo <= 1);
  CHECK(sum->lo > 0.9999);
  CHECK(sum->hi >= 5);
  CHECK(sum->hi < 5.001);
  REQUIRE(range(6));  // e * (1 / (sum / 4)), a quantized softmax's form (onnx_import's Factored): [0, 4]
  CHECK(range(6)->lo == 0);
  CHECK(range(6)->hi >= 4);
  CHECK(range(6)->hi < 4.001);
  CHECK_FALSE(range(3));   // e^127.5 is past f32's largest value: infinity
  CHECK_FALSE(range(4));  // the maximum over another axis than the sum's: not a softmax
  CHECK_FALSE(ranges(g.node(g.outputs[4]).inputs[1]));  // (nor its sum)
  CHECK_FALSE(range(5));  // of an input that may hold NaN or infinity
  CHECK_FALSE(ranges(g.node(g.outputs[5]).inputs[1]));
}

TEST_CASE("simplify: empty values become fills") {
  const char* in =
      "{ lambda ; a:f32[0,3] b:f32[2,3]. let\n"
      "    c:f32[0,3] = exp a\n"
      "    d:f32[3] = reduce_sum[axes=(0) keepdims=0] a\n"
      "    e:f32[2,3] = concatenate[axis=0] a b\n"
      "  in (c, d, e) }\n";
  CHECK(run_pass(in, [](const Graph& g) { return hjit::dce(hjit::simplify(g)); }) ==
        "{ lambda ; a:f32[0,3] b:f32[2,3]. let\n"
        "    c:f32[0,3] = full[value=0.0]\n"
        "    d:f32[3] = full[value=0.0]\n"
        "  in (c, d, b) }\n");
}

TEST_CASE("cse merges equal nodes and equal constants; dce drops the dead") {
  const char* in =
      "{ lambda ; a:f32[4]. let\n"
      "    b:f32[4] = exp a\n"
      "    c:f32[4] = exp a\n"
      "    d:f32[4] = add b c\n"
      "    e:f32[4] = sin a\n"
      "  in (d) }\n";
  CHECK(run_pass(in, [](const Graph& g) { return hjit::dce(hjit::cse(g)); }) ==
        "{ lambda ; a:f32[4]. let\n"
        "    b:f32[4] = exp a\n"
        "    c:f32[4] = add b b\n"
        "  in (c) }\n");
}

TEST_CASE("constant folding evaluates with the eager kernels") {
  const char* in =
      "{ lambda ; a:f32[2]. let\n"
      "    b:f32[] = mul 2.0:f32 3.0:f32\n"
      "    c:f32[2] = mul a b\n"
      "    d:f32[2] = constant[data=000000000000803f]\n"
      "    e:f32[2] = exp d\n"
      "    f:f32[2] = add c e\n"
      "    g:f32[2] = iota[axis=0]\n"
      "    h:f32[2] = exp g\n"
      "    i:f32[2] = add f h\n"
      "  in (i) }\n";
  Graph g = Graph::parse(in);
  Graph folded = hjit::dce(hjit::fold_constants(g, evaluator()));
  hjit::verify(folded, "fold_constants");
  std::string text = folded.str();
  CHECK(text.find("mul a 6.0:f32") != std::string::npos);
  CHECK(text.find("constant") != std::string::npos);
  // An iota stays a node (an index expression in the pipeline, of any size): exp of it is computed.
  CHECK(text.find("iota") != std::string::npos);
  CHECK(text.find("exp") != std::string::npos);
  CHECK(text.find("exp") == text.rfind("exp"));  // one exp left: the iota's
  // The folded constant holds exp(0), exp(1).
  REQUIRE(folded.constants.size() == 1);
  const float* v = static_cast<const float*>(folded.constants[0].data);
  CHECK(v[0] == doctest::Approx(1.0));
  CHECK(v[1] == doctest::Approx(std::exp(1.0)));
}

TEST_CASE("a constant of one repeated value folds to a full, and rules for fulls then apply") {
  // A per-channel zero point of zeros: the integer product with it is 0, and the row sums it
  // weighed are dead. Ones of f32 fold to a full of 1.0 too; -0.0 beside 0.0 stays a constant
  // (other bits), as does a constant with two values.
  const char* in =
      "{ lambda ; a:i32[2,3] x:f32[2]. let\n"
      "    b:i64[2,1] = reduce_sum[axes=(1) keepdims=1] a\n"
      "    c:i32[2,1] = convert[dtype=i32] b\n"
      "    d:i32[3] = constant[data=000000000000000000000000]\n"
      "    e:i32[2,3] = mul d c\n"
      "    f:i32[2,3] = sub a e\n"
      "    g:f32[2] = constant[data=0000803f0000803f]\n"
      "    h:f32[2] = constant[data=0000008000000000]\n"
      "    i:f32[2] = constant[data=000000000000803f]\n"
      "    j:f32[2] = mul x g\n"
      "    k:f32[2] = add j h\n"
      "    l:f32[2] = add k i\n"
      "  in (f, l) }\n";
  Graph g = Graph::parse(in);
  hjit::ConstEvaluator eval = evaluator();
  Graph folded = hjit::dce(hjit::fold_constants(g, eval));
  hjit::verify(folded, "fold_constants");
  const std::string text = folded.str();
  CAPTURE(text);
  CHECK(text.find(":i32[3] = full[value=0.0]") != std::string::npos);
  CHECK(text.find(":f32[2] = full[value=1.0]") != std::string::npos);
  CHECK(folded.constants.size() == 2);  // the signed zeros and the two values
  Graph o = hjit::optimize(g, &eval);
  const std::string optimized = o.str();
  CAPTURE(optimized);
  CHECK(optimized.find("reduce_sum") == std::string::npos);
  CHECK(optimized.find("mul") == std::string::npos);  // (x * 1.0 is x)
}

TEST_CASE("the verifier reports what broke, and after which pass") {
  Graph g = Graph::parse("{ lambda ; a:f32[2]. let\n    b:f32[2] = exp a\n  in (b) }\n");
  g.nodes[1].type.shape = {3};
  try {
    hjit::verify(g, "my_pass");
    FAIL("verify accepted a wrong type");
  } catch (const hjit::InternalError& e) {
    CHECK(std::string(e.what()).find("after my_pass") != std::string::npos);
  }
  Graph h = Graph::parse("{ lambda ; a:f32[2]. let\n    b:f32[2] = exp a\n  in (b) }\n");
  h.outputs.push_back(7);
  CHECK_THROWS_AS(hjit::verify(h, "x"), hjit::InternalError);
}

TEST_CASE("graph construction checks operands with the op table") {
  Graph g;
  int a = g.add_parameter({DType::F32, {2, 3}});
  int b = g.add_parameter({DType::I32, {2, 3}});
  int c = g.add_parameter({DType::F32, {4}});
  CHECK_THROWS_AS(g.add_op(OpKind::Add, {a, b}), hjit::DTypeError);
  CHECK_THROWS_AS(g.add_op(OpKind::Add, {a, c}), hjit::ShapeError);
  CHECK_THROWS_AS(g.add_op(OpKind::Exp, {b}), hjit::DTypeError);
  CHECK_THROWS_AS(g.add_op(OpKind::Add, {a}), hjit::ValueError);
  CHECK_THROWS_AS(g.add_op(OpKind::ReduceSum, {a}, hjit::Attrs{{"axes", std::vector<int64_t>{5}}, {"keepdims", int64_t(0)}}),
                  hjit::ShapeError);
  CHECK_THROWS_AS(g.add_op(OpKind::Exp, {a}, hjit::Attrs{{"bogus", int64_t(1)}}), hjit::ValueError);
  CHECK(g.type(g.add_op(OpKind::Lt, {a, a})).dtype == DType::Bool);
}

TEST_CASE("optimize keeps the signature: every input stays, in order") {
  Graph g = Graph::parse("{ lambda ; a:f32[2] b:f32[3]. let\n    c:f32[2] = exp a\n  in (c) }\n");
  hjit::ConstEvaluator eval = evaluator();
  Graph o = hjit::optimize(g, &eval);
  CHECK(o.inputs.size() == 2);
  CHECK(o.type(o.inputs[1]).shape == hjit::Shape{3});
}

TEST_CASE("README's counts of dtypes and primitive ops come from the tables") {
  std::FILE* f = std::fopen(HJIT_SOURCE_DIR "/README.md", "rb");
  REQUIRE(f != nullptr);
  std::string readme;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) readme.append(buf, n);
  std::fclose(f);
  // The front page states both counts once; a row added to either table must change it.
  CHECK(readme.find(std::to_string(hjit::kNumDTypes) + " dtypes") != std::string::npos);
  CHECK(readme.find(std::to_string(hjit::kNumOps) + " primitive ops") != std::string::npos);
}
