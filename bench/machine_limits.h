// The limits of the machine hjit-bench runs on, measured when it starts, so that each row can be
// quoted as a fraction of what this very machine can do (machines differ twofold in FP32 peak:
// a Zen 4's AVX-512 runs on 256-bit units, a Zen 5's on 512-bit ones).
#pragma once
#include <string>

namespace bench {

struct MachineLimits {
  double gflops = 0;  // FP32 FMA peak over every thread, GFLOP/s
  double gbps = 0;    // memory bandwidth of a triad over arrays far larger than the caches, GB/s
  int threads = 0;
  std::string vectors;  // the FMA width measured: "512-bit", "256-bit" or "scalar"

  // The fraction of the binding limit a call reaches: the larger of its time at peak FLOP/s and
  // at full bandwidth, over its measured time; `what` says which limit binds. 0 when both are 0.
  double fraction(double flops, double bytes, double ms, std::string* what) const;
};

// FP32 peak: 16 independent FMA chains per thread on the widest vectors the CPU has (as
// ../shared/peers/peak.c), best of 3. Bandwidth: a = b + s * c over three 64 MiB arrays (as
// stream.c's triad, counting 12 bytes an element), best of 5. About 0.3 s in all.
MachineLimits measure_machine_limits();

// The triad's bandwidth alone, as measure_machine_limits measures it (about 0.3 s): a virtual
// machine's host moves it within a minute (a 2-vCPU Zen 5 guest read 44 and 74 GB/s a minute
// apart), so a row bound by memory is quoted against the triad measured beside it.
double measure_triad(int threads);

// The peaks of the low-precision dot products, 0 where the CPU lacks the instruction: VNNI's
// vpdpbusd (int8: u8 x i8 multiply-adds into i32, counted as 2 operations each) and AVX512_BF16's
// vdpbf16ps (bf16 pairs into f32), twelve chains a thread as the FP32 peak, best of 9. Without
// VNNI, int8_pairs_gops: AVX2's vpmaddwd (i16 pairs into i32), the exact int8 products there.
struct LowPrecisionLimits {
  double int8_gops = 0, bf16_gflops = 0, int8_pairs_gops = 0;
  double amx_int8_gops = 0, amx_bf16_gflops = 0;  // AMX's tiles, where the CPU has them
};
LowPrecisionLimits measure_low_precision_limits(int threads);

}  // namespace bench
