// The backend's data: schedule values (text form, the readers of the autoschedulers' sources,
// applying them) and targets.
#include <doctest/doctest.h>

#include <Halide.h>
#include <hjit/hjit.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "halide_backend/build/build.h"
#include "halide_backend/scheduling/apply_schedule.h"
#include "halide_backend/providers/extern_stages.h"
#include "halide_backend/lowering/ieee_math.h"
#include "halide_backend/lowering/lower.h"
#include "halide_backend/scheduling/scheduler.h"
#include "halide_backend/codegen/target.h"
#include "schedules/schedule.h"
#include "support/cpu_caches.h"
#include "support/cpu_vendor.h"
#include "support/run_queue.h"

using hjit::Tensor;
using namespace hjit::backend;

namespace {

Halide::Target host() { return Target::host(hjit::Device::CPU).halide(true); }

hjit::Graph softmax_of_matmul() {
  return hjit::make_graph([](const Tensor& x, const Tensor& w) { return hjit::softmax(hjit::relu(hjit::matmul(x, w))); },
                          Tensor::randn({64, 48}, 1), Tensor::randn({48, 32}, 2));
}
hjit::Graph layer_norm_graph() {
  return hjit::make_graph([](const Tensor& x) { return hjit::layer_norm(x, std::nullopt, std::nullopt) * 2.0 + 1.0; }, Tensor::randn({32, 256}, 3));
}
hjit::Graph conv_graph() {
  return hjit::make_graph([](const Tensor& x, const Tensor& w) { return hjit::relu(hjit::conv2d(x, w, std::nullopt, {1, 1}, {1, 1})); },
                          Tensor::randn({1, 8, 16, 16}, 4), Tensor::randn({8, 8, 3, 3}, 5));
}

// Everything Halide holds as a pipeline's schedule, Func by Func, with canonical names: two
// pipelines scheduled alike print alike.
std::map<std::string, std::string> fingerprints(const LoweredPipeline& p) {
  std::map<std::string, std::string> out;
  std::ostringstream os;
  auto stage = [&](const Halide::Internal::StageSchedule& s) {
    for (const auto& d : s.dims()) os << " " << d.var << ":" << int(d.for_type);
    os << " |";
    for (const auto& sp : s.splits())
      os << " " << sp.old_var << "/" << sp.outer << "/" << sp.inner << "/" << sp.factor << "/" << int(sp.tail) << "/"
         << int(sp.split_type);
    os << "\n";
  };
  for (auto& [name, f] : funcs_by_canonical_name(p)) {
    os.str("");
    const auto& fs = f.function().schedule();
    Halide::LoopLevel compute = fs.compute_level(), store = fs.store_level();
    compute.lock(), store.lock();
    if (store.is_inlined()) store = compute;  // unset: stored where computed
    os << name << " compute " << canonical_name(compute.to_string()) << " store " << canonical_name(store.to_string()) << " memory " << int(fs.memory_type()) << " storage";
    for (const auto& sd : fs.storage_dims()) os << " " << sd.var << (sd.fold_factor.defined() ? "(folded)" : "");
    os << "\n  pure";
    stage(f.function().definition().schedule());
    for (int k = 0; k < f.num_update_definitions(); ++k) {
      os << "  update " << k;
      stage(f.function().update(k).schedule());
    }
    // Li2018 numbers its loops and split RVars from a process-wide counter (v<n>, r<n>): number
    // them by first use.
    std::string text = os.str(), renumbered;
    std::map<std::string, std::string> renamed;
    for (size_t i = 0; i < text.size();) {
      const bool starts =
          (text[i] == 'v' || text[i] == 'r') && (i == 0 || text[i - 1] == '.' || text[i - 1] == '/' || text[i - 1] == ' ');
      size_t j = i + 1;
      while (starts && j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
      if (starts && j > i + 1) {
        renumbered += renamed.emplace(text.substr(i, j - i), text.substr(i, 1) + std::to_string(renamed.size())).first->second;
        i = j;
      } else {
        renumbered += text[i++];
      }
    }
    out[name] = renumbered;
  }
  return out;
}

std::string fingerprint(const LoweredPipeline& p) {
  std::string all;
  for (auto& [name, text] : fingerprints(p)) all += text;
  return all;
}

// Halide's own application of an autoscheduler's schedule to p, with the estimates hjit gives.
void halide_autoschedule(LoweredPipeline& p, const std::string& name) {
  const hjit::Graph& g = *p.graph;
  auto estimate = [](auto dim_of, const hjit::Shape& shape) {
    const hjit::Shape h = to_halide_order(shape);
    for (int i = 0; i < int(h.size()); ++i) dim_of(i).set_estimate(0, int(h[size_t(i)]));
  };
  for (size_t i = 0; i < p.params.size(); ++i)
    if (p.params[i].defined()) estimate([&](int d) { return p.params[i].dim(d); }, g.type(g.inputs[i]).shape);
  for (size_t i = 0; i < p.const_params.size(); ++i) estimate([&](int d) { return p.const_params[i].dim(d); }, p.const_types[i].shape);
  std::vector<Halide::Func> outs;
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    Halide::Region region;
    for (int64_t e : to_halide_order(g.type(p.output_node[k]).shape)) region.emplace_back(0, int(e));
    p.outputs[k].set_estimates(region);
    outs.push_back(p.outputs[k]);
  }
  Halide::MachineParams machine(hjit::schedules::halide_threads(), 0, 40);
  // schedule_auto's machine parameters: read them back from its identity.
  const hjit::backend::Autoscheduler a = *hjit::backend::autoscheduler_from_name(name);
  const std::string id = hjit::schedules::autoscheduler_identity(hjit::backend::Auto{a});
  const size_t at = id.find("machine=") + 8;
  machine = Halide::MachineParams(id.substr(at, id.find(' ', at) - at));
  hjit::schedules::load_plugin(a);
  Halide::Pipeline(outs).auto_schedule(name, p.target, machine);
}

}  // namespace

TEST_CASE("cache sizes are read as sysfs writes them, and the built-in schedule's identity names the L2 it sized blocks by") {
  CHECK(hjit::parse_cache_size("48K") == 48 * 1024);
  CHECK(hjit::parse_cache_size("1024K") == 1024 * 1024);
  CHECK(hjit::parse_cache_size("32M") == int64_t(32) << 20);
  CHECK(hjit::parse_cache_size("65536") == 65536);
  for (const char* bad : {"", "K", "12X", "12 K", "-4K", "99999999999999K"}) {
    CAPTURE(bad);
    CHECK(hjit::parse_cache_size(bad) == -1);
  }
  const hjit::CpuCaches& c = hjit::cpu_caches();
  CHECK(c.l1d >= 4096);
  CHECK(c.l2 >= c.l1d);
  CHECK(c.l3 > 0);
  // The compile cache's key holds the identity: code scheduled for another L2 is not reused.
  CHECK(hjit::schedules::builtin_identity().find(" l2=" + std::to_string(c.l2 >> 10) + "K") != std::string::npos);
}

TEST_CASE("the CPU's vendor is CPUID's, as Linux reads it, and the built-in schedule's identity names it") {
  // Matrix-vector products take their runs of rows by it (schedules/contraction.h, TileSpec::row_runs).
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, vendor;
  while (vendor.empty() && std::getline(cpuinfo, line))
    if (line.rfind("vendor_id", 0) == 0) vendor = line.substr(line.find(':') + 2);
  const hjit::CpuVendor v = hjit::cpu_vendor();
  if (vendor == "AuthenticAMD") CHECK(v == hjit::CpuVendor::Amd);
  else if (vendor == "GenuineIntel") CHECK(v == hjit::CpuVendor::Intel);
  else CHECK(v == hjit::CpuVendor::Other);
  CHECK(hjit::to_string(hjit::CpuVendor::Amd) == "amd");
  CHECK(hjit::to_string(hjit::CpuVendor::Intel) == "intel");
  CHECK(hjit::to_string(hjit::CpuVendor::Other) == "other");
  CHECK(hjit::schedules::builtin_identity().find(" cpu=" + hjit::to_string(v)) != std::string::npos);
}

// Trial timings skip runs whose threads waited for a CPU (halide_backend/scheduling/trial.cpp): the count they
// read grows while more threads spin than there are cores.
TEST_CASE("the time this process's threads waited for a CPU is counted") {
  const int64_t before = hjit::run_queue_wait_ns();
  if (before == 0) {
    MESSAGE("skipped: this kernel does not count run-queue waits (/proc/self/task/*/schedstat)");
    return;
  }
  const unsigned spinners = std::max(2u, std::thread::hardware_concurrency()) + 1;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (unsigned i = 0; i < spinners; ++i)
    threads.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // (Read while they live: an ended thread's count leaves with it.)
  const double waited_ms = double(hjit::run_queue_wait_ns() - before) / 1e6;
  const double spun_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  stop = true;
  for (std::thread& t : threads) t.join();
  // One thread more than the cores: about one thread's worth of the time was spent waiting.
  CAPTURE(spun_ms);
  CHECK(waited_ms >= 0.25 * spun_ms);
}

TEST_CASE("canonical names drop Halide's uniquifying suffixes, and only those") {
  CHECK(canonical_name("n3_sum$12_acc$1") == "n3_sum_acc");
  CHECK(canonical_name("n3_r$x") == "n3_r$x");
  CHECK(canonical_name("d0") == "d0");
  CHECK(canonical_name("f$") == "f$");
}

TEST_CASE("the built-in schedule is a value: its text parses back to the same value, the same in every lowering") {
  for (const hjit::Graph& g : {softmax_of_matmul(), layer_norm_graph(), conv_graph()}) {
    LoweredPipeline p = lower(g, host()), q = lower(g, host());
    Schedule s = hjit::schedules::schedule_builtin(p);
    CHECK(!s.directives.empty());
    CHECK(Schedule::parse(s.str()) == s);
    CHECK(hjit::schedules::schedule_builtin(q).str() == s.str());  // names do not depend on the process's history
    CHECK(hjit::schedules::schedule_unfused(p).str() != s.str());
    // Deciding touched nothing; applying does.
    const std::string before = fingerprint(p);
    apply_schedule(s, p);
    CHECK(fingerprint(p) != before);
  }
}

TEST_CASE("a matmul's constant right operand is bound once, as panels of a vector's columns") {
  // The weight's own bytes would be copied into the pipeline (and the disk cache) beside the
  // panels, unread. Read by another op as well, the weight is bound too.
  const std::vector<float> data(64 * 48, 0.5f);
  auto weight = [&] { return Tensor::from_vector<float>(data, {64, 48}); };
  const int V = host().natural_vector_size(Halide::Float(32));
  const hjit::Graph alone = hjit::make_graph([&](const Tensor& x) { return hjit::matmul(x, weight()); }, Tensor::randn({8, 64}, 1));
  const LoweredPipeline p = lower(alone, host());
  REQUIRE(p.const_types.size() == 1);
  CHECK(p.const_types[0].shape == hjit::Shape{48 / V, 64, V});
  const hjit::Graph shared = hjit::make_graph(
      [&](const Tensor& x) {
        const Tensor w = weight();
        return hjit::matmul(x, w) + hjit::sum(w);
      },
      Tensor::randn({8, 64}, 1));
  CHECK(lower(shared, host()).const_types.size() == 2);
}

TEST_CASE("schedule text does not depend on how many pipelines the process lowered before") {
  // Halide's unique_name() rewrites a '$' inside a name it has to uniquify, so names derived from
  // a uniquified name ("n3_sum$2" + "_acc") drifted with the process's history.
  const hjit::Graph attention = hjit::make_graph(
      [](const Tensor& q, const Tensor& k, const Tensor& v) { return hjit::scaled_dot_product_attention(q, k, v, true); },
      Tensor::randn({1, 2, 16, 8}, 1), Tensor::randn({1, 2, 16, 8}, 2), Tensor::randn({1, 2, 16, 8}, 3));
  for (const hjit::Graph& g : {attention, layer_norm_graph(), conv_graph()}) {
    const std::string first = hjit::schedules::schedule_builtin(lower(g, host())).str();
    for (int i = 0; i < 40; ++i) CHECK(hjit::schedules::schedule_builtin(lower(g, host())).str() == first);
  }
}

TEST_CASE("an autoscheduler's source, read into a value and applied, schedules exactly as Halide applies it") {
  // Adams2019 searches greedily (beam 1) on both sides: its schedules' source has the same form,
  // and its default beam search took 2 minutes here (10 under the sanitizers).
  for (const std::string name : {"Adams2019", "Li2018", "Mullapudi2016"}) {
    const std::string request = name == "Adams2019" ? name + " beam=1" : name;
    for (const hjit::Graph& g : {softmax_of_matmul(), layer_norm_graph(), conv_graph()}) {
      INFO(request << " on " << g.str());
      LoweredPipeline theirs = lower(g, host()), ours = lower(g, host());
      std::string why;
      std::optional<Schedule> s = hjit::backend::scheduler().autoscheduled(ours, *hjit::backend::ScheduleRequest::parse(request).as<hjit::backend::Auto>(), &why);
      REQUIRE_MESSAGE(s.has_value(), why);
      CHECK(!s->directives.empty());
      CHECK(Schedule::parse(s->str()) == *s);
      if (name == "Adams2019") setenv("HL_BEAM_SIZE", "1", 1);
      halide_autoschedule(theirs, name);
      unsetenv("HL_BEAM_SIZE");
      apply_schedule(*s, ours);
      // Mullapudi2016 also substitutes trivial Funcs into their callers' definitions; in ours they
      // remain, inlined by default, which compiles to the same code.
      std::map<std::string, std::string> a = fingerprints(ours), b = fingerprints(theirs);
      for (auto& [func, text] : a) {
        INFO(func);
        if (b.count(func)) CHECK(text == b[func]);
        else CHECK(text.find(" compute . store . ") != std::string::npos);
      }
    }
  }
}

TEST_CASE("Li2018's rfactor intermediates (its `intm = f.update(0).rfactor(...)` lines) read and apply as Halide applies them") {
  // A loss: the sum of a large tensor, which Li2018 splits with rfactor to run in parallel (W9).
  hjit::Graph g = hjit::make_graph([](const Tensor& x) { return hjit::sum(x * x) * 0.5; }, Tensor::randn({4, 64, 56, 56}, 6));
  LoweredPipeline theirs = lower(g, host()), ours = lower(g, host());
  std::string why;
  std::optional<Schedule> s = hjit::backend::scheduler().autoscheduled(ours, hjit::backend::Auto{hjit::backend::Autoscheduler::Li2018}, &why);
  REQUIRE_MESSAGE(s.has_value(), why);
  bool has_rfactor = false;
  for (const Directive& d : s->directives) has_rfactor |= d.verb == "rfactor";
  CHECK(has_rfactor);
  halide_autoschedule(theirs, "Li2018");
  apply_schedule(*s, ours);
  std::map<std::string, std::string> a = fingerprints(ours), b = fingerprints(theirs);
  for (auto& [func, text] : a) {  // as above: Funcs Halide substituted away are inlined in ours
    INFO(func);
    if (b.count(func)) CHECK(text == b[func]);
    else CHECK(text.find(" compute . store . ") != std::string::npos);
  }
  CHECK(a.count("n2_reduce_sum_acc_intm") == 1);
}

TEST_CASE("schedule text that is not a schedule is a ValueError naming the line") {
  CHECK_THROWS_AS(Schedule::parse(""), hjit::ValueError);
  CHECK_THROWS_AS(Schedule::parse("hjit-schedule 2\nsource x\n"), hjit::ValueError);
  CHECK_THROWS_AS(Schedule::parse("hjit-schedule 1\nsource x\nf explode d0\n"), hjit::ValueError);
  CHECK_THROWS_AS(Schedule::parse("hjit-schedule 1\nsource x\nf split d0 d1\n"), hjit::ValueError);
  CHECK_THROWS_AS(Schedule::parse("hjit-schedule 1\nsource x\nf.update(x) vectorize d0\n"), hjit::ValueError);
  try {
    Schedule::parse("hjit-schedule 1\nsource x\nf compute_root\nf explode\n");
    FAIL("no throw");
  } catch (const hjit::ValueError& e) {
    CHECK(std::string(e.what()).find("line 4") != std::string::npos);
  }
  // A schedule for another pipeline names Funcs this one does not have.
  LoweredPipeline p = lower(softmax_of_matmul(), host());
  CHECK_THROWS_AS(apply_schedule(Schedule::parse("hjit-schedule 1\nsource x\nno_such_func compute_root\n"), p),
                  hjit::ValueError);
  CHECK_THROWS_AS(Schedule::parse("hjit-schedule 1\nsource x\nf.update(99999999999) vectorize d0\n"), hjit::ValueError);
  // The numbers a directive passes to Halide are ints it can take, and a vectorized or unrolled
  // loop is at most 256 wide (Halide 14 divides by zero at 65536 vector lanes).
  const std::string out = canonical_name(p.outputs.at(0).name());
  for (const std::string& bad : std::vector<std::string>{" split d0 d0_t d0_i 99999999999 Auto", " split d0 d0_t d0_i 0 Auto", " vectorize d0 65536",
                                 " unroll d0 257", " split d0 d0_t d0_i 1024 Auto\n" + out + " vectorize d0_i", " bound d0 0 -4",
                                 " prefetch no_such_input d0 d0 4", " prefetch in0 d0 d0 0", " prefetch in0 d0 no_such_loop 4",
                                 // (a sorting network's steps only: elsewhere, a wrong answer)
                                 " allow_race_conditions"}) {
    LoweredPipeline fresh = lower(softmax_of_matmul(), host());
    CHECK_THROWS_AS(apply_schedule(Schedule::parse("hjit-schedule 1\nsource x\n" + out + bad + "\n"), fresh), hjit::ValueError);
  }
  LoweredPipeline fine = lower(softmax_of_matmul(), host());
  CHECK_NOTHROW(apply_schedule(Schedule::parse("hjit-schedule 1\nsource x\n" + out + " split d0 d0_t d0_i 256 Auto\n" + out + " vectorize d0_i\n"), fine));
  LoweredPipeline fetched = lower(softmax_of_matmul(), host());
  CHECK_NOTHROW(apply_schedule(Schedule::parse("hjit-schedule 1\nsource x\n" + out + " prefetch in0 d1 d1 2\n"), fetched));
  // Extern stages a schedule names must be nodes a library can compute: a graph input, a node
  // past the end of the graph, or a relu of a matmul (no convolution chain ends there) are not.
  const hjit::Graph conv = conv_graph(), mm = softmax_of_matmul();
  for (int id : {0, int(conv.nodes.size())}) CHECK_THROWS_AS(lower(conv, host(), {id}), hjit::ValueError);
  for (size_t id = 0; id < mm.nodes.size(); ++id)
    if (mm.nodes[id].op == hjit::OpKind::Relu) CHECK_THROWS_AS(lower(mm, host(), {int(id)}), hjit::ValueError);
  if (hjit::backend::extern_conv_available()) {
    // The convolution alone, or it and the relu after it.
    for (size_t id = 0; id < conv.nodes.size(); ++id)
      if (conv.nodes[id].op == hjit::OpKind::Conv2d || conv.nodes[id].op == hjit::OpKind::Relu) {
        LoweredPipeline lp = lower(conv, host(), {int(id)});
        CHECK(lp.stages[id].is_extern);
        CHECK(lp.stages[id].extern_kind == "conv");
      }
  }
}

// A global average pool of a 7x7 or 13x13 image sums rows of 49 or 169: no vector divides them.
// They are summed a whole vector of lanes at a time, the last step guarded (Halide 14 lost the lanes
// of some guarded vector tails on AVX2: checked there too), and read nothing past the input. The
// lanes are then folded by a tree of shuffles (Halide's VectorReduce), on both targets.
TEST_CASE("a row no vector divides is summed in whole vectors, its last step guarded, on this CPU's target and AVX2's") {
  for (const int64_t side : {7, 13, 15}) {
    CAPTURE(side);
    const Tensor x = Tensor::randn({2, 24, side, side}, 31);
    const hjit::Graph g = hjit::make_graph([](const Tensor& v) { return hjit::sum(v, {2, 3}, true) + hjit::max(v, {2, 3}, true); }, x);
    const Tensor want = hjit::sum(x.astype(hjit::DType::F64), {2, 3}, true) + hjit::max(x, {2, 3}, true).astype(hjit::DType::F64);
    for (const Target& target : {Target::host(hjit::Device::CPU), Target::parse("x86-64-linux-avx-avx2-f16c-fma-sse41")}) {
      CAPTURE(target.str());
      Built built;
      std::string why;
      {
        std::lock_guard<std::mutex> lock(compile_mutex());
        const std::string schedule = decide(g, target, BuiltIn{}, &why).value_or("");
        CHECK(schedule.find("the last step guarded") != std::string::npos);
        CHECK(schedule.find("folded as a tree") != std::string::npos);
        Options options;
        options.name = "guarded_rows";
        built = build(g, options, target);
      }
      REQUIRE(built.executable);
      std::vector<float> out(48);
      const void* in[] = {x.data()};
      void* outs[] = {out.data()};
      built.executable->run(in, outs);
      const Tensor got = Tensor::from_vector(out, {2, 24, 1, 1}).astype(hjit::DType::F64);
      CHECK(hjit::max(hjit::abs(got - want)).item<double>() < 1e-4);
    }
  }
}

// An element-wise nest over few outer slices (8 attention heads) of many short rows takes only as
// many of the rows into its parallel loop as its tasks need (here 152 tasks of 7 rows, an exp being
// costly: not 1024 tasks of one row). Where the slices do not divide the rows (128 in slices of 7)
// the last is guarded, and every value is the eager one, the nest's and its row sum's.
TEST_CASE("a nest over few outer slices runs their rows in parallel in a few long tasks, tails guarded") {
  const std::vector<hjit::Shape> shapes{{8, 128, 32}, {3, 127, 48}, {2, 3, 131, 40}};
  for (size_t k = 0; k < shapes.size(); ++k) {
    const hjit::Shape& shape = shapes[k];
    CAPTURE(shape);
    const Tensor x = Tensor::randn(shape, 7 + int(k));
    auto fn = [](const Tensor& v) { return hjit::exp(v * 0.5f) + hjit::sum(v, {-1}, true); };
    const hjit::Graph g = hjit::make_graph(fn, x);
    const Tensor want = fn(x);
    Built built;
    std::string schedule;
    {
      std::lock_guard<std::mutex> lock(compile_mutex());
      std::string why;
      schedule = decide(g, Target::host(hjit::Device::CPU), BuiltIn{}, &why).value_or("");
      Options options;
      options.name = "row_slices";
      built = build(g, options, Target::host(hjit::Device::CPU));
    }
    if (k < 2) CHECK(schedule.find("par(d2,d1/") != std::string::npos);
    REQUIRE(built.executable);
    // (Aligned as hjit's own tensors: compiled code stores whole vectors where they are.)
    std::unique_ptr<float, decltype(&std::free)> out(static_cast<float*>(std::aligned_alloc(64, size_t(x.numel()) * 4 + 64)), &std::free);
    const void* in[] = {x.data()};
    void* outs[] = {out.get()};
    built.executable->run(in, outs);
    const Tensor got = Tensor::from_vector(std::vector<float>(out.get(), out.get() + x.numel()), shape);
    CHECK(hjit::max(hjit::abs(got - want)).item<float>() < 1e-4f);
  }
}

// HJIT_PROFILE: Halide's profiler in every CPU pipeline compiled while it is set, named in the
// target and so in the cache keys: code compiled with it is never served without it, or the reverse.
TEST_CASE("HJIT_PROFILE builds Halide's profiler into CPU pipelines, under cache keys of their own") {
  setenv("HJIT_PROFILE", "1", 1);
  const std::string profiled = Target::host(hjit::Device::CPU).str();
  unsetenv("HJIT_PROFILE");
  const std::string plain = Target::host(hjit::Device::CPU).str();
  CHECK(profiled.find("profile") != std::string::npos);
  CHECK(plain.find("profile") == std::string::npos);
  CHECK(Halide::Target(profiled).has_feature(Halide::Target::Profile));
}

TEST_CASE("targets are values: the host's string, and Halide's strings validated") {
  const Target h = Target::host(hjit::Device::CPU);
  CHECK(h.str().find("x86-64-linux") == 0);
  CHECK(Target::parse(h.str()) == h);
  CHECK(Target::parse("x86-64-linux-avx2").str() == "x86-64-linux-avx2");
  CHECK_THROWS_AS(Target::parse("not-a-target"), hjit::ValueError);
  const Target cuda = Target::host(hjit::Device::CUDA);
  CHECK(cuda.device() == hjit::Device::CUDA);
  CHECK(h.device() == hjit::Device::CPU);
  CHECK(Target::host(hjit::Device::OpenCL).device() == hjit::Device::OpenCL);
  CHECK(cuda.str().find("cuda_capability_80") != std::string::npos);
  CHECK(Target::host(hjit::Device::CUDA, 86).str().find("cuda_capability_86") != std::string::npos);
  CHECK_THROWS_AS(Target::host(hjit::Device::CUDA, 90), hjit::ValueError);
}

// A device is a value: what differs between the CPU, CUDA and OpenCL is asked of its kind.
TEST_CASE("device kinds: found by device and by name, each saying what differs for it") {
  using hjit::backend::device_kind;
  for (hjit::Device d : {hjit::Device::CPU, hjit::Device::CUDA, hjit::Device::OpenCL}) {
    const hjit::backend::DeviceKind& k = device_kind(d);
    CHECK(k.id() == d);
    CHECK(hjit::backend::device_kind_named(k.name()) == &k);
    CHECK(k.host() == (d == hjit::Device::CPU));
    CHECK(!k.runtime_object().empty());
    // What the backend does differently on a GPU: no parts, no in-place outputs, no fitted
    // parameters, fixed sizes, one autoscheduler; device code with a name and a file ending.
    CHECK(k.partitions() == k.host());
    CHECK(k.computes_in_place() == k.host());
    CHECK(k.fitted_params() == k.host());
    CHECK(k.dynamic_sizes() == k.host());
    CHECK((k.only_autoscheduler() == nullptr) == k.host());
    CHECK(std::string(k.device_code()).empty() == k.host());
  }
  CHECK(hjit::backend::device_kind_named("tpu") == nullptr);
  CHECK(std::string(device_kind(hjit::Device::CUDA).device_code_extension()) == ".ptx");
  CHECK(device_kind(hjit::Device::CPU).usable());
  CHECK_THROWS_AS(device_kind(hjit::Device::CPU).allocate(64), hjit::InternalError);
}

// An ieee:: function of one f32 argument, compiled for the host and vectorized by 16, at every
// element of `in`.
template <class F>
Halide::Buffer<float> realize_vectorized(F fn, const Halide::Buffer<float>& in) {
  Halide::ImageParam x(Halide::Float(32), 1, "x");
  Halide::Var i("i");
  Halide::Func f("f");
  f(i) = fn(x(i));
  f.vectorize(i, 16);
  x.set(in);
  return f.realize({in.width()}, host());
}

// How many units in the last place of want's f32 rounding `got` is from the exact `want`.
double ulps(float got, double want) {
  const float w = float(want);
  return got == w ? 0.0 : std::fabs(double(got) - want) / (double(std::nextafter(w, INFINITY)) - double(w));
}

// ieee::exp against libm over the range where its results are normal floats (below it they are 0): Cody-Waite's split
// keeps it within an ulp, also where the argument is a negation (sigmoid's exp(-x)), which
// Halide's simplifier and LLVM's reassociation once rearranged into 5 and 60 ulp.
TEST_CASE("compiled f32 exp is within an ulp of libm, for x and for -x, vectorized") {
  const int n = 1 << 20;
  Halide::Buffer<float> in(n);
  for (int i = 0; i < n; ++i) in(i) = -86.5f + 175.0f * float(i) / float(n);  // [-86.5, 88.5)
  Halide::Buffer<float> got_plus = realize_vectorized([](Halide::Expr x) { return ieee::exp(x); }, in);
  Halide::Buffer<float> got_minus = realize_vectorized([](Halide::Expr x) { return ieee::exp(-x); }, in);
  double worst_plus = 0, worst_minus = 0;
  for (int k = 0; k < n; ++k) {
    worst_plus = std::max(worst_plus, ulps(got_plus(k), std::exp(double(in(k)))));
    if (in(k) < 86.5f) worst_minus = std::max(worst_minus, ulps(got_minus(k), std::exp(-double(in(k)))));
  }
  CHECK(worst_plus <= 1.1);
  CHECK(worst_minus <= 1.1);
}

// ieee::sin and ieee::cos against the exact values (libm's in f64, exact for f32 arguments): within
// an ulp densely over [-10, 10] and at arguments of every magnitude up to the largest float, where
// the reduction by pi/2 needs 2/pi to 200 bits; special values as libm's.
TEST_CASE("compiled f32 sin and cos are within an ulp for every argument, special values as libm's") {
  const int dense = 1 << 20, spread = 1 << 18;
  const std::vector<float> specials = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, std::numeric_limits<float>::denorm_min(),
                                       -1e-30f, 0x1p-12f, 0.78125f, 0.7853982f, 1.5707964f, 3.1415927f, 1e10f,
                                       // near multiples of pi/2: little is left of them after the reduction
                                       105414350.0f, 1.4e9f, 16367173.0f * 0x1p72f, 3.4028235e38f, -3.4028235e38f};
  Halide::Buffer<float> in(dense + spread + int(specials.size()));
  for (int i = 0; i < dense; ++i) in(i) = -10.0f + 20.0f * float(i) / float(dense);
  uint32_t state = 12345;
  for (int i = 0; i < spread; ++i) {  // every exponent, random significands and signs
    state = state * 1664525u + 1013904223u;
    const uint32_t bits = (state >> 1) % 0x7f800000u | (state << 31);
    std::memcpy(&in(dense + i), &bits, 4);
  }
  for (size_t k = 0; k < specials.size(); ++k) in(dense + spread + int(k)) = specials[k];
  for (bool cosine : {false, true}) {
    Halide::Buffer<float> got =
        realize_vectorized([cosine](Halide::Expr x) { return cosine ? ieee::cos(x) : ieee::sin(x); }, in);
    double worst = 0;
    float worst_at = 0;
    for (int k = 0; k < in.width(); ++k) {
      const float x = in(k), g = got(k);
      const double want = cosine ? std::cos(double(x)) : std::sin(double(x));
      if (std::isnan(want)) {
        CHECK(std::isnan(g));
        continue;
      }
      const double u = ulps(g, want);
      if (u > worst) worst = u, worst_at = x;
      if (x == 0) CHECK(std::signbit(g) == std::signbit(want));
    }
    INFO((cosine ? "cos" : "sin") << ": worst " << worst << " ulp, at " << worst_at);
    CHECK(worst <= 1.0);
  }
}

// ieee::tanh against the exact tanh: within 1.5 ulp (1.3 measured) over [-10, 10] (both of its formulas and the
// point between them), tiny and subnormal arguments kept, and the special values as libm's.
TEST_CASE("compiled f32 tanh is within 2 ulp of the exact value, special values as libm's") {
  const int n = 1 << 20;
  const float inf = INFINITY, tiny = std::numeric_limits<float>::denorm_min();
  const std::vector<float> specials = {0.0f, -0.0f, inf, -inf, NAN, tiny, -tiny, 1e-30f, -3e-8f, 0.625f,
                                       std::nextafter(0.625f, 0.0f), 9.02f, 9.1f, 10.0f, 11.0f, 1e30f, -1e30f, 3.4e38f};
  Halide::Buffer<float> in(n + int(specials.size()));
  for (int i = 0; i < n; ++i) in(i) = -10.0f + 20.0f * float(i) / float(n);
  for (size_t k = 0; k < specials.size(); ++k) in(n + int(k)) = specials[k];
  Halide::Buffer<float> got = realize_vectorized([](Halide::Expr x) { return ieee::tanh(x); }, in);
  double worst = 0;
  for (int k = 0; k < n; ++k) worst = std::max(worst, ulps(got(k), std::tanh(double(in(k)))));
  CHECK(worst <= 1.5);
  for (size_t k = 0; k < specials.size(); ++k) {
    const float x = specials[k], want = std::tanh(x), g = got(n + int(k));
    INFO("tanh(" << x << ") = " << g << ", libm " << want);
    CHECK((std::isnan(want) ? std::isnan(g) : ulps(g, std::tanh(double(x))) <= 2.0));
    CHECK(std::signbit(g) == std::signbit(want));
  }
}
