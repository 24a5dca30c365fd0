// A schedule as a value: what a scheduler decided for a pipeline, as data that can be printed,
// parsed, compared, stored and applied later (apply_schedule.h), instead of side effects on Funcs.
// Halide-free, so tuning tools and caches can hold schedules without Halide.h.
//
// Text form, one directive per line, after a header:
//   hjit-schedule 1
//   source built-in threads=2
//   note n7_add: vec16 par(d1,d2)
//   n5_matmul_acc compute_at n7_add d0_t
//   n5_matmul_acc.update(0) split d0 d0_t d0_i 32 Auto
// Names are canonical: Halide's uniquifying suffixes ($1, $2, ...) are removed, so that the same
// graph lowered in another process (or twice in one) has the same schedule text.
#pragma once
#include <string>
#include <vector>

#include "halide_backend/lowering/names.h"

namespace hjit::backend {

struct Directive {
  std::string func;               // canonical Func name
  int update = -1;                // -1: the Func (its pure definition); k: its update definition k
  std::string verb;               // a Halide scheduling method: split, vectorize, compute_at, ...
  std::vector<std::string> args;  // its arguments, each one token (names, numbers, tail strategies)
  bool operator==(const Directive&) const = default;
};

struct Schedule {
  std::string source;               // who decided it, with every parameter that changes the result
  std::vector<std::string> notes;   // a human summary, one line per loop nest (for explain())
  std::vector<Directive> directives;

  std::string str() const;
  // Throws ValueError naming the line when `text` is not a schedule's text form.
  static Schedule parse(const std::string& text);
  bool operator==(const Schedule&) const = default;
};


// The verbs apply_schedule() knows: the number of arguments each takes (min, max), and whether it
// schedules a Func as a whole (compute_at, store_in, ...) rather than one of its definitions.
struct VerbArity {
  const char* verb;
  int min_args, max_args;
  bool func_level = false;
  bool takes(size_t args) const { return int(args) >= min_args && int(args) <= max_args; }
};
const std::vector<VerbArity>& schedule_verbs();
const VerbArity* find_verb(const std::string& verb);  // null for an unknown verb

}  // namespace hjit::backend
