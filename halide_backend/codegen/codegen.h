// Code for a scheduled pipeline: object code linked into a shared object and loaded with dlopen
// (what the disk cache stores, and what a later process loads without Halide or LLVM running),
// or, where no linker is installed, Halide's in-process JIT.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "halide_backend/codegen/device_pipeline.h"
#include "halide_backend/codegen/target.h"
#include "halide_backend/lowering/lowered.h"
#include "halide_backend/runtime/executable.h"
#include "halide_backend/runtime/linker.h"

namespace hjit::backend {

// The arguments of the function compiled from p, and the bytes of its hidden inputs.
PipelineInfo describe(const Graph& g, const LoweredPipeline& p, std::string function, std::string summary,
                      std::string schedule);

// The Halide arguments of p's function (in the order of describe()'s args) and its outputs.
std::vector<Halide::Argument> halide_arguments(const LoweredPipeline& p);
std::vector<Halide::Func> defined_outputs(const LoweredPipeline& p);

// The Halide target p's code is generated for (jit: for Halide's in-process JIT, else a shared
// object). Without Halide's assertions where nothing in p needs them: hjit makes the buffers (see
// Buffers in device_pipeline.h), and what is left to check is an index (require()), a library
// call's status, sizes that vary per call, and heap allocations, which GuardAllocations covers.
// (CPU code is lowered without assertions whatever this says: lowering_target().)
Halide::Target code_target(const LoweredPipeline& p, const Target& target, bool jit);

// The target p is lowered for: code_target() without Halide's assertions on the CPU. Halide's
// lowering builds some 20 checks per buffer and its simplifier carries them through every pass
// (after a run of assertions it goes over the rest of the statement once for each fact they
// state): the parts of a GPT training step whose embedding and cross entropy check indices lowered
// 1.4-1.6 times as long with them. Whatever a check of p needs is an assertion code generation
// makes (require()'s, heap allocations') or one lowering makes whatever the target (a library
// call's status), so the code of a module lowered for this and generated for code_target() keeps
// every check ByHjit code keeps.
Halide::Target lowering_target(const LoweredPipeline& p, const Target& target, bool jit);

// The module of p's function: lowered for lowering_target(), its code generated for code_target()
// (what compile_shared_object and jit_compile compile; an exported library's CPU pipelines are the
// same modules under their own names). `buffers`: who makes the buffers it is called with.
Halide::Module pipeline_module(const LoweredPipeline& p, const Target& target, const std::string& function, bool jit,
                               Buffers buffers = Buffers::ByHjit);

// Compiles p to object code for `target`, links it into a shared object and returns the shared
// object's bytes. nullopt when this machine has no linker (hjit then uses
// the JIT, and says so once). Throws Halide::CompileError when Halide rejects the pipeline.
std::optional<std::string> compile_shared_object(LoweredPipeline& p, const Target& target, PipelineInfo& info);

// Loads a shared object from its bytes (checked by the caller). Throws CompileError when the
// dynamic loader rejects it.
std::shared_ptr<HalideExecutable> load_shared_object(std::string_view bytes, PipelineInfo info);

// The device code (PTX for CUDA) of a compiled module's GPU kernels; empty when it has none.
std::string device_code_of(const Halide::Module& module);

// Compiles p in process with Halide's JIT.
std::shared_ptr<HalideExecutable> jit_compile(LoweredPipeline& p, const Target& target, PipelineInfo info);

}  // namespace hjit::backend
