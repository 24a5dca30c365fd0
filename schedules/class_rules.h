// How the schedulers treat each schedule class of the op table (graph/include/hjit/op_list.h): one
// entry per class for the CPU's built-in schedule and one for the GPU's. Both are switches over
// every class without a default, compiled with -Werror=switch: a class added to the table without
// its entries fails the build, and an op's row alone says how it is scheduled.
#pragma once
#include <cstdint>

#include "graph/op_def.h"

namespace hjit::schedules {

// A contraction's register tile (contraction.h's tile_spec): which dimensions it spans.
enum class Tile : uint8_t { None, Matmul, Convolution, ConvolutionWeightGrad, Attention };
// How a fold's update definition is scheduled (reduction.h).
enum class Fold : uint8_t { None, Plain, Pair, Scan };
// Whether a stage's operands are stored rather than inlined into it.
enum class Operands : uint8_t {
  Inlined,             // computed where they are read
  Stored,              // every element reads them again (a random draw's key)
  StoredUnlessCopied,  // a contraction reads each element many times; one read only through a copy
                       // of the contraction's own (a padded input) is computed into that copy
};

struct CpuRules {
  // An element-wise value of it read by two or more stages is stored (per row of its reader, or at
  // root) rather than recomputed in each (BuiltinParams::store_expensive).
  bool stored_when_reused = false;
  // A long chain of dependent instructions per element: a loop nest computing it runs several
  // vectors side by side, so that the core has independent work while each chain waits.
  bool long_latency = false;
  // Its value without an accumulator is stored in a nest of its own, never inlined: a small
  // pooling window is one expression of its taps (lower_ops.cpp), which a reader viewing it as
  // rows (a 1x1 convolution's operand) would gather tap by tap.
  bool stored_alone = false;
  Operands operands = Operands::Inlined;
  Tile tile = Tile::None;  // computed per register tile of the nest that reads it
  Fold fold = Fold::None;
};
CpuRules cpu_rules(ScheduleClass c);

// The kernel a GPU schedule makes of a stage (schedules/gpu.cpp); any stage whose shape the
// specialised kernel does not fit takes the tiled one.
enum class GpuKernel : uint8_t {
  Tiled,                // 2-D thread tiles over its outputs, a reduction looped in each thread
  BlockedMatmul,        // whole 64x16 output tiles, 4x8 outputs a thread in registers
  BlockedConvolution,   // whole 8x4x32 output tiles, 4x4 outputs a thread in registers
  AttentionQueryTiles,  // a block per tile of query rows, the scores in shared memory
  OnHost,               // index checks, whose messages a kernel cannot format: on the host
};
struct GpuRules {
  GpuKernel kernel = GpuKernel::Tiled;
  bool shared_memory_fold = false;  // a row or whole-tensor fold shares its work across a block's threads
  bool operands_stored = false;     // each element is read many times, or on the host
};
GpuRules gpu_rules(ScheduleClass c);

inline CpuRules cpu_rules(OpKind op) { return cpu_rules(schedule_class(op)); }
inline GpuRules gpu_rules(OpKind op) { return gpu_rules(schedule_class(op)); }

}  // namespace hjit::schedules
