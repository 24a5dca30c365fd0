// How a collective combines the ranks' values (the `op` attribute of all_reduce and reduce_scatter,
// as MPI's MPI_SUM ... and JAX's psum / pmax / pmin name them).
#pragma once
#include <cstdint>

namespace hjit::dist {

enum class ReduceOp : uint8_t {
  Sum,   // bool: any
  Mean,  // the sum divided by the world size; floating point only
  Max,   // bool: any
  Min,   // bool: all
  Prod,  // bool: all
};
inline constexpr int kNumReduceOps = 5;

inline const char* reduce_op_name(ReduceOp op) {
  static constexpr const char* kNames[kNumReduceOps] = {"sum", "mean", "max", "min", "prod"};
  return kNames[int(op)];
}

}  // namespace hjit::dist
