#include "halide_backend/scheduling/apply_schedule.h"

#include <charconv>
#include <limits>
#include <optional>

namespace hjit::backend {

using Halide::RVar;
using Halide::Var;
using Halide::VarOrRVar;

std::map<std::string, Halide::Func> funcs_by_canonical_name(const LoweredPipeline& p) {
  std::map<std::string, Halide::Func> out;
  for (const Halide::Func& f : p.outputs) {
    if (!f.defined()) continue;
    std::map<std::string, Halide::Internal::Function> reached = Halide::Internal::find_transitive_calls(f.function());
    reached.emplace(f.name(), f.function());
    for (auto& [name, fn] : reached) {
      auto [it, inserted] = out.emplace(canonical_name(name), Halide::Func(fn));
      if (!inserted && it->second.name() != name)
        throw InternalError("hjit: two Funcs of one pipeline are both named '" + it->first + "'");
    }
  }
  return out;
}

std::set<int> extern_stages_of(const Schedule& s) {
  std::set<int> out;
  for (const Directive& d : s.directives) {
    if (d.verb != "extern") continue;
    int id = -1;
    auto [end, ec] = std::from_chars(d.func.data() + 1, d.func.data() + d.func.size(), id);
    if (d.func.empty() || d.func[0] != 'n' || ec != std::errc() || *end != '_' || id < 0)
      throw ValueError("hjit: schedule: '" + d.func + "' is no stage's name, so it cannot be extern");
    out.insert(id);
  }
  return out;
}

void add_extern_directives(const LoweredPipeline& p, Schedule& s) {
  std::vector<Directive> externs;
  for (const Stage& st : p.stages)
    if (st.is_extern)
      externs.push_back(Directive{canonical_name(st.func.name()), -1, "extern", {st.extern_kind}});
  s.directives.insert(s.directives.begin(), externs.begin(), externs.end());
}

namespace {

// A number a directive passes to Halide as an int: within int's range (from `least` up).
int number(const std::string& s, int64_t least = std::numeric_limits<int>::min()) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) throw ValueError("hjit: schedule: '" + s + "' is not a number");
  if (v < least || v > std::numeric_limits<int>::max())
    throw ValueError("hjit: schedule: " + s + " is out of range (" + std::to_string(least) + " to " +
                     std::to_string(std::numeric_limits<int>::max()) + ")");
  return int(v);
}
int factor(const std::string& s) { return number(s, 1); }

// The widest vectorized loop and the longest unrolled one a schedule may make. Halide 14 divides
// by zero (SIGFPE) at 65536 vector lanes and takes minutes over thousands; the built-in schedules
// and the autoschedulers stay far below this.
constexpr int64_t kMaxLoopWidth = 256;

Halide::TailStrategy tail_strategy(const std::string& s) {
  using T = Halide::TailStrategy;
  static const std::pair<const char*, T> names[] = {
      {"Auto", T::Auto},           {"GuardWithIf", T::GuardWithIf}, {"ShiftInwards", T::ShiftInwards},
      {"RoundUp", T::RoundUp},     {"Predicate", T::Predicate},     {"PredicateLoads", T::PredicateLoads},
      {"PredicateStores", T::PredicateStores}};
  for (auto& [name, t] : names)
    if (s == name) return t;
  throw ValueError("hjit: schedule: unknown tail strategy '" + s + "'");
}

Halide::MemoryType memory_type(const std::string& s) {
  using M = Halide::MemoryType;
  static const std::pair<const char*, M> names[] = {{"Auto", M::Auto},           {"Heap", M::Heap},
                                                     {"Stack", M::Stack},         {"Register", M::Register},
                                                     {"GPUShared", M::GPUShared}, {"GPUTexture", M::GPUTexture},
                                                     {"LockedCache", M::LockedCache}, {"VTCM", M::VTCM},
                                                     {"AMXTile", M::AMXTile}};
  for (auto& [name, m] : names)
    if (s == name) return m;
  throw ValueError("hjit: schedule: unknown memory type '" + s + "'");
}

// Whether `name` is a reduction variable of the stage (its loops as scheduled so far).
bool is_rvar(const Halide::Stage& st, const std::string& name) {
  for (const auto& d : st.get_schedule().dims())
    if (d.var == name) return d.is_rvar();
  for (const auto& r : st.get_schedule().rvars())
    if (r.var == name) return true;
  return false;
}

// Whether the stage has a loop of that name, as Halide matches names: by the last part of a
// qualified one (an rfactor'ed intermediate's steps along K are qualified so).
bool has_loop(const Halide::Stage& st, const std::string& name) {
  for (const auto& d : st.get_schedule().dims())
    if (d.var == name || (d.var.size() > name.size() && d.var.ends_with("." + name))) return true;
  return false;
}

VarOrRVar var_of(const Halide::Stage& st, const std::string& name) {
  if (name == "__outermost") return Var::outermost();
  return is_rvar(st, name) ? VarOrRVar(RVar(name)) : VarOrRVar(Var(name));
}

// The same kind (Var or RVar) as `like`, named `name`.
VarOrRVar same_kind(const VarOrRVar& like, const std::string& name) {
  return like.is_rvar ? VarOrRVar(RVar(name)) : VarOrRVar(Var(name));
}

// A loop of any stage of f, for compute_at and store_at.
VarOrRVar loop_of(Halide::Func f, const std::string& name) {
  if (name == "__outermost") return Var::outermost();
  if (is_rvar(f, name)) return RVar(name);
  for (int k = 0; k < f.num_update_definitions(); ++k)
    if (is_rvar(f.update(k), name)) return RVar(name);
  return Var(name);
}

class Applier {
 public:
  Applier(LoweredPipeline& p, bool guarded) : funcs_(funcs_by_canonical_name(p)), guarded_(guarded) {
    for (const Halide::ImageParam& in : p.params)
      if (in.defined()) inputs_.emplace(in.name(), in);
    for (const Halide::ImageParam& in : p.const_params)
      if (in.defined()) inputs_.emplace(in.name(), in);
    if (p.dynamic) find_dynamic_loops(p);
    else find_stage_extents(p);
  }

  // A pipeline of dynamic sizes: a split of a loop whose extent varies was decided at the traced
  // size (apply_schedule.h, DynamicTails). An update's split is always guarded (rounding up would
  // read past the inputs at sizes not a multiple).
  Halide::TailStrategy tail(const std::string& func, const std::string& loop, const std::string& name, int update,
                            int64_t factor) {
    using T = Halide::TailStrategy;
    const T t = tail_strategy(name);
    const int64_t scale = dynamic_scale(func, loop);
    if (scale == 0) return t;
    if (guarded_ && (t == T::Auto || t == T::RoundUp || t == T::ShiftInwards)) return T::GuardWithIf;
    if (update >= 0 && (t == T::Auto || t == T::RoundUp)) return T::GuardWithIf;
    if (t == T::Auto || t == T::ShiftInwards) min_dynamic_size_ = std::max(min_dynamic_size_, scale * factor);
    if (t == T::RoundUp) return T::GuardWithIf;
    return t;
  }
  int64_t min_dynamic_size() const { return min_dynamic_size_; }

  void apply(const Directive& d) {
    Halide::Func f = func(d.func);
    if (d.verb == "extern") {  // already lowered so: nothing to schedule
      if (!f.is_extern()) throw ValueError("hjit: schedule: " + d.func + " was not lowered as an extern stage");
      return;
    }
    if (d.update >= f.num_update_definitions())
      throw ValueError("hjit: schedule: " + d.func + " has no update definition " + std::to_string(d.update));
    const VerbArity* verb = find_verb(d.verb);
    if (!verb) throw ValueError("hjit: schedule: unknown directive '" + d.verb + "'");
    if (verb->func_level && d.update >= 0) throw ValueError("hjit: schedule: '" + d.verb + "' applies to a Func, not an update");
    if (!verb->func_level && f.is_extern()) return apply_to_extern(f, d);
    if (verb->func_level) return apply_to_func(f, d);
    Halide::Stage st = d.update < 0 ? Halide::Stage(f) : f.update(d.update);
    apply_to_stage(st, d);
  }

 private:
  // Directives on a Func as a whole: where it is computed and stored, and its storage.
  void apply_to_func(Halide::Func f, const Directive& d) {
    const auto& a = d.args;
    const std::string& v = d.verb;
    if (v == "compute_root") {
      f.compute_root();
      // A stage computed at root is realized whole. Its consumers may need less (a gather's one
      // row, a slice's columns), and a split's tile larger than that region, shifted inwards,
      // would start below 0 and read the stage's inputs out of bounds (take(matmul(x, w), i),
      // a GRU's gates sliced from one matmul). Eager execution computes it whole too.
      if (auto g = whole_.find(d.func); g != whole_.end() && !f.is_extern())
        for (size_t k = 0; k < g->second.vars.size(); ++k) f.bound(g->second.vars[k], 0, int(g->second.extents[k]));
    } else if (v == "compute_inline") {
      f.compute_inline();
    } else if (v == "store_root") {
      f.store_root();
    } else if (v == "compute_at" || v == "store_at") {
      Halide::Func consumer = func(a[0]);
      VarOrRVar loop = loop_of(consumer, a[1]);
      if (v == "compute_at") loop.is_rvar ? f.compute_at(consumer, loop.rvar) : f.compute_at(consumer, loop.var);
      else loop.is_rvar ? f.store_at(consumer, loop.rvar) : f.store_at(consumer, loop.var);
    } else if (v == "in") {
      Halide::Func wrapper = f.in(func(a[0]));
      funcs_[a[1]] = wrapper;
      funcs_[canonical_name(wrapper.name())] = wrapper;
    } else if (v == "reorder_storage") {
      std::vector<Var> order;
      for (const std::string& n : a) order.emplace_back(n);
      f.reorder_storage(order);
    } else if (v == "bound") {
      f.bound(Var(a[0]), number(a[1]), number(a[2], 0));
    } else if (v == "bound_extent") {
      f.bound_extent(Var(a[0]), number(a[1], 0));
    } else if (v == "fold_storage") {
      f.fold_storage(Var(a[0]), factor(a[1]), a.size() < 3 || a[2] != "backward");
    } else if (v == "store_in") {
      f.store_in(memory_type(a[0]));
    } else if (v == "align_storage") {
      f.align_storage(Var(a[0]), factor(a[1]));
    } else {
      throw ValueError("hjit: schedule: unknown directive '" + v + "'");
    }
  }

  // An extern Func's loops are the regions Halide calls it for: they may be split by a factor that
  // divides the loop (a last part shifted inwards would overlap the one before, and a library may
  // sum into its output as it goes: two threads would add into the same elements), reordered and
  // run in parallel, nothing else. (Halide 14 makes no Stage of an extern Func: its own methods.)
  // The int_conv kernel computes only what lies inside its output: split by any factor, its last
  // part is guarded, which Halide 14 calls for the part rounded up (docs: HALIDE14.md).
  void apply_to_extern(Halide::Func f, const Directive& d) {
    const auto& a = d.args;
    if (d.verb == "split" && a.size() >= 4) {
      const int n = factor(a[3]);
      int64_t loop = 0;
      if (auto w = extern_whole_.find(d.func); w != extern_whole_.end())
        for (size_t k = 0; k < w->second.vars.size(); ++k)
          if (w->second.vars[k].name() == a[0]) loop = w->second.extents[k];
      const bool clamps = clamping_externs_.count(d.func) > 0;
      if (loop <= 0 || (loop % n != 0 && !clamps))
        throw ValueError("hjit: schedule: split of the extern stage " + d.func + "'s loop " + a[0] + " by " + a[3] +
                         ", which does not divide it");
      f.split(Var(a[0]), Var(a[1]), Var(a[2]), n, loop % n == 0 ? Halide::TailStrategy::ShiftInwards : Halide::TailStrategy::GuardWithIf);
    } else if (d.verb == "reorder") {
      std::vector<VarOrRVar> order;
      for (const std::string& n : a) order.push_back(Var(n));
      f.reorder(order);
    } else if (d.verb == "parallel" && a.size() == 1) {
      f.parallel(Var(a[0]));
    } else {
      throw ValueError("hjit: schedule: '" + d.verb + "' on the extern stage " + d.func);
    }
  }

  // Directives on one definition's loops.
  void apply_to_stage(Halide::Stage& st, const Directive& d) {
    const auto& a = d.args;
    const std::string& v = d.verb;
    if (v == "split") {
      split(st, d);
    } else if (v == "fuse") {
      fuse(st, d);
    } else if (v == "reorder") {
      std::vector<VarOrRVar> order;
      for (const std::string& n : a) order.push_back(var_of(st, n));
      st.reorder(order);
    } else if (v == "unroll" && guarded_) {
      // Guarded tails leave the loops of stages computed inside a tile without a constant extent
      // (the tile's last, partial one bounds them), which Halide cannot unroll: they stay loops.
    } else if (v == "vectorize" || v == "unroll" || v == "parallel") {
      loop_verb(st, d);
    } else if (v == "gpu_blocks" || v == "gpu_threads") {
      std::vector<VarOrRVar> x;
      for (const std::string& n : a) x.push_back(var_of(st, n));
      const bool blocks = v == "gpu_blocks";
      if (x.size() == 1) blocks ? st.gpu_blocks(x[0]) : st.gpu_threads(x[0]);
      else if (x.size() == 2) blocks ? st.gpu_blocks(x[0], x[1]) : st.gpu_threads(x[0], x[1]);
      else blocks ? st.gpu_blocks(x[0], x[1], x[2]) : st.gpu_threads(x[0], x[1], x[2]);
    } else if (v == "gpu_single_thread") {
      st.gpu_single_thread();
    } else if (v == "atomic") {
      st.atomic();
    } else if (v == "allow_race_conditions") {
      // A sorting network's steps only (lower_ops.cpp), whose pairs are independent by
      // construction: on another stage it would let a schedule text compute a wrong answer.
      if (!d.func.ends_with("_sort_net"))
        throw ValueError("hjit: schedule: allow_race_conditions on '" + d.func + "', which is no sorting network's steps");
      st.allow_race_conditions();
    } else if (v == "serial") {
      st.serial(var_of(st, a[0]));
    } else if (v == "prefetch") {
      const auto in = inputs_.find(a[0]);
      if (in == inputs_.end()) throw ValueError("hjit: schedule: prefetch of '" + a[0] + "', which is no input of the pipeline");
      // (Halide takes any names here and meets them only when it lowers the pipeline.)
      for (const std::string& loop : {a[1], a[2]})
        if (!has_loop(st, loop)) throw ValueError("hjit: schedule: prefetch at " + d.func + "'s loop " + loop + ", which it does not have");
      st.prefetch(in->second, var_of(st, a[1]), var_of(st, a[2]), factor(a[3]), Halide::PrefetchBoundStrategy::NonFaulting);
    } else if (v == "rfactor") {
      rfactor(st, d);
    } else {
      throw ValueError("hjit: schedule: unknown directive '" + v + "'");
    }
  }

  void split(Halide::Stage& st, const Directive& d) {
    const auto& a = d.args;
    VarOrRVar old = var_of(st, a[0]);
    const int n = factor(a[3]);
    st.split(old, same_kind(old, a[1]), same_kind(old, a[2]), Halide::Expr(n), tail(d.func, a[0], a[4], d.update, n));
    if (const int64_t scale = dynamic_scale(d.func, a[0])) dynamic_loops_[d.func][a[1]] = scale * n;
    set_extent(d, a[2], n);
  }

  void fuse(Halide::Stage& st, const Directive& d) {
    const auto& a = d.args;
    VarOrRVar inner = var_of(st, a[0]), outer = var_of(st, a[1]);
    VarOrRVar fused = inner.is_rvar || outer.is_rvar ? VarOrRVar(RVar(a[2])) : VarOrRVar(Var(a[2]));
    st.fuse(inner, outer, fused);
    const int64_t si = dynamic_scale(d.func, a[0]), so = dynamic_scale(d.func, a[1]);
    if (si || so) dynamic_loops_[d.func][a[2]] = si && so ? std::min(si, so) : si ? si : so;
    const int64_t ei = extent(d, a[0]), eo = extent(d, a[1]);
    set_extent(d, a[2], ei * eo);  // each below 2^31: no overflow
  }

  // vectorize, unroll, parallel: the whole loop, or split by a factor with a tail strategy.
  void loop_verb(Halide::Stage& st, const Directive& d) {
    const auto& a = d.args;
    const std::string& v = d.verb;
    VarOrRVar x = var_of(st, a[0]);
    const int n = a.size() > 1 ? factor(a[1]) : 0;
    if (v != "parallel") {
      const int64_t width = n ? n : extent(d, a[0]);  // 0: not known here
      if (width > kMaxLoopWidth)
        throw ValueError("hjit: schedule: " + v + " of " + d.func + "'s loop " + a[0] + " over " + std::to_string(width) +
                         " iterations; at most " + std::to_string(kMaxLoopWidth));
    }
    if (!n) {
      if (v == "vectorize") st.vectorize(x);
      else if (v == "unroll") st.unroll(x);
      else st.parallel(x);
      return;
    }
    const Halide::TailStrategy tail_kind = tail(d.func, a[0], a.size() > 2 ? a[2] : "Auto", d.update, n);
    if (v == "vectorize") st.vectorize(x, n, tail_kind);
    else if (v == "unroll") st.unroll(x, n, tail_kind);
    else st.parallel(x, n, tail_kind);
    // (a split whose outer loop keeps the name)
    if (const int64_t scale = dynamic_scale(d.func, a[0])) dynamic_loops_[d.func][a[0]] = scale * n;
  }

  void rfactor(Halide::Stage& st, const Directive& d) {
    const auto& a = d.args;
    std::vector<std::pair<RVar, Var>> preserved;
    for (size_t from = 0; from < a[0].size();) {
      size_t comma = a[0].find(',', from);
      if (comma == std::string::npos) comma = a[0].size();
      const std::string pair = a[0].substr(from, comma - from);
      const size_t colon = pair.find(':');
      if (colon == std::string::npos) throw ValueError("hjit: schedule: rfactor takes rvar:var pairs, not '" + pair + "'");
      preserved.emplace_back(RVar(pair.substr(0, colon)), Var(pair.substr(colon + 1)));
      from = comma + 1;
    }
    Halide::Func intm = st.rfactor(preserved);
    funcs_[a[1]] = intm;
    funcs_[canonical_name(intm.name())] = intm;
  }

  Halide::Func func(const std::string& name) {
    auto it = funcs_.find(name);
    if (it == funcs_.end()) throw ValueError("hjit: schedule names the Func '" + name + "', which this pipeline does not have");
    return it->second;
  }
  std::map<std::string, Halide::Func> funcs_;
  std::map<std::string, Halide::ImageParam> inputs_;  // the pipeline's buffers, by name (prefetch)
  // Pipelines of dynamic sizes: per Func (canonical name), its loops whose extent varies, each
  // with how many units of the size one of its iterations covers (1 for a dimension's own loop).
  std::map<std::string, std::map<std::string, int64_t>> dynamic_loops_;
  struct Whole {
    std::vector<Halide::Var> vars;
    Shape extents;
  };
  std::map<std::string, Whole> whole_;  // each stage's vars and extents, by canonical name (fixed sizes only)
  std::map<std::string, Whole> extern_whole_;  // the same, of extern stages
  std::set<std::string> clamping_externs_;     // extern stages whose kernel clamps its region to its output
  int64_t min_dynamic_size_ = 0;
  bool guarded_ = false;
  // Per definition (a Func's pure one or an update), the loops this schedule made whose extent it
  // fixed: a split's inner loop (its factor), a fuse of two such. What a vectorize or unroll
  // without a factor is held to; other loops' extents come from Halide's bounds inference, later.
  std::map<std::pair<std::string, int>, std::map<std::string, int64_t>> extents_;

  int64_t extent(const Directive& d, const std::string& loop) const {
    auto it = extents_.find({d.func, d.update});
    if (it == extents_.end()) return 0;
    auto l = it->second.find(loop);
    return l == it->second.end() ? 0 : l->second;
  }
  void set_extent(const Directive& d, const std::string& loop, int64_t e) {
    if (e > 0) extents_[{d.func, d.update}][loop] = e;
  }

  int64_t dynamic_scale(const std::string& func, const std::string& loop) const {
    auto it = dynamic_loops_.find(func);
    if (it == dynamic_loops_.end()) return 0;
    auto l = it->second.find(loop);
    return l == it->second.end() ? 0 : l->second;
  }

  // The loops each stage starts with whose extents vary: pure vars of varying dimensions (shared
  // by a stage's reduction and output wrapper), reduction variables over varying extents, and a
  // helper's vars as its lowering marked them.
  void find_stage_extents(const LoweredPipeline& p) {
    for (const Stage& x : p.stages) {
      if (x.func.defined() && x.vars.size() == x.extents.size())
        (x.is_extern ? extern_whole_ : whole_)[canonical_name(x.func.name())] = Whole{x.vars, x.extents};
      if (x.is_extern && x.extern_kind == "int_conv") clamping_externs_.insert(canonical_name(x.func.name()));
    }
  }

  void find_dynamic_loops(const LoweredPipeline& p) {
    auto varying_rvars = [](const std::vector<RVar>& rvars, std::set<std::string>& names) {
      for (const RVar& r : rvars)
        if (!Halide::Internal::is_const(r.extent())) names.insert(r.name());
    };
    std::vector<std::set<std::string>> of_node(p.stages.size());
    for (const Stage& st : p.stages) {
      if (st.node < 0 || !st.func.defined()) continue;
      const std::vector<Affine>& ext = p.dynamic->extents[size_t(st.node)];
      std::set<std::string>& names = of_node[size_t(st.node)];
      for (size_t h = 0; h < st.vars.size() && h < ext.size(); ++h)
        if (!ext[ext.size() - 1 - h].is_constant()) names.insert(st.vars[h].name());
      varying_rvars(st.rvars, names);
      auto loops = [](const std::set<std::string>& n) {
        std::map<std::string, int64_t> m;
        for (const std::string& x : n) m[x] = 1;
        return m;
      };
      dynamic_loops_[canonical_name(st.func.name())] = loops(names);
      if (st.reduction.defined()) dynamic_loops_[canonical_name(st.reduction.name())] = loops(names);
      for (const Helper& h : st.helpers) {
        std::set<std::string> hn;
        for (const Var& v : h.vars)
          if (names.count(v.name()) || h.dynamic_vars.count(v.name())) hn.insert(v.name());
        varying_rvars(h.rvars, hn);
        dynamic_loops_[canonical_name(h.func.name())] = loops(hn);
      }
    }
    for (size_t k = 0; k < p.outputs.size(); ++k)
      if (p.outputs[k].defined()) {
        std::map<std::string, int64_t> m;
        for (const std::string& x : of_node[size_t(p.output_node[k])]) m[x] = 1;
        dynamic_loops_[canonical_name(p.outputs[k].name())] = m;
      }
  }
};

}  // namespace

int64_t smallest_served_size(const LoweredPipeline& p) {
  if (!p.dynamic) return 0;
  int64_t smallest = p.dynamic->serves_from > 0 ? p.dynamic->serves_from : std::numeric_limits<int64_t>::max();
  for (const SymbolicSizes::Source& src : p.dynamic->sources)
    smallest = std::min(smallest, p.graph->type(p.graph->inputs[size_t(src.input)]).shape[size_t(src.dim)]);
  return smallest;
}

void apply_schedule(const Schedule& s, LoweredPipeline& p, DynamicTails tails) {
  Applier applier(p, tails == DynamicTails::Guarded);
  for (const Directive& d : s.directives) applier.apply(d);
  p.min_dynamic_size = applier.min_dynamic_size();
}

}  // namespace hjit::backend
