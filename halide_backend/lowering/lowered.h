// A graph lowered to Halide Funcs, before scheduling: what schedules/ reads and schedules.
// One Stage per graph node. Halide stores dimension 0 innermost, so a stage's vars run innermost
// first: the reverse of the tensor's row-major shape (see halide_args()).
#pragma once
#include <set>
#include <string>
#include <vector>

#include <Halide.h>
#include <hjit/graph.h>

#include "graph/symbolic_sizes.h"

namespace hjit::backend {

using Coords = std::vector<Halide::Expr>;

// Starts the message of a require() that a compiled call turns into an IndexError.
inline constexpr const char* kIndexErrorMarker = "hjit-index-error:";  // row-major: coordinate of dimension 0 first

// The one place where hjit's order (row-major: dimension 0 outermost) and Halide's (dimension 0
// innermost) meet: every shape, coordinate list and axis list crosses through these.
template <class T>
std::vector<T> to_halide_order(const std::vector<T>& row_major) {
  return {row_major.rbegin(), row_major.rend()};
}
template <class T>
std::vector<T> to_row_major(const std::vector<T>& halide_order) {
  return {halide_order.rbegin(), halide_order.rend()};
}
inline std::vector<Halide::Expr> halide_args(const Coords& row_major) { return to_halide_order(row_major); }

// A Func a lowering made besides a stage's func and reduction.
struct Helper {
  std::string role;              // "padded", "keys_t", "scores", "row_max", "probs", "row_sum"
  Halide::Func func;
  std::vector<Halide::Var> vars;  // pure vars, innermost first
  Shape extents;                  // of vars, innermost first
  std::vector<Halide::RVar> rvars;  // of its update, if it has one
  std::set<std::string> dynamic_vars;  // names of vars whose extent varies (dynamic sizes)
  // false: a view of a constant packed when compiling, read where it lies (inlined), not copied
  bool stored = true;
};

struct Stage {
  int node = -1;
  OpKind op = OpKind::Parameter;
  DType dtype = DType::F32;         // of the node: its values are computed in compute_type(dtype)
  Halide::Func func;
  Halide::Func reduction;           // reductions and matmul: the accumulator with the update
                                    // definition; func only reads it (argmax: its index)
  std::vector<Halide::Var> vars;    // pure vars, innermost first
  std::vector<Halide::RVar> rvars;  // reduction domain (reductions, matmul), innermost first
  // A contraction lowered as dot products (x86's vpdpbusd, vdpbf16ps): this many products summed
  // into each lane of the accumulator per step of rvars[0], whose extent it is; 0 otherwise.
  int dot_lanes = 0;
  bool right_packed = false;        // a matmul reading its right operand packed when compiling
  // A convolution's or pool's padded input; attention's transposed keys, scores, row maxima,
  // probabilities and row sums.
  std::vector<Helper> helpers;
  Shape extents;                    // of vars, innermost first
  std::vector<int> consumers;       // stages (node ids) that read this one, one entry per use
  bool is_output = false;           // the func itself is a pipeline output
  bool is_extern = false;           // func is an extern stage (a library call): computed at root, unscheduled
  std::string extern_kind;          // then what it calls: "sgemm", "conv", "conv_weight_grad"
  // A node an extern stage computes with a later one (a convolution and the post-ops before a
  // chain's last): no func, nothing to schedule.
  bool absorbed = false;
  Halide::ImageParam constant;      // a Constant: the parameter its stored bits are bound to
};

struct LoweredPipeline;

// A product of one or two rows over a weight larger than the threads' L2 caches together (a
// matrix-vector product, decoding): the built-in schedule splits its reduction between the threads,
// each reading its rows of the weight as one run of memory (TileSpec::k_outer), where no panels
// are packed for it (they would cut each run into one per panel: [1, 1280] x [1280, 1000] took
// 583 us against 67).
bool reads_weight_in_parts(int64_t rows, int64_t weight_bytes);

// Whether bf16 contractions compiled for `target` sum pairs of products with vdpbf16ps (Halide 14
// emits it only with avx512_sapphirerapids, which the target keeps for such graphs where the CPU
// has AVX512_BF16) rather than widen their operands to f32 for the FMA's tiles: only where the
// instruction does more multiply-adds a cycle. AMD's Zen 4 and Zen 5 run it at their FMA's rate,
// 32 products an instruction to 16 (hjit-bench --low-precision: 1.9-2.1x the FP32 peak); Intel's
// Sapphire Rapids at half its FMA's multiply-adds (125-148 against 266 GFLOP/s, 2 threads), where
// the widened forms ran 1.4-2.1x faster: a 3x3 convolution of 256 channels at 28x28 9.9 -> 5.8 ms,
// [1, 768] x [768, 3072] 495 -> 234 us, ResNet-50 under autocast 119-147 -> 66-88 ms (f32: 68).
// Read off the CPU's vendor, as the built-in schedule's identity (the compile cache's key) is.
bool bf16_dot_products(const Halide::Target& target);

// Binds `data` of `type` as a hidden input and returns the value of it at `args` (Halide order),
// in the compute type.
Halide::Expr bind_constant(LoweredPipeline& p, const TensorType& type, ConstData data, const std::vector<Halide::Expr>& args);
// The same, returning the parameter (its values in the storage type).
Halide::ImageParam bind_constant_param(LoweredPipeline& p, const TensorType& type, ConstData data);

struct LoweredPipeline {
  const Graph* graph = nullptr;
  // Dynamic sizes (jit's dynamic_dims): the extents and attributes that vary, and each symbol's
  // value in the pipeline (an input buffer's extent). Null and empty for a pipeline of fixed sizes.
  const SymbolicSizes* dynamic = nullptr;
  std::vector<Halide::Expr> symbols;
  // Set by apply_schedule: the smallest value of every symbol the scheduled pipeline serves.
  int64_t min_dynamic_size = 0;
  Halide::Target target;
  std::vector<Stage> stages;              // indexed by node id
  std::vector<Halide::ImageParam> params; // indexed like graph->inputs; undefined when unused
  // Values passed to the pipeline as hidden inputs: the graph's constants, and fills that are not
  // finite (an inf or nan written into the code as a literal is poison to LLVM's fast-math flags,
  // which Halide sets: `select(mask, -inf, x)` would lose its select).
  std::vector<Halide::ImageParam> const_params;
  std::vector<ConstData> const_data;
  std::vector<TensorType> const_types;
  std::vector<Halide::Func> outputs;      // one per graph output, then one per update
  std::vector<int> output_node;           // the node each output computes
  // Wrapper funcs that only convert a node to its storage type (or copy an input); may be empty.
  std::vector<bool> output_is_wrapper;
  // Set by the lowering of an op that checks its indices (Halide's require()): the pipeline then
  // has a failure of its own to report, which needs Halide's assertions (codegen.cpp).
  bool checks_indices = false;
};

}  // namespace hjit::backend
