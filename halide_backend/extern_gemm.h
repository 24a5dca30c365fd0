// An extern stage for matrix products: a tuning candidate (BuiltinParams::extern_gemm) computes a
// 2-D f32 matmul with oneDNN's or OpenBLAS's sgemm (whichever was found at configure time) while
// the element-wise work after it stays fused in Halide. Chosen only where it measures faster.
#pragma once
#include <set>
#include <string>

#include <hjit/graph.h>

namespace hjit::backend {

// "oneDNN", "OpenBLAS", or "" when hjit was built without either.
const char* extern_gemm_library();

// The matmul nodes of g an extern sgemm can compute: f32, both operands 2-D and read from
// graph inputs or from computed (not constant) values.
std::set<int> extern_gemm_nodes(const Graph& g);

// The name the lowered pipeline calls (extern "C", defined in libhjit).
inline constexpr const char* kExternGemmSymbol = "hjit_extern_sgemm";

}  // namespace hjit::backend
