#include "schedules/class_rules.h"

namespace hjit::schedules {

CpuRules cpu_rules(ScheduleClass c) {
  using C = ScheduleClass;
  switch (c) {
    case C::Source:
    case C::Elementwise:
    case C::Check:
    case C::Movement:
    case C::Gather:
    case C::ControlFlow:
    case C::Collective:
      return {};
    // exp, log, tanh, ...: a polynomial after a range reduction, or one slow instruction. Four
    // vectors at a time: W2 (selu) ran 1.13x faster with four than with one, and eight spill
    // registers (exp alone: 1.13x slower than four).
    case C::LongLatency:
      return {.stored_when_reused = true, .long_latency = true};
    // pow: a scalar libm call per lane, which more vectors at a time do not help.
    case C::ScalarCall:
      return {.stored_when_reused = true};
    case C::Reduction:
    case C::PoolingGrad:
      return {.fold = Fold::Plain};
    // A window reads each element several times (2.25 for 3x3 windows of stride 2): what it reads
    // is stored (a relu then runs once, in its convolution's tiles), or computed into the padded
    // copy where the windows are padded.
    case C::Pooling:
      return {.stored_alone = true, .operands = Operands::StoredUnlessCopied, .fold = Fold::Plain};
    case C::ArgReduction:
      return {.fold = Fold::Pair};
    case C::Scan:
      return {.fold = Fold::Scan};
    // Its network's steps are helpers, each stored at root (schedule_helpers_at_root): inlined,
    // every step would compute the one before it twice.
    case C::Sort:
      return {};
    case C::Matmul:
      return {.operands = Operands::StoredUnlessCopied, .tile = Tile::Matmul, .fold = Fold::Plain};
    case C::Convolution:
      return {.operands = Operands::StoredUnlessCopied, .tile = Tile::Convolution, .fold = Fold::Plain};
    case C::ConvolutionWeightGrad:
      return {.operands = Operands::StoredUnlessCopied, .tile = Tile::ConvolutionWeightGrad, .fold = Fold::Plain};
    case C::Attention:
      return {.operands = Operands::StoredUnlessCopied, .tile = Tile::Attention, .fold = Fold::Plain};
    // Every element of a draw reads the key, and keys are often drawn themselves: inlined, each
    // element would redo the draw.
    case C::Random:
      return {.operands = Operands::Stored};
  }
  throw InternalError("hjit: no CPU rules for schedule class " + std::to_string(int(c)));
}

GpuRules gpu_rules(ScheduleClass c) {
  using C = ScheduleClass;
  switch (c) {
    case C::Source:
    case C::Elementwise:
    case C::LongLatency:
    case C::ScalarCall:
    case C::ArgReduction:  // its (index, value) pair is not folded across threads
    case C::Scan:
    case C::Sort:  // a root kernel per network step
    case C::Pooling:
    case C::PoolingGrad:
    case C::Movement:
    case C::Random:
    case C::ControlFlow:
    case C::Collective:
      return {};
    case C::Reduction:
      return {.shared_memory_fold = true};
    case C::Matmul:
      return {.kernel = GpuKernel::BlockedMatmul, .operands_stored = true};
    case C::Convolution:
      return {.kernel = GpuKernel::BlockedConvolution, .operands_stored = true};
    case C::ConvolutionWeightGrad:
      return {.operands_stored = true};
    case C::Attention:
      return {.kernel = GpuKernel::AttentionQueryTiles, .operands_stored = true};
    // Their lowering checks indices with Halide's require(), whose error message a GPU kernel
    // cannot format; the host cannot run device code (libdevice's functions), so their operands
    // are stored.
    case C::Check:
    case C::Gather:
      return {.kernel = GpuKernel::OnHost, .operands_stored = true};
  }
  throw InternalError("hjit: no GPU rules for schedule class " + std::to_string(int(c)));
}

}  // namespace hjit::schedules
