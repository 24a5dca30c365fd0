// Saved modules: save, load and run without the function's source; parameters, freezing, updates,
// threads; every bad file a typed error.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "tests/support.h"

using hjit::Tensor;
namespace fs = std::filesystem;

namespace {

std::string path_of(const std::string& name) {
  return fs::temp_directory_path().string() + "/hjit_test_module_" + std::to_string(getpid()) + "_" + name + ".hjit";
}


// A small network with captured parameters, like a model's forward pass.
struct Block {
  Tensor w1 = Tensor::randn({32, 64}, 1), b1 = Tensor::randn({64}, 2), w2 = Tensor::randn({64, 16}, 3);
  Tensor operator()(const Tensor& x) const { return hjit::softmax(hjit::matmul(hjit::relu(hjit::matmul(x, w1) + b1), w2)); }
};

}  // namespace

TEST_CASE("a saved function loads and runs without its source, as eager computes it") {
  Block block;
  Tensor x = Tensor::randn({8, 32}, 4);
  const std::string p = path_of("block");
  hjit::save(p, [&](const Tensor& x) { return block(x); }, x);
  hjit::Module m = hjit::Module::load(p);
  CHECK(m.parameters().size() == 3);
  CHECK(m.input_types().size() == 1);
  CHECK(m.input_types()[0] == hjit::TensorType{hjit::DType::F32, {8, 32}});
  CHECK(m.output_types()[0] == hjit::TensorType{hjit::DType::F32, {8, 16}});
  Tensor y = m(x);
  CHECK_CLOSE(y, block(x));
  Tensor x2 = Tensor::randn({8, 32}, 5);
  CHECK_CLOSE(Tensor(m(x2)), block(x2));
  CHECK(m.str().find("parameters: f32[32,64] f32[64] f32[64,16]") != std::string::npos);
  CHECK(m.str().find("matmul") != std::string::npos);
  // Saved again and loaded again: the same module.
  m.save(p + "2");
  CHECK(test::read_file(p + "2") == test::read_file(p));
  // Changing a parameter changes what the module computes.
  m.parameters()[1].assign(Tensor::zeros({64}));
  Block zero_bias = block;
  zero_bias.b1 = Tensor::zeros({64});
  CHECK_CLOSE(Tensor(m(x)), zero_bias(x));
  fs::remove(p), fs::remove(p + "2");
}

TEST_CASE("freezing bakes the parameters in as constants") {
  Block block;
  Tensor x = Tensor::randn({8, 32}, 4);
  const std::string p = path_of("frozen");
  hjit::save(p, hjit::SaveOptions{.freeze_parameters = true}, [&](const Tensor& x) { return block(x); }, x);
  hjit::Module frozen = hjit::Module::load(p);
  CHECK(frozen.parameters().empty());
  CHECK_CLOSE(Tensor(frozen(x)), block(x));
  hjit::save(p, [&](const Tensor& x) { return block(x); }, x);
  hjit::Module thawed = hjit::Module::load(p);
  hjit::Module f = thawed.freeze();
  CHECK(f.parameters().empty());
  CHECK_CLOSE(Tensor(f(x)), block(x));
  fs::remove(p);
}

TEST_CASE("a saved training step updates its parameters at every call, as the jitted one does") {
  Tensor w = Tensor::randn({16, 4}, 6), w_ref = w.clone();
  Tensor x = Tensor::randn({8, 16}, 7);
  auto step_fn = [](Tensor& w) {
    return [&w](const Tensor& x) {
      auto mse = [&x](const Tensor& w2) {
        Tensor y = hjit::matmul(x, w2);
        return hjit::mean(y * y);
      };
      Tensor loss = mse(w);
      Tensor g = hjit::grad(mse)(w);
      w.assign(w - 0.1 * g);
      return loss;
    };
  };
  const std::string p = path_of("step");
  Tensor w_saved = w.clone();
  hjit::save(p, step_fn(w_saved), x);
  hjit::Module m = hjit::Module::load(p);
  auto ref = hjit::jit(step_fn(w_ref));
  for (int i = 0; i < 3; ++i) {
    Tensor got = m(x), want = ref(x);  // once each: a call is a training step
    CHECK_CLOSE(got, want);
  }
  CHECK_CLOSE(m.parameters()[0], w_ref);
  CHECK_THROWS_AS(m.freeze(), hjit::ValueError);  // it assigns to its parameter
  fs::remove(p);
}

TEST_CASE("a module is callable from several threads at once") {
  Block block;
  const std::string p = path_of("threads");
  hjit::save(p, [&](const Tensor& x) { return block(x); }, Tensor::randn({8, 32}, 1));
  hjit::Module m = hjit::Module::load(p);
  std::vector<Tensor> xs, want;
  for (int t = 0; t < 4; ++t) xs.push_back(Tensor::randn({8, 32}, uint64_t(10 + t))), want.push_back(block(xs.back()));
  std::vector<Tensor> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) got[size_t(t)] = m(xs[size_t(t)]);
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) CHECK_CLOSE(got[size_t(t)], want[size_t(t)]);
  fs::remove(p);
}

TEST_CASE("calls with the wrong arguments are typed errors") {
  const std::string p = path_of("args");
  hjit::save(p, [](const Tensor& a, const Tensor& b) { return std::vector<Tensor>{a + b, a * b}; }, Tensor::ones({3}),
             Tensor::ones({3}));
  hjit::Module m = hjit::Module::load(p);
  hjit::ModuleResult r = m(test::f32({1, 2, 3}, {3}), test::f32({4, 5, 6}, {3}));
  REQUIRE(r.size() == 2);
  CHECK(test::vals(r[0]) == std::vector<float>{5, 7, 9});
  CHECK(test::vals(r[1]) == std::vector<float>{4, 10, 18});
  CHECK_THROWS_AS(static_cast<Tensor>(r), hjit::ValueError);  // two outputs are not one Tensor
  CHECK_THROWS_AS(m(Tensor::ones({3})), hjit::ValueError);
  CHECK_THROWS_AS(m(Tensor::ones({4}), Tensor::ones({3})), hjit::ShapeError);
  CHECK_THROWS_AS(m(Tensor::ones({3}, hjit::DType::F64), Tensor::ones({3})), hjit::DTypeError);
  CHECK_THROWS_AS(m(Tensor(), Tensor::ones({3})), hjit::ValueError);
  fs::remove(p);
}

TEST_CASE("1000 corrupted module files: each is a ValueError that says what is wrong, or the file itself") {
  Block block;
  const std::string p = path_of("corrupt"), bad_path = path_of("corrupt_bad");
  hjit::save(p, [&](const Tensor& x) { return block(x); }, Tensor::randn({8, 32}, 1));
  const std::string good = test::read_file(p);
  CHECK_THROWS_AS(hjit::Module::load(path_of("missing")), hjit::ValueError);
  std::mt19937_64 rng(3);
  int rejected = 0;
  for (int i = 0; i < 1000; ++i) {
    std::string bad = good;
    switch (i % 5) {
      case 0: bad.resize(rng() % bad.size()); break;
      case 1:
        for (int k = 0, n = 1 + int(rng() % 8); k < n; ++k) bad[rng() % bad.size()] ^= char(1 + rng() % 255);
        break;
      case 2: bad[8] = char(bad[8] + 1 + rng() % 3); break;  // another format version
      case 3: bad += std::string(1 + rng() % 16, 'x'); break;
      default: bad = std::string(rng() % 64, char(rng())); break;
    }
    test::write_file(bad_path, bad);
    try {
      hjit::Module m = hjit::Module::load(bad_path);
      CHECK(bad == good);
    } catch (const hjit::ValueError& e) {
      ++rejected;
      CHECK(std::string(e.what()).find("cannot load the module") != std::string::npos);
    }
  }
  CHECK(rejected > 990);
  test::write_file(bad_path, good.substr(0, 8) + std::string("\x07\x00\x00\x00", 4) + good.substr(12));
  try {
    hjit::Module::load(bad_path);
    FAIL("no error");
  } catch (const hjit::ValueError& e) {
    CHECK(std::string(e.what()).find("format version 7") != std::string::npos);
  }
  fs::remove(p), fs::remove(bad_path);
}

TEST_CASE("dynamic_dims: one module for every batch size, saved with its sizes; what cannot hold is a ValueError") {
  Block block;
  auto fn = [&](const Tensor& x) { return block(x); };
  hjit::ModuleOptions options;
  options.dynamic_dims = {{0, 0}};
  hjit::Module m = hjit::make_module("block_dynamic", options, hjit::SaveOptions{}, fn, Tensor::randn({8, 32}, 4));
  CHECK(m.dynamic_dims() == std::vector<std::pair<int, int>>{{0, 0}});
  for (int64_t n : {8, 16, 9, 1, 40}) {
    const Tensor x = Tensor::randn({n, 32}, uint64_t(n));
    const Tensor y = m(x);
    CHECK(y.shape() == hjit::Shape{n, 16});
    CHECK_CLOSE(y, block(x));
  }
  CHECK_THROWS_AS(m(Tensor::randn({8, 31}, 1)), hjit::ShapeError);  // only the batch may change
  // Saved and loaded with its sizes; the same bytes again after a second save.
  const std::string p = path_of("dynamic");
  m.save(p);
  hjit::Module back = hjit::Module::load(p);
  CHECK(back.dynamic_dims() == m.dynamic_dims());
  const Tensor x12 = Tensor::randn({12, 32}, 12);
  CHECK_CLOSE(Tensor(back(x12)), block(x12));
  back.save(p + "2");
  CHECK(test::read_file(p + "2") == test::read_file(p));
  // A truncated sizes section is a ValueError, as every other damage.
  const std::string bytes = test::read_file(p);
  test::write_file(p + "3", bytes.substr(0, bytes.size() - 9));
  CHECK_THROWS_AS(hjit::Module::load(p + "3"), hjit::ValueError);
  fs::remove(p), fs::remove(p + "2"), fs::remove(p + "3");

  // What cannot be one pipeline, or is not a dimension of the arguments, says so.
  auto branches = [&](const Tensor& x) { return x.shape()[0] > 9 ? x * 2.0 : x + 1.0; };
  CHECK_THROWS_WITH_AS(hjit::make_module("branches", options, hjit::SaveOptions{}, branches, Tensor::randn({8, 4}, 1)),
                       doctest::Contains("one pipeline cannot serve"), hjit::DynamicDimsError);
  // Or the module of the traced sizes, from the traces already made (hjit::onnx::load's way): the
  // base trace and the fit's two (the symbol changed, then all symbols), none more.
  int traces = 0;
  auto counted = [&](const Tensor& x) {
    ++traces;
    return branches(x);
  };
  hjit::ModuleOptions fallback = options;
  fallback.fixed_sizes_otherwise = true;
  const hjit::Module fixed = hjit::make_module("fixed", fallback, hjit::SaveOptions{}, counted, Tensor::randn({8, 4}, 1));
  CHECK(traces == 3);
  CHECK(fixed.dynamic_dims().empty());
  CHECK(Tensor(fixed(Tensor::ones({8, 4}))).to_vector<float>() == std::vector<float>(32, 2.0f));
  hjit::ModuleOptions bad;
  bad.dynamic_dims = {{1, 0}};
  CHECK_THROWS_WITH_AS(hjit::make_module("bad", bad, hjit::SaveOptions{}, fn, Tensor::randn({8, 32}, 4)),
                       doctest::Contains("names tensor 1"), hjit::ValueError);
  bad.dynamic_dims = {{0, 2}};
  CHECK_THROWS_WITH_AS(hjit::make_module("bad", bad, hjit::SaveOptions{}, fn, Tensor::randn({8, 32}, 4)),
                       doctest::Contains("axis 2"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(hjit::make_module("small", options, hjit::SaveOptions{}, fn, Tensor::randn({1, 32}, 4)),
                       doctest::Contains("below 2"), hjit::ValueError);
  CHECK_THROWS_AS(m.freeze(), hjit::ValueError);
  CHECK_THROWS_AS(hjit::Module::load(path_of("none"), options), hjit::ValueError);
  // Frozen when made: the same answers, no parameters.
  hjit::Module frozen = hjit::make_module("block_frozen", options, hjit::SaveOptions{.freeze_parameters = true}, fn, Tensor::randn({8, 32}, 4));
  CHECK(frozen.parameters().empty());
  CHECK_CLOSE(Tensor(frozen(x12)), block(x12));
}
