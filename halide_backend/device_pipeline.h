// The Halide::Pipeline every compile path builds (in-process, shared object, export, statement),
// with the lowering passes a device target needs.
#pragma once
#include <vector>

#include <Halide.h>

namespace hjit::backend {

// For OpenCL targets, 64-bit immediates are rebuilt from 32-bit halves: Halide 14's OpenCL code
// generator prints an f64 immediate through a 32-bit float ("(double) float_from_bits(...)": an
// f64 mean's 1/24 lost 29 bits) and cuts 64-bit integer immediates to their low 32 bits. (A
// custom lowering pass: it runs after Halide's last simplification, which would fold them back.)
Halide::Pipeline device_ready_pipeline(const std::vector<Halide::Func>& outputs, const Halide::Target& target);

}  // namespace hjit::backend
