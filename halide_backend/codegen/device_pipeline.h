// The Halide::Pipeline every compile path builds (in-process, shared object, export, statement),
// with the lowering passes a device target needs, and those of code whose buffers hjit makes.
#pragma once
#include <vector>

#include <Halide.h>

namespace hjit::backend {

// For OpenCL targets, 64-bit immediates are rebuilt from 32-bit halves: Halide 14's OpenCL code
// generator prints an f64 immediate through a 32-bit float ("(double) float_from_bits(...)": an
// f64 mean's 1/24 lost 29 bits) and cuts 64-bit integer immediates to their low 32 bits. (A
// custom lowering pass: it runs after Halide's last simplification, which would fold them back.)
//
// Who makes the buffers the code is called with. hjit makes them itself for its own calls: dense,
// of the types and sizes compiled for, every dimension the pipeline reads inside. Halide's checks
// of its arguments (some 20 per buffer: type, dimensions, strides, extents, the region read, host
// pointer, alignment) are then dead weight, and they were most of the code: a part of a training
// step with 45 buffers had 12,459 lines of assembly with them and 4,801 without, and LLVM took
// twice as long over it. ByHjit drops them at the end of lowering, for CPU code (a bad index, a
// library call's status and a failed allocation are still reported). A function exported for
// others keeps them, as GPU code does.
enum class Buffers { ByHjit, ByCaller };
//
// Every target: a schedule Halide proves cannot compute the pipeline (its always-failing assertion
// of explicit bounds or storage folds too small, which lowering without assertions would drop)
// throws CompileError while lowering.
//
// A target with NoAsserts (CPU code is lowered with it: lowering_target() in codegen.h) has no
// check of a heap allocation either: ByHjit code then runs the statements that use an allocation
// only when it was made, and hjit's allocator notes the failure, which the call reports as an
// OutOfMemoryError.
Halide::Pipeline device_ready_pipeline(const std::vector<Halide::Func>& outputs, const Halide::Target& target,
                                       Buffers buffers);

}  // namespace hjit::backend
