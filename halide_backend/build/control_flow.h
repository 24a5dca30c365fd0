// Graphs with host steps: control flow ops (cond, while_loop, scan, checkpoint) and collectives.
// The stretches of ordinary nodes between them compile to pipelines as usual; the host steps run
// between them (runtime/host_steps.h). All_reduces are bucketed first
// (graph/passes/bucket_collectives.h) and run while the steps after them do, until a step reads
// their results.
#pragma once
#include <memory>

#include "halide_backend/backend.h"

namespace hjit::backend {

// Control flow ops, and collectives (an exchange with the other ranks between two pipelines).
bool has_host_steps(const Graph& g);

// Compiles g's parts and its ops' graphs (each through compile(), so each is cached): a cache hit
// where every one was, loaded where every one was found or loaded. With dynamic sizes the parts
// compile for every size and a scan's trip count may vary (a ValueError where anything else of a
// host step does).
Compiled compile_control_flow(const Graph& g, const Options& options);

}  // namespace hjit::backend
