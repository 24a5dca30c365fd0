// dynamic_dims: one trace and one compiled pipeline for every size of the marked dimensions,
// compiled against eager at every size; where one pipeline cannot hold (C++ that branches on a
// size, a value computed from it, sizes below the schedule's), a compile per size, still correct.
#include <hjit/nn.h>
#include <hjit/optim.h>

#include "examples/llama_attention.h"
#include "tests/support.h"

using hjit::DType;
using hjit::Shape;
using hjit::Tensor;

namespace {

// `to` given copies of `from`'s parameters and buffers (an eager twin of a compiled model).
void copy_state(const hjit::nn::Module& from, hjit::nn::Module& to) {
  hjit::NamedTensors copied;
  for (const auto& [name, t] : from.state()) copied.emplace_back(name, t.clone());
  to.load_state(copied);
}

// Every parameter and buffer of the two models alike.
void check_same_state(const hjit::nn::Module& got_model, const hjit::nn::Module& want_model, double tolerance) {
  const hjit::NamedTensors got = got_model.state(), want = want_model.state();
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    CAPTURE(got[k].first);
    CHECK_CLOSE_TOL(got[k].second, want[k].second, tolerance);
  }
}

hjit::JitOptions dynamic(std::vector<std::pair<int, int>> dims, int opt_level = 1) {
  hjit::JitOptions o;
  o.dynamic_dims = std::move(dims);
  o.opt_level = opt_level;
  return o;
}

}  // namespace

TEST_CASE("W10's attention with a dynamic sequence length: one compile from 37 to 512 positions") {
  LlamaAttention attn(512, 8, 512);
  auto f = hjit::jit([&](const Tensor& x) { return attn(x); }, dynamic({{0, 1}}, 2));
  for (int64_t t : {256, 64, 512, 100, 37, 255}) {
    CAPTURE(t);
    Tensor x = Tensor::randn({1, t, 512}, uint64_t(t));
    Tensor got = f(x);
    CHECK(got.shape() == Shape{1, t, 512});
    CHECK_CLOSE_TOL(got, attn(x), 1e-4);
  }
  CHECK(f.stats().traces == 1);
  CHECK(f.stats().compiles + f.stats().loaded == 1);
  CHECK(f.stats().dynamic_entries == 1);
  CHECK(f.explain(Tensor::randn({1, 64, 512}, 1)).find("one pipeline for every size") != std::string::npos);
  // Below the sizes the schedule's splits serve (its row tiles), a size compiles on its own.
  Tensor tiny = Tensor::randn({1, 3, 512}, 3);
  CHECK_CLOSE_TOL(f(tiny), attn(tiny), 1e-4);
  CHECK(f.stats().dynamic_entries == 1);
}

TEST_CASE("dynamic batch and length: elementwise, matmul, reductions, reshape, slice, concat") {
  Tensor w = test::random({6, 5}, DType::F32, 1), b = test::random({5}, DType::F32, 2);
  auto mlp = [&](const Tensor& x) {
    Tensor h = hjit::relu(hjit::matmul(x, w) + b);                       // [n, 5]
    Tensor s = hjit::softmax(h, -1);                                     // along a fixed axis
    Tensor r = h.reshape({-1, 5}).reshape({x.dim(0) * 5});                // regrouped through the dynamic axis
    Tensor first = hjit::slice(s, 0, 0, x.dim(0) - 1);                    // a stop that moves with n
    return std::make_tuple(s, hjit::sum(h, {0}), hjit::max(h, {0}), r, hjit::concat({first, first * 2.0}, 1),
                           hjit::sum(x * x, {1}, true));
  };
  for (int level : {0, 1, 2}) {
    CAPTURE(level);
    auto f = hjit::jit(mlp, dynamic({{0, 0}}, level));
    for (int64_t n : {7, 33, 2, 128, 16}) {
      CAPTURE(n);
      Tensor x = test::random({n, 6}, DType::F32, uint64_t(n));
      auto got = f(x);
      auto want = mlp(x);
      CHECK_CLOSE(std::get<0>(got), std::get<0>(want));
      CHECK_CLOSE(std::get<1>(got), std::get<1>(want));
      CHECK_CLOSE(std::get<2>(got), std::get<2>(want));
      CHECK_CLOSE(std::get<3>(got), std::get<3>(want));
      CHECK_CLOSE(std::get<4>(got), std::get<4>(want));
      CHECK_CLOSE(std::get<5>(got), std::get<5>(want));
    }
    CHECK(f.stats().dynamic_entries == 1);
    CHECK(f.stats().traces <= 2);  // one for every size (and one for a size below the schedule's splits)
  }
}

// A matmul traced with fewer rows than one tile and columns for two: with fixed sizes its column
// tiles run in parallel, each over every row, its rows unrolled; rows that vary cannot be unrolled
// (Halide refused to compile it), so they keep row tiles.
TEST_CASE("a dynamic batch of fewer rows than a tile, and wide columns, compiles and computes") {
  const Tensor w = test::random({32, 160}, DType::F32, 3);
  auto layer = [&](const Tensor& x) { return hjit::relu(hjit::matmul(x, w)); };
  auto f = hjit::jit(layer, dynamic({{0, 0}}));
  for (int64_t n : {4, 1, 9, 37}) {
    CAPTURE(n);
    const Tensor x = test::random({n, 32}, DType::F32, uint64_t(n));
    CHECK_CLOSE(f(x), layer(x));
  }
  CHECK(f.stats().dynamic_entries == 1);
}

TEST_CASE("dynamic dims: two arguments of one length move together, two lengths are two sizes") {
  auto pair = [](const Tensor& a, const Tensor& b) { return hjit::matmul(a, hjit::transpose(b, {1, 0})) * 0.5; };
  auto same = hjit::jit(pair, dynamic({{0, 0}, {1, 0}}));
  for (int64_t n : {4, 9, 20}) {
    Tensor a = test::random({n, 8}, DType::F32, 1), b = test::random({n, 8}, DType::F32, 2);
    CHECK_CLOSE(same(a, b), pair(a, b));
  }
  CHECK(same.stats().compiles + same.stats().loaded == 1);
  auto two = hjit::jit(pair, dynamic({{0, -2}, {1, -2}}));
  for (auto [n, m] : {std::pair<int64_t, int64_t>{4, 6}, {9, 3}, {20, 20}, {5, 17}}) {
    Tensor a = test::random({n, 8}, DType::F32, 3), b = test::random({m, 8}, DType::F32, 4);
    Tensor got = two(a, b);
    CHECK(got.shape() == Shape{n, m});
    CHECK_CLOSE(got, pair(a, b));
  }
  CHECK(two.stats().dynamic_entries == 1);
  // Both axes of one argument, of different sizes.
  auto grid = [](const Tensor& x) { return std::make_pair(hjit::sum(x, {1}), hjit::transpose(x, {1, 0}) * 2.0); };
  auto gf = hjit::jit(grid, dynamic({{0, 0}, {0, 1}}));
  for (auto [n, m] : {std::pair<int64_t, int64_t>{5, 7}, {12, 3}, {6, 6}}) {
    Tensor x = test::random({n, m}, DType::F32, uint64_t(n * m));
    auto [a, b] = gf(x);
    CHECK_CLOSE(a, grid(x).first);
    CHECK_CLOSE(b, grid(x).second);
  }
  CHECK(gf.stats().dynamic_entries == 1);
  // A std::vector<Tensor> argument: every tensor's axis.
  auto total = [](const std::vector<Tensor>& xs) { return hjit::sum(xs[0], {0}) + hjit::sum(xs[1], {0}); };
  auto tv = hjit::jit(total, dynamic({{0, 0}}));
  for (int64_t n : {3, 11}) {
    std::vector<Tensor> xs{test::random({n, 4}, DType::F32, 5), test::random({n + 2, 4}, DType::F32, 6)};
    CHECK_CLOSE(tv(xs), total(xs));
  }
}

TEST_CASE("dynamic dims that cannot be one pipeline compile per size, correctly") {
  // A number computed from the size in C++ is a value, not a shape (hjit::numel is the traced one).
  auto scaled = [](const Tensor& x) { return x * double(x.dim(0)); };
  auto f = hjit::jit(scaled, dynamic({{0, 0}}));
  for (int64_t n : {3, 8, 21}) {
    Tensor x = test::random({n, 4}, DType::F32, uint64_t(n));
    CHECK_CLOSE(f(x), scaled(x));
  }
  CHECK(f.stats().dynamic_entries == 0);
  CHECK(f.stats().traces == 3);
  // C++ that branches on the size traces to different graphs.
  auto branchy = [](const Tensor& x) { return x.dim(0) > 10 ? x * 2.0 : x + 1.0; };
  auto g = hjit::jit(branchy, dynamic({{0, 0}}));
  for (int64_t n : {4, 16, 5}) {
    Tensor x = test::random({n, 3}, DType::F32, uint64_t(n));
    CHECK_CLOSE(g(x), branchy(x));
  }
  CHECK(g.stats().dynamic_entries == 0);
  // Its re-trace warning says why each size compiles its own, not to set dynamic_dims.
  hjit::JitOptions warned = dynamic({{0, 0}});
  warned.warn_after_retraces = 1;
  auto w = hjit::jit(branchy, warned);
  for (int64_t n : {4, 16, 5, 6}) w(test::random({n, 3}, DType::F32, uint64_t(n)));
  const std::string warning = w.stats().recompile_warning;
  CAPTURE(warning);
  CHECK(warning.find("dynamic_dims are set, but one pipeline cannot serve every size") != std::string::npos);
  CHECK(warning.find("name them in") == std::string::npos);
  // Size 0 never takes a pipeline made for every size; 1 does (the pipeline's tails are guarded
  // where its first size is below its splits).
  auto h = hjit::jit([](const Tensor& x) { return x * 3.0 + 1.0; }, dynamic({{0, 0}}));
  for (int64_t n : {5, 0, 1, 9}) {
    Tensor x = test::random({n, 3}, DType::F32, 7);
    CHECK_CLOSE(h(x), x * 3.0 + 1.0);
  }
  CHECK(h.stats().dynamic_entries == 1);
}

TEST_CASE("generation compiles once: embeddings, causal attention, a slice from the end, a take at a moving position") {
  namespace nn = hjit::nn;
  nn::manual_seed(2);
  const int64_t V = 23, C = 16;
  nn::Embedding tok(V, C), pos(80, C);
  nn::TransformerEncoderLayer block(C, 2, {.dim_feedforward = 32, .dropout = 0, .batch_first = true, .norm_first = true});
  nn::Linear head(C, V);
  block.eval();
  auto next_logits = [&](const Tensor& ids) {
    const int64_t T = ids.dim(1);
    const Tensor x = block(tok(ids) + pos(hjit::iota({1, T}, 1, DType::I64)), {.is_causal = true});
    return hjit::reshape(hjit::slice(head(x), 1, -1, std::nullopt), {V});  // the last position's logits
  };
  auto f = hjit::jit(next_logits, dynamic({{0, 1}}));
  std::vector<int64_t> ids{3};
  for (int64_t t = 1; t <= 70; ++t) {
    CAPTURE(t);
    const Tensor x = Tensor::from_vector(ids, Shape{1, t});
    const Tensor got = f(x);
    if (t <= 4 || t % 11 == 0 || t == 70) CHECK_CLOSE_TOL(got, next_logits(x), 1e-4);
    ids.push_back(hjit::argmax(got, 0).item<int64_t>());
  }
  CHECK(f.stats().traces == 1);
  CHECK(f.stats().dynamic_entries == 1);
  // The case: a take at a position given as a tensor, through a dynamic axis.
  const Tensor w = test::random({16, 16}, DType::F32, 3);
  auto at = [&](const Tensor& x, const Tensor& p) { return hjit::take(hjit::matmul(x, w), p, 1).reshape({-1}); };
  // First called at 1, it is traced at 2 and its tiles of 2 rows are guarded: shifted inwards, the
  // call at 1 read the row before x (the guard pages make that a crash).
  auto g = hjit::jit(at, dynamic({{0, 1}}));
  for (hjit::GuardPages mode : {hjit::GuardPages::Before, hjit::GuardPages::After})
    for (int64_t t : {1, 64, 9, 2}) {
      CAPTURE(t);
      const test::ScopedGuardPages guarded(mode);
      const Tensor x = test::random({1, t, 16}, DType::F32, uint64_t(t));
      const Tensor p = Tensor::from_vector<int32_t>({int32_t(t - 1)}, {1});
      CHECK_CLOSE(g(x, p), at(x, p));
    }
  CHECK(g.stats().dynamic_entries == 1);
  CHECK(g.stats().traces == 1);
  CHECK_THROWS_AS(g(test::random({1, 5, 16}, DType::F32, 1), Tensor::from_vector<int32_t>({7}, {1})), hjit::IndexError);
}

TEST_CASE("reductions over a dynamic axis stay dynamic: mean, numel, norms, batch norm's statistics, losses") {
  const Tensor w = test::random({5}, DType::F32, 4), b = test::random({5}, DType::F32, 5);
  auto stats = [&](const Tensor& x) {  // x [n, 5]
    const Tensor centered = x - hjit::mean(x, {0}, true);
    return std::make_tuple(hjit::mean(x, {0}), hjit::mean(x), hjit::mean(centered * centered, {0}),
                           hjit::sum(x) / hjit::numel(x), hjit::numel(x, {0}, DType::I64), hjit::softmax(x, 0),
                           hjit::layer_norm(hjit::transpose(x, {1, 0}), std::nullopt, std::nullopt));
  };
  for (int level : {0, 1, 2}) {
    CAPTURE(level);
    auto f = hjit::jit(stats, dynamic({{0, 0}}, level));
    for (int64_t n : {6, 2, 37, 128, 3}) {
      CAPTURE(n);
      const Tensor x = test::random({n, 5}, DType::F32, uint64_t(n));
      const auto got = f(x);
      const auto want = stats(x);
      CHECK_CLOSE(std::get<0>(got), std::get<0>(want));
      CHECK_CLOSE(std::get<1>(got), std::get<1>(want));
      CHECK_CLOSE(std::get<2>(got), std::get<2>(want));
      CHECK_CLOSE(std::get<3>(got), std::get<3>(want));
      CHECK(std::get<4>(got).item<int64_t>() == n);
      CHECK_CLOSE(std::get<5>(got), std::get<5>(want));
      CHECK_CLOSE(std::get<6>(got), std::get<6>(want));
    }
    CHECK(f.stats().traces == 1);
    CHECK(f.stats().dynamic_entries == 1);
  }
  // Two dynamic sizes under one mean (its count is their product, not an affine form of them).
  auto both = [](const Tensor& x) { return hjit::mean(x * x); };
  auto g = hjit::jit(both, dynamic({{0, 0}, {0, 1}}));
  for (auto [n, m] : {std::pair<int64_t, int64_t>{4, 6}, {9, 3}, {20, 31}}) {
    const Tensor x = test::random({n, m}, DType::F32, uint64_t(n * m));
    CHECK_CLOSE(g(x), both(x));
  }
  CHECK(g.stats().traces == 1);
  // Batch norm in training mode: its output and the running statistics it updates (n / (n - 1)
  // from the dynamic batch), against the same layer run eagerly.
  hjit::nn::manual_seed(3);
  hjit::nn::BatchNorm2d compiled_bn(3), eager_bn(3);
  auto bn = hjit::jit([&](const Tensor& x) { return compiled_bn(x); }, dynamic({{0, 0}}));
  for (int64_t n : {4, 2, 9, 33}) {
    CAPTURE(n);
    const Tensor x = test::random({n, 3, 5, 4}, DType::F32, uint64_t(n));
    const Tensor y = bn(x), eager_y = eager_bn(x);
    CHECK_CLOSE(y, eager_y);
    check_same_state(compiled_bn, eager_bn, 2e-5);
  }
  CHECK(bn.stats().traces == 1);
}

namespace {

// A small CNN with batch norm: convolution, batch norm, max pooling, a global mean and a linear head.
struct BatchNormNet : hjit::nn::Layer {
  hjit::nn::Conv2d conv{3, 6, 3, 1, 1};
  hjit::nn::BatchNorm2d bn{6};
  hjit::nn::Linear head{6, 4};
  BatchNormNet() {
    register_module("conv", conv);
    register_module("bn", bn);
    register_module("head", head);
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h = hjit::max_pool2d(hjit::relu(bn(conv(x))), {2, 2}, {2, 2});
    return head(hjit::mean(h, {2, 3}));
  }
};

}  // namespace

TEST_CASE("a batch norm CNN's training step compiles once for batch sizes 1 to 64") {
  hjit::nn::manual_seed(4);
  BatchNormNet compiled_net, eager_net;
  copy_state(compiled_net, eager_net);
  auto step_of = [](BatchNormNet& net, hjit::optim::SGD& opt) {
    return [&net, &opt](const Tensor& x, const Tensor& y) {
      auto loss = [&](const Tensor& x, const Tensor& y) { return hjit::cross_entropy(net(x), y); };
      auto [l, g] = hjit::value_and_grad(loss, net.parameters())(x, y);
      opt.step(g);
      return l;
    };
  };
  hjit::optim::SGD compiled_opt(compiled_net.parameters(), 0.05, 0.9), eager_opt(eager_net.parameters(), 0.05, 0.9);
  auto step = hjit::jit(step_of(compiled_net, compiled_opt), dynamic({{0, 0}, {1, 0}}));
  auto eager_step = step_of(eager_net, eager_opt);
  for (int64_t n : {8, 1, 64, 3, 17, 2, 8}) {
    CAPTURE(n);
    const Tensor x = test::random({n, 3, 8, 8}, DType::F32, uint64_t(n));
    std::vector<int64_t> labels;
    for (int64_t i = 0; i < n; ++i) labels.push_back((i * 3 + n) % 4);
    const Tensor y = Tensor::from_vector(labels);
    const Tensor loss = step(x, y), eager_loss = eager_step(x, y);
    CHECK_CLOSE_TOL(loss, eager_loss, 1e-4);
    check_same_state(compiled_net, eager_net, 1e-4);
  }
  CHECK(step.stats().traces == 1);
  CHECK(step.stats().compiles + step.stats().loaded == 1);
  CHECK(step.stats().dynamic_entries == 1);
}

namespace {

// A character-level language model: embedding, a batch-first LSTM, a linear head; logits [B*T, V].
struct CharLM : hjit::nn::Module {
  static constexpr int64_t kVocab = 30;
  hjit::nn::Embedding emb{kVocab, 16};
  hjit::nn::LSTM lstm{16, 24, {.num_layers = 2, .batch_first = true}};
  hjit::nn::Linear head{24, kVocab};
  CharLM() {
    register_module("emb", emb);
    register_module("lstm", lstm);
    register_module("head", head);
  }
  Tensor operator()(const Tensor& ids) { return head(lstm(emb(ids)).output).reshape({-1, kVocab}); }
};

}  // namespace

TEST_CASE("an LSTM language model's training step compiles once for lengths 16 to 128") {
  hjit::nn::manual_seed(6);
  CharLM compiled_lm, eager_lm;
  copy_state(compiled_lm, eager_lm);
  auto step_of = [](CharLM& lm, hjit::optim::AdamW& opt) {
    return [&lm, &opt](const Tensor& ids, const Tensor& next) {
      auto loss = [&](const Tensor& ids, const Tensor& next) { return hjit::cross_entropy(lm(ids), next.reshape({-1})); };
      auto [l, g] = hjit::value_and_grad(loss, lm.parameters())(ids, next);
      hjit::optim::clip_grad_norm(g, 1.0);
      opt.step(g);
      return l;
    };
  };
  hjit::optim::AdamW compiled_opt(compiled_lm.parameters(), 1e-2), eager_opt(eager_lm.parameters(), 1e-2);
  auto step = hjit::jit(step_of(compiled_lm, compiled_opt), dynamic({{0, 1}, {1, 1}}));
  auto eager_step = step_of(eager_lm, eager_opt);
  for (int64_t t : {16, 37, 128, 17, 100, 64, 16}) {
    CAPTURE(t);
    std::vector<int64_t> ids, next;
    for (int64_t i = 0; i < 3 * t; ++i) ids.push_back((i * 7 + t) % CharLM::kVocab), next.push_back((i * 5 + 1) % CharLM::kVocab);
    const Tensor x = Tensor::from_vector(ids, Shape{3, t}), y = Tensor::from_vector(next, Shape{3, t});
    const Tensor loss = step(x, y), eager_loss = eager_step(x, y);
    CHECK_CLOSE_TOL(loss, eager_loss, 1e-4);
  }
  check_same_state(compiled_lm, eager_lm, 1e-4);
  CHECK(step.stats().traces == 1);
  CHECK(step.stats().compiles + step.stats().loaded == 1);
  CHECK(step.stats().dynamic_entries == 1);
  CHECK(step.explain(Tensor::zeros({3, 20}, DType::I64), Tensor::zeros({3, 20}, DType::I64)).find("scan on the host") != std::string::npos);
}

TEST_CASE("loops whose trip count is a dynamic size: scan, reverse scan, fori_loop, while_loop to numel") {
  // Rows of 3 floats (12 bytes: each goes through an aligned copy), scanned both ways.
  const Tensor zero3 = Tensor::zeros({3}), counter = Tensor::scalar(0, DType::I32), one = Tensor::scalar(1.0);
  auto sweeps = [&](const Tensor& x) {  // x [T, 3]
    const hjit::Tensors init{zero3};
    auto running = [](const hjit::Tensors& c, const hjit::Tensors& row) {
      const Tensor next = c[0] * 0.5 + row[0];
      return std::pair<hjit::Tensors, hjit::Tensors>{{next}, {next * 2.0}};
    };
    const hjit::ScanResult forward = hjit::scan(running, init, {x});
    const hjit::ScanResult backward = hjit::scan(running, init, {x}, -1, true);
    // fori_loop for as many steps as x has rows (a scan of x.dim(0) steps), and a while_loop to
    // numel's count.
    const Tensor total = hjit::fori_loop(0, x.dim(0), [](const Tensor& i, const Tensor& acc) {
      return acc * 0.75 + i.astype(DType::F32);
    }, zero3);
    const Tensor rows = hjit::numel(x, {0}, DType::I32);
    const hjit::Tensors counted = hjit::while_loop([&](const hjit::Tensors& c) { return c[0] < rows; },
                                                   [](const hjit::Tensors& c) { return hjit::Tensors{c[0] + 1, c[1] * 1.5}; },
                                                   {counter, one});
    return std::make_tuple(forward.carries[0], forward.ys[0], backward.ys[0], total, counted[1]);
  };
  auto f = hjit::jit(sweeps, dynamic({{0, 0}}));
  for (int64_t t : {5, 2, 31, 8}) {
    CAPTURE(t);
    const Tensor x = test::random({t, 3}, DType::F32, uint64_t(t));
    const auto got = f(x);
    const auto want = sweeps(x);
    CHECK(std::get<1>(got).shape() == Shape{t, 3});
    CHECK_CLOSE(std::get<0>(got), std::get<0>(want));
    CHECK_CLOSE(std::get<1>(got), std::get<1>(want));
    CHECK_CLOSE(std::get<2>(got), std::get<2>(want));
    CHECK_CLOSE(std::get<3>(got), std::get<3>(want));
    CHECK_CLOSE(std::get<4>(got), std::get<4>(want));
  }
  CHECK(f.stats().traces == 1);
  CHECK(f.stats().dynamic_entries == 1);
  // A loop whose carries change size with the dynamic one (a body of another shape at each size)
  // compiles per size, correctly.
  auto batch_loop = [](const Tensor& x) { return hjit::fori_loop(0, 3, [](const Tensor&, const Tensor& acc) { return acc * 2.0 + 1.0; }, x); };
  auto g = hjit::jit(batch_loop, dynamic({{0, 0}}));
  for (int64_t n : {4, 9}) {
    const Tensor x = test::random({n, 2}, DType::F32, uint64_t(n));
    CHECK_CLOSE(g(x), batch_loop(x));
  }
  CHECK(g.stats().dynamic_entries == 0);
  // A loop over values the function itself made runs when it is traced: its result is a constant
  // of that size's trace (it was an input captured from outside, read after it died, and the
  // same at every size).
  auto made_here = [](const Tensor& x) {
    const Tensor steps = hjit::fori_loop(0, x.dim(0), [](const Tensor&, const Tensor& acc) { return acc * 0.5 + 1.0; }, Tensor::zeros({3}));
    return steps + hjit::sum(x, {0});
  };
  auto m = hjit::jit(made_here, dynamic({{0, 0}}));
  for (int64_t n : {5, 2, 31, 5}) {
    CAPTURE(n);
    const Tensor x = test::random({n, 3}, DType::F32, uint64_t(n));
    CHECK_CLOSE(m(x), made_here(x));
  }
  // So does a body that reads a tensor of the dynamic size (a body of other sizes at each size).
  auto rows = [&](const Tensor& x) {
    return hjit::fori_loop(0, 2, [&](const Tensor& i, const Tensor& acc) { return acc + hjit::take(x, i.reshape({1}), 0).reshape({3}); },
                           zero3);
  };
  auto h = hjit::jit(rows, dynamic({{0, 0}}));
  for (int64_t n : {4, 9}) {
    const Tensor x = test::random({n, 3}, DType::F32, uint64_t(n));
    CHECK_CLOSE(h(x), rows(x));
  }
  CHECK(h.stats().dynamic_entries == 0);
}

TEST_CASE("dynamic_dims: options it cannot take are ValueErrors") {
  auto f = [](const Tensor& x) { return x + 1.0; };
  hjit::JitOptions cuda = dynamic({{0, 0}});
  cuda.device = hjit::Device::CUDA;
  CHECK_THROWS_AS(hjit::jit(f, cuda), hjit::ValueError);
  hjit::JitOptions concrete = dynamic({{0, 0}});
  concrete.trace_mode = hjit::TraceMode::Concrete;
  CHECK_THROWS_AS(hjit::jit(f, concrete), hjit::ValueError);
  CHECK_THROWS_AS(hjit::jit(f, dynamic({{-1, 0}})), hjit::ValueError);
  // An axis no argument has: a pipeline per size, as without it.
  auto g = hjit::jit(f, dynamic({{0, 5}}));
  CHECK(test::vals(g(test::f32({1, 2}, {2}))) == std::vector<float>{2, 3});
}
