#include "bench/low_precision_rows.h"

#include <cstdio>
#include <functional>
#include <string>

#include <hjit/hjit.h>

#include "bench/machine_limits.h"
#include "bench/timing.h"

namespace bench {
namespace {

using hjit::DType;
using hjit::Tensor;

Tensor random_8_bit(hjit::Shape shape, DType dtype, uint64_t seed) {
  const bool u = dtype == DType::U8;
  return hjit::floor(Tensor::uniform(std::move(shape), seed, u ? 0 : -128, u ? 256 : 128)).astype(dtype);
}

// One row: the compiled call's median time, its rate and that rate's fraction of `peak` (0: the
// CPU lacks the instruction), and the speed-up over the eager call timed alternately with it.
void row(const std::string& name, double ops, double peak, const char* peak_name, const std::function<void()>& compiled,
         const std::function<void()>& eager, bool quick) {
  const std::vector<double> ms = interleaved_ms({compiled, eager}, 1, quick ? 1.0 : 4.0);
  const double rate = ops / (ms[0] * 1e6);
  char of_peak[64] = "-";
  if (peak > 0) std::snprintf(of_peak, sizeof of_peak, "%3.0f%% of %s", 100 * rate / peak, peak_name);
  std::printf("%-44s %9.3f %10.1f  %-22s %8.2fx\n", name.c_str(), ms[0], rate, of_peak, ms[1] / ms[0]);
}

}  // namespace

int low_precision_rows(bool quick) {
  const MachineLimits f32 = measure_machine_limits();
  const LowPrecisionLimits low = measure_low_precision_limits(f32.threads);
  std::printf("machine (%d threads): FP32 peak %.1f GFLOP/s; int8 VNNI peak %s; bf16 peak %s\n", f32.threads, f32.gflops,
              low.int8_gops > 0 ? (std::to_string(int(low.int8_gops)) + " GOP/s (vpdpbusd)").c_str() : "none (no AVX512_VNNI)",
              low.bf16_gflops > 0 ? (std::to_string(int(low.bf16_gflops)) + " GFLOP/s (vdpbf16ps)").c_str() : "none (no AVX512_BF16)");
  std::printf("compiled call: median ms and G(FL)OP/s, its fraction of the peak of its instruction, speed-up over eager\n\n");
  std::printf("%-44s %9s %10s  %-22s %9s\n", "contraction", "ms", "G(FL)OP/s", "of peak", "vs eager");
  const int64_t n = 1024;
  const double ops = 2.0 * n * n * n;
  {
    const Tensor a = random_8_bit({n, n}, DType::U8, 1), b = random_8_bit({n, n}, DType::I8, 2);
    auto f = hjit::jit([](const Tensor& x, const Tensor& y) { return hjit::int_matmul(x, y); });
    row("int8 matmul 1024^3 u8 x i8 -> i32", ops, low.int8_gops, "VNNI", [&] { f(a, b); }, [&] { hjit::int_matmul(a, b); }, quick);
  }
  {
    const Tensor a = Tensor::randn({n, n}, 1).astype(DType::BF16), b = Tensor::randn({n, n}, 2).astype(DType::BF16);
    auto f = hjit::jit([](const Tensor& x, const Tensor& y) { return hjit::matmul(x, y); });
    row("bf16 matmul 1024^3 (f32 sums)", ops, low.bf16_gflops, "BF16", [&] { f(a, b); }, [&] { hjit::matmul(a, b); }, quick);
    const Tensor a32 = a.astype(DType::F32), b32 = b.astype(DType::F32);
    row("f32 matmul 1024^3", ops, f32.gflops, "FP32", [&] { f(a32, b32); }, [&] { hjit::matmul(a32, b32); }, quick);
  }
  return 0;
}

}  // namespace bench
