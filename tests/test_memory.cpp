// hjit::memory_stats(): the caching allocator's bytes in use, peak and cache, and each live
// pipeline's temporaries.
#include <string>

#include "examples/resnet_block.h"
#include "tests/support.h"

using hjit::Tensor;

namespace {

int64_t pipelines_named(const hjit::MemoryStats& m, const std::string& part) {
  int64_t n = 0;
  for (const hjit::PipelineMemory& p : m.pipelines) n += p.name.find(part) != std::string::npos;
  return n;
}

}  // namespace

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
