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

// A peak a row's rate is a fraction of: G(FL)OP/s (0: the CPU lacks the instruction) and the
// instruction's name.
struct Peak {
  double rate = 0;
  const char* name = "";
};

// One row: the compiled call's median time, its rate and that rate's fraction of `peak` (and of
// `also`, where given: a row on AMX is quoted against the dot-product instruction's peak too), and
// the speed-up over the eager call timed alternately with it.
void row(const std::string& name, double ops, Peak peak, const std::function<void()>& compiled, const std::function<void()>& eager,
         bool quick, Peak also = {}) {
  const std::vector<double> ms = interleaved_ms({compiled, eager}, 1, quick ? 1.0 : 4.0);
  const double rate = ops / (ms[0] * 1e6);
  std::string of_peak = "-";
  char text[64];
  for (const Peak& p : {peak, also}) {
    if (p.rate <= 0) continue;
    std::snprintf(text, sizeof text, "%3.0f%% of %s", 100 * rate / p.rate, p.name);
    of_peak = of_peak == "-" ? text : of_peak + ", " + text;
  }
  std::printf("%-44s %9.3f %10.1f  %-34s %8.2fx\n", name.c_str(), ms[0], rate, of_peak.c_str(), ms[1] / ms[0]);
}

}  // namespace

int low_precision_rows(bool quick) {
  const MachineLimits f32 = measure_machine_limits();
  const LowPrecisionLimits low = measure_low_precision_limits(f32.threads);
  // Without VNNI the int8 rows are fractions of the exact pairs' peak (vpmaddwd).
  const double int8_peak = low.int8_gops > 0 ? low.int8_gops : low.int8_pairs_gops;
  const char* int8_instruction = low.int8_gops > 0 ? "VNNI" : "vpmaddwd";
  // A row is a fraction of the peak of what its compiled code runs, which its plan says: oneDNN's
  // matmul on AMX's tiles where it calls that; for bf16 elsewhere vdpbf16ps's pairs where they do
  // more multiply-adds than the FMA (AMD), else the operands widened to f32 on the FMA (Intel's
  // Sapphire Rapids, and CPUs without AVX512_BF16).
  auto on_amx = [](const std::string& plan, const char* kind) { return plan.find(std::string("extern oneDNN ") + kind) != std::string::npos; };
  const Peak int8_dots{int8_peak, int8_instruction};
  auto bf16_dots = [&](const std::string& plan) {
    return plan.find("pairs") != std::string::npos ? Peak{low.bf16_gflops, "BF16"} : Peak{f32.gflops, "FP32 (widened)"};
  };
  const Peak amx_int8{low.amx_int8_gops, "AMX-INT8"}, amx_bf16{low.amx_bf16_gflops, "AMX-BF16"};
  std::printf("machine (%d threads): FP32 peak %.1f GFLOP/s; int8 VNNI peak %s; bf16 peak %s\n", f32.threads, f32.gflops,
              low.int8_gops > 0 ? (std::to_string(int(low.int8_gops)) + " GOP/s (vpdpbusd)").c_str()
                                : ("none (no AVX512_VNNI; exact pairs " + std::to_string(int(low.int8_pairs_gops)) + " GOP/s, vpmaddwd)").c_str(),
              low.bf16_gflops > 0 ? (std::to_string(int(low.bf16_gflops)) + " GFLOP/s (vdpbf16ps)").c_str() : "none (no AVX512_BF16)");
  if (low.amx_int8_gops > 0 || low.amx_bf16_gflops > 0)
    std::printf("AMX tiles: int8 %.0f GOP/s (tdpbusd), bf16 %.0f GFLOP/s (tdpbf16ps)\n", low.amx_int8_gops, low.amx_bf16_gflops);
  std::printf("compiled call: median ms and G(FL)OP/s, its fraction of the peak of its instruction, speed-up over eager\n\n");
  std::printf("%-44s %9s %10s  %-34s %9s\n", "contraction", "ms", "G(FL)OP/s", "of peak", "vs eager");
  const int64_t n = 1024;
  const double ops = 2.0 * n * n * n;
  {
    const Tensor a = random_8_bit({n, n}, DType::U8, 1), b = random_8_bit({n, n}, DType::I8, 2);
    auto f = hjit::jit([](const Tensor& x, const Tensor& y) { return hjit::int_matmul(x, y); });
    const bool amx = on_amx(f.explain(a, b), "int_gemm");
    row("int8 matmul 1024^3 u8 x i8 -> i32", ops, amx ? amx_int8 : int8_dots, [&] { f(a, b); }, [&] { hjit::int_matmul(a, b); }, quick,
        amx ? int8_dots : Peak{});
  }
  {
    const Tensor a = Tensor::randn({n, n}, 1).astype(DType::BF16), b = Tensor::randn({n, n}, 2).astype(DType::BF16);
    auto f = hjit::jit([](const Tensor& x, const Tensor& y) { return hjit::matmul(x, y); });
    const std::string plan = f.explain(a, b);
    const bool amx = on_amx(plan, "bf16_gemm");
    row("bf16 matmul 1024^3 (f32 sums)", ops, amx ? amx_bf16 : bf16_dots(plan), [&] { f(a, b); }, [&] { hjit::matmul(a, b); }, quick,
        amx ? Peak{low.bf16_gflops, "BF16"} : Peak{});
    const Tensor a32 = a.astype(DType::F32), b32 = b.astype(DType::F32);
    row("f32 matmul 1024^3", ops, {f32.gflops, "FP32"}, [&] { f(a32, b32); }, [&] { hjit::matmul(a32, b32); }, quick);
  }
  // A 3x3 convolution of ResNet's third stage (256 channels at 28x28, batch 1), each form.
  {
    const int64_t c = 256, side = 28;
    const double conv_ops = 2.0 * c * c * 9 * side * side;
    auto conv = [](const Tensor& x, const Tensor& w) { return hjit::conv2d(x, w, std::nullopt, {1, 1}, {1, 1}); };
    const Tensor xu = random_8_bit({1, c, side, side}, DType::U8, 3), wi = random_8_bit({c, c, 3, 3}, DType::I8, 4);
    const Tensor zero_point = Tensor::scalar(128, DType::U8);
    auto int_conv = [](const Tensor& x, const Tensor& w, const Tensor& z) { return hjit::int_conv2d(x, w, z, {1, 1}, {1, 1}); };
    auto fi = hjit::jit(int_conv);
    row("int8 conv 3x3 256 at 28x28 u8 x i8 -> i32", conv_ops, int8_dots, [&] { fi(xu, wi, zero_point); },
        [&] { int_conv(xu, wi, zero_point); }, quick);
    const Tensor x = Tensor::randn({1, c, side, side}, 5), w = Tensor::randn({c, c, 3, 3}, 6) * 0.05f;
    const Tensor xb = x.astype(DType::BF16), wb = w.astype(DType::BF16);
    auto f = hjit::jit(conv);
    const std::string plan = f.explain(xb, wb);
    row("bf16 conv 3x3 256 at 28x28 (f32 sums)", conv_ops, bf16_dots(plan), [&] { f(xb, wb); }, [&] { conv(xb, wb); }, quick);
    row("f32 conv 3x3 256 at 28x28", conv_ops, {f32.gflops, "FP32"}, [&] { f(x, w); }, [&] { conv(x, w); }, quick);
  }
  // A depthwise 3x3 convolution of MobileNet V2's second stage (144 channels at 56x56): int8 runs
  // as int_depthwise2d (four rows of a window column a dot product, three of them weights), f32
  // as a grouped convolution. Alone, the int8 layer reads the caller's NCHW tensor, whose channels
  // its interleaved rows gather byte by byte; inside a quantized network its input comes stored
  // channels innermost by the convolution before it (the case docs/low-precision.md measures).
  {
    const int64_t c = 144, side = 56;
    const double dw_ops = 2.0 * c * 9 * side * side;
    const Tensor xu = random_8_bit({1, c, side, side}, DType::U8, 7), wi = random_8_bit({c, 1, 3, 3}, DType::I8, 8);
    const Tensor zero_point = Tensor::scalar(128, DType::U8);
    auto int_dw = [c](const Tensor& x, const Tensor& w, const Tensor& z) { return hjit::int_conv2d(x, w, z, {1, 1}, {1, 1}, {1, 1}, c); };
    auto fi = hjit::jit(int_dw);
    row("int8 depthwise 3x3 144 at 56x56 u8 x i8 -> i32", dw_ops, int8_dots, [&] { fi(xu, wi, zero_point); },
        [&] { int_dw(xu, wi, zero_point); }, quick);
    const Tensor x = Tensor::randn({1, c, side, side}, 9), w = Tensor::randn({c, 1, 3, 3}, 10);
    auto dw = [c](const Tensor& x, const Tensor& w) { return hjit::conv2d(x, w, std::nullopt, {1, 1}, {1, 1}, {1, 1}, c); };
    auto f = hjit::jit(dw);
    row("f32 depthwise 3x3 144 at 56x56", dw_ops, {f32.gflops, "FP32"}, [&] { f(x, w); }, [&] { dw(x, w); }, quick);
  }
  return 0;
}

}  // namespace bench
