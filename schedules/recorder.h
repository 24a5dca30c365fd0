// The schedules decide; they do not touch Funcs. FuncRef and StageRef mirror the Halide scheduling
// methods the schedules use, and record each call as a directive of a Schedule value, which the
// backend applies (halide_backend/scheduling/apply_schedule.h). Vars and RVars are only names here.
#pragma once
#include <string>
#include <vector>

#include <Halide.h>

#include "halide_backend/scheduling/schedule_value.h"

namespace hjit::schedules {

using backend::Schedule;

class FuncRef;

class StageRef {
 public:
  StageRef(Schedule* s, std::string func, int update) : s_(s), func_(std::move(func)), update_(update) {}

  StageRef& split(const Halide::VarOrRVar& old, const Halide::VarOrRVar& outer, const Halide::VarOrRVar& inner,
                  int factor, Halide::TailStrategy tail = Halide::TailStrategy::Auto);
  StageRef& fuse(const Halide::VarOrRVar& inner, const Halide::VarOrRVar& outer, const Halide::VarOrRVar& fused);
  StageRef& reorder(const std::vector<Halide::VarOrRVar>& innermost_first);
  template <class... V>
  StageRef& reorder(const Halide::VarOrRVar& first, const V&... rest) {
    return reorder(std::vector<Halide::VarOrRVar>{first, Halide::VarOrRVar(rest)...});
  }
  // factor 0: the whole loop.
  StageRef& vectorize(const Halide::VarOrRVar& v, int factor = 0, Halide::TailStrategy tail = Halide::TailStrategy::Auto);
  StageRef& unroll(const Halide::VarOrRVar& v);
  StageRef& parallel(const Halide::VarOrRVar& v);
  // Lets an associative update's reduction variable be vectorized (a dot product's lanes).
  StageRef& atomic();
  // Lets a sorting network's step loop be vectorized and run in parallel (its pairs are
  // independent: each step reads one copy of the row and writes the other).
  StageRef& allow_race_conditions();
  // Halide's prefetch of an input buffer (named as the pipeline names its parameter): at each
  // iteration of `at`, the elements that iteration `offset` steps later of `from` reads, not
  // bounded by the buffer (x86's prefetches never fault).
  StageRef& prefetch(const std::string& input, const Halide::VarOrRVar& at, const Halide::VarOrRVar& from, int offset);
  // GPU loops: block and thread dimensions (innermost first, up to three each), or one thread.
  StageRef& gpu_blocks(const std::vector<Halide::VarOrRVar>& innermost_first);
  StageRef& gpu_threads(const std::vector<Halide::VarOrRVar>& innermost_first);
  StageRef& gpu_single_thread();
  // The intermediate Func of Halide's rfactor, named as Halide names it (<func>_intm).
  FuncRef rfactor(const Halide::RVar& r, const Halide::Var& v);

 protected:
  void add(std::string verb, std::vector<std::string> args);
  Schedule* s_;
  std::string func_;
  int update_;
};

class FuncRef : public StageRef {
 public:
  FuncRef(Schedule* s, const Halide::Func& f) : StageRef(s, backend::canonical_name(f.name()), -1) {}
  FuncRef(Schedule* s, std::string canonical) : StageRef(s, std::move(canonical), -1) {}
  const std::string& name() const { return func_; }
  FuncRef& compute_root();
  FuncRef& compute_at(const FuncRef& consumer, const Halide::VarOrRVar& loop);
  FuncRef& reorder_storage(const std::vector<Halide::Var>& innermost_first);
  // Halide's Func::in: a copy of this Func that only `consumer` reads, to be scheduled on its own
  // (a packed panel of a matmul's operand); named <func>_in_<consumer>.
  FuncRef in(const FuncRef& consumer);
  StageRef update(int k = 0) { return StageRef(s_, func_, k); }
};

const char* tail_name(Halide::TailStrategy t);

}  // namespace hjit::schedules
