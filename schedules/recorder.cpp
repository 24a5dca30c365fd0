#include "schedules/recorder.h"

namespace hjit::schedules {
namespace {

template <class V>
std::vector<std::string> names_of(const std::vector<V>& vars) {
  std::vector<std::string> names;
  for (const auto& v : vars) names.push_back(v.name());
  return names;
}

}  // namespace

const char* tail_name(Halide::TailStrategy t) {
  using T = Halide::TailStrategy;
  switch (t) {
    case T::RoundUp: return "RoundUp";
    case T::GuardWithIf: return "GuardWithIf";
    case T::Predicate: return "Predicate";
    case T::PredicateLoads: return "PredicateLoads";
    case T::PredicateStores: return "PredicateStores";
    case T::ShiftInwards: return "ShiftInwards";
    case T::Auto: return "Auto";
  }
  return "Auto";
}

void StageRef::add(std::string verb, std::vector<std::string> args) {
  s_->directives.push_back(backend::Directive{func_, update_, std::move(verb), std::move(args)});
}

StageRef& StageRef::split(const Halide::VarOrRVar& old, const Halide::VarOrRVar& outer, const Halide::VarOrRVar& inner,
                          int factor, Halide::TailStrategy tail) {
  add("split", {old.name(), outer.name(), inner.name(), std::to_string(factor), tail_name(tail)});
  return *this;
}

StageRef& StageRef::fuse(const Halide::VarOrRVar& inner, const Halide::VarOrRVar& outer, const Halide::VarOrRVar& fused) {
  add("fuse", {inner.name(), outer.name(), fused.name()});
  return *this;
}

StageRef& StageRef::reorder(const std::vector<Halide::VarOrRVar>& order) {
  add("reorder", names_of(order));
  return *this;
}

StageRef& StageRef::vectorize(const Halide::VarOrRVar& v, int factor, Halide::TailStrategy tail) {
  if (factor == 0) add("vectorize", {v.name()});
  else add("vectorize", {v.name(), std::to_string(factor), tail_name(tail)});
  return *this;
}

StageRef& StageRef::gpu_blocks(const std::vector<Halide::VarOrRVar>& vars) {
  add("gpu_blocks", names_of(vars));
  return *this;
}

StageRef& StageRef::gpu_threads(const std::vector<Halide::VarOrRVar>& vars) {
  add("gpu_threads", names_of(vars));
  return *this;
}

StageRef& StageRef::gpu_single_thread() {
  add("gpu_single_thread", {});
  return *this;
}

StageRef& StageRef::unroll(const Halide::VarOrRVar& v) {
  add("unroll", {v.name()});
  return *this;
}

StageRef& StageRef::parallel(const Halide::VarOrRVar& v) {
  add("parallel", {v.name()});
  return *this;
}

StageRef& StageRef::atomic() {
  add("atomic", {});
  return *this;
}

StageRef& StageRef::allow_race_conditions() {
  add("allow_race_conditions", {});
  return *this;
}

StageRef& StageRef::prefetch(const std::string& input, const Halide::VarOrRVar& at, const Halide::VarOrRVar& from, int offset) {
  add("prefetch", {input, at.name(), from.name(), std::to_string(offset)});
  return *this;
}

FuncRef StageRef::rfactor(const Halide::RVar& r, const Halide::Var& v) {
  const std::string intm = func_ + "_intm";
  add("rfactor", {r.name() + ":" + v.name(), intm});
  return FuncRef(s_, intm);
}

FuncRef& FuncRef::compute_root() {
  add("compute_root", {});
  return *this;
}

FuncRef& FuncRef::compute_at(const FuncRef& consumer, const Halide::VarOrRVar& loop) {
  add("compute_at", {consumer.name(), loop.name()});
  return *this;
}

FuncRef FuncRef::in(const FuncRef& consumer) {
  const std::string wrapper = func_ + "_in_" + consumer.name();
  add("in", {consumer.name(), wrapper});
  return FuncRef(s_, wrapper);
}

FuncRef& FuncRef::reorder_storage(const std::vector<Halide::Var>& order) {
  add("reorder_storage", names_of(order));
  return *this;
}

}  // namespace hjit::schedules
