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
// Measured (hjit-bench, 2 threads, Zen 5 with an FP32 peak of 446 GFLOP/s): W3 1024^3 matmul
// 370-386 GFLOP/s with blocked, packed tiles (contraction.h); see the closing notes of the issues.
#include <algorithm>
#include <iterator>
#include <set>
#include <sstream>

#include "graph/op_def.h"
#include "halide_backend/build/partition.h"
#include "halide_backend/providers/extern_stages.h"
#include "schedules/attention.h"
#include "schedules/class_rules.h"
#include "schedules/contraction.h"
#include "schedules/loop_nest.h"
#include "schedules/reduction.h"
#include "schedules/schedule.h"
#include "schedules/stage_info.h"
#include "support/cpu_caches.h"
#include "support/cpu_vendor.h"

namespace hjit::schedules {
namespace {

using backend::LoweredPipeline;
using backend::Stage;
using Halide::Var;

}  // namespace

bool builtin_stores_elementwise(OpKind op, size_t readers) { return cpu_rules(op).stored_when_reused && readers >= 2; }

namespace {

enum class Level { Row, Tile };

struct Nest {
  Halide::Func func;
  int stage = -1;  // whose vars and extents the nest iterates
  bool can_host = true;
  int host = -1;  // the contraction computed per tile of this nest (tiled when >= 0)
  bool has_row_guests = false;
  bool is_root_stage = false;  // a stage func made compute_root (not a pipeline output)
  // Set when scheduled.
  bool has_row = false;
  Var row, tile, panel, parallel;
  TileSpec spec;
  bool tiled() const { return host >= 0; }
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
  Builtin(const LoweredPipeline& p, const BuiltinParams& params) : p_(p), params_(params), n_(p.stages.size()) {}

  Schedule run() {
    func_.assign(n_, Place{});
    acc_.assign(n_, Place{});
    store_instead_.assign(n_, false);
    site_.assign(n_, Site{});
    wrapper_nests_.assign(n_, {});
    for (size_t k = 0; k < p_.outputs.size(); ++k) {
      if (!p_.outputs[k].defined()) continue;
      int node = p_.output_node[k];
      int nest = add_nest(p_.outputs[k], node);
      if (p_.output_is_wrapper[k]) wrapper_nests_[size_t(node)].push_back(nest);
      else func_[size_t(node)] = Place{Place::Nest, nest};
    }
    find_cuts();
    for (size_t id = n_; id-- > 0;) place(int(id));
    choose_channels_last();
    for (Nest& nest : nests_)
      if (nest.can_host) schedule_nest(nest);
    for (size_t id = 0; id < n_; ++id) schedule_guests(int(id));
    out_.notes = note_lines(os_.str());
    return std::move(out_);
  }

 private:
  const Stage& st(int id) const { return p_.stages[size_t(id)]; }
  FuncRef ref(const Halide::Func& f) { return FuncRef(&out_, f); }
  static std::string nm(const Halide::Func& f) { return backend::canonical_name(f.name()); }
  const Node& node(int id) const { return p_.graph->node(id); }

  int add_nest(Halide::Func f, int stage, bool can_host = true) {
    Nest nest;
    nest.func = f;
    nest.stage = stage;
    nest.can_host = can_host;
    nests_.push_back(nest);
    return int(nests_.size()) - 1;
  }

  // A stage with no function of its own whose operands its reader reads in its place: the round a
  // quantized conversion reads past (it rounds the operand's bits), or a post-op a library call
  // computes. Every walk through an expression goes on to its operands; none stops at it.
  bool read_past(int id) const { return st(id).absorbed; }

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
    if (nest.tiled()) return false;
    for (size_t i = 1; i < mine.size(); ++i)
      if (mine[i] != theirs[i]) return false;
    return true;
  }

  // Operands of contractions are stored: each element is read many times. So are those of extern
  // stages (Halide computes nothing inline inside a library call) and random keys (read by every
  // element of the draw, and often drawn themselves: inlined, each element would redo the draw).
  // An operand a contraction reads only through a copy of its own (a convolution's padded input, a
  // weight gradient's transposed one: helpers stored at root) is computed into that copy instead:
  // stored as well it would be two copies (W9: a relu's output beside both of its padded copies).
  // A view of an input is read where it is (a 1x1 convolution's weight reshaped to a matrix),
  // except by a library call, which takes buffers.
  bool feeds_contraction(int id) {
    for (int c : st(id).consumers)
      if (st(c).is_extern || cpu_rules(st(c).op).operands == Operands::Stored) return true;
    if (is_view_of_sources(p_, st(id)) || streamed_into_few_rows(id)) return false;
    for (int c : st(id).consumers)
      if (cpu_rules(st(c).op).operands == Operands::StoredUnlessCopied && reads_itself(c, id)) return true;
    return false;
  }
  // A weight computed from sources (dequantized from i8) that only products of a few rows read
  // as their right operand: each element is read once, or once a tile of rows, so inlined into
  // the products' loads it streams the narrow values (decode's matrix-vector products), where
  // stored it is written and read back whole in f32 every call, slower than an f32 weight.
  bool streamed_into_few_rows(int id) {
    if (!is_cheap_function_of_sources(p_, st(id))) return false;
    for (int c : st(id).consumers) {
      const Stage& cs = st(c);
      if (cpu_rules(cs.op).tile != Tile::Matmul || node(c).inputs[0] == id || cs.extents.size() < 2) return false;
      if (cs.extents[1] > kMatrixVectorRows || (p_.dynamic && p_.dynamic->extent_varies(cs.node))) return false;
    }
    return true;
  }
  bool reads_itself(int c, int id) {
    const std::string& name = st(id).func.name();
    for (const Halide::Func& f : {st(c).func, st(c).reduction})
      if (f.defined() && Halide::Internal::find_direct_calls(f.function()).count(name)) return true;
    return st(c).helpers.empty();
  }

  // A conversion to a narrower type of a contraction's element-wise epilogue, read through a copy
  // (a quantized convolution's u8 output, packed for the next convolution): stored, so that the
  // contraction computes per tile of it and the copy reads the narrow values. Inlined into the
  // copy, the contraction is stored whole at its wide type and read back (int8 ResNet-50's packs
  // read every i32 sum).
  bool narrows_contraction_for_copy(int id, const Site& site) {
    const Node& n = node(id);
    if (n.op != OpKind::Cast || site.row_pointwise || n.inputs.size() != 1) return false;
    if (dtype_size(n.type.dtype) >= dtype_size(node(n.inputs[0]).type.dtype)) return false;
    return computes_tiled_contraction(n.inputs[0], st(id).extents);
  }

  // Does stage id, or an element-wise stage inlined into it, read a tiled contraction (a matmul or
  // convolution) of these extents, which could then be computed per tile of it? With `alone`, only
  // a contraction that nothing else reads, directly or through those stages.
  bool computes_tiled_contraction(int id, const Shape& extents, bool alone = false) {
    std::vector<int> found, through;  // (through: the element-wise stages looked through)
    const std::set<int> seen = walk_elementwise(id, [&](int at) {
      if (has_reduction(st(at))) {
        if (cpu_rules(st(at).op).tile != Tile::None && st(at).extents == extents) found.push_back(at);
        return false;
      }
      if (!has_trait(st(at).op, Elementwise) || func_[size_t(at)].kind != Place::Inline) return false;
      through.push_back(at);
      return true;
    });
    if (!alone) return !found.empty();
    auto read_here = [&](int at) {
      return std::all_of(st(at).consumers.begin(), st(at).consumers.end(), [&](int c) { return seen.count(c) > 0; });
    };
    for (const std::vector<int>& stages : {through, found})
      for (int at : stages)
        if (at != id && !read_here(at)) return false;
    return !found.empty();
  }

  // A value rounded to 8 bits (a quantized network's activation) that several nests read: stored,
  // a quarter of its f32 computation's bytes. Inlined into each reader, a residual network's
  // block outputs nested inside each other (each block's sum reads the last one's) until the
  // expression had to be cut at kMaxInlined stages, and the next convolution's copy recomputed it;
  // a quantized attention's keys and values, read by their VNNI packing and by their zero point's
  // sums, were each recomputed from the stored i32 sums of the QKV product through its slices and
  // transposes (int8 BERT-like encoder, Zen 5: 5.9-6.3 -> 5.6-5.8 ms in its loops, three pairs).
  bool quantized_and_reused(int id, const Site& site) {
    const Node& n = node(id);
    return n.op == OpKind::Cast && dtype_size(n.type.dtype) == 1 && site.nests.size() >= 2 && n.type.shape.size() >= 3 &&
           dtype_size(node(n.inputs[0]).type.dtype) > 1;
  }

  // A reshape that a contraction reads of another contraction's epilogue (a 3x3 convolution's
  // output, its bias and relu read as the matrix of the next 1x1 convolution): the epilogue is
  // stored, computed per tile of its contraction, and read through the reshape, which moves no
  // element. Stored itself, the reshape was a pass of its own that copied the value, and the
  // contraction, read through it, was stored whole a pass before that. (Other values stay
  // reshaped where stored: a flat [C, H*W] nest vectorizes better than one over a 7-wide row.)
  int reshaped_stage(int id) {
    if (node(id).op != OpKind::Reshape) return -1;
    for (int c : st(id).consumers)  // (a library call takes a buffer, not a view)
      if (st(c).is_extern) return -1;
    const int source = node(id).inputs[0];
    const Stage& s = st(source);
    if (!live(source) || s.is_extern || func_[size_t(source)].kind != Place::Inline) return -1;
    return computes_tiled_contraction(source, s.extents, true) ? source : -1;
  }

  // A value whose expression gathers along its rows (a take along the innermost axis: an
  // interpolation's taps along a row) that takes of whole rows read more often than it has rows
  // (the taps of an upsampled image's other axis): stored, each gather runs once, where inlined
  // every output element gathered again. LR-ASPP's head, 28x28 to 224x224 bilinear, Zen 4: the
  // output's nest took 20% of the model's time.
  bool rows_gathered_then_repeated(int id) {
    const Stage& s = st(id);
    const Shape& shape = node(id).type.shape;
    if (s.consumers.empty() || shape.size() < 2) return false;
    const int64_t axis = node(s.consumers.front()).op == OpKind::Take ? node(s.consumers.front()).attrs.i("axis") : -1;
    if (axis < 0 || axis + 1 >= int64_t(shape.size())) return false;
    int64_t rows_read = 0;
    for (int c : s.consumers) {
      const Node& take = node(c);
      if (take.op != OpKind::Take || take.inputs[0] != id || take.attrs.i("axis") != axis) return false;
      rows_read += node(take.inputs[1]).type.numel();
    }
    if (rows_read < 2 * shape[size_t(axis)]) return false;
    bool gathers = false;
    walk_elementwise(id, [&](int at) {
      if (at != id && func_[size_t(at)].kind != Place::Inline) return false;
      const Node& n = node(at);
      gathers |= n.op == OpKind::Take && n.attrs.i("axis") + 1 == int64_t(n.type.shape.size()) && n.type.shape == shape;
      return !gathers && has_trait(st(at).op, Elementwise);
    });
    return gathers;
  }

  // Visits the live stages of stage id's expression, from id inwards: each once, the operands of
  // those `visit` returns true for next. Returns the stages reached.
  template <class Visit>
  std::set<int> walk_elementwise(int id, Visit&& visit) {
    std::vector<int> todo{id};
    std::set<int> seen;
    while (!todo.empty()) {
      const int at = todo.back();
      todo.pop_back();
      if (!seen.insert(at).second) continue;
      // (Read past: a depthwise convolution's u8 output, quantized twice around a ReLU6, was not
      // seen to narrow the convolution, whose i32 sums the next packing gathered back: int8
      // MobileNet V2 3.27 -> 1.52 ms on a Zen 5.)
      if (read_past(at)) {
        todo.insert(todo.end(), node(at).inputs.begin(), node(at).inputs.end());
        continue;
      }
      if (!live(at)) continue;
      if (visit(at)) todo.insert(todo.end(), node(at).inputs.begin(), node(at).inputs.end());
    }
    return seen;
  }

  void make_nest(int id) {
    int nest = add_nest(st(id).func, id);
    nests_[size_t(nest)].is_root_stage = true;
    func_[size_t(id)] = Place{Place::Nest, nest};
  }

  // The int8 and bf16 gemm kernels run oneDNN on the thread that calls them (providers/kernels/
  // onednn_matmul.cpp): its matrices (its rows where they are fewer than the threads) are cut
  // into parts for the threads of Halide's pool, parts of 16 rows at least (AMX's tile). Never its
  // columns: a part of them is a product whose rows lie apart, for which oneDNN 2.6 leaves AMX for
  // a gemm a tenth as fast (a 512 x 256 x 384 product: 3 ms). The parts divide the loop: a last
  // part shifted inwards would overlap the one before, and oneDNN sums into its output as it goes.
  std::string split_amx_gemm(const Stage& s) {
    constexpr int64_t kTile = 16;
    const int64_t threads = halide_threads();
    if (threads < 2) return "";
    for (size_t d = s.vars.size() - 1; d >= 1; --d) {
      const int64_t extent = s.extents[d], least = d == 1 ? kTile : 1;
      for (int64_t parts = threads; parts <= 4 * threads && extent / parts >= least; ++parts) {
        if (extent % parts != 0) continue;
        const int factor = int(extent / parts);
        const Halide::Var outer(s.vars[d].name() + "_part"), inner(s.vars[d].name() + "_in");
        // Halide calls an extern stage inside its loops that are not the extern's own: those outermost.
        std::vector<Halide::VarOrRVar> order(s.vars.begin(), s.vars.end());
        order[d] = inner;
        order.push_back(outer);
        ref(s.func).split(s.vars[d], outer, inner, factor).reorder(order).parallel(outer);
        return ", " + std::to_string(parts) + " parts of " + std::to_string(factor) + (d == 1 ? " rows" : " matrices");
      }
    }
    return "";
  }

  // The int_conv kernel (providers/kernels/onednn_int_conv.cpp) reads its input and writes its sums
  // where they lie when both are stored channels innermost, oneDNN's nhwc (the input: see
  // choose_channels_last). Cut into a part of the images or rows for each of Halide's workers,
  // never the channels or columns (nhwc rows whole); parts that do not divide the rows overlap
  // (the kernel writes its rows, it does not sum into them).
  std::string split_int_conv(const Stage& s) {
    const std::vector<Var>& v = s.vars;  // (ox, oy, co, nb)
    FuncRef f = ref(s.func);
    f.reorder_storage({v[2], v[0], v[1], v[3]});
    const int64_t threads = halide_threads();
    if (threads < 2) return ", channels innermost";
    const bool images = s.extents[3] >= threads && s.extents[3] % threads == 0;
    const size_t d = images ? 3 : 1;
    const int64_t extent = s.extents[d], factor = (extent + threads - 1) / threads, parts = (extent + factor - 1) / factor;
    if (parts < 2) return ", channels innermost";
    const Halide::Var outer(v[d].name() + "_part"), inner(v[d].name() + "_in");
    std::vector<Halide::VarOrRVar> order(v.begin(), v.end());
    order[d] = inner;
    order.push_back(outer);
    f.split(v[d], outer, inner, int(factor), Halide::TailStrategy::GuardWithIf).reorder(order).parallel(outer);
    return ", channels innermost, " + std::to_string(parts) + " parts of " + std::to_string(factor) + (images ? " images" : " rows");
  }

  void place(int id) {
    // (Read past, it is read where its reader is. With no site, everything before a requantize was
    // read nowhere: a softmax's and a convolution's sums could not be computed per row or per
    // tile of the quantized value: int8 ResNet-50 14.1 -> 10.6 ms on a Zen 5.)
    if (read_past(id)) {
      site_[size_t(id)] = value_site(id);
      return;
    }
    if (!live(id)) return;
    const Stage& s = st(id);
    Site site = value_site(id);
    site_[size_t(id)] = site;
    if (s.is_extern) {  // a library call: a loop nest of its own that nothing is computed inside
      if (func_[size_t(id)].kind == Place::Inline) make_nest(id);
      Nest& nest = nests_[size_t(func_[size_t(id)].nest)];
      nest.can_host = false;
      if (nest.is_root_stage) ref(s.func).compute_root();
      os_ << nm(s.func) << ": extern " << (s.extern_kind == "sgemm" ? backend::extern_gemm_library() : "oneDNN") << " "
          << s.extern_kind;
      if (s.extern_kind == "int_gemm" || s.extern_kind == "bf16_gemm") os_ << split_amx_gemm(s);
      if (s.extern_kind == "int_conv") os_ << split_int_conv(s);
      // (A bf16 product's computed operands, narrowed to their bits at root for the library.)
      if (s.extern_kind == "bf16_gemm" && !s.helpers.empty()) os_ << ";" << schedule_helpers_at_root(p_, s, out_);
      os_ << "\n";
      return;
    }
    if (func_[size_t(id)].kind == Place::Inline) {
      bool reused_expensive = params_.store_expensive && builtin_stores_elementwise(s.op, s.consumers.size());
      const bool stored_alone = cpu_rules(s.op).stored_alone && !has_reduction(s);
      if (store_instead_[size_t(id)] || rows_gathered_then_repeated(id) || stored_alone) {
        make_nest(id);
      } else if (feeds_contraction(id) || narrows_contraction_for_copy(id, site) || quantized_and_reused(id, site)) {
        if (const int source = reshaped_stage(id); source >= 0) store_instead_[size_t(source)] = true;
        else make_nest(id);
      } else if (reused_expensive || cut_[size_t(id)] != Cut::None) {
        if (can_home(id, site, Level::Row)) {
          func_[size_t(id)] = Place{Place::At, *site.nests.begin(), Level::Row};
          nests_[size_t(*site.nests.begin())].has_row_guests = true;
        } else if (!stored_only_as_costly(id)) {
          make_nest(id);  // (a costly expression stays inlined: see schedule_guests)
        }
      }
    }
    if (!has_reduction(s)) return;
    // The accumulator is read wherever the stage's value is, or by the stage's own nest.
    Site acc_site = func_[size_t(id)].kind == Place::Inline ? site : Site{{func_[size_t(id)].nest}, true, false};
    if (cpu_rules(s.op).tile != Tile::None) {
      // At a tile of the one nest that reads it pointwise (and hosts no other kind of tile), or
      // at a tile of its own nest.
      bool home = can_home(id, acc_site, Level::Tile);
      if (home) {
        const Nest& n = nests_[size_t(*acc_site.nests.begin())];
        home = !n.tiled() || st(n.host).op == s.op;
      }
      if (!home) {
        if (func_[size_t(id)].kind != Place::Nest) make_nest(id);
        acc_site = Site{{func_[size_t(id)].nest}, true, false};
      }
      int nest = *acc_site.nests.begin();
      acc_[size_t(id)] = Place{Place::At, nest, Level::Tile};
      if (!nests_[size_t(nest)].tiled()) nests_[size_t(nest)].host = id;
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

  // Stages stored so that no inlined expression holds more than kMaxInlined stages. Halide
  // lowers an inlined chain in time about cubic in its length (it inlines one Func at a time and
  // eliminates common subexpressions after each): a chain of 800 element-wise ops lowered in 8 s
  // inlined whole, in 0.23 s with a stage stored every 64. Stages are counted once however often
  // they are read (Halide shares them as lets). A stored stage is computed per row of the nest
  // that reads it where it can be (in cache), else at root.
  //
  // And a value read by two or more stages whose inlined expression is costly to compute again in
  // each (a quantized network's requantize and dequantize around a layer norm's input: its mean's
  // and its variance's sums and the output each recomputed the rounding and saturation of the
  // matmul's sums, two thirds of the stage's time in an int8 encoder).
  static constexpr size_t kMaxInlined = 64;
  static constexpr int kCostlyCone = 16;
  void find_cuts() {
    cut_.assign(n_, Cut::None);
    std::vector<std::vector<int>> cone(n_);  // the inlined stages an expression holds, sorted
    std::vector<int> cost(n_, 0);            // of recomputing each inlined expression (0: stored)
    for (size_t id = 0; id < n_; ++id) {
      const Stage& s = st(int(id));
      // (Read past, its expression is recomputed inside its reader's: counted as nothing, a QDQ
      // chain looked cheap after each QuantizeLinear, and a softmax's or layer norm's dequantized
      // input was recomputed by each of its row's passes.)
      if (read_past(int(id))) {
        for (int in : node(int(id)).inputs)
          if (cut_[size_t(in)] != Cut::Costly) cost[id] += cost[size_t(in)];
        continue;
      }
      if (!s.func.defined() || is_source(s) || has_reduction(s) || s.is_extern) continue;
      if (func_[id].kind == Place::Nest || feeds_contraction(int(id))) continue;  // stored anyway
      std::vector<int> mine{int(id)};
      for (int in : node(int(id)).inputs) {
        std::vector<int> merged;
        std::set_union(mine.begin(), mine.end(), cone[size_t(in)].begin(), cone[size_t(in)].end(), std::back_inserter(merged));
        mine.swap(merged);
      }
      // (Summed from the last stage stored for this reason: one stored only where its readers'
      // row loop can hold it, the length it leaves inlined counts on.)
      cost[id] = recompute_cost(int(id));
      for (int in : node(int(id)).inputs)
        if (cut_[size_t(in)] != Cut::Costly) cost[id] += cost[size_t(in)];
      if (mine.size() > kMaxInlined) {
        cut_[id] = Cut::Long, mine.clear(), cost[id] = 0;
      } else if (params_.store_expensive && s.consumers.size() >= 2 && cost[id] >= kCostlyCone && read_by_row_reduction(int(id))) {
        cut_[id] = Cut::Costly;
      }
      cone[id] = std::move(mine);
    }
  }

  // Is it summed or maximized along its rows (a normalization's or softmax's reductions, which
  // its row loop holds)? Where only contractions' tiles and copies read it, storing it per row of
  // a tiled nest cost int8 ResNet-50 a third of its time.
  bool read_by_row_reduction(int id) {
    for (int c : st(id).consumers)
      if (has_reduction(st(c)) && cpu_rules(st(c).op).tile == Tile::None) return true;
    return false;
  }

  bool stored_only_as_costly(int id) const {
    const Stage& s = st(id);
    return cut_[size_t(id)] == Cut::Costly && !(params_.store_expensive && builtin_stores_elementwise(s.op, s.consumers.size()));
  }

  // Roughly the instructions a vector of this element-wise stage takes, inlined.
  int recompute_cost(int id) {
    const Node& n = node(id);
    if (cpu_rules(st(id).op).stored_when_reused) return kCostlyCone;
    if (n.op == OpKind::Cast && !n.inputs.empty() && is_floating(node(n.inputs[0]).type.dtype) && !is_floating(n.type.dtype))
      return 8;  // NaN, infinities and the range tested, truncated, wrapped (float_to_int)
    if (n.op == OpKind::Round || n.op == OpKind::Div) return 3;
    return 1;
  }

  std::string why_stored(int id) const {
    switch (cut_[size_t(id)]) {
      case Cut::Long: return " (stored: an inlined expression holds at most " + std::to_string(kMaxInlined) + " stages)";
      case Cut::Costly: return " (stored: read twice or more, costly to recompute)";
      case Cut::None: break;
    }
    return "";
  }

  // Stage id and the stages inlined into its value (element-wise, no reductions of their own).
  std::set<int> inlined_cone(int id) {
    std::vector<int> todo{id};
    std::set<int> seen;
    while (!todo.empty()) {
      const int at = todo.back();
      todo.pop_back();
      if (!seen.insert(at).second) continue;
      for (int in : node(at).inputs)
        if (live(in) && func_[size_t(in)].kind == Place::Inline && !has_reduction(st(in))) todo.push_back(in);
    }
    return seen;
  }

  // Roughly the instructions a vector of stage id's value takes, with the stages inlined into it.
  int64_t inlined_cost(int id) {
    int64_t cost = 0;
    for (int at : inlined_cone(id)) cost += recompute_cost(at);
    return cost;
  }

  // Does the nest of stage id compute a long-latency op, itself or in a stage inlined into it?
  bool computes_long_latency(int id) {
    for (int at : inlined_cone(id))
      if (cpu_rules(st(at).op).long_latency) return true;
    return false;
  }

  // Natural vectors per iteration of the loop nest of stage id: the tuned value, else 4 for
  // long-latency work (fewer where the innermost dimension is short), else 1.
  int vectors_per_iteration(int id, int vec) {
    if (params_.vec > 0) return params_.vec;
    if (st(id).extents.empty() || !computes_long_latency(id)) return 1;
    int m = 4;
    while (m > 1 && st(id).extents[0] < int64_t(2) * m * vec) m /= 2;
    return m;
  }

  // A stored transpose whose innermost output dimension walks across the input's rows: the
  // dimension (Halide order) that walks along them, > 0; else 0. Only where both are a vector
  // long and no other stage is computed per row of it.
  int transposed_dim(const Nest& nest) {
    const Stage& s = st(nest.stage);
    const Node& n = node(nest.stage);
    if (n.op != OpKind::Transpose || nest.has_row_guests || nest.func.name() != s.func.name()) return 0;
    const std::vector<int64_t>& perm = n.attrs.ints("perm");
    const int rank = int(perm.size()), vec = vector_width(p_.target, value_type(s));
    for (int k = 0; k < rank; ++k)
      if (perm[size_t(k)] == rank - 1) {
        const int j = rank - 1 - k;
        return j > 0 && s.extents[0] >= vec && s.extents[size_t(j)] >= vec ? j : 0;
      }
    return 0;
  }

  // A stored transpose whose innermost output dimension is shorter than a vector: how many of its
  // innermost dimensions make a vector together (0: not such a transpose, or none do).
  size_t narrow_transpose(const Nest& nest, int vec) {
    const Stage& s = st(nest.stage);
    if (node(nest.stage).op != OpKind::Transpose || nest.has_row_guests || nest.func.name() != s.func.name()) return 0;
    if (s.extents.size() < 2 || s.extents[0] >= vec) return 0;
    int64_t together = s.extents[0];
    for (size_t k = 1; k < s.extents.size(); ++k)
      if ((together *= s.extents[k]) >= vec) return k + 1;
    return 0;
  }

  // Integer convolutions tiled over output channels store their epilogue's values channels
  // innermost (NHWC), so that a tile writes each channel vector whole (in NCHW its 16 lanes went
  // to 16 planes, one byte each), and the next convolution's input copy (the zero point's padding,
  // channels in fours: IntConv2d's packed operand) is stored channels innermost too: a contiguous
  // copy where it was a transpose. The convolution reads four channels of a pixel either way.
  // Element-wise values stored between them (a residual block's quantized sum, a depthwise
  // convolution's sum of taps) follow their stored operands (producers first: the nests were added
  // consumers first). A strided depthwise sum stored on its own (a QDQ file that quantizes a ReLU6
  // on both sides leaves it too long to inline into the next pack) gathered a byte a tap and pixel
  // along the width: such an int8 MobileNet V2 3.73 -> 2.88 ms once it followed too.
  // A pipeline's output keeps the caller's layout, but an 8-bit one computed from such values runs
  // with the channels innermost too (reads_channels_last_): its loads stay contiguous, its byte
  // stores scatter. (Along the width, each load of a partition's u8 cut value gathered: 0.6 ms of
  // int8 ResNet-50's. An f32 output's scattered stores cost more than the gathers: 3.5 -> 6.4%.)
  // A partition hands such 8-bit images on [N, H, W, C] now, a value the next part reads through
  // a transpose of its parameter (handed_in_channels_last), stored channels innermost as its own.
  void choose_channels_last() {
    channels_last_.assign(n_, false);
    reads_channels_last_.assign(n_, false);
    for (int id = 0; id < int(n_); ++id) channels_last_[size_t(id)] = handed_in_channels_last(id);
    for (auto it = nests_.rbegin(); it != nests_.rend(); ++it) {
      const Nest& nest = *it;
      const Stage& s = st(nest.stage);
      if (s.is_extern && s.extern_kind == "int_conv") {  // (split_int_conv)
        channels_last_[size_t(nest.stage)] = true;
        continue;
      }
      if (!nest.can_host || s.extents.size() != 4 || nest.func.name() != s.func.name()) continue;
      if (nest.tiled()) {
        channels_last_[size_t(nest.stage)] =
            nest.is_root_stage && st(nest.host).dot_lanes > 0 && tile_spec(p_, st(nest.host), params_).channels;
      } else if (has_trait(s.op, Elementwise)) {
        const std::vector<int> stored = stored_operands(nest.stage);
        // Its operands' images and channels are its own; their rows and columns may be a window
        // of them (a depthwise convolution's taps, strided or padded), read a pixel's channels at
        // a time all the same.
        const bool follows = !stored.empty() && std::all_of(stored.begin(), stored.end(), [&](int k) {
          const std::vector<int64_t>& e = st(k).extents;
          return channels_last_[size_t(k)] && e.size() == 4 && e[2] == s.extents[2] && e[3] == s.extents[3];
        });
        if (nest.is_root_stage) channels_last_[size_t(nest.stage)] = follows;
        else reads_channels_last_[size_t(nest.stage)] = follows && value_type(s).bytes() == 1;
      }
    }
  }
  // A value the part before handed on [N, H, W, C] (backend::partition), read as NCHW through a
  // transpose: stored channels innermost, as this pipeline's own such values are.
  bool handed_in_channels_last(int id) {
    const Node& n = node(id);
    if (n.op != OpKind::Transpose || n.type.rank() != 4 || node(n.inputs[0]).op != OpKind::Parameter) return false;
    return n.attrs.ints("perm") == backend::kFromChannelsLast;
  }
  // The stored stages (not sources, but for values handed in channels innermost) that stage id's
  // inlined expression reads.
  std::vector<int> stored_operands(int id) {
    std::vector<int> todo(node(id).inputs.begin(), node(id).inputs.end()), found;
    std::set<int> seen;
    while (!todo.empty()) {
      const int at = todo.back();
      todo.pop_back();
      if (!seen.insert(at).second || !live(at)) continue;
      if (handed_in_channels_last(at)) {
        found.push_back(at);
        continue;
      }
      // (A stage stored per row of id's nest, to bound an inlined expression, is looked through:
      // it is stored as id is.)
      const bool row_guest = func_[size_t(at)].kind == Place::At && func_[size_t(at)].nest == func_[size_t(id)].nest;
      if ((func_[size_t(at)].kind != Place::Inline && !row_guest) || has_reduction(st(at))) {
        found.push_back(at);
        continue;
      }
      for (int in : node(at).inputs) todo.push_back(in);
    }
    return found;
  }
  // Whether value id (a depthwise convolution's padded input, its pad read through) is stored
  // channels innermost, or computed element by element from values that are.
  bool reads_channels_innermost(int id) {
    if (node(id).op == OpKind::Pad) id = node(id).inputs[0];
    if (func_[size_t(id)].kind != Place::Inline || has_reduction(st(id))) return channels_last_[size_t(id)];
    const std::vector<int> stored = stored_operands(id);
    return !stored.empty() && std::all_of(stored.begin(), stored.end(), [&](int k) { return channels_last_[size_t(k)]; });
  }
  // Is stored stage id an integer convolution's packed input ([N, C/4, H, W, 4]) computed from a
  // value stored channels innermost?
  bool packs_channels_last(const Nest& nest) {
    const Stage& s = st(nest.stage);
    if (s.extents.size() != 5 || s.extents[0] != 4 || nest.func.name() != s.func.name()) return false;
    for (int c : s.consumers)
      if (node(c).op != OpKind::IntConv2d || node(c).inputs[0] != nest.stage) return false;
    const std::vector<int> stored = stored_operands(nest.stage);
    return std::any_of(stored.begin(), stored.end(), [&](int k) { return channels_last_[size_t(k)]; });
  }

  // A 4-D stage computed channels innermost, vectorized along them, and stored [N, H, W, C] when
  // `store` (else as its buffer's strides say: a pipeline's output).
  std::string channels_innermost(FuncRef f, const Stage& s, bool store = true) {
    const std::vector<Var>& v = s.vars;
    if (store) f.reorder_storage({v[2], v[0], v[1], v[3]});
    f.reorder({v[2], v[0], v[1], v[3]});
    const int vec = vector_width(p_.target, value_type(s));
    return "channels innermost " + vectorize_and_parallelize(f, {v[2], v[0], v[1], v[3]}, {s.extents[2], s.extents[0], s.extents[1], s.extents[3]},
                                                            vec, halide_threads(), false, int64_t(1) << params_.grain, params_.tasks)
                                          .what;
  }

  // Whether a library call reads value id (which takes a buffer, not a view).
  bool read_by_library(int id) {
    const std::vector<int>& c = st(id).consumers;
    return std::any_of(c.begin(), c.end(), [&](int k) { return st(k).is_extern; });
  }

  // A packed input that only reshapes and transposes one stored value: no padding, channels in
  // fours already.
  bool packs_by_view(const Nest& nest) {
    std::vector<int> todo{nest.stage};
    std::set<int> seen;
    int stored = -1;
    while (!todo.empty()) {
      const int at = todo.back();
      todo.pop_back();
      if (!seen.insert(at).second) continue;
      if (at != nest.stage &&
          (func_[size_t(at)].kind != Place::Inline || has_reduction(st(at)) || is_source(st(at)) || handed_in_channels_last(at))) {
        if (stored >= 0 && stored != at) return false;
        stored = at;
        continue;
      }
      if (node(at).op != OpKind::Reshape && node(at).op != OpKind::Transpose) return false;
      for (int in : node(at).inputs) todo.push_back(in);
    }
    return stored >= 0 && channels_last_[size_t(stored)];
  }

  void schedule_nest(Nest& nest) {
    const Stage& s = st(nest.stage);
    const int vec = vector_width(p_.target, value_type(s));
    const int threads = halide_threads();
    const int64_t grain = int64_t(1) << params_.grain;
    if (!nest.tiled() && packs_channels_last(nest) && packs_by_view(nest) && !read_by_library(nest.stage)) {
      // Stored [N, H, W, C], the value is the packed operand already: each step of the
      // convolution reads a pixel's four channels, contiguous. (Copied, a 1x1 convolution's input
      // was one more pass over memory: 35 of them in MobileNet V2.)
      nest.has_row = false;
      os_ << nm(nest.func) << ": inlined (a view of a value stored channels innermost)\n";
      return;
    }
    if (nest.is_root_stage) ref(nest.func).compute_root();
    if (!nest.tiled()) {
      if (const int j = transposed_dim(nest); j > 0) {
        LoopNest ln = transpose_tiles(ref(nest.func), s.vars, s.extents, j, vec, threads, grain);
        nest.has_row = false;
        os_ << nm(nest.func) << ": " << (nest.is_root_stage ? "root " : "") << ln.what << "\n";
        return;
      }
      if (packs_channels_last(nest)) {
        // [N, C/4, H, W, 4] stored as [N, H, W, C]: the channels and their fours fused, vectorized.
        FuncRef f = ref(nest.func);
        const std::vector<Var>& v = s.vars;
        Var channels(v[0].name() + "_" + v[3].name());
        f.reorder_storage({v[0], v[3], v[1], v[2], v[4]});
        f.reorder({v[0], v[3], v[1], v[2], v[4]});
        f.fuse(v[0], v[3], channels);
        LoopNest ln = vectorize_and_parallelize(f, {channels, v[1], v[2], v[4]}, {s.extents[0] * s.extents[3], s.extents[1], s.extents[2], s.extents[4]},
                                                vec, threads, false, grain, params_.tasks);
        nest.has_row = false;
        os_ << nm(nest.func) << ": " << (nest.is_root_stage ? "root " : "") << "channels innermost " << ln.what << "\n";
        return;
      }
      if (const size_t k = narrow_transpose(nest, vec)) {
        // Its innermost dimension shorter than a vector (int_conv2d's channels in fours): the
        // innermost fused until they make a vector, each vector read as a few rows of the input
        // interleaved (a 56 x 56 x 256 activation packed in 0.1 ms, where 4-lane loops took 3; a
        // 7 x 7 one needs its rows too).
        FuncRef f = ref(nest.func);
        Var fused = s.vars[0];
        int64_t extent = s.extents[0];
        for (size_t d = 1; d < k; ++d) {
          Var outer(fused.name() + "_" + s.vars[d].name());
          f.fuse(fused, s.vars[d], outer);
          fused = outer;
          extent *= s.extents[d];
        }
        std::vector<Var> vars{fused};
        Shape extents{extent};
        for (size_t d = k; d < s.vars.size(); ++d) vars.push_back(s.vars[d]), extents.push_back(s.extents[d]);
        LoopNest ln = vectorize_and_parallelize(f, vars, extents, vec, threads, false, grain, params_.tasks);
        nest.has_row = false;
        os_ << nm(nest.func) << ": " << (nest.is_root_stage ? "root " : "") << "fused innermost " << ln.what << "\n";
        return;
      }
      if (channels_last_[size_t(nest.stage)] || reads_channels_last_[size_t(nest.stage)]) {
        nest.has_row = false;  // its guests are stored whole, channels innermost too
        os_ << nm(nest.func) << ": " << (nest.is_root_stage ? "root " : "") << channels_innermost(ref(nest.func), s, nest.is_root_stage) << "\n";
        return;
      }
      // The grain counts points of one instruction a vector: a point of several costly ones
      // (an LSTM's gates, [8, 256] through three sigmoids and two tanh: 2048 points, 19 us on one
      // thread of a Zen 3) runs in parallel with fewer.
      const int64_t work_grain = std::max<int64_t>(1, grain / inlined_cost(nest.stage));
      LoopNest ln = vectorize_and_parallelize(ref(nest.func), s.vars, s.extents, vec * vectors_per_iteration(nest.stage, vec),
                                              threads, false, work_grain, params_.tasks);
      nest.has_row = ln.has_row;
      nest.row = ln.row;
      os_ << nm(nest.func) << ": " << (nest.is_root_stage ? "root " : "") << ln.what << why_stored(nest.stage) << "\n";
      return;
    }
    nest.spec = tile_spec(p_, st(nest.host), params_);
    nest.spec.channels_last = channels_last_[size_t(nest.stage)];
    // A contraction's point is a whole sum: the grain counts multiply-adds (SqueezeNet's 1x1 of 384
    // -> 64 channels on 13x13 ran on one thread, 10816 points of 384 terms each).
    const int64_t tile_grain = std::max<int64_t>(2, grain / reduced_points(st(nest.host)));
    TiledNest t = tile_nest(ref(nest.func), s.vars, s.extents, nest.spec, vec, threads, tile_grain);
    nest.tile = t.tile;
    nest.panel = t.panel;
    nest.parallel = t.parallel;
    if (channels_last_[size_t(nest.stage)]) ref(nest.func).reorder_storage({s.vars[2], s.vars[0], s.vars[1], s.vars[3]});
    os_ << nm(nest.func) << ": " << (nest.is_root_stage ? "root " : "") << t.what << (channels_last_[size_t(nest.stage)] ? ", stored channels innermost" : "") << "\n";
  }

  Var level_var(const Nest& nest, Level level) { return level == Level::Tile ? nest.tile : nest.row; }

  void schedule_guests(int id) {
    const Stage& s = st(id);
    const Place& f = func_[size_t(id)];
    if (f.kind == Place::At && !nests_[size_t(f.nest)].has_row && stored_only_as_costly(id)) {
      // A costly expression stays inlined where its readers have no row loop to hold it: stored
      // whole it costs a pass over memory and a parallel loop of its own (int8 ResNet-50's
      // requantized residual sums, 15% slower).
      func_[size_t(id)] = Place{};
    } else if (f.kind == Place::At) {
      const Nest& nest = nests_[size_t(f.nest)];
      if (!nest.has_row && (channels_last_[size_t(nest.stage)] || reads_channels_last_[size_t(nest.stage)]) &&
          s.extents == st(nest.stage).extents) {
        ref(s.func).compute_root();
        os_ << nm(s.func) << ": root " << channels_innermost(ref(s.func), s) << " (as " << nm(nest.func) << ")" << why_stored(id) << "\n";
      } else if (!nest.has_row) {
        ref(s.func).compute_root();
        os_ << nm(s.func) << ": root (no row loop in " << nm(nest.func) << ")\n";
      } else {
        ref(s.func).compute_at(ref(nest.func), level_var(nest, f.level));
        const int vec = vector_width(p_.target, value_type(s)), lanes = vec * vectors_per_iteration(id, vec);
        if (s.extents[0] >= lanes) ref(s.func).vectorize(s.vars[0], lanes);
        os_ << nm(s.func) << ": per row of " << nm(nest.func) << (lanes > vec ? ", vec" + std::to_string(lanes) : "")
            << why_stored(id) << "\n";
      }
    }
    if (!live(id)) return;
    if (!has_reduction(s)) {
      // A network's steps (argsort): each stored at root.
      if (!s.helpers.empty()) os_ << nm(s.func) << " steps:" << schedule_helpers_at_root(p_, s, out_) << "\n";
      return;
    }
    const Place& a = acc_[size_t(id)];
    if (a.kind == Place::At) {
      const Nest& nest = nests_[size_t(a.nest)];
      if (a.level == Level::Row && !nest.has_row) {
        ref(s.reduction).compute_root();
        os_ << nm(s.reduction) << ": root " << schedule_reduction(p_, s, true, out_) << schedule_helpers_at_root(p_, s, out_) << "\n";
        return;
      }
      ref(s.reduction).compute_at(ref(nest.func), level_var(nest, a.level));
      if (a.level == Level::Tile) {
        os_ << nm(s.reduction) << ": per tile of " << nm(nest.func) << ", "
            << schedule_contraction_tile(p_, s, nest.spec, out_);
        if (s.right_packed) os_ << ", right operand packed when compiling";  // (panels already)
        else if (nest.spec.block > 0 || nest.spec.panels_parallel) os_ << pack_panels(s, nest);
        if (nest.spec.channels && !weights_in_vector_blocks(s)) os_ << pack_channel_panel(s, nest);
        if (cpu_rules(s.op).tile == Tile::Attention) os_ << ";" << schedule_attention_helpers(p_, s, ref(nest.func), nest.parallel, nest.spec, out_);
        else {
          // (Only a depthwise convolution's rows read its input's layout: other stages skip the walk.)
          const bool input_channels_innermost = s.op != OpKind::IntDepthwise2d || reads_channels_innermost(node(s.node).inputs[0]);
          os_ << ";" << schedule_rows_in_fours(p_, s, ref(nest.func), nest.tile, input_channels_innermost, out_) << schedule_helpers_at_root(p_, s, out_);
        }
        os_ << "\n";
      } else {
        os_ << nm(s.reduction) << ": per row of " << nm(nest.func) << ", " << schedule_reduction(p_, s, false, out_)
            << schedule_helpers_at_root(p_, s, out_) << "\n";
      }
    } else if (a.kind == Place::Nest) {
      ref(s.reduction).compute_root();
      os_ << nm(s.reduction) << ": root " << schedule_reduction(p_, s, true, out_) << schedule_helpers_at_root(p_, s, out_) << "\n";
    }
  }

  // A blocked matmul's right operand, copied one column panel at a time (the tile's columns by the
  // whole reduction, contiguous) by each block: its row tiles then read it from cache in order
  // instead of one strided row per reduction step. W3 on Zen 5: 238 -> 381 GFLOP/s.
  std::string pack_panels(const Stage& s, const Nest& nest) {
    const Node& n = node(s.node);
    if (n.inputs[0] == n.inputs[1]) return "";  // x @ x: a wrapper would copy the left operand too
    const Stage& b = st(n.inputs[1]);
    if (s.dot_lanes > 0) {
      // A dot product's right operand comes in groups of rows, [.., K/g, N, g]: an integer
      // matmul's input packed in fours, a bf16 one's pairs helper (a copy at root). A step of a
      // tile reads its columns N * 4 bytes after the last (4 KiB for 1024 columns: every step in
      // the same few L1 sets). Copied per panel, the steps follow each other.
      const Halide::Func* grouped = n.op == OpKind::IntMatmul ? &b.func : nullptr;
      const std::vector<Var>* vars = &b.vars;
      for (const backend::Helper& h : s.helpers)
        if (h.role == "pairs") grouped = &h.func, vars = &h.vars;
      if (!grouped) return "";
      FuncRef panel = ref(*grouped).in(ref(s.reduction));
      panel.compute_at(ref(nest.func), nest.panel);
      Var lanes((*vars)[0].name() + "_" + (*vars)[1].name());
      panel.fuse((*vars)[0], (*vars)[1], lanes)
          .vectorize(lanes, std::min(s.dot_lanes * nest.spec.tx, vector_width(p_.target, grouped->output_types()[0])));
      return ", right operand copied per panel";
    }
    FuncRef panel = ref(b.func).in(ref(s.reduction));
    panel.compute_at(ref(nest.func), nest.panel);
    const int vec = vector_width(p_.target, value_type(b));
    if (nest.spec.tx >= vec) panel.vectorize(b.vars[0], vec);
    return ", right operand packed per panel";
  }

  // A dot-product convolution's packed weights, [out / B, in / g, kh, kw, B, g] (Halide order: g,
  // B, kw, kh, in / g, out / B): an integer convolution's operand, or a bf16 one's helper.
  struct PackedWeights {
    Halide::Func func;
    std::vector<Var> vars;
    Shape extents;  // Halide order
  };
  PackedWeights packed_weights(const Stage& s) {
    for (const backend::Helper& h : s.helpers)
      if (h.role == "weight pairs") return {h.func, h.vars, h.extents};
    const Stage& w = st(node(s.node).inputs[1]);
    return {w.func, w.vars, w.extents};
  }

  // A dot-product convolution whose weights come in blocks of outputs a vector of sums wide (or a
  // multiple): each vector of the tile reads its block contiguous, step after step.
  bool weights_in_vector_blocks(const Stage& s) {
    if (s.dot_lanes == 0) return false;
    for (const backend::Helper& h : s.helpers)
      if (h.role == "weights by channel") return true;  // every channel's beside the next
    const PackedWeights w = packed_weights(s);
    return w.extents.size() == 6 && w.extents[1] % vector_width(p_.target, value_type(s)) == 0;
  }

  // A channel-tiled convolution's weights ([co, ci, ky, kx]), copied for each channel tile with
  // the channels innermost: the tile then loads its channel vectors contiguously at every step of
  // the reduction.
  std::string pack_channel_panel(const Stage& s, const Nest& nest) {
    const Node& n = node(s.node);
    if (n.inputs[0] == n.inputs[1]) return "";
    if (s.dot_lanes > 0) {
      // A dot-product convolution's weights come packed, [out / B, in / g, kh, kw, B, g]: where
      // the blocks B are narrower than a vector of sums, a step reads the tile's blocks a block's
      // weights apart; copied, the tile's channels by their groups are contiguous, one step after
      // the other. (Outputs innermost, [in / 4, kh, kw, out, 4], a tile's steps fell in a few sets
      // of the L1 cache: 512 x 512 3x3 at 7x7, 0.57 against 0.35 ms copied.)
      const PackedWeights w = packed_weights(s);
      FuncRef panel = ref(w.func).in(ref(s.reduction));
      panel.compute_at(ref(nest.func), nest.panel);
      Var lanes(w.vars[0].name() + "_" + w.vars[1].name());
      panel.reorder_storage({w.vars[0], w.vars[1], w.vars[5], w.vars[2], w.vars[3], w.vars[4]});
      panel.fuse(w.vars[0], w.vars[1], lanes)
          .vectorize(lanes, std::min<int>(int(w.extents[1] * w.extents[0]), vector_width(p_.target, w.func.output_types()[0])));
      return ", weights copied per channel tile";
    }
    const Stage& w = st(n.inputs[1]);
    FuncRef panel = ref(w.func).in(ref(s.reduction));
    panel.compute_at(ref(nest.func), nest.panel);
    panel.reorder_storage({w.vars[3], w.vars[0], w.vars[1], w.vars[2]});
    panel.reorder({w.vars[3], w.vars[0], w.vars[1], w.vars[2]});
    panel.vectorize(w.vars[3], vector_width(p_.target, value_type(w)));
    return ", weights packed per channel tile";
  }

  const LoweredPipeline& p_;
  const BuiltinParams params_;
  Schedule out_;
  const size_t n_;
  std::vector<Nest> nests_;
  std::vector<Place> func_, acc_;
  std::vector<Site> site_;
  enum class Cut : uint8_t { None, Long, Costly };
  std::vector<Cut> cut_;  // stored rather than inlined (find_cuts)
  std::vector<bool> store_instead_;  // stored for a reshape of it that a contraction reads (reshaped_stage)
  std::vector<bool> channels_last_, reads_channels_last_;  // (choose_channels_last)
  std::vector<std::vector<int>> wrapper_nests_;
  std::ostringstream os_;
};

}  // namespace

// The schedule depends on the threads, the L2 cache's size (weight gradients' blocks) and the CPU's
// vendor (matrix-vector products' runs of rows), so the compile cache's key does too: a cache
// shared by other machines serves each its own.
std::string builtin_identity() {
  return "built-in v1 threads=" + std::to_string(halide_threads()) + " l2=" + std::to_string(cpu_caches().l2 >> 10) + "K cpu=" +
         to_string(cpu_vendor());
}

std::vector<std::string> note_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

Schedule schedule_builtin(const LoweredPipeline& p, const BuiltinParams& params) {
  Schedule s = Builtin(p, params).run();
  s.source = builtin_identity();
  if (!params.is_default()) s.source.append(" ").append(params.str());
  return s;
}

}  // namespace hjit::schedules
