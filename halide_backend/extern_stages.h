// Extern stages: library calls for the heaviest ops, as tuning candidates. A 2-D f32 matmul can be
// computed by oneDNN's or OpenBLAS's sgemm (whichever was found at configure time), and an f32
// convolution and the gradient of its weights by oneDNN's convolution primitives, while the element-wise work around them stays fused
// in Halide. Chosen by a tuning run only where they measure faster (BuiltinParams::extern_gemm,
// extern_conv); a schedule names them ("n5_matmul extern sgemm"), and lowering builds them.
#pragma once
#include <set>
#include <string>

#include <hjit/graph.h>

namespace hjit::backend {

// "oneDNN", "OpenBLAS", or "" when hjit was built without either.
const char* extern_gemm_library();
// Whether convolutions can be extern (hjit was built with oneDNN).
bool extern_conv_available();

// The matmul nodes of g an extern sgemm can compute: f32, both operands 2-D and read from
// graph inputs or from computed (not constant) values.
std::set<int> extern_gemm_nodes(const Graph& g);
// The conv2d and conv2d_weight_grad nodes oneDNN can compute: f32, one group, operands as above.
std::set<int> extern_conv_nodes(const Graph& g);
// What an extern stage computing op is called in a schedule ("sgemm", "conv", "conv_weight_grad").
const char* extern_stage_kind(OpKind op);

// The names the lowered pipeline calls (extern "C", defined in libhjit).
inline constexpr const char* kExternGemmSymbol = "hjit_extern_sgemm";
inline constexpr const char* kExternConvSymbol = "hjit_extern_conv2d";
inline constexpr const char* kExternConvWeightGradSymbol = "hjit_extern_conv2d_weight_grad";

}  // namespace hjit::backend
