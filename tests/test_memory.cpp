// hjit::memory_stats(): the caching allocator's bytes in use, peak and cache, and each live
// pipeline's temporaries.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <functional>
#include <string>

#include "examples/resnet_block.h"
#include "graph/passes/peak_memory.h"
#include "halide_backend/backend.h"
#include "tests/support.h"

using hjit::Tensor;

namespace {

int64_t pipelines_named(const hjit::MemoryStats& m, const std::string& part) {
  int64_t n = 0;
  for (const hjit::PipelineMemory& p : m.pipelines) n += p.name.find(part) != std::string::npos;
  return n;
}

// The signal `body` dies of in a child process (0: it returned).
int dies_of(const std::function<void()>& body) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Killed by the fault itself: not reported by doctest's handler, nor AddressSanitizer's.
    std::signal(SIGSEGV, SIG_DFL), std::signal(SIGBUS, SIG_DFL);
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

}  // namespace

TEST_CASE("guard pages: a block ends against an inaccessible page, or starts after one") {
  const int64_t in_use = hjit::memory_stats().current_bytes;
  {
    test::ScopedGuardPages after(hjit::GuardPages::After);
    auto* p = static_cast<volatile unsigned char*>(hjit::cached_alloc(40));
    // Its bytes rounded up to 64, all of them usable; the next one is not there.
    CHECK(hjit::cached_size(const_cast<unsigned char*>(p)) == 64);
    for (int i = 0; i < 64; ++i) p[i] = uint8_t(i);
    CHECK(p[63] == 63);
    CHECK(hjit::memory_stats().current_bytes == in_use + 64);
    CHECK(dies_of([p] { (void)p[64]; }) == SIGSEGV);
    CHECK(dies_of([p] { (void)p[-1]; }) == 0);
    hjit::cached_free(const_cast<unsigned char*>(p));
  }
  {
    test::ScopedGuardPages before(hjit::GuardPages::Before);
    auto* p = static_cast<volatile unsigned char*>(hjit::cached_alloc(5000));
    CHECK(hjit::cached_size(const_cast<unsigned char*>(p)) == 5056);
    p[0] = 1;
    p[5055] = 2;
    CHECK(dies_of([p] { (void)p[-1]; }) == SIGSEGV);
    hjit::cached_free(const_cast<unsigned char*>(p));
  }
  CHECK(hjit::memory_stats().current_bytes == in_use);
  // A compiled call's inputs, outputs and temporaries are guarded blocks too, and come out right.
  test::ScopedGuardPages after(hjit::GuardPages::After);
  auto f = hjit::jit([](const Tensor& x, const Tensor& y) { return hjit::sum(hjit::exp(x) * y, {1}) + 1.0; });
  const Tensor x = Tensor::randn({37, 19}, 1), y = Tensor::randn({37, 19}, 2);
  CHECK_CLOSE(f(x, y), hjit::sum(hjit::exp(x) * y, {1}) + 1.0);
  // An argmax of 20000 rows runs in parallel chunks of 2528; guarded, the last one ran whole past
  // its output's end (loop_nest.cpp: Halide 14 dropped its guard), which crashes here.
  auto argmax = hjit::jit([](const Tensor& v) { return hjit::argmax(v, 1); });
  const Tensor rows = Tensor::randn({20000, 3}, 3);
  CHECK(argmax(rows).to_vector<int64_t>() == hjit::argmax(rows, 1).to_vector<int64_t>());
}

TEST_CASE("tensors' storage is counted in use, at its peak, and cached when freed") {
  const int64_t bytes = int64_t(1) << 22;  // 4 MiB of floats
  const hjit::MemoryStats before = hjit::memory_stats();
  hjit::reset_peak_memory();
  {
    Tensor t = Tensor::zeros({bytes / 4});
    const hjit::MemoryStats during = hjit::memory_stats();
    CHECK(during.current_bytes >= before.current_bytes + bytes);
    CHECK(during.peak_bytes >= during.current_bytes);
    CHECK(during.allocations > before.allocations);
  }
  const hjit::MemoryStats after = hjit::memory_stats();
  CHECK(after.current_bytes <= after.peak_bytes - bytes);  // the block went back
  CHECK(after.cached_bytes >= bytes);                      // and is kept for the next one
  // The next tensor of that size takes the cached block: nothing new from the system.
  Tensor again = Tensor::zeros({bytes / 4});
  CHECK(hjit::memory_stats().system_allocations == after.system_allocations);
  // The peak starts again from what is in use.
  hjit::reset_peak_memory();
  const hjit::MemoryStats reset = hjit::memory_stats();
  CHECK(reset.peak_bytes == reset.current_bytes);
}

TEST_CASE("a pipeline's temporaries are counted per call, for its jit function and in memory_stats") {
  // relu(x) is stored for the matmul that reads it: a temporary the size of x.
  // (Constants of its own: a pipeline other tests compiled would come from the shared disk cache
  // under the name they gave it.)
  auto fn = [](const Tensor& x, const Tensor& w) { return hjit::matmul(hjit::relu(x), w) + 1.2345; };
  Tensor x = test::random({96, 128}, hjit::DType::F32, 1), w = test::random({128, 64}, hjit::DType::F32, 2);
  auto f = hjit::jit(fn, {.name = "memory_temporaries", .opt_level = 1});
  CHECK(f.stats().temporary_bytes == 0);  // nothing compiled yet
  Tensor y = f(x, w);
  CHECK_CLOSE(y, fn(x, w));
  const int64_t temporaries = f.stats().temporary_bytes;
  CHECK(temporaries >= 96 * 128 * 4);
  CHECK(temporaries < 4 * 96 * 128 * 4);
  const hjit::MemoryStats m = hjit::memory_stats();
  bool listed = false;
  for (const hjit::PipelineMemory& p : m.pipelines)
    if (p.name.find("memory_temporaries") != std::string::npos) {
      listed = true;
      CHECK(p.temporary_bytes == temporaries);
    }
  CHECK(listed);
  // A call's peak holds its arguments, its result and its temporaries at once.
  hjit::reset_peak_memory();
  const int64_t base = hjit::memory_stats().current_bytes;
  Tensor z = f(x, w);
  CHECK(hjit::memory_stats().peak_bytes >= base + 96 * 64 * 4 + temporaries);
  // In steady state, calls reuse cached blocks: nothing more from the system.
  const int64_t system = hjit::memory_stats().system_allocations;
  for (int i = 0; i < 5; ++i) z = f(x, w);
  CHECK(hjit::memory_stats().system_allocations == system);
}

TEST_CASE("a version a jit cache evicts gives its pipeline back") {
  auto f = hjit::jit([](const Tensor& x) { return hjit::exp(x) * 2.0 + 0.4217; },
                     {.name = "memory_evicted", .opt_level = 1, .max_cache_entries = 1});
  f(Tensor::ones({3, 5}));
  CHECK(pipelines_named(hjit::memory_stats(), "memory_evicted") == 1);
  f(Tensor::ones({4, 6}));  // the first version is evicted
  CHECK(f.stats().evictions == 1);
  CHECK(pipelines_named(hjit::memory_stats(), "memory_evicted") == 1);
  {
    auto g = hjit::jit([](const Tensor& x) { return hjit::exp(x) * 3.0 - 0.1931; }, {.name = "memory_evicted_too", .opt_level = 1});
    g(Tensor::ones({7}));
    CHECK(pipelines_named(hjit::memory_stats(), "memory_evicted_too") == 1);
  }
  CHECK(pipelines_named(hjit::memory_stats(), "memory_evicted_too") == 0);  // g and its cache are gone
}

TEST_CASE("a graph compiled in parts counts the values between them as temporaries") {
  setenv("HJIT_PART_MAX_COST", "4", 1);
  auto fn = [](const Tensor& x) {
    Tensor y = x;
    for (int i = 0; i < 12; ++i) y = hjit::tanh(y * (1.0 + i * 0.01));
    return y;
  };
  Tensor x = test::random({64, 64}, hjit::DType::F32, 3);
  auto f = hjit::jit(fn, {.name = "memory_parts", .opt_level = 1});
  CHECK_CLOSE(f(x), fn(x));
  unsetenv("HJIT_PART_MAX_COST");
  INFO(f.stats().schedule);
  CHECK(f.stats().schedule.find(" parts") != std::string::npos);
  CHECK(f.stats().temporary_bytes >= 64 * 64 * 4);  // at least one value crosses a cut
}

// A ResNet block's training step (W9's graph): its compiled pipeline holds four to five activations at
// once besides its arguments (the two convolutions' outputs, the second's gradient and a transposed
// or padded copy), whether it is compiled whole or in parts. Before the memory planning it held ten:
// every forward value lived until the last gradient (the gradients were computed in the caller's
// order, not the backward pass's), a relu's output was stored beside both of its padded copies, and
// six element-wise activations crossed the cut between the parts instead of the two they come from.
TEST_CASE("a training step's pipeline holds few activations, whole or in parts") {
  BasicBlock block(16, 5);
  Tensor x = Tensor::randn({4, 16, 32, 32}, 9);
  const int64_t activation = x.numel() * 4;
  auto step = [&](const Tensor& x) {
    auto loss = [&](const Tensor& x) { return hjit::mean(block(x, true)); };
    auto [value, grads] = hjit::value_and_grad(loss, block.parameters())(x);
    grads.insert(grads.begin(), value);
    return grads;
  };
  const std::vector<Tensor> want = step(x);
  for (const bool whole : {true, false}) {
    // Whole: no cut at all; else as compiled by default (in two parts, compiled side by side).
    if (whole) setenv("HJIT_PARTITION_WORK", "1000000", 1);
    auto f = hjit::jit(step, {.name = std::string("memory_block_step_") + (whole ? "whole" : "parts"), .opt_level = 1});
    const std::vector<Tensor> got = f(x);
    unsetenv("HJIT_PARTITION_WORK");
    const std::string schedule = f.stats().schedule;
    INFO(schedule << ", temporaries " << f.stats().temporary_bytes << " bytes");
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK_CLOSE(got[i], want[i]);
    CHECK((schedule.find(" parts") == std::string::npos) == whole);
    MESSAGE(schedule << ": temporaries " << double(f.stats().temporary_bytes) / double(activation) << " activations");
    CHECK(f.stats().temporary_bytes <= 11 * activation / 2);
  }
}

// The estimate memory_budget_mb plans by (graph/passes/peak_memory.h), on graphs whose answer is
// known: what is stored, from when, until when.
TEST_CASE("the peak estimate: outputs from the start, stored values until their last reader") {
  const int64_t kib256 = 256 * 256 * 4;
  // b is computed at each tile of c, its one element-wise reader; c, a matmul operand, is stored.
  // At d: d (the output) and c.
  const hjit::Graph chain = hjit::Graph::parse(
      "{ lambda ; a:f32[256,256]. let\n    b:f32[256,256] = matmul a a\n    c:f32[256,256] = relu b\n"
      "    d:f32[256,256] = matmul c a\n  in (d) }\n");
  CHECK(hjit::estimate_peak_bytes(chain) == 2 * kib256);
  // A reduction's input read again after it (a softmax): e is stored (a reduction), and kept until
  // the division that reads it through the fused exp; the output from the start.
  const hjit::Graph softmax = hjit::Graph::parse(
      "{ lambda ; a:f32[256,256]. let\n    b:f32[256,256] = matmul a a\n    c:f32[256,256] = exp b\n"
      "    d:f32[256,1] = reduce_sum[axes=(1) keepdims=1] c\n    e:f32[256,256] = div c d\n  in (e) }\n");
  CHECK(hjit::estimate_peak_bytes(softmax) == 2 * kib256 + 256 * 4);
  // A convolution holds a copy of each operand while it runs (its value, read only by the relu, is
  // computed at each tile of it); element-wise values alone hold nothing but the output.
  const hjit::Graph conv = hjit::Graph::parse(
      "{ lambda ; x:f32[1,8,16,16] w:f32[8,8,3,3]. let\n"
      "    y:f32[1,8,16,16] = conv2d[stride=(1,1) padding=(1,1) dilation=(1,1) groups=1] x w\n"
      "    z:f32[1,8,16,16] = relu y\n  in (z) }\n");
  const int64_t act = 8 * 16 * 16 * 4, weights = 8 * 8 * 9 * 4;
  CHECK(hjit::estimate_peak_bytes(conv) == act + act + weights);  // z, x's and w's copies
  const hjit::Graph pointwise = hjit::Graph::parse(
      "{ lambda ; x:f32[1000]. let\n    y:f32[1000] = exp x\n    z:f32[1000] = mul y y\n  in (z) }\n");
  CHECK(hjit::estimate_peak_bytes(pointwise) == 4000);
  hjit::PeakModel stores_exp;
  stores_exp.stores_elementwise = [](hjit::OpKind op, size_t readers) { return op == hjit::OpKind::Exp && readers >= 2; };
  CHECK(hjit::estimate_peak_bytes(pointwise, stores_exp) == 8000);
  stores_exp.block_bytes = [](int64_t bytes) { return (bytes + 1023) / 1024 * 1024; };
  CHECK(hjit::estimate_peak_bytes(pointwise, stores_exp) == 8192);
}

// Against the allocator's measurement, for the steps memory_budget_mb plans: within the error the
// README states (the estimate follows the built-in schedule's rules, not Halide's every allocation).
TEST_CASE("the peak estimate of training steps is near what they hold") {
  hjit::backend::Options built_in;
  built_in.schedule = {hjit::backend::BuiltIn{}};
  auto check = [&](const std::string& what, auto& f, const Tensor& x) {
    f(x);
    hjit::reset_peak_memory();
    const int64_t base = hjit::memory_stats().current_bytes;
    f(x);
    const int64_t measured = hjit::memory_stats().peak_bytes - base;
    const int64_t estimated = hjit::backend::estimate_peak_bytes(f.graph(x), built_in);
    MESSAGE(what << ": estimated " << estimated / 1024 << " KiB, measured " << measured / 1024 << " KiB");
    CHECK(estimated >= measured * 4 / 5);
    CHECK(estimated <= measured * 5 / 4);
  };
  BasicBlock block(16, 5);
  Tensor x = Tensor::randn({4, 16, 32, 32}, 9);
  auto resnet = hjit::jit([&](const Tensor& x) {
    return hjit::grad([&](const Tensor& x) { return hjit::mean(block(x, true)); }, block.parameters())(x);
  }, {.name = "estimate_resnet_step", .opt_level = 1});
  check("a ResNet block's step", resnet, x);
  Tensor w = Tensor::randn({256, 256}, 3) * 0.05, h = Tensor::randn({256, 256}, 4);
  auto chain = hjit::jit([&](const Tensor& x) {
    auto loss = [&](const Tensor& x) {
      Tensor y = x;
      for (int i = 0; i < 8; ++i) y = hjit::tanh(hjit::matmul(y, w)) * 1.5 + y;
      return hjit::mean(y * y);
    };
    return hjit::grad(loss, std::vector<Tensor>{w})(x)[0];
  }, {.name = "estimate_tanh_chain_step", .opt_level = 1});
  check("eight tanh(x @ w) blocks' step", chain, h);
}
