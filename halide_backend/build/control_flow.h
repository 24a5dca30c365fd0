// Graphs with host steps: control flow ops (cond, while_loop, scan) and collectives. The stretches
// of ordinary nodes between them compile to pipelines as usual; each control flow op runs on the
// host, calling the compiled pipelines of its branches or body: a loop of compiled bodies driven by
// the host, the carries passed between two sets of buffers without copies, the scanned slices read
// and the stacked results written in place. Each collective is an exchange with the other ranks
// (distributed/collectives.h); all_reduces are bucketed first (graph/passes/bucket_collectives.h)
// and run while the steps after them do, until a step reads their results.
#pragma once
#include <memory>

#include "halide_backend/backend.h"

namespace hjit::backend {

// Control flow ops, and collectives (an exchange with the other ranks between two pipelines).
bool has_host_steps(const Graph& g);

// Compiles g's parts and its ops' graphs (each through compile(), so each is cached).
std::shared_ptr<const Executable> compile_control_flow(const Graph& g, const Options& options);

}  // namespace hjit::backend
