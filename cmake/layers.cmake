# hjit's layers: each top-level folder of the library and the folders it may include, the one place
# these arrows are written (docs/architecture.md draws them). A public header <hjit/x.h> belongs to
# the folder whose include/hjit holds it; "frontend-public" is the frontend's public headers only.
# Where a lower layer must call an upper one, the upper registers an interface with the lower
# (schedules/ registers the backend's Scheduler, tuning/ its TunedStore).
# tools/, bench/, examples/ and tests/ sit above them all and may include anything.
set(HJIT_LAYERS support graph distributed halide_backend schedules frontend tuning onnx_import nn)
set(HJIT_LAYER_USES_support "")
set(HJIT_LAYER_USES_graph support)
# The process group and the collectives' exchanges: what the eager kernels and the compiled
# graphs' host steps both run.
set(HJIT_LAYER_USES_distributed graph support)
set(HJIT_LAYER_USES_halide_backend distributed graph support)
set(HJIT_LAYER_USES_schedules halide_backend graph support)
set(HJIT_LAYER_USES_frontend halide_backend distributed graph support)
# Tuning traces through the frontend's public headers and compiles its candidates with the
# backend's compile() itself (it times their code, it binds no tensors).
set(HJIT_LAYER_USES_tuning frontend-public schedules halide_backend distributed graph support)
# The ONNX importer is a user of the public API: it converts nodes into the ops any program calls.
set(HJIT_LAYER_USES_onnx_import frontend-public support)
# Layers (hjit::nn) are C++ code over the public ops, as a user's model is.
set(HJIT_LAYER_USES_nn frontend-public support)

# Inside a layer, its sub-folders in order (HJIT_SUBLAYERS_<layer>): a file of one includes the
# layer's own root files and the sub-folders before its own, never one after it; the root's
# files include no sub-folder.
# The backend's spine (docs/architecture.md): the kernel providers (graph matching, planning,
# kernels), lowering (graph -> Funcs), scheduling (schedule values, applying them, trials), the
# runtime (executables, Halide's runtime, devices, the linker), code generation, the cache tiers,
# the build (compile(): the cache, partitioning, host steps, the passes of one pipeline) and export.
set(HJIT_SUBLAYERS_halide_backend providers lowering scheduling runtime codegen cache build export)
