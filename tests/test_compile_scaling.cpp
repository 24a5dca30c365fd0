// Compile time that scales with the graph: long inlined chains are stored every so many stages
// (schedules/builtin.cpp), and big graphs compile as parts of bounded cost, parts alike compiled
// once (halide_backend/build/partition.h). What is checked here is that every such cut computes what
// eager computes, at the sizes the issue names (a 2000-op chain, 500 matmuls) and at the edges of
// the cutting (outputs that are inputs or constants, updates, size-0 and scalar values, integer
// dtypes, every opt level). How long they take is hjit-bench's compile-time table.
#include <memory>
#include <tuple>
#include <cstdlib>
#include <cstdio>
#include <utility>

#include "halide_backend/build/partition.h"
#include "tests/support.h"

using hjit::Tensor;

namespace {

// The partitioning's settings for the scope of a test (read at each compile): the most a part may
// cost, and the work from which a graph is cut in two to compile at once.
struct PartCost {
  explicit PartCost(int cost, int halves_from = 96) {
    setenv("HJIT_PART_MAX_COST", std::to_string(cost).c_str(), 1);
    setenv("HJIT_PARTITION_WORK", std::to_string(halves_from).c_str(), 1);
  }
  ~PartCost() {
    unsetenv("HJIT_PART_MAX_COST");
    unsetenv("HJIT_PARTITION_WORK");
  }
};

// "built-in, in 32 parts (3 distinct)" -> {32, 3}.
std::pair<int, int> parts_of(const std::string& summary) {
  int parts = 0, distinct = 0;
  const size_t at = summary.find(", in ");
  if (at == std::string::npos) return {0, 0};
  std::sscanf(summary.c_str() + at, ", in %d parts (%d distinct)", &parts, &distinct);
  return {parts, distinct ? distinct : parts};
}

Tensor identity(int64_t n) {
  std::vector<float> v(size_t(n * n), 0.0f);
  for (int64_t i = 0; i < n; ++i) v[size_t(i * n + i)] = 1.0f;
  return Tensor::from_vector(v, {n, n});
}

}  // namespace

TEST_CASE("a 2000-op element-wise chain compiles in parts and computes what eager computes") {
  // Each step's constant differs, so no two parts are alike: every one is compiled.
  auto chain = [](const Tensor& x, const Tensor& a, const Tensor& b) {
    Tensor y = x;
    for (int i = 0; i < 667; ++i) y = y * a * (1.0 + i * 1e-6) + b;  // 3 ops a step
    return y;
  };
  Tensor x = test::random({4, 256}, hjit::DType::F32, 1);
  Tensor a = Tensor::full({256}, 0.5), b = test::random({4, 256}, hjit::DType::F32, 2);
  auto f = hjit::jit(chain, {.name = "chain2000", .opt_level = 1});
  Tensor got = f(x, a, b), want = chain(x, a, b);
  CHECK_CLOSE(got, want);
  const std::string summary = f.stats().schedule;
  INFO(summary);
  const auto [parts, distinct] = parts_of(summary);
  CHECK(parts >= 4);
  CHECK(distinct == parts);
  CHECK(f.stats().compiles + f.stats().loaded == 1);
}

TEST_CASE("a graph of 500 matmuls compiles in parts, layers alike compiled once") {
  // A weight per layer: the parts read different weights but are the same graph.
  auto net = [](const Tensor& x, const std::vector<Tensor>& ws) {
    Tensor y = x;
    for (const Tensor& w : ws) y = hjit::matmul(y, w);
    return y;
  };
  Tensor x = test::random({32, 32}, hjit::DType::F32, 3);
  std::vector<Tensor> ws;
  // Near-orthogonal weights keep 500 products of moderate size: a scaled identity plus noise.
  for (int i = 0; i < 500; ++i) ws.push_back(identity(32) + 0.01 * test::random({32, 32}, hjit::DType::F32, 100 + i));
  auto f = hjit::jit(net, {.name = "matmul500", .opt_level = 1});
  Tensor got = f(x, ws), want = net(x, ws);
  CHECK_CLOSE_TOL(got, want, 1e-3);  // 500 products summed in another order
  const std::string summary = f.stats().schedule;
  INFO(summary);
  const auto [parts, distinct] = parts_of(summary);
  CHECK(parts >= 20);
  CHECK(distinct <= 4);  // the first, the last, and the ones between
}

// DenseNet's layers grow: each concatenates every feature map before it and convolves them to a
// fixed width, so no run of whole layers repeats; but each layer's relu and 3x3 convolution of that
// width is alike. Those stretches are a part each, one graph compiled once.
TEST_CASE("a network whose layers grow compiles the stretch its layers share once") {
  PartCost small(100);
  auto dense = [](const Tensor& x, const std::vector<Tensor>& ws) {
    std::vector<Tensor> features{x};
    for (size_t l = 0; l + 1 < ws.size(); l += 2) {
      const Tensor narrowed = hjit::relu(hjit::conv2d(hjit::relu(hjit::concat(features, 1)), ws[l], std::nullopt, {1, 1}, {0, 0}));
      features.push_back(hjit::conv2d(narrowed, ws[l + 1], std::nullopt, {1, 1}, {1, 1}));
    }
    return hjit::concat(features, 1);
  };
  std::vector<Tensor> ws;
  for (int l = 0; l < 7; ++l) {
    ws.push_back(test::random({16, 8 + 4 * l, 1, 1}, hjit::DType::F32, uint64_t(400 + l)) * 0.3);
    ws.push_back(test::random({4, 16, 3, 3}, hjit::DType::F32, uint64_t(500 + l)) * 0.2);
  }
  const Tensor x = test::random({1, 8, 6, 6}, hjit::DType::F32, 399);
  auto f = hjit::jit(dense, {.name = "dense_layers", .opt_level = 1});
  CHECK_CLOSE(f(x, ws), dense(x, ws));
  const std::string summary = f.stats().schedule;
  INFO(summary);
  const auto [parts, distinct] = parts_of(summary);
  CHECK(parts >= 14);               // each layer's 1x1 stretch and 3x3 stretch at least
  CHECK(distinct <= parts - 6);     // the 7 layers' 3x3 stretches: one graph
}

TEST_CASE("alike parts whose parameters come in another order share no code") {
  // Captured weights and the argument: the first part reads the argument (before the weights, in
  // the caller's order), a later one the value handed to it (after them). Printed, captured
  // inputs come first, so the parts read alike; their compiled code takes its arguments in the
  // caller's order, and a shared one ran the second part with its arguments swapped.
  std::vector<Tensor> ws;
  for (int i = 0; i < 24; ++i) ws.push_back(identity(48) + 0.01 * test::random({48, 48}, hjit::DType::F32, 200 + i));
  auto net = [&](const Tensor& x) {
    Tensor h = x;
    for (size_t k = 0; k < ws.size(); k += 2) h = h + hjit::matmul(hjit::relu(hjit::matmul(h, ws[k])), ws[k + 1]);
    return h;
  };
  PartCost small(40);
  const Tensor x = test::random({3, 48}, hjit::DType::F32, 4);
  auto f = hjit::jit(net, {.name = "captured_blocks", .opt_level = 1});
  const Tensor got = f(x), want = net(x);
  const std::string summary = f.stats().schedule;
  INFO(summary);
  CHECK(parts_of(summary).first >= 3);
  CHECK_CLOSE_TOL(got, want, 1e-4);
}

TEST_CASE("a deep training step: layers, their gradients and their optimizer steps each compile once") {
  // Each layer's constants (CSE keeps one of each, among the first layer's nodes) and the Adam
  // steps, which hand each other nothing, must not make parts unlike: the step's distinct parts
  // grow slower than its layers.
  auto distinct_at = [](int layers) {
    std::vector<Tensor> ws;
    for (int i = 0; i < layers; ++i) ws.push_back(identity(48) + 0.05 * test::random({48, 48}, hjit::DType::F32, 7 + i));
    std::vector<Tensor> eager_ws;
    for (const Tensor& w : ws) eager_ws.push_back(w + 0.0);
    const Tensor x = test::random({64, 48}, hjit::DType::F32, 1);
    auto loss = [](const std::vector<Tensor>& p, const Tensor& x) {
      Tensor y = x;
      for (const Tensor& w : p) y = hjit::tanh(hjit::matmul(y, w) * 0.5 + 0.25);
      return hjit::mean(y * y);
    };
    auto step_of = [&](std::vector<Tensor>& params) {
      return [&, opt = std::make_shared<hjit::optim::Adam>(params, 1e-2)](const Tensor& x) {
        auto [l, g] = hjit::value_and_grad([&](const Tensor& a) { return loss(params, a); }, params)(x);
        opt->step(g);
        return l;
      };
    };
    auto jitted = hjit::jit(step_of(ws), {.name = "deep_step" + std::to_string(layers), .opt_level = 1});
    auto eager = step_of(eager_ws);
    for (int s = 0; s < 2; ++s) CHECK_CLOSE_TOL(jitted(x), eager(x), 1e-5);
    for (size_t i = 0; i < ws.size(); ++i) CHECK_CLOSE_TOL(ws[i], eager_ws[i], 1e-5);
    INFO(jitted.stats().schedule);
    return parts_of(jitted.stats().schedule);
  };
  PartCost cost(64);
  const auto [parts3, distinct3] = distinct_at(3);
  const auto [parts8, distinct8] = distinct_at(8);
  CHECK(parts8 > parts3);
  CHECK(distinct8 - distinct3 < 8 - 3);  // five more layers, fewer more pipelines to compile
  CHECK(distinct8 < parts8);
}

TEST_CASE("a transformer's training step: every block's forward and backward compile once, the first block's too") {
  // The first block differs from the others at its edges: its input is an embedding (a gather of
  // parameters, cheap to recompute) and its gradient is where CSE leaves the causal mask every
  // block's gradient reads. Neither may make its parts unlike the other blocks': a third block adds
  // no pipeline to compile. And the forward blocks, whose values the backward pass reads anyway,
  // are a part each: alike, not two to a part.
  const int64_t C = 16, T = 8, B = 2, V = 11, H = 2;
  auto run = [&](int blocks) {
    uint64_t seed = 100;
    auto param = [&](hjit::Shape shape) { return test::random(std::move(shape), hjit::DType::F32, seed++) * 0.2; };
    std::vector<Tensor> params{param({V, C}), param({T, C})};
    for (int b = 0; b < blocks; ++b)
      for (Tensor t : {Tensor::ones({C}), Tensor::zeros({C}), param({C, 3 * C}), param({C, C}), Tensor::ones({C}),
                       Tensor::zeros({C}), param({C, 4 * C}), param({4 * C, C})})
        params.push_back(t);
    for (Tensor t : {Tensor::ones({C}), Tensor::zeros({C}), param({C, V})}) params.push_back(t);
    auto loss = [&](const std::vector<Tensor>& p, const Tensor& ids) {
      Tensor x = hjit::embedding(p[0], ids) + p[1];
      auto heads = [&](const Tensor& t) { return t.reshape({B, T, H, C / H}).transpose({0, 2, 1, 3}); };
      size_t k = 2;
      for (int b = 0; b < blocks; ++b, k += 8) {
        Tensor qkv = hjit::matmul(hjit::layer_norm(x, p[k], p[k + 1]), p[k + 2]);
        Tensor a = hjit::scaled_dot_product_attention(heads(hjit::slice(qkv, 2, 0, C)), heads(hjit::slice(qkv, 2, C, 2 * C)),
                                                      heads(hjit::slice(qkv, 2, 2 * C, 3 * C)), true);
        x = x + hjit::matmul(a.transpose({0, 2, 1, 3}).reshape({B, T, C}), p[k + 3]);
        x = x + hjit::matmul(hjit::gelu(hjit::matmul(hjit::layer_norm(x, p[k + 4], p[k + 5]), p[k + 6])), p[k + 7]);
      }
      Tensor logits = hjit::matmul(hjit::layer_norm(x, p[k], p[k + 1]), p[k + 2]);
      return hjit::cross_entropy(logits.reshape({B * T, V}), ids.reshape({B * T}));
    };
    auto step_of = [&](std::vector<Tensor>& ps) {
      return [&, opt = std::make_shared<hjit::optim::Adam>(ps, 1e-2)](const Tensor& ids) {
        auto [l, g] = hjit::value_and_grad([&](const Tensor& i) { return loss(ps, i); }, ps)(ids);
        opt->step(g);
        return l;
      };
    };
    std::vector<Tensor> eager_params;
    for (const Tensor& t : params) eager_params.push_back(t + 0.0);
    std::vector<int32_t> id_values(size_t(B * T));
    for (size_t i = 0; i < id_values.size(); ++i) id_values[i] = int32_t((i * 7 + i / 3) % size_t(V));
    const Tensor ids = Tensor::from_vector(id_values, {B, T});
    auto jitted = hjit::jit(step_of(params), {.name = "gpt_parts" + std::to_string(blocks), .opt_level = 1});
    auto eager = step_of(eager_params);
    for (int s = 0; s < 2; ++s) CHECK_CLOSE_TOL(jitted(ids), eager(ids), 1e-4);
    for (size_t i = 0; i < params.size(); ++i) CHECK_CLOSE_TOL(params[i], eager_params[i], 1e-4);
    INFO(jitted.stats().schedule);
    return parts_of(jitted.stats().schedule);
  };
  const auto [parts2, distinct2] = run(2);
  const auto [parts3, distinct3] = run(3);
  CHECK(parts3 > parts2);
  CHECK(distinct3 == distinct2);
  CHECK(distinct2 < parts2 - 2);  // both blocks' forward alike, and their gradients, and their Adam steps
}

TEST_CASE("a quantized network's alike blocks are cut where the 8-bit values cross") {
  // ONNX's QDQ form of a residual block: each value is rounded to u8 and widened again where it is
  // read. The run of alike blocks found starts where the likeness starts; cut there, each part
  // would hand the next the widened f32 value (four times the bytes, stored in the layout a
  // pipeline's output has). Its cuts move within the period to where the u8 values cross.
  auto quantize = [](const Tensor& v) { return hjit::clamp(hjit::round(v * 8.0f) + 3.0f, 0, 255).astype(hjit::DType::U8); };
  auto widen = [](const Tensor& q) { return (q.astype(hjit::DType::F32) - 3.0f) * 0.125f; };
  auto network = [&](const Tensor& x, const std::vector<Tensor>& weights) {
    Tensor q = quantize(x);
    for (const Tensor& w : weights) {
      const Tensor inner = quantize(hjit::relu(hjit::conv2d(widen(q), w, std::nullopt, {1, 1}, {1, 1})));
      q = quantize(widen(inner) + widen(q));
    }
    return widen(q);
  };
  std::vector<Tensor> weights;
  for (int b = 0; b < 5; ++b) weights.push_back(test::random({8, 8, 3, 3}, hjit::DType::F32, uint64_t(300 + b)) * 0.1);
  const Tensor x = test::random({1, 8, 10, 10}, hjit::DType::F32, 299);
  const hjit::Graph g = hjit::make_graph(network, x, weights);
  PartCost small(60);  // a block a part
  const std::vector<hjit::backend::Part> parts = hjit::backend::partition(g, false);
  REQUIRE(parts.size() >= 3);
  for (const hjit::backend::Part& part : parts)
    for (size_t k = 0; k < part.output_slot.size(); ++k)
      if (part.output_slot[k] < 0) CHECK(part.graph.type(part.graph.outputs[k]).dtype == hjit::DType::U8);
  auto compiled = hjit::jit(network, {.name = "qdq_blocks", .opt_level = 1});
  CHECK_CLOSE(compiled(x, weights), network(x, weights));
}

TEST_CASE("a chain longer than an inlined expression's bound is stored along the way") {
  PartCost one_part(100000, 100000);
  auto chain = [](const Tensor& x) {
    Tensor y = x;
    for (int i = 0; i < 100; ++i) y = y * (1.0 - i * 1e-4) + 0.001 * x;
    return y;
  };
  Tensor x = test::random({8, 128}, hjit::DType::F32, 4);
  auto f = hjit::jit(chain, {.name = "stored_chain", .opt_level = 1});
  CHECK_CLOSE(f(x), chain(x));
  const std::string e = f.explain(x);
  CHECK(test::occurrences(e, "stored: an inlined expression holds at most") >= 3);
  CHECK(test::occurrences(e, "part ") == 0);
}

// A later part recomputes element-wise values an earlier one computed only for it: those are
// dropped there (kept, they were stored and read by nothing, and the schedule failed: "names the
// Func 'n80_exp', which this pipeline does not have"). The golden tests' softmax group, cut in two.
TEST_CASE("a graph cut in two where the second part recomputes values of the first") {
  PartCost halves(384, 8);
  using D = hjit::DType;
  const std::vector<std::tuple<hjit::Shape, D, int>> specs = {
      {{4}, D::F16, -1},    {{4}, D::BF16, -1},   {{4}, D::F32, -1},   {{4}, D::F64, -1},    {{5}, D::F16, 0},
      {{5}, D::F16, -1},    {{3, 7}, D::F16, 1},  {{3, 7}, D::F16, 0}, {{2, 3, 6}, D::F16, 2}, {{2, 3, 6}, D::F16, 0},
      {{}, D::F16, 0},      {{2, 0}, D::F16, 1},  {{5}, D::BF16, 0},   {{5}, D::BF16, -1},   {{3, 7}, D::BF16, 1},
      {{3, 7}, D::BF16, 0}, {{2, 3, 6}, D::BF16, 2}, {{2, 3, 6}, D::BF16, 0}, {{}, D::BF16, 0}, {{2, 0}, D::BF16, 1},
      {{5}, D::F32, 0},     {{5}, D::F32, -1},    {{3, 7}, D::F32, 1},  {{3, 7}, D::F32, 0}};
  std::vector<Tensor> in;
  for (size_t k = 0; k < specs.size(); ++k) in.push_back(test::random(std::get<0>(specs[k]), std::get<1>(specs[k]), 20 + k));
  auto fn = [&](const std::vector<Tensor>& in) {
    std::vector<Tensor> out;
    for (size_t k = 0; k < specs.size(); ++k) out.push_back(hjit::softmax(in[k], std::get<2>(specs[k])));
    return out;
  };
  auto f = hjit::jit(fn, {.name = "parts_softmaxes", .opt_level = 1});
  std::vector<Tensor> got = f(in), want = fn(in);
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) CHECK_CLOSE(got[k], want[k]);
  CHECK(f.stats().schedule.find(" parts") != std::string::npos);
}

TEST_CASE("graphs cut into many small parts compute what eager computes") {
  PartCost tiny(3);  // a part per few ops
  SUBCASE("outputs that are inputs, constants and values several parts read") {
    auto fn = [](const Tensor& x, const Tensor& w) {
      Tensor h = hjit::tanh(hjit::matmul(x, w));
      Tensor s = hjit::sum(h, {1}, true);
      Tensor y = h / (s + 1.0) + hjit::exp(-h * h);
      return std::vector<Tensor>{y, x, Tensor::full({3}, 2.5), h, hjit::mean(y)};
    };
    Tensor x = test::random({5, 7}, hjit::DType::F32, 5), w = test::random({7, 6}, hjit::DType::F32, 6);
    for (int level : {0, 1}) {
      CAPTURE(level);
      auto f = hjit::jit(fn, {.name = "parts_outputs", .opt_level = level});
      std::vector<Tensor> got = f(x, w), want = fn(x, w);
      REQUIRE(got.size() == want.size());
      for (size_t k = 0; k < got.size(); ++k) CHECK_CLOSE(got[k], want[k]);
      CHECK(f.stats().schedule.find(" parts") != std::string::npos);
    }
  }
  SUBCASE("a training step with updates") {
    Tensor w1 = test::random({8, 16}, hjit::DType::F32, 7), w2 = test::random({16, 4}, hjit::DType::F32, 8);
    Tensor x = test::random({6, 8}, hjit::DType::F32, 9), t = test::random({6, 4}, hjit::DType::F32, 10);
    auto step = [](Tensor& w1, Tensor& w2) {
      return [&w1, &w2](const Tensor& x, const Tensor& t) {
        auto loss = [&](const Tensor& x) {
          Tensor d = hjit::matmul(hjit::relu(hjit::matmul(x, w1)), w2) - t;
          return hjit::mean(d * d);
        };
        auto [l, g] = hjit::value_and_grad(loss, std::vector<Tensor>{w1, w2})(x);
        w1.assign(w1 - 0.05 * g[0]);
        w2.assign(w2 - 0.05 * g[1]);
        return l;
      };
    };
    Tensor a1 = w1.clone(), a2 = w2.clone(), b1 = w1.clone(), b2 = w2.clone();
    auto eager = step(a1, a2);
    auto jitted = hjit::jit(step(b1, b2), {.name = "parts_train", .opt_level = 1});
    for (int i = 0; i < 3; ++i) CHECK_CLOSE_TOL(jitted(x, t), eager(x, t), 1e-4);
    CHECK_CLOSE_TOL(b1, a1, 1e-4);
    CHECK_CLOSE_TOL(b2, a2, 1e-4);
    CHECK(jitted.stats().schedule.find(" parts") != std::string::npos);
  }
  SUBCASE("integers, scalars and size-0 values") {
    auto fn = [](const Tensor& i, const Tensor& e, const Tensor& s) {
      Tensor j = hjit::minimum(i * 3 + 1, 7) - i;
      Tensor k = hjit::maximum(j, i) * 2 + j;
      return std::vector<Tensor>{k, hjit::sum(k), e * 2.0 + 1.0, s * s + s};
    };
    Tensor i = test::random({4, 5}, hjit::DType::I32, 11), e = Tensor::zeros({0, 3}), s = Tensor::full({}, 1.5);
    auto f = hjit::jit(fn, {.name = "parts_ints", .opt_level = 1});
    std::vector<Tensor> got = f(i, e, s), want = fn(i, e, s);
    REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < got.size(); ++k) CHECK_CLOSE(got[k], want[k]);
  }
}
