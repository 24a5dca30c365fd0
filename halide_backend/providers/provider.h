// Kernel providers: libraries that compute some ops' values inside a Halide pipeline as extern
// stages (ONNX Runtime's execution providers are the model). A provider says which kinds of stage
// it computes; matching (providers/matching.h) finds the nodes of a graph a kind can compute,
// planning (providers/planning.h) how their arguments travel, and the kernels
// (providers/kernels/) are the C functions the pipelines call, built into an object of their own
// that libhjit links and an exported library carries.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace hjit::backend {

// The kinds of extern stage: what a library computes.
enum class ExternKind : uint8_t { Sgemm, Conv, ConvWeightGrad, IntGemm, Bf16Gemm, IntConv };

struct KernelProvider {
  const char* name;        // "oneDNN", "OpenBLAS"
  bool sgemm, conv;        // the kinds it computes (conv: forward and the weights' gradient)
  bool amx;                // u8 x s8 -> s32 and bf16 x bf16 -> bf16 matmuls, u8 x s8 -> s32
                           // convolutions (on AMX where the CPU has that)
  const char* link_flags;  // what a program linking its kernels needs besides libc ("-ldnnl -lstdc++")
  bool computes(ExternKind k) const {
    return k == ExternKind::Sgemm ? sgemm : k == ExternKind::IntGemm || k == ExternKind::Bf16Gemm || k == ExternKind::IntConv ? amx : conv;
  }
};

// The provider this build has for `kind` (oneDNN before OpenBLAS), or null.
const KernelProvider* provider_for(ExternKind kind);

// Whether this build's kernel of `kind` (IntGemm, Bf16Gemm) runs on AMX's tile unit on this CPU
// (oneDNN's matmul primitive picks it; decided once a process).
bool gemm_on_amx(ExternKind kind);

// A constant right operand of an IntGemm or Bf16Gemm stage (int8: hjit's packed [K/4, N, 4], bf16:
// [K, N], dense) packed when compiling into the layout oneDNN's matmul reads, after the header its
// kernel checks (kernel_abi::hjit_matmul_pack_constant); empty where this build cannot.
std::vector<uint8_t> pack_constant_weights(ExternKind kind, int64_t k, int64_t n, const void* weights);

// An int_conv2d's sizes (kernel_abi::kIntConvProblemInts), and whether this build's kernel runs
// that convolution on AMX's tiles on this CPU (planned once a shape).
using IntConvProblem = std::array<int32_t, 11>;
bool int_conv_on_amx(const IntConvProblem& problem);
// Its constant weights (hjit's [O/B, C/4, KH, KW, B, 4], dense) packed for calls of `rows` output
// rows, as pack_constant_weights; empty where this build cannot.
std::vector<uint8_t> pack_int_conv_weights(const IntConvProblem& problem, int32_t rows, const void* weights);

// The kernels as one relocatable object (ld -r of providers/kernels/), for an exported library;
// empty when this build has no provider.
std::string_view kernels_object();

}  // namespace hjit::backend
