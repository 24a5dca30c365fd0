// Extern stages: library calls for the heaviest ops, as tuning candidates. A 2-D f32 matmul can be
// computed by oneDNN's or OpenBLAS's sgemm (whichever was found at configure time), and an f32
// convolution and the gradient of its weights by oneDNN's convolution primitives, while the element-wise work around them stays fused
// in Halide. Chosen by a tuning run only where they measure faster (BuiltinParams::extern_gemm,
// extern_conv); a schedule names them ("n5_matmul extern sgemm"), and lowering builds them.
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <hjit/graph.h>

namespace hjit::backend {

// "oneDNN", "OpenBLAS", or "" when hjit was built without either.
const char* extern_gemm_library();
// Whether convolutions can be extern (hjit was built with oneDNN).
bool extern_conv_available();

// Which schedule classes of the op table a library computes, as what: keyed by the class, so that
// an op is an extern stage's by its row in the op table alone.
enum class ExternKind : uint8_t { Sgemm, Conv, ConvWeightGrad };
struct ExternRule {
  ExternKind kind;
  const char* name;  // in a schedule: "sgemm", "conv", "conv_weight_grad"
  int rank;          // of its f32 operands and result
};
// nullopt for a class no library computes.
std::optional<ExternRule> extern_rule(ScheduleClass c);

// The matmul nodes of g an extern sgemm can compute: f32, both operands 2-D and read from
// graph inputs or from computed (not constant) values.
std::set<int> extern_gemm_nodes(const Graph& g);
// The element-wise work after a convolution that oneDNN does in the same pass (post-ops): add,
// subtract, multiply or divide by a per-channel value (batch norm in inference, a bias), relu,
// and once per chain the sum with a value of the output's shape (a residual connection).
struct PostOp {
  enum Kind { Add = 1, Sub = 2, Mul = 3, Div = 4, Relu = 5, Sum = 6 };
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
inline constexpr size_t kMaxPostOps = 10;  // they travel as one int32, 3 bits each
// The chain whose last value node `end` is (a conv2d node alone included), when there is one.
std::optional<ConvChain> conv_chain_ending_at(const Graph& g, int end);
// How many post-ops from the first are per-channel affine (no relu): they fold into the
// convolution, a * conv(x, w) + b = conv(x, a * w) + b, which costs oneDNN nothing extra (each
// post-op costs it about 5% of a 3x3 convolution).
size_t affine_prefix(const ConvChain& c);
// The post-ops from `first` on as the extern stage's integer argument.
int32_t post_op_code(const ConvChain& c, size_t first);

// A chain whose value only the next extern convolution reads hands it over in oneDNN's blocked
// layout (16 channels innermost), where both convolutions use it: no reorder to NCHW and back in
// between. Halide allocates that buffer with NCHW's size and never reads it. Per chain end:
enum ConvLayout { kBlockedInput = 1, kBlockedOutput = 2 };
std::map<int, int> conv_layouts(const Graph& g, const std::vector<ConvChain>& chains);

// The nodes whose values extern convolutions compute: the last node of each conv2d's longest chain,
// and conv2d_weight_grad nodes. f32, one group, operands as above.
std::set<int> extern_conv_nodes(const Graph& g);
// What an extern stage whose chain starts with op is called in a schedule ("sgemm", "conv",
// "conv_weight_grad"; "" for an op no library computes).
const char* extern_stage_kind(OpKind op);

// The names the lowered pipeline calls (extern "C", defined in libhjit).
inline constexpr const char* kExternGemmSymbol = "hjit_extern_sgemm";
inline constexpr const char* kExternConvSymbol = "hjit_extern_conv2d";
inline constexpr const char* kExternConvWeightGradSymbol = "hjit_extern_conv2d_weight_grad";

}  // namespace hjit::backend
