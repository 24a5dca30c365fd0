// What a jitted function keeps between calls: its options, its versions, and its counters. Each
// feature of a cached call is a unit of its own in this folder; this is what they share.
#pragma once
#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>

#include <hjit/jit.h>

#include "frontend/compiled/function.h"
#include "frontend/jit/dynamic_sizes.h"
#include "frontend/jit/retraces.h"
#include "frontend/jit/version_cache.h"

namespace hjit::detail {

struct JitCore::State {
  explicit State(JitOptions o);

  const JitOptions opt;
  FunctionRequest request;  // checked once, when jit() was called
  VersionCache cache;
  Retraces retraces;
  DynamicSizes dynamic;
  std::atomic<int64_t> traces{0}, compiles{0}, loaded{0}, hits{0}, compile_us{0}, guard_failures{0}, graph_breaks{0};
  std::atomic<int64_t> update_bytes_copied{0}, donated_bytes_reused{0}, dynamic_entries{0};

  // fullgraph = false (frontend/jit/graph_breaks.cpp): the segments met so far, by their graph
  // as traced: how often a small one has run eagerly (one seen often enough is compiled), and the
  // compiled function of one compiled, kept so that the next call neither optimizes nor looks it up.
  struct Segment {
    int eager_runs = 0;
    Graph optimized;
    std::shared_ptr<CompiledFunction> fn;
  };
  std::mutex segments_mu;
  std::unordered_map<std::string, Segment> segments;  // by graph_breaks.cpp's segment_key

  // The latest compilation's schedule summary (JitStats::schedule).
  void set_schedule(std::string summary);
  std::string schedule() const;

 private:
  mutable std::mutex schedule_mu_;
  std::string schedule_;
};

}  // namespace hjit::detail
