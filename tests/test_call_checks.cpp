// Nothing unchecked reaches native code: every call of a compiled pipeline (jit, Module, a saved
// and loaded module) is checked against the sizes it was compiled for, and answers as eager does
// (the same values, or the same typed error) for sizes that keep or break the relations tracing
// found (a contraction, a broadcast, an elementwise pair), and for indices in and out of range,
// constant or not.
#include <filesystem>
#include <random>

#include <hjit/export.h>

#include "bench/exported_library.h"
#include "tests/support.h"

namespace fs = std::filesystem;
using hjit::DType;
using hjit::Shape;
using hjit::Tensor;

namespace {

// What eager gives: the values, or the kind of error and its message.
struct Outcome {
  std::vector<Tensor> values;
  std::string error_kind, message;
};

template <class F>
Outcome outcome(F&& f) {
  Outcome o;
  try {
    o.values = f();
  } catch (const hjit::ShapeError& e) {
    o.error_kind = "ShapeError", o.message = e.what();
  } catch (const hjit::IndexError& e) {
    o.error_kind = "IndexError", o.message = e.what();
  } catch (const hjit::DTypeError& e) {
    o.error_kind = "DTypeError", o.message = e.what();
  } catch (const hjit::ValueError& e) {
    o.error_kind = "ValueError", o.message = e.what();
  }
  return o;
}

// The compiled outcome is eager's: the same values, or the same kind of error with eager's words
// in it (a compiled call's message may name the function first).
void check_same(const Outcome& got, const Outcome& want) {
  CAPTURE(got.message);
  CAPTURE(want.message);
  REQUIRE(got.error_kind == want.error_kind);
  if (!want.error_kind.empty()) {
    const std::string tail = want.message.substr(want.message.find(':') + 1);
    CHECK(got.message.find(tail) != std::string::npos);
    return;
  }
  REQUIRE(got.values.size() == want.values.size());
  for (size_t k = 0; k < got.values.size(); ++k) CHECK_CLOSE(got.values[k], want.values[k]);
}

Tensor mm(const Tensor& a, const Tensor& b) { return hjit::matmul(a, b); }

}  // namespace

TEST_CASE("a jitted contraction over dynamic sizes refuses sizes that do not contract, as eager does") {
  hjit::JitOptions o;
  o.dynamic_dims = {{0, 1}, {1, 0}};
  auto f = hjit::jit(mm, o);
  CHECK_CLOSE(f(Tensor::randn({2, 8}, 1), Tensor::randn({8, 5}, 2)), mm(Tensor::randn({2, 8}, 1), Tensor::randn({8, 5}, 2)));
  CHECK(f.stats().dynamic_entries == 1);
  // The cases: K=3, J=4 gave wrong values, K=100, J=3 read past b, K=10^7, J=3 crashed.
  for (auto [k, j] : {std::pair<int64_t, int64_t>{3, 4}, {100, 3}, {10'000'000, 3}}) {
    CAPTURE(k);
    const Tensor a = Tensor::zeros({2, k}), b = Tensor::zeros({j, 5});
    CHECK_THROWS_WITH_AS(f(a, b), doctest::Contains("contraction sizes differ"), hjit::ShapeError);
  }
  // Sizes that keep the relation are still served by the one pipeline.
  const Tensor a = Tensor::randn({2, 13}, 3), b = Tensor::randn({13, 5}, 4);
  CHECK_CLOSE(f(a, b), mm(a, b));
  CHECK(f.stats().compiles + f.stats().loaded == 1);
}

TEST_CASE("dimensions equal only by chance when traced become independent, not refused") {
  hjit::JitOptions o;
  o.dynamic_dims = {{0, 0}, {0, 1}};
  auto grid = [](const Tensor& x) { return hjit::sum(x, {1}) * 2.0; };
  auto f = hjit::jit(grid, o);
  const Tensor square = Tensor::randn({6, 6}, 1);
  CHECK_CLOSE(f(square), grid(square));
  for (auto [n, m] : {std::pair<int64_t, int64_t>{5, 7}, {9, 9}, {12, 3}}) {
    const Tensor x = Tensor::randn({n, m}, uint64_t(n * m));
    CHECK_CLOSE(f(x), grid(x));
  }
}

TEST_CASE("a module's pipeline checks every call's sizes, loaded from a file too") {
  hjit::ModuleOptions options;
  options.dynamic_dims = {{0, 1}, {1, 0}};
  const hjit::Module m = hjit::make_module("contract", options, hjit::SaveOptions{}, mm, Tensor::randn({2, 8}, 1), Tensor::randn({8, 5}, 2));
  const std::string path = test::scratch_dir("module") + "/contract.hjit";
  m.save(path);
  const hjit::Module back = hjit::Module::load(path);
  for (const hjit::Module* mod : {&m, &back}) {
    for (auto [k, j] : {std::pair<int64_t, int64_t>{3, 4}, {100, 3}, {10'000'000, 3}}) {
      CAPTURE(k);
      CHECK_THROWS_WITH_AS((*mod)(Tensor::zeros({2, k}), Tensor::zeros({j, 5})), doctest::Contains("contraction sizes differ"),
                           hjit::ShapeError);
    }
    const Tensor a = Tensor::randn({2, 21}, 3), b = Tensor::randn({21, 5}, 4);
    CHECK_CLOSE(Tensor((*mod)(a, b)), mm(a, b));
  }
  fs::remove_all(fs::path(path).parent_path());
}

TEST_CASE("a module made where two independent dimensions were equal names the relation it needs") {
  hjit::ModuleOptions options;
  options.dynamic_dims = {{0, 0}, {0, 1}};
  auto rowsum = [](const Tensor& x) { return hjit::sum(x, {1}); };
  const hjit::Module m = hjit::make_module("rowsum", options, hjit::SaveOptions{}, rowsum, Tensor::randn({6, 6}, 1));
  const Tensor x = Tensor::randn({9, 9}, 2);
  CHECK_CLOSE(Tensor(m(x)), rowsum(x));
  CHECK_THROWS_WITH_AS(m(Tensor::randn({5, 7}, 3)), doctest::Contains("stay equal in every call"), hjit::ShapeError);
}

// Random sizes for functions whose dynamic dimensions must agree (or broadcast), each called
// compiled (jit and Module) and eagerly: the same values, or the same typed error.
TEST_CASE("random sizes: compiled answers as eager, values or the same error") {
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&)> f;
    Shape a, b;
    std::vector<std::pair<int, int>> dims;
  };
  const std::vector<Case> cases = {
      {"matmul", mm, {3, 8}, {8, 4}, {{0, 0}, {0, 1}, {1, 0}, {1, 1}}},
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, {4, 6}, {4, 6}, {{0, 0}, {0, 1}, {1, 0}, {1, 1}}},
      {"broadcast", [](const Tensor& a, const Tensor& b) { return a * b - 1.0; }, {5, 6}, {1, 6}, {{0, 0}, {0, 1}, {1, 1}}},
      {"concat", [](const Tensor& a, const Tensor& b) { return hjit::concat({a, b}, 0) * 3.0; }, {3, 7}, {4, 7}, {{0, 0}, {0, 1}, {1, 0}, {1, 1}}},
  };
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> size(2, 12);
  for (const Case& c : cases) {
    CAPTURE(c.name);
    hjit::JitOptions jo;
    jo.dynamic_dims = c.dims;
    auto jitted = hjit::jit(c.f, jo);
    hjit::ModuleOptions mo;
    mo.dynamic_dims = c.dims;
    const hjit::Module module = hjit::make_module(c.name, mo, hjit::SaveOptions{}, c.f, Tensor::randn(c.a, 1), Tensor::randn(c.b, 2));
    (void)jitted(Tensor::randn(c.a, 1), Tensor::randn(c.b, 2));
    for (int trial = 0; trial < 12; ++trial) {
      Shape sa = c.a, sb = c.b;
      for (auto [arg, d] : c.dims) {
        Shape& s = arg == 0 ? sa : sb;
        if (s[size_t(d)] != 1) s[size_t(d)] = size(rng);
      }
      const std::string sizes = hjit::TensorType{DType::F32, sa}.str() + " " + hjit::TensorType{DType::F32, sb}.str();
      CAPTURE(sizes);
      const Tensor a = Tensor::randn(sa, uint64_t(trial)), b = Tensor::randn(sb, uint64_t(trial + 100));
      const Outcome want = outcome([&] { return std::vector<Tensor>{c.f(a, b)}; });
      check_same(outcome([&] { return std::vector<Tensor>{jitted(a, b)}; }), want);
      const Outcome from_module = outcome([&] { return std::vector<Tensor>{Tensor(module(a, b))}; });
      // A module keeps the relations it was made with: sizes eager accepts but that break one are
      // a ShapeError naming it (the jitted function traces them anew instead).
      if (want.error_kind.empty() && !from_module.error_kind.empty())
        CHECK(from_module.message.find("stay equal in every call") != std::string::npos);
      else
        check_same(from_module, want);
    }
  }
}

namespace {

Tensor i64s(std::vector<int64_t> v, Shape s) { return Tensor::from_vector(v, std::move(s)); }

}  // namespace

TEST_CASE("a constant index out of range is eager's IndexError compiled too: a literal, a frozen parameter") {
  const Tensor x = Tensor::arange(15).reshape({5, 3}).astype(DType::F32);
  for (int64_t k : {7, -9, 5, -6}) {
    CAPTURE(k);
    auto f = [k](const Tensor& x) { return hjit::take(x, i64s({k}, {1}), 0) * 2.0; };
    const Outcome want = outcome([&] { return std::vector<Tensor>{f(x)}; });
    REQUIRE(want.error_kind == "IndexError");
    check_same(outcome([&] { return std::vector<Tensor>{hjit::jit(f)(x)}; }), want);
    auto e = [k](const Tensor& x) { return hjit::embedding(x, i64s({1, k}, {2})); };
    check_same(outcome([&] { return std::vector<Tensor>{hjit::jit(e)(x)}; }), outcome([&] { return std::vector<Tensor>{e(x)}; }));
  }
  // In range at the ends.
  auto ends = [](const Tensor& x) { return hjit::take(x, i64s({4, -5}, {2}), 0); };
  CHECK_CLOSE(hjit::jit(ends)(x), ends(x));
  // A parameter index frozen into the module's graph is a constant of it.
  Tensor rows = i64s({0, 9}, {2});
  auto pick = [&](const Tensor& x) { return hjit::take(x, rows, 0); };
  const hjit::Module m = hjit::make_module("pick", hjit::ModuleOptions{}, hjit::SaveOptions{.freeze_parameters = true}, pick, Tensor::zeros({7, 3}));
  CHECK_THROWS_WITH_AS(m(Tensor::ones({7, 3})), doctest::Contains("index 9 is out of range"), hjit::IndexError);
}

TEST_CASE("IndexMode::Clamp clamps, eagerly and compiled alike") {
  const Tensor x = Tensor::arange(15).reshape({5, 3}).astype(DType::F32);
  const Tensor idx = i64s({7, -9, 2, -1}, {4});
  auto f = [](const Tensor& x, const Tensor& i) { return hjit::take(x, i, 0, hjit::IndexMode::Clamp); };
  const Tensor eager = f(x, idx);
  CHECK(eager.to_vector<float>() == std::vector<float>{12, 13, 14, 0, 1, 2, 6, 7, 8, 12, 13, 14});
  CHECK_CLOSE(hjit::jit(f)(x, idx), eager);
  auto e = [](const Tensor& x, const Tensor& i) { return hjit::embedding(x, i, hjit::IndexMode::Clamp); };
  CHECK_CLOSE(hjit::jit(e)(x, idx), e(x, idx));
  auto g = [](const Tensor& x, const Tensor& i) { return hjit::gather(x, 0, i, hjit::IndexMode::Clamp); };
  const Tensor gi = i64s({9, -7, 1}, {1, 3});
  CHECK(g(x, gi).to_vector<float>() == std::vector<float>{12, 1, 5});
  CHECK_CLOSE(hjit::jit(g)(x, gi), g(x, gi));
}

// Random indices, some out of range, through every gathering and scattering op, called eagerly,
// jitted and as a module: the same values or the same IndexError.
TEST_CASE("random indices: compiled answers as eager, values or the same IndexError") {
  using F = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<const char*, F>> ops = {
      {"take", [](const Tensor& x, const Tensor& i) { return hjit::take(x, i, 0) + 1.0; }},
      {"take axis 1", [](const Tensor& x, const Tensor& i) { return hjit::take(x, i, 1); }},
      {"embedding", [](const Tensor& x, const Tensor& i) { return hjit::embedding(x, i) * 2.0; }},
      {"gather", [](const Tensor& x, const Tensor& i) { return hjit::gather(x, 1, hjit::reshape(i, {1, -1})); }},
      {"scatter_add", [](const Tensor& x, const Tensor& i) {
         const Tensor idx = hjit::reshape(i, {1, -1});
         return hjit::scatter_add(x, 1, idx, idx.astype(DType::F32) * 0.0 + 1.0);
       }},
      {"one_hot", [](const Tensor& x, const Tensor& i) { return hjit::one_hot(i, 6) + hjit::sum(x); }},
      {"index", [](const Tensor& x, const Tensor& i) { return hjit::index(x, {hjit::Index(i)}); }},
  };
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int64_t> value(-9, 8);
  const Tensor x = Tensor::randn({6, 6}, 5);
  for (const auto& [name, f] : ops) {
    CAPTURE(name);
    auto jitted = hjit::jit(f);
    const hjit::Module module = hjit::make_module(name, hjit::ModuleOptions{}, hjit::SaveOptions{}, f, x, i64s({0, 1, 2, 3}, {4}));
    int errors = 0;
    for (int trial = 0; trial < 16; ++trial) {
      std::vector<int64_t> v(4);
      for (int64_t& k : v) k = trial % 2 ? value(rng) : (value(rng) + 9) % 6;  // every other trial in range
      const std::string indices = std::to_string(v[0]) + " " + std::to_string(v[1]) + " " + std::to_string(v[2]) + " " + std::to_string(v[3]);
      CAPTURE(indices);
      const Tensor i = i64s(v, {4});
      const Outcome want = outcome([&] { return std::vector<Tensor>{f(x, i)}; });
      errors += !want.error_kind.empty();
      check_same(outcome([&] { return std::vector<Tensor>{jitted(x, i)}; }), want);
      check_same(outcome([&] { return std::vector<Tensor>{Tensor(module(x, i))}; }), want);
    }
    CHECK(errors > 0);
  }
}

TEST_CASE("an exported library refuses an index out of range: an error status, nothing written past a buffer") {
  const std::string dir = test::scratch_dir("exported");
  auto f = [](const Tensor& x, const Tensor& i) { return hjit::take(x, i, 0) * 3.0; };
  const Tensor x = Tensor::randn({5, 3}, 1);
  hjit::export_library(dir, "taker", f, x, i64s({0, 1}, {2}));
  const bench::ExportedLibrary lib(dir, "taker");
  std::vector<Tensor> out{Tensor::empty({2, 3})};
  REQUIRE(lib.call({x, i64s({4, -5}, {2})}, out) == 0);
  CHECK_CLOSE(out[0], f(x, i64s({4, -5}, {2})));
  for (int64_t k : {5, -6, 1'000'000'000}) {
    CAPTURE(k);
    CHECK(lib.call({x, i64s({0, k}, {2})}, {Tensor::zeros({2, 3})}) == -27);  // halide_error_code_requirement_failed
  }
  fs::remove_all(dir);
}
