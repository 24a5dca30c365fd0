// Matching: which nodes of a graph a provider's kernel can compute (providers/provider.h). Decided
// on the graph, before lowering: a schedule names the nodes ("n5_matmul extern sgemm"), and
// lowering builds them as extern stages (lowering/lower_extern.h).
#pragma once
#include <optional>
#include <set>
#include <vector>

#include <hjit/graph.h>

#include "halide_backend/providers/kernel_abi.h"
#include "halide_backend/providers/provider.h"

namespace hjit::backend {

// "oneDNN", "OpenBLAS", or "" when hjit was built without either: the provider of sgemm.
const char* extern_gemm_library();
// Whether convolutions can be extern (a provider computes them).
bool extern_conv_available();

// Which schedule classes of the op table a kind of stage computes: keyed by the class, so that an
// op is an extern stage's by its row in the op table alone.
struct ExternRule {
  ExternKind kind;
  const char* name;  // in a schedule: "sgemm", "conv", "conv_weight_grad"
  int rank;          // of its f32 operands and result
};
// nullopt for a class no kind computes.
std::optional<ExternRule> extern_rule(ScheduleClass c);
// The rule of node n's stage: its class's, but int_gemm for int_matmul (an op of the matmul class
// whose operands are 8-bit integers), bf16_gemm for a bf16 matmul and int_conv for int_conv2d.
std::optional<ExternRule> extern_rule(const Node& n);
// What an extern stage whose chain starts with node n is called in a schedule ("sgemm", "conv",
// "conv_weight_grad", "int_gemm", "bf16_gemm", "int_conv"; "" for an op no provider computes).
const char* extern_stage_kind(const Node& n);

// The matmul nodes of g an extern sgemm can compute: f32, both operands 2-D and read from graph
// inputs or from computed (not constant) values. Empty without a provider.
std::set<int> extern_gemm_nodes(const Graph& g);

// The int_matmul nodes oneDNN's u8 x s8 matmul computes, where it runs on AMX (gemm_on_amx): a
// product of [M, 4K] or [B, M, 4K] by one packed [K, N, 4] or by one per matrix ([B, K, N, 4]), of
// at least a tile's 16 rows (the batch's together where the right operand is shared) and 2^28
// multiply-adds (a 1024 x 512 x 512 product), operands read from graph inputs, constants or
// computed values. Empty elsewhere: hjit's own VNNI tiles run these products at 81-98% of the
// VNNI peak on Zen 4 and 5.
std::set<int> extern_int_gemm_nodes(const Graph& g);
// The bf16 matmul nodes oneDNN's bf16 matmul computes (f32 sums, rounded once, as eager), where it
// runs on AMX: [M, K] or [B, M, K] by one [K, N] or by one per matrix ([B, K, N]), of at least 16
// rows and 2^21 multiply-adds, operands as above. Elsewhere hjit's own code serves them: vdpbf16ps
// pairs where those pay, f32 tiles on widened values where they do not (lowering/lowered.h).
std::set<int> extern_bf16_gemm_nodes(const Graph& g);

// The int_conv2d nodes oneDNN's u8 x s8 convolution computes, where it runs on AMX
// (int_conv_on_amx): of at least 2^24 multiply-adds, operands read from graph inputs, constants or
// computed values. Empty elsewhere. Called only where a schedule asks (extern_int_conv, off by
// default: hjit's own VNNI tiles requantize in registers, docs/low-precision.md).
std::set<int> extern_int_conv_nodes(const Graph& g);
// Int_conv2d node n's sizes as its kernel takes them.
IntConvProblem int_conv_problem(const Graph& g, const Node& n);

// The element-wise work after a convolution that oneDNN does in the same pass (post-ops): add,
// subtract, multiply or divide by a per-channel value (batch norm in inference, a bias), relu,
// and once per chain the sum with a value of the output's shape (a residual connection).
struct PostOp {
  using Kinds = kernel_abi::PostOpKinds;
  using Kind = Kinds::Kind;
  static constexpr Kind Add = Kinds::Add, Sub = Kinds::Sub, Mul = Kinds::Mul, Div = Kinds::Div, Relu = Kinds::Relu,
                        Sum = Kinds::Sum;
  Kind kind;
  int node;         // the graph node it computes
  int operand = -1; // the per-channel operand's node (binary kinds), the residual (sum)
};
// A convolution and the post-ops after it, each the only reader of the one before, whose last
// value an extern stage computes in one oneDNN call.
struct ConvChain {
  int conv = -1;
  std::vector<PostOp> post_ops;
  int end() const { return post_ops.empty() ? conv : post_ops.back().node; }
};
inline constexpr size_t kMaxPostOps = kernel_abi::kMaxPostOps;
// The chain whose last value node `end` is (a conv2d node alone included), when there is one.
std::optional<ConvChain> conv_chain_ending_at(const Graph& g, int end);

// The nodes whose values extern convolutions compute: the last node of each conv2d's longest chain,
// and conv2d_weight_grad nodes. f32, one group, operands as above. Empty without a provider.
std::set<int> extern_conv_nodes(const Graph& g);

// How many nodes read each node's value, with outputs and updates counted as readers.
std::vector<int> value_uses(const Graph& g);

}  // namespace hjit::backend
