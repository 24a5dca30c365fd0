// What a tuning database is keyed by: the pipeline's normalized graph (its text without names,
// and its constants), its input and output types, the target, and the hjit and Halide versions.
// Two functions that trace to the same graph share their tuned schedule.
#pragma once
#include <string>

#include <hjit/graph.h>

#include "tuning/database.h"

namespace hjit::tuning {

// The graph as its text rebuilds it: node ids (and with them the names of the Halide Funcs a
// schedule names) depend on the order a trace happened to create nodes in, the text does not.
// Tuning and lookups both schedule this form, so that a schedule found for one trace applies to
// every trace with the same text.
Graph canonical_graph(const Graph& g);

// The record a tuning run writes and jit() looks up (id, times and candidates not filled).
PipelineRecord describe_pipeline(const Graph& g, Device device, const std::string& name);

}  // namespace hjit::tuning
