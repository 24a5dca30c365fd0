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

  // fullgraph = false: how often each small segment's graph (by the hash of its text) has run
  // eagerly, so that one seen often enough is compiled (frontend/jit/graph_breaks.cpp).
  std::mutex segments_mu;
  std::unordered_map<uint64_t, int> eager_segments;

  // The latest compilation's schedule summary (JitStats::schedule).
  void set_schedule(std::string summary);
  std::string schedule() const;

 private:
  mutable std::mutex schedule_mu_;
  std::string schedule_;
};

}  // namespace hjit::detail
