#include "bench/machine_limits.h"

#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr long kChainSteps = 20'000'000;  // per thread: kChains FMAs a step
constexpr int kChains = 12;

// Twelve chains written out (not an array), so that each lives in a register of its own: more than
// the latency times the FMA units of any x86 core (Zen 4 and 5: 4 x 2), and with the two constants
// within AVX2's 16 registers (sixteen chains spilled two of them there: this Zen 3 measured 105
// GFLOP/s, where 12 chains reach 184 and hjit's W3 128).
#define HJIT_BENCH_CHAINS(T, SET1, FMA, ADD, LANES)                                                     \
  T a0 = SET1(1.000f), a1 = SET1(1.001f), a2 = SET1(1.002f), a3 = SET1(1.003f), a4 = SET1(1.004f);      \
  T a5 = SET1(1.005f), a6 = SET1(1.006f), a7 = SET1(1.007f), a8 = SET1(1.008f), a9 = SET1(1.009f);      \
  T a10 = SET1(1.010f), a11 = SET1(1.011f);                                                             \
  const T m = SET1(0.9999999f), add = SET1(1e-7f);                                                      \
  for (long i = 0; i < steps; ++i) {                                                                    \
    a0 = FMA(a0, m, add), a1 = FMA(a1, m, add), a2 = FMA(a2, m, add), a3 = FMA(a3, m, add);            \
    a4 = FMA(a4, m, add), a5 = FMA(a5, m, add), a6 = FMA(a6, m, add), a7 = FMA(a7, m, add);            \
    a8 = FMA(a8, m, add), a9 = FMA(a9, m, add), a10 = FMA(a10, m, add), a11 = FMA(a11, m, add);        \
  }                                                                                                     \
  T s = ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7)));                              \
  s = ADD(s, ADD(ADD(a8, a9), ADD(a10, a11)));                                                          \
  float lanes[LANES];                                                                                   \
  std::memcpy(lanes, &s, sizeof s);                                                                     \
  return lanes[0];

__attribute__((target("avx512f"))) float chains512(long steps) {
  HJIT_BENCH_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, 16)
}
__attribute__((target("avx2,fma"))) float chains256(long steps) {
  HJIT_BENCH_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, 8)
}
#undef HJIT_BENCH_CHAINS

// The same for the dot products of low precision: sixteen chains of VNNI's vpdpbusd (64 u8 x i8
// multiply-adds an instruction) or AVX512_BF16's vdpbf16ps (32 bf16 ones), each in a register of
// its own (AVX-512 has 32). Twelve read 65% of vpdpbusd's rate on Zen 4 (580 against 888 GOP/s,
// ../shared/peers/peak_lowp.c's sixteen; an int8 matmul reached 711), whose latency times its
// units is more than twelve. (peak_lowp.c keeps its chains in an array, which GCC spilled on
// Sapphire Rapids: it read half of vpdpbusd's rate there, and 984 GOP/s on Zen 5 against these
// chains' 1841, below the 1655 an int8 matmul reached beside them.)
constexpr int kDotChains = 16;
#define HJIT_BENCH_DOT_CHAINS(T, INIT, STEP)                                                             \
  T a0 = INIT(0), a1 = INIT(1), a2 = INIT(2), a3 = INIT(3), a4 = INIT(4), a5 = INIT(5), a6 = INIT(6);   \
  T a7 = INIT(7), a8 = INIT(8), a9 = INIT(9), a10 = INIT(10), a11 = INIT(11), a12 = INIT(12);           \
  T a13 = INIT(13), a14 = INIT(14), a15 = INIT(15);                                                    \
  for (long i = 0; i < steps; ++i) {                                                                   \
    a0 = STEP(a0), a1 = STEP(a1), a2 = STEP(a2), a3 = STEP(a3), a4 = STEP(a4), a5 = STEP(a5);          \
    a6 = STEP(a6), a7 = STEP(a7), a8 = STEP(a8), a9 = STEP(a9), a10 = STEP(a10), a11 = STEP(a11);       \
    a12 = STEP(a12), a13 = STEP(a13), a14 = STEP(a14), a15 = STEP(a15);                                \
  }                                                                                                    \
  T s = a0;                                                                                            \
  for (T v : {a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15}) s = ADD(s, v);        \
  float lanes[16];                                                                                     \
  std::memcpy(lanes, &s, sizeof lanes);                                                                \
  return lanes[0];

__attribute__((target("avx512f,avx512bw,avx512vnni"))) float vnni_chains(long steps) {
  const __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-2);
#define INIT(k) _mm512_set1_epi32(k)
#define STEP(a) _mm512_dpbusd_epi32(a, x, y)
#define ADD _mm512_add_epi32
  HJIT_BENCH_DOT_CHAINS(__m512i, INIT, STEP)
#undef INIT
#undef STEP
#undef ADD
}
__attribute__((target("avx512f,avx512bf16"))) float bf16_chains(long steps) {
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3380);  // 1, 6e-8
#define INIT(k) _mm512_set1_ps(float(k))
#define STEP(a) _mm512_dpbf16_ps(a, x, y)
#define ADD _mm512_add_ps
  HJIT_BENCH_DOT_CHAINS(__m512, INIT, STEP)
#undef INIT
#undef STEP
#undef ADD
}
#undef HJIT_BENCH_DOT_CHAINS

// Without VNNI, exact 8-bit products are vpmaddwd's: 16 i16 x i16 multiply-adds into pairs of i32
// lanes an instruction, what hjit's int8 contractions use there (docs/low-precision.md). Twelve
// chains, as the FP32 peak's (AVX2's 16 registers); a pair of ones keeps the sums small.
__attribute__((target("avx2"))) float pairs_chains(long steps) {
  const __m256i y = _mm256_set1_epi16(1);
  __m256i a0 = _mm256_set1_epi32(0), a1 = _mm256_set1_epi32(1), a2 = _mm256_set1_epi32(2), a3 = _mm256_set1_epi32(3);
  __m256i a4 = _mm256_set1_epi32(4), a5 = _mm256_set1_epi32(5), a6 = _mm256_set1_epi32(6), a7 = _mm256_set1_epi32(7);
  __m256i a8 = _mm256_set1_epi32(8), a9 = _mm256_set1_epi32(9), a10 = _mm256_set1_epi32(10), a11 = _mm256_set1_epi32(11);
  for (long i = 0; i < steps; ++i) {
    a0 = _mm256_madd_epi16(a0, y), a1 = _mm256_madd_epi16(a1, y), a2 = _mm256_madd_epi16(a2, y), a3 = _mm256_madd_epi16(a3, y);
    a4 = _mm256_madd_epi16(a4, y), a5 = _mm256_madd_epi16(a5, y), a6 = _mm256_madd_epi16(a6, y), a7 = _mm256_madd_epi16(a7, y);
    a8 = _mm256_madd_epi16(a8, y), a9 = _mm256_madd_epi16(a9, y), a10 = _mm256_madd_epi16(a10, y), a11 = _mm256_madd_epi16(a11, y);
  }
  __m256i s = a0;
  for (__m256i v : {a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11}) s = _mm256_add_epi32(s, v);
  return float(_mm256_extract_epi32(s, 0));
}

// AMX's tile unit (Sapphire Rapids): four accumulator tiles, each step a tdpbusd (16 x 16 sums of
// 64 u8 x i8 products) or a tdpbf16ps (16 x 16 of 32 bf16 ones) into each, from two pairs of
// operand tiles that stay loaded: what oneDNN's matmul runs on there (docs/low-precision.md). The
// process must have asked Linux for the tiles' state first (amx_permitted).
constexpr int kAmxChains = 4;
constexpr long kAmxStepsPer = 32;  // a step is 4 x 16 cycles, not an FMA's half cycle
template <bool Bf16>
__attribute__((target("amx-tile,amx-int8,amx-bf16"))) float amx_chains(long steps) {
  alignas(64) unsigned char config[64] = {};
  config[0] = 1;  // palette 1: 8 tiles, each 16 rows of 64 bytes
  for (int t = 0; t < 8; ++t) config[16 + 2 * t] = 64, config[48 + t] = 16;
  alignas(64) unsigned char operand[16 * 64] = {};
  alignas(64) float out[16 * 16];
  _tile_loadconfig(config);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  for (long i = 0; i < steps / kAmxStepsPer; ++i) {
    if constexpr (Bf16) {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    } else {
      _tile_dpbusd(0, 4, 6);
      _tile_dpbusd(1, 4, 7);
      _tile_dpbusd(2, 5, 6);
      _tile_dpbusd(3, 5, 7);
    }
  }
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

// Linux grants a process AMX's tile state only when asked (arch_prctl ARCH_REQ_XCOMP_PERM for
// XTILEDATA, since 5.16); without it the first tile instruction is a fault.
bool amx_permitted() {
  constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
}

// GFLOP/s of every thread running the chains at once, the best of 9 runs of 40 ms or so: on a
// shared virtual machine a run in which the host takes a core away reads half the peak (seen on a
// Zen 3: 95 against 184 GFLOP/s, with the best of 3). `lanes`: multiply-adds per instruction and
// chain, `per_step`: steps of the chains' loop that count as one.
double peak(int lanes, float (*chains)(long), int threads, int n_chains = kChains, long per_step = 1) {
  double best = 0;
  std::vector<float> sink(static_cast<size_t>(threads));
  for (int rep = 0; rep < 9; ++rep) {
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads)
    sink[size_t(omp_get_thread_num())] = chains(kChainSteps);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, double(threads) * double(kChainSteps / per_step) * n_chains * lanes * 2 / s / 1e9);
  }
  volatile float keep = sink[0];
  (void)keep;
  return best;
}

}  // namespace

double MachineLimits::fraction(double flops, double bytes, double ms, std::string* what) const {
  const double at_peak = gflops > 0 ? flops / (gflops * 1e6) : 0, at_bandwidth = gbps > 0 ? bytes / (gbps * 1e6) : 0;
  if (what) *what = at_peak >= at_bandwidth ? "FP32 peak" : "bandwidth";
  const double bound = std::max(at_peak, at_bandwidth);
  return bound > 0 && ms > 0 ? bound / ms : 0;
}

MachineLimits measure_machine_limits() {
  MachineLimits m;
  m.threads = omp_get_max_threads();
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) m.gflops = peak(16, chains512, m.threads), m.vectors = "512-bit";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) m.gflops = peak(8, chains256, m.threads), m.vectors = "256-bit";
  else m.vectors = "no FMA";
  m.gbps = measure_triad(m.threads);
  return m;
}

double measure_triad(int threads) {
  const int64_t n = int64_t(64) << 18;  // 64 MiB of floats an array
  std::unique_ptr<float[]> a(new float[size_t(n)]), b(new float[size_t(n)]), c(new float[size_t(n)]);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) a[size_t(i)] = 0, b[size_t(i)] = 1, c[size_t(i)] = 2;  // first touch, per thread
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) a[size_t(i)] = b[size_t(i)] + 3.0f * c[size_t(i)];
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, 12.0 * double(n) / s / 1e9);
  }
  volatile float keep = a[size_t(n / 2)];
  (void)keep;
  return best;
}

LowPrecisionLimits measure_low_precision_limits(int threads) {
  LowPrecisionLimits m;
  __builtin_cpu_init();
  // (peak() counts 2 operations per lane and step: 64 lanes of vpdpbusd, 32 of vdpbf16ps.)
  if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw")) m.int8_gops = peak(64, vnni_chains, threads, kDotChains);
  if (__builtin_cpu_supports("avx512bf16")) m.bf16_gflops = peak(32, bf16_chains, threads, kDotChains);
  if (m.int8_gops == 0 && __builtin_cpu_supports("avx2")) m.int8_pairs_gops = peak(16, pairs_chains, threads);
  if (__builtin_cpu_supports("amx-tile") && amx_permitted()) {
    if (__builtin_cpu_supports("amx-int8")) m.amx_int8_gops = peak(16 * 16 * 64, amx_chains<false>, threads, kAmxChains, kAmxStepsPer);
    if (__builtin_cpu_supports("amx-bf16")) m.amx_bf16_gflops = peak(16 * 16 * 32, amx_chains<true>, threads, kAmxChains, kAmxStepsPer);
  }
  return m;
}

}  // namespace bench
