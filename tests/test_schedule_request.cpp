// The schedule request: one value made at every door of the API, checked there with a typed error,
// and carried as it is into the cache key, the partitioning and the build.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <hjit/hjit.h>

#include "halide_backend/backend.h"
#include "halide_backend/schedule_request.h"
#include "support/cpu_vendor.h"
#include "tests/support.h"

namespace {

using hjit::Tensor;
using namespace hjit::backend;

ScheduleRequest request(int opt_level, const std::string& autoscheduler = "", const std::string& db = "",
                        hjit::Device device = hjit::Device::CPU) {
  return schedule_request("test", {.opt_level = opt_level, .autoscheduler = autoscheduler, .tuning_db = db,
                                   .tuning_db_from_environment = false, .device = device});
}

}  // namespace

TEST_CASE("options become typed requests: each opt level, autoscheduler and database means one thing") {
  CHECK(request(0) == ScheduleRequest{Unfused{}});
  CHECK(request(1) == ScheduleRequest{BuiltIn{}});
  CHECK(request(2) == ScheduleRequest{BuiltIn{}});  // opt_level 2 without an autoscheduler is the built-in schedule
  CHECK(request(2, "Li2018") == ScheduleRequest{Auto{Autoscheduler::Li2018, {}}});
  CHECK(request(2, "Li2018", "", hjit::Device::CUDA).as<Auto>() != nullptr);
  // The database is on where it is named, at opt_level 1 as at 2, and only there.
  CHECK(request(1, "", "t.sqlite").tuning_db == "t.sqlite");
  CHECK(request(2, "Mullapudi2016", "t.sqlite").tuning_db == "t.sqlite");
  CHECK(request(2).tuning_db.empty());
  {
    test::ScopedEnv env("HJIT_TUNING_DB", "env.sqlite");
    CHECK(schedule_request("test", {.opt_level = 1}).tuning_db == "env.sqlite");
    CHECK(schedule_request("test", {.opt_level = 2, .tuning_db = "mine.sqlite"}).tuning_db == "mine.sqlite");
    CHECK(schedule_request("test", {.opt_level = 0}).tuning_db.empty());  // the unfused baseline ignores it
    CHECK(schedule_request("test", {.opt_level = 1, .tuning_db_from_environment = false}).tuning_db.empty());
  }
}

TEST_CASE("bad schedule options are a ValueError naming the door and what to do") {
  CHECK_THROWS_WITH_AS(request(7), "test: opt_level must be 0, 1 or 2, got 7", hjit::ValueError);
  CHECK_THROWS_WITH_AS(request(-1), doctest::Contains("opt_level must be 0, 1 or 2"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(request(2, "Foo"), doctest::Contains("unknown autoscheduler 'Foo'; choose Adams2019, Li2018 or Mullapudi2016"),
                       hjit::ValueError);
  CHECK_THROWS_WITH_AS(request(1, "Li2018"), doctest::Contains("an autoscheduler needs opt_level 2, got 1"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(request(2, "Adams2019", "", hjit::Device::CUDA), doctest::Contains("schedules CPUs only"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(request(0, "", "t.sqlite"), doctest::Contains("opt_level 0 is the unfused baseline"), hjit::ValueError);
}

TEST_CASE("every door of the API checks its schedule options") {
  auto fn = [](const Tensor& x) { return x * 2.0; };
  const Tensor x = Tensor::ones({4});
  CHECK_THROWS_WITH_AS(hjit::jit(fn, {.name = "f", .opt_level = 7}), doctest::Contains("jit 'f': opt_level"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(hjit::jit(fn, {.name = "f", .autoscheduler = "Foo"}), doctest::Contains("jit 'f': unknown autoscheduler"),
                       hjit::ValueError);
  CHECK_THROWS_AS(hjit::jit(fn, {.device = hjit::Device::OpenCL, .autoscheduler = "Mullapudi2016"}), hjit::ValueError);
  // A module is checked when it is loaded, before its file is read.
  const std::string dir = test::scratch_dir("schedule_request"), file = dir + "/f.hjit";
  hjit::save(file, fn, x);
  CHECK_THROWS_WITH_AS(hjit::Module::load(file, {.opt_level = 7, .autoscheduler = "Foo"}), doctest::Contains("opt_level must be"),
                       hjit::ValueError);
  CHECK_THROWS_WITH_AS(hjit::Module::load(file, {.opt_level = 2, .autoscheduler = "Foo"}), doctest::Contains("unknown autoscheduler"),
                       hjit::ValueError);
  CHECK_THROWS_AS(hjit::Module::load(file, {.opt_level = 0, .tuning_db = "t.sqlite"}), hjit::ValueError);
  hjit::Module m = hjit::Module::load(file, {.opt_level = 0});
  CHECK(Tensor(m(x)).to_vector<float>() == std::vector<float>{2, 2, 2, 2});
  hjit::ExportOptions e;
  e.opt_level = 5;
  CHECK_THROWS_WITH_AS(hjit::export_library(dir, "f", fn, x, e), doctest::Contains("export_library 'f': opt_level"), hjit::ValueError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the text form of a request reads back as the same request") {
  for (const char* text : {"unfused", "built-in", "built-in cols=3 rows=6 extern_gemm=1", "built-in runs=2 ahead=0", "Adams2019",
                           "Adams2019 max_funcs=0 beam=1 dropout=50 seed=7", "Li2018 parallelism=16",
                           "Mullapudi2016 parallelism=4 cache=1048576 balance=40"}) {
    INFO(text);
    const ScheduleRequest r = ScheduleRequest::parse(text);
    CHECK(r.str() == text);
    CHECK(ScheduleRequest::parse(r.str()) == r);
  }
  CHECK(ScheduleRequest::parse("built-in cols=0").str() == "built-in");  // defaults are not written
  CHECK_THROWS_AS(ScheduleRequest::parse("given"), hjit::ValueError);
  CHECK_THROWS_AS(ScheduleRequest::parse("unfused cols=3"), hjit::ValueError);
  CHECK_THROWS_AS(ScheduleRequest::parse("built-in cols=99"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(ScheduleRequest::parse("built-in runs=9"), doctest::Contains("runs must be in [0, 8], got 9"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(ScheduleRequest::parse("built-in ahead=-2"), doctest::Contains("ahead must be in [-1, 64], got -2"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(ScheduleRequest::parse("Li2018 seed=3"), doctest::Contains("unknown 'seed'"), hjit::ValueError);
  CHECK_THROWS_AS(ScheduleRequest::parse("Mullapudi2016 cache=-1"), hjit::ValueError);
  CHECK_THROWS_AS(ScheduleRequest::parse("Adams2019 beam"), hjit::ValueError);
  CHECK_THROWS_AS(ScheduleRequest::parse("Halide"), hjit::ValueError);
  // Dynamic sizes take the built-in schedule (the unfused one at opt_level 0), with no database.
  CHECK(request(2, "Adams2019", "t.sqlite").at_every_size() == ScheduleRequest{BuiltIn{}});
  CHECK(request(0).at_every_size() == ScheduleRequest{Unfused{}});
}

TEST_CASE("the request is the cache key's schedule: the same request hits, another compiles") {
  auto fn = [](const Tensor& x) { return hjit::exp(x) + 1.0; };
  const hjit::Graph g = hjit::jit(fn).graph(Tensor::ones({64}));
  Options o;
  o.name = "request_key";
  o.schedule = {BuiltIn{}};
  const Compiled first = compile(g, o), again = compile(g, o);
  CHECK(again.cache_hit);
  CHECK(again.executable == first.executable);
  Options unfused = o;
  unfused.schedule = {Unfused{}};
  const Compiled other = compile(g, unfused);
  CHECK(other.executable != first.executable);
  CHECK(other.executable->summary() == "unfused");
  Options tiled = o;
  tiled.schedule = {BuiltIn{BuiltinParams::parse("vec=2")}};
  const Compiled with_params = compile(g, tiled);
  CHECK(with_params.executable != first.executable);
  CHECK(with_params.executable->summary() == "built-in vec=2");
  // A request for dynamic sizes other than at_every_size() is a bug of the caller's.
  Options dynamic = o;
  dynamic.schedule = {Auto{Autoscheduler::Li2018, {}}};
  dynamic.dynamic = std::make_shared<const hjit::SymbolicSizes>();
  CHECK_THROWS_AS(compile(g, dynamic), hjit::InternalError);
}

// A decode step's matrix-vector product over an i8 weight read along its rows takes each thread's
// outputs from interleaved runs of rows: one on AMD's CPUs, four on others by default (their
// prefetchers want opposite patterns: schedules/contraction.h, TileSpec::row_runs), any count a
// tuning run asks for, each thread's share in several iterations of the parallel loop. Every count
// computes what eager computes, with output counts that the runs and threads do not divide.
TEST_CASE("a matrix-vector product's runs of rows a thread: the CPU's default and every count asked for equal eager") {
  auto fn = [](const Tensor& x, const Tensor& w, const Tensor& scale) {
    return hjit::matmul(x, hjit::transpose(w.astype(hjit::DType::F32))) * scale;
  };
  uint64_t seed = 40;
  for (int64_t out : {int64_t(1100), int64_t(3072), int64_t(20000)}) {
    CAPTURE(out);
    const Tensor x = test::random({1, 768}, hjit::DType::F32, seed++);
    const Tensor w = (test::random({out, 768}, hjit::DType::F32, seed++) * 100.0).astype(hjit::DType::I8);
    const Tensor scale = test::random({out}, hjit::DType::F32, seed++);
    const std::vector<float> want = fn(x, w, scale).to_vector<float>();
    // Sums of 768 products in another order: their rounding is bounded by the sums of magnitudes.
    const std::vector<float> magnitude = fn(hjit::abs(x), hjit::abs(w), hjit::abs(scale)).to_vector<float>();
    const hjit::Graph g = hjit::jit(fn).graph(x, w, scale);
    // Each count of runs with a prefetch distance: the CPU's (-1), none, or some KiB.
    for (const auto [runs, ahead] : {std::pair{0, -1}, {1, 0}, {2, 4}, {3, -1}, {4, 2}, {8, 0}}) {
      CAPTURE(runs);
      CAPTURE(ahead);
      const BuiltinParams params = BuiltinParams::parse("runs=" + std::to_string(runs) + " ahead=" + std::to_string(ahead));
      Options o;
      o.name = "row_runs";
      o.schedule = {BuiltIn{params}};
      const Compiled c = compile(g, o);
      const std::string plan = c.executable->explain();
      const int expected = params.row_runs();
      if (hjit::num_threads() > 1) {
        CHECK(plan.find(", " + std::to_string(expected) + (expected == 1 ? " run" : " runs") + " of rows a thread") != std::string::npos);
        // Several iterations a thread, so that one done early takes the other's last (3072 outputs
        // leave 4 a thread at every count of runs; 1100 fewer where the runs would be short).
        if (out == 3072) CHECK(plan.find(" of rows a thread in 4 iterations") != std::string::npos);
        // Many outputs (a language model's head) take more, of at most 2048 outputs each.
        if (out == 20000 && expected == 1 && hjit::num_threads() == 2) CHECK(plan.find(" of rows a thread in 8 iterations") != std::string::npos);
      }
      // The i8 weight (the pipeline's second input) read ahead of its products, where asked or
      // the CPU's default asks (AMD's: 2 KiB; Intel's hardware prefetchers stream it faster alone).
      const int bytes = params.prefetch_bytes();
      CHECK(bytes == 1024 * (ahead >= 0 ? ahead : hjit::cpu_vendor() == hjit::CpuVendor::Amd ? 2 : 0));
      if (bytes > 0)
        CHECK(plan.find(", in1 fetched " + std::to_string(bytes) + " bytes ahead") != std::string::npos);
      else
        CHECK(plan.find(" bytes ahead") == std::string::npos);
      std::vector<float> got(size_t(out), -1.0f);
      const void* inputs[] = {x.data(), w.data(), scale.data()};
      void* outputs[] = {got.data()};
      c.executable->run(inputs, outputs);
      for (size_t i = 0; i < got.size(); ++i) REQUIRE(std::abs(got[i] - want[i]) <= 1e-5f * magnitude[i]);
    }
  }
}
