// opt_level 1: the built-in schedule.
//
// Every pipeline output, and every stage that must be stored (matmul operands, and values of an
// expensive function read more than once), is a loop nest of its own: innermost dimension
// vectorized, outer dimensions fused and parallel. Everything else is inlined into its readers,
// except the accumulators of reductions and matmuls, which are computed inside the one loop nest
// that reads them when they can be:
//   - a matmul at each register tile (tx columns by ty rows) of its reader, so a bias and an
//     activation after it run on the tile while it is in registers;
//   - a reduction over the innermost axes at each row of its reader, so softmax and layer norm
//     make one pass over a row in cache instead of a pass over the tensor per reduction.
// What cannot be placed so is computed at root, vectorized and parallel.
//
// Measured on this machine (hjit-bench, 2 threads): W3 1024^3 matmul ~170 GFLOP/s (OpenBLAS ~187);
// see the closing notes of issue 2 for the rest.
#include <set>
#include <sstream>

#include "graph/op_def.h"
#include "schedules/loop_nest.h"
#include "schedules/reduction.h"
#include "schedules/schedule.h"
#include "schedules/stage_info.h"

namespace hjit::schedules {
namespace {

using backend::LoweredPipeline;
using backend::Stage;
using Halide::Var;

bool expensive(OpKind op) {
  switch (op) {
    case OpKind::Exp: case OpKind::Log: case OpKind::Log1p: case OpKind::Tanh: case OpKind::Sigmoid:
    case OpKind::Erf: case OpKind::Sin: case OpKind::Cos: case OpKind::Pow: case OpKind::Sqrt: case OpKind::Rsqrt:
      return true;
    default:
      return false;
  }
}

enum class Level { Row, Tile };

struct Nest {
  Halide::Func func;
  int stage = -1;  // whose vars and extents the nest iterates
  bool can_host = true;
  bool tiled = false;
  bool has_row_guests = false;
  bool is_root_stage = false;  // a stage func made compute_root (not a pipeline output)
  // Set when scheduled.
  bool has_row = false;
  Var row, tile;
  int tx = 0, ty = 0;
};

// Where a value is read.
struct Site {
  std::set<int> nests;
  bool row_pointwise = true;   // at the outer coordinates of the nest's own loop
  bool via_reduction = false;  // inside some reduction's accumulator
  void merge(const Site& o) {
    nests.insert(o.nests.begin(), o.nests.end());
    row_pointwise &= o.row_pointwise;
    via_reduction |= o.via_reduction;
  }
};

struct Place {
  enum Kind { Inline, Nest, At } kind = Inline;
  int nest = -1;
  Level level = Level::Row;
};

class Builtin {
 public:
  explicit Builtin(LoweredPipeline& p) : p_(p), n_(p.stages.size()) {}

  std::string run() {
    func_.assign(n_, Place{});
    acc_.assign(n_, Place{});
    site_.assign(n_, Site{});
    wrapper_nests_.assign(n_, {});
    for (size_t k = 0; k < p_.outputs.size(); ++k) {
      if (!p_.outputs[k].defined()) continue;
      int node = p_.output_node[k];
      int nest = add_nest(p_.outputs[k], node);
      if (p_.output_is_wrapper[k]) wrapper_nests_[size_t(node)].push_back(nest);
      else func_[size_t(node)] = Place{Place::Nest, nest};
    }
    for (size_t id = n_; id-- > 0;) place(int(id));
    for (Nest& nest : nests_)
      if (nest.can_host) schedule_nest(nest);
    for (size_t id = 0; id < n_; ++id) schedule_guests(int(id));
    return os_.str();
  }

 private:
  Stage& st(int id) { return p_.stages[size_t(id)]; }
  const Node& node(int id) const { return p_.graph->node(id); }

  int add_nest(Halide::Func f, int stage, bool can_host = true) {
    Nest nest;
    nest.func = f;
    nest.stage = stage;
    nest.can_host = can_host;
    nests_.push_back(nest);
    return int(nests_.size()) - 1;
  }

  bool live(int id) {
    const Stage& s = st(id);
    return s.func.defined() && !is_source(s) &&
           (!s.consumers.empty() || func_[size_t(id)].kind == Place::Nest || !wrapper_nests_[size_t(id)].empty());
  }

  // Where stage c reads its operands.
  Site read_site(int c) {
    const Stage& s = st(c);
    const bool elementwise = has_trait(s.op, Elementwise);
    if (has_reduction(s)) {
      const Place& a = acc_[size_t(c)];
      return Site{{a.nest}, a.kind == Place::At, true};
    }
    const Place& f = func_[size_t(c)];
    if (f.kind == Place::Inline) {
      Site site = site_[size_t(c)];
      site.row_pointwise &= elementwise;
      return site;
    }
    return Site{{f.nest}, elementwise, false};
  }

  Site value_site(int id) {
    Site site;
    std::set<int> seen;
    for (int c : st(id).consumers)
      if (seen.insert(c).second) site.merge(read_site(c));
    for (int nest : wrapper_nests_[size_t(id)]) site.merge(Site{{nest}, true, false});
    const Place& f = func_[size_t(id)];
    if (f.kind == Place::Nest) site.merge(Site{{f.nest}, true, false});
    return site;
  }

  // Can stage id be computed inside the one nest of `site`, per row or per tile of it?
  bool can_home(int id, const Site& site, Level level) {
    if (site.nests.size() != 1 || !site.row_pointwise) return false;
    const Nest& nest = nests_[size_t(*site.nests.begin())];
    const Shape &mine = st(id).extents, &theirs = st(nest.stage).extents;
    if (!nest.can_host || theirs.size() < 2 || mine.size() != theirs.size()) return false;
    if (level == Level::Tile) return !site.via_reduction && !nest.has_row_guests && mine == theirs;
    if (nest.tiled) return false;
    for (size_t i = 1; i < mine.size(); ++i)
      if (mine[i] != theirs[i]) return false;
    return true;
  }

  bool feeds_matmul(int id) {
    for (int c : st(id).consumers)
      if (st(c).op == OpKind::Matmul) return true;
    return false;
  }

  void make_nest(int id) {
    int nest = add_nest(st(id).func, id);
    nests_[size_t(nest)].is_root_stage = true;
    func_[size_t(id)] = Place{Place::Nest, nest};
  }

  void place(int id) {
    if (!live(id)) return;
    Stage& s = st(id);
    Site site = value_site(id);
    site_[size_t(id)] = site;
    if (func_[size_t(id)].kind == Place::Inline) {
      bool reused_expensive = expensive(s.op) && s.consumers.size() >= 2;
      if (feeds_matmul(id)) {
        make_nest(id);
      } else if (reused_expensive) {
        if (can_home(id, site, Level::Row)) {
          func_[size_t(id)] = Place{Place::At, *site.nests.begin(), Level::Row};
          nests_[size_t(*site.nests.begin())].has_row_guests = true;
        } else {
          make_nest(id);
        }
      }
    }
    if (!has_reduction(s)) return;
    // The accumulator is read wherever the stage's value is, or by the stage's own nest.
    Site acc_site = func_[size_t(id)].kind == Place::Inline ? site : Site{{func_[size_t(id)].nest}, true, false};
    if (s.op == OpKind::Matmul) {
      if (!can_home(id, acc_site, Level::Tile)) {
        if (func_[size_t(id)].kind != Place::Nest) make_nest(id);
        acc_site = Site{{func_[size_t(id)].nest}, true, false};
      }
      int nest = *acc_site.nests.begin();
      acc_[size_t(id)] = Place{Place::At, nest, Level::Tile};
      nests_[size_t(nest)].tiled = true;
      return;
    }
    if (can_home(id, acc_site, Level::Row)) {
      int nest = *acc_site.nests.begin();
      acc_[size_t(id)] = Place{Place::At, nest, Level::Row};
      nests_[size_t(nest)].has_row_guests = true;
    } else {
      acc_[size_t(id)] = Place{Place::Nest, add_nest(s.reduction, id, false)};
    }
  }

  void schedule_nest(Nest& nest) {
    const Stage& s = st(nest.stage);
    const int vec = vector_width(p_.target, value_type(s));
    const int threads = halide_threads();
    if (nest.is_root_stage) nest.func.compute_root();
    if (!nest.tiled) {
      LoopNest ln = vectorize_and_parallelize(nest.func, s.vars, s.extents, vec, threads);
      nest.has_row = ln.has_row;
      nest.row = ln.row;
      os_ << nest.func.name() << ": " << (nest.is_root_stage ? "root " : "") << ln.what << "\n";
      return;
    }
    // Register tiles of tx columns by ty rows; tiles (and batch dimensions) fused and parallel.
    const int64_t N = s.extents[0], M = s.extents[1];
    nest.tx = int(N >= 2 * vec ? 2 * vec : N >= vec ? vec : N);
    nest.ty = int(M >= 8 ? 8 : M);
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi"), t("tile");
    nest.func.tile(s.vars[0], s.vars[1], xo, yo, xi, yi, nest.tx, nest.ty).fuse(xo, yo, t);
    for (size_t d = 2; d < s.vars.size(); ++d) {
      Var outer(t.name() + "_" + s.vars[d].name());
      nest.func.fuse(t, s.vars[d], outer);
      t = outer;
    }
    int64_t work = 1;
    for (int64_t e : s.extents) work *= e;
    if (work >= 1 << 14 && threads > 1) nest.func.parallel(t);
    if (nest.tx >= vec) nest.func.vectorize(xi, vec);
    nest.func.unroll(yi);
    nest.tile = t;
    os_ << nest.func.name() << ": " << (nest.is_root_stage ? "root " : "") << "tiles " << nest.tx << "x" << nest.ty
        << (work >= 1 << 14 ? " par" : "") << "\n";
  }

  Var level_var(const Nest& nest, Level level) { return level == Level::Tile ? nest.tile : nest.row; }

  void schedule_guests(int id) {
    Stage& s = st(id);
    const Place& f = func_[size_t(id)];
    if (f.kind == Place::At) {
      const Nest& nest = nests_[size_t(f.nest)];
      if (!nest.has_row) {
        s.func.compute_root();
        os_ << s.func.name() << ": root (no row loop in " << nest.func.name() << ")\n";
      } else {
        s.func.compute_at(nest.func, level_var(nest, f.level));
        const int vec = vector_width(p_.target, value_type(s));
        if (s.extents[0] >= vec) s.func.vectorize(s.vars[0], vec);
        os_ << s.func.name() << ": per row of " << nest.func.name() << "\n";
      }
    }
    if (!has_reduction(s) || !live(id)) return;
    const Place& a = acc_[size_t(id)];
    if (a.kind == Place::At) {
      const Nest& nest = nests_[size_t(a.nest)];
      if (a.level == Level::Row && !nest.has_row) {
        s.reduction.compute_root();
        os_ << s.reduction.name() << ": root " << schedule_reduction(p_, s, true) << "\n";
        return;
      }
      s.reduction.compute_at(nest.func, level_var(nest, a.level));
      if (a.level == Level::Tile)
        os_ << s.reduction.name() << ": per tile of " << nest.func.name() << ", "
            << schedule_matmul_tile(p_, s, nest.tx, nest.ty) << "\n";
      else
        os_ << s.reduction.name() << ": per row of " << nest.func.name() << ", " << schedule_reduction(p_, s, false) << "\n";
    } else if (a.kind == Place::Nest) {
      s.reduction.compute_root();
      os_ << s.reduction.name() << ": root " << schedule_reduction(p_, s, true) << "\n";
    }
  }

  LoweredPipeline& p_;
  const size_t n_;
  std::vector<Nest> nests_;
  std::vector<Place> func_, acc_;
  std::vector<Site> site_;
  std::vector<std::vector<int>> wrapper_nests_;
  std::ostringstream os_;
};

}  // namespace

std::string schedule_builtin(LoweredPipeline& p) { return Builtin(p).run(); }

}  // namespace hjit::schedules
