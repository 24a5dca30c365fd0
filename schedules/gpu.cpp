// GPU schedules (CUDA targets): the unfused (opt_level 0) and built-in (opt_level 1) schedules as
// a GPU runs them. Every Func computed at root is one kernel launch over a grid of thread blocks:
// two-dimensional 32 x 8 thread tiles where a stage has two dimensions or more (the innermost one
// across a warp, so that its loads and stores coalesce), 256 threads in a row for one dimension,
// one thread for a scalar. Row reductions long enough to share out give each row a block whose
// threads fold strided parts of it into shared memory, long reductions to one value a kernel of
// partial results first; other reductions run their reduction loop inside each thread of the tiled
// output. The built-in schedule inlines element-wise chains into the kernel that reads them.
// Gathers with index checks (take, check_index) run on the host.
#include <optional>
#include <sstream>

#include "graph/op_def.h"
#include "schedules/class_rules.h"
#include "schedules/recorder.h"
#include "schedules/schedule.h"
#include "schedules/stage_info.h"

namespace hjit::schedules {
namespace {

using backend::LoweredPipeline;
using backend::Stage;
using Halide::Var;
using Halide::VarOrRVar;

constexpr int kTileX = 32, kTileY = 8, kRowThreads = 256, kBlockThreads = 256;

std::string nm(const Halide::Func& f) { return backend::canonical_name(f.name()); }

int clamp_tile(int64_t extent, int tile) { return int(std::max<int64_t>(1, std::min<int64_t>(extent, tile))); }

// Halide has three block dimensions: the dimensions from the third outwards (of `vars`, innermost
// first) become one loop, which this returns.
Var fuse_outer_dims(StageRef stage, const std::vector<std::string>& vars) {
  Var outer(vars.back());
  for (size_t d = vars.size() - 1; d-- > 2;) {
    Var fused(vars[d] + "_f");
    stage.fuse(Var(vars[d]), outer, fused);
    outer = fused;
  }
  return outer;
}

// Tiles the loops `vars` (innermost first, of the given extents) of one stage over blocks and
// threads. Returns what it did, for the schedule's notes.
std::string tile(StageRef stage, const std::vector<std::string>& vars, const std::vector<int64_t>& extents) {
  const auto tail = Halide::TailStrategy::GuardWithIf;
  if (vars.empty()) {
    stage.gpu_single_thread();
    return "one thread";
  }
  if (vars.size() == 1) {
    Var x(vars[0]), xo(vars[0] + "_bk"), xi(vars[0] + "_th");
    const int t = clamp_tile(extents[0], kRowThreads);
    stage.split(x, xo, xi, t, tail).gpu_blocks({xo}).gpu_threads({xi});
    return "blocks of " + std::to_string(t);
  }
  Var x(vars[0]), y(vars[1]), xo(vars[0] + "_bk"), xi(vars[0] + "_th"), yo(vars[1] + "_bk"), yi(vars[1] + "_th");
  // A narrow innermost dimension (a reduction's kept axis of size 1) leaves its threads to y.
  const int tx = clamp_tile(extents[0], kTileX), ty = clamp_tile(extents[1], std::max(kTileY, kBlockThreads / tx));
  stage.split(x, xo, xi, tx, tail).split(y, yo, yi, ty, tail).reorder({xi, yi, xo, yo});
  std::vector<VarOrRVar> blocks{xo, yo};
  if (vars.size() > 2) blocks.push_back(fuse_outer_dims(stage, vars));
  stage.gpu_blocks(blocks).gpu_threads({xi, yi});
  return "tiles of " + std::to_string(tx) + "x" + std::to_string(ty);
}

std::vector<std::string> names(const std::vector<Var>& vars) {
  std::vector<std::string> out;
  for (const Var& v : vars) out.push_back(v.name());
  return out;
}

// A Func at root, every definition tiled over the pure dimensions it has (an update that writes
// computed coordinates, a scatter, has none: it runs on one thread).
std::string root_kernel(Schedule& out, const Halide::Func& f, const std::vector<Var>& vars, const Shape& extents) {
  FuncRef ref(&out, f);
  ref.compute_root();
  std::string what = nm(f) + ": root " + tile(ref, names(vars), extents);
  for (int k = 0; k < f.num_update_definitions(); ++k) {
    std::vector<std::string> pure;
    std::vector<int64_t> pure_extents;
    const std::vector<Halide::Expr> args = f.update_args(k);
    for (size_t d = 0; d < vars.size() && d < args.size(); ++d) {
      const auto* v = args[d].as<Halide::Internal::Variable>();
      if (v && v->name == vars[d].name()) pure.push_back(v->name), pure_extents.push_back(extents[d]);
    }
    // Pure dimensions past a computed one cannot be tiled apart from it: only a leading run is.
    size_t run = 0;
    while (run < pure.size() && pure[run] == vars[run].name()) ++run;
    pure.resize(run), pure_extents.resize(run);
    what += "; update " + tile(ref.update(k), pure, pure_extents);
  }
  return what;
}

constexpr int64_t kRowShareMin = 64, kScalarShareMin = 1024;

// A reduction to one value whose innermost reduced axis has kScalarShareMin elements or more: a
// kernel of 256 to 4096 threads, each folding every lanes-th element of that axis (with the outer
// reduced axes), then one thread folding their results. (One thread folding everything, the
// fallback, would leave all but one of the GPU's threads idle.)
std::optional<std::string> scalar_reduction(Schedule& out, const Stage& s) {
  const int64_t* known = s.rvars.empty() ? nullptr : Halide::Internal::as_const_int(s.rvars[0].extent());
  const int64_t extent = known ? *known : 0;
  if (extent < kScalarShareMin) return std::nullopt;
  const int lanes = extent >= 65536 ? 4096 : extent >= 8192 ? 1024 : 256;
  FuncRef acc(&out, s.reduction);
  acc.compute_root().gpu_single_thread();
  StageRef u = acc.update();
  Halide::RVar ro(s.rvars[0].name() + "_o"), ri(s.rvars[0].name() + "_i");
  u.split(s.rvars[0], ro, ri, lanes, Halide::TailStrategy::GuardWithIf);
  FuncRef partial = u.rfactor(ri, Var("lane"));
  u.gpu_single_thread();
  partial.compute_root();
  const std::string how = tile(partial, {"lane"}, {lanes});
  tile(partial.update(), {"lane"}, {lanes});
  return nm(s.reduction) + ": " + std::to_string(lanes) + " partial results in " + how + ", folded by one thread";
}

// A row reduction (the innermost input axis folded) over rows of kRowShareMin or more: a block per
// output element (up to three block dimensions, outer ones fused), whose 32-128 threads each fold
// every lanes-th element of the row (consecutive threads read consecutive elements: coalesced)
// into shared memory; one thread then folds those partial results. Reductions to one value go to
// scalar_reduction; argmax/argmin and other reductions: nullopt (a reduction loop per thread).
std::optional<std::string> block_reduction(Schedule& out, const LoweredPipeline& p, const Stage& s) {
  if (!gpu_rules(s.op).shared_memory_fold) return std::nullopt;
  if (s.vars.empty()) return scalar_reduction(out, s);
  if (!reduces_innermost(p, s)) return std::nullopt;
  const int64_t row = innermost_reduced_extent(p, s);
  if (row < kRowShareMin) return std::nullopt;
  const int lanes = row >= 4096 ? 128 : row >= 1024 ? 64 : 32;
  FuncRef acc(&out, s.reduction);
  acc.compute_root();
  std::string what = nm(s.reduction) + ": root, init " + tile(acc, names(s.vars), s.extents);
  StageRef u = acc.update();
  std::vector<VarOrRVar> blocks;
  const Var outer = fuse_outer_dims(u, names(s.vars));
  // The final fold runs in a thread loop of one thread: at block level, Halide would put a barrier
  // in each of its iterations.
  Var row_block(s.vars[0].name() + "_bk"), one_thread(s.vars[0].name() + "_th");
  blocks.emplace_back(row_block);
  for (size_t d = 1; d < std::min<size_t>(2, s.vars.size()); ++d) blocks.emplace_back(s.vars[d]);
  if (s.vars.size() > 2) blocks.emplace_back(outer);
  Halide::RVar ro(s.rvars[0].name() + "_o"), ri(s.rvars[0].name() + "_i");
  Var lane("lane");
  u.split(s.rvars[0], ro, ri, lanes, Halide::TailStrategy::GuardWithIf);
  FuncRef partial = u.rfactor(ri, lane);
  u.split(s.vars[0], row_block, one_thread, 1).gpu_blocks(blocks).gpu_threads({one_thread});
  partial.compute_at(acc, row_block);
  partial.gpu_threads({lane});
  partial.update().gpu_threads({lane});
  return what + "; update a block per row, " + std::to_string(lanes) + " threads folding into shared memory";
}

// A matmul whose rows and columns are whole output tiles (64 columns, 16 rows): a block (one warp)
// per tile, each thread accumulating 4 columns x 8 rows in registers, the columns as one vector
// (float4 loads of the right operand, whose columns are contiguous), the reduction unrolled by 8:
// each operand element a thread loads feeds several multiply-adds. (Halide's own CUDA matmul,
// apps/cuda_mat_mul, is this schedule, within 1.35x of cuBLAS.) Tails would need the operands'
// realized regions to stretch past their inputs: other shapes take the tiled kernel of root_kernel.
constexpr int kMatmulTileX = 64, kMatmulTileY = 16, kMatmulRegsX = 4, kMatmulRegsY = 8, kMatmulUnrollK = 8;

std::optional<std::string> register_blocked_matmul(Schedule& out, const Stage& s) {
  if (gpu_rules(s.op).kernel != GpuKernel::BlockedMatmul || s.vars.size() < 2 || s.rvars.empty() || !s.reduction.defined()) return std::nullopt;
  if (s.extents[0] % kMatmulTileX != 0 || s.extents[1] % kMatmulTileY != 0) return std::nullopt;
  const std::vector<std::string> vars = names(s.vars);
  Var x(vars[0]), y(vars[1]), xo(vars[0] + "_bk"), yo(vars[1] + "_bk"), xi(vars[0] + "_in"), yi(vars[1] + "_in");
  Var xt(vars[0] + "_th"), yt(vars[1] + "_th"), xr(vars[0] + "_rg"), yr(vars[1] + "_rg");
  FuncRef result(&out, s.func);
  result.compute_root();
  result.split(x, xo, xi, kMatmulTileX).split(y, yo, yi, kMatmulTileY);
  result.split(xi, xt, xr, kMatmulRegsX).split(yi, yt, yr, kMatmulRegsY);
  result.reorder({xr, yr, xt, yt, xo, yo});
  std::vector<VarOrRVar> blocks{xo, yo};
  if (vars.size() > 2) blocks.push_back(fuse_outer_dims(result, vars));
  result.gpu_blocks(blocks).gpu_threads({xt, yt}).unroll(xr).unroll(yr);
  FuncRef acc(&out, s.reduction);
  acc.compute_at(result, xt).vectorize(x).unroll(y);
  StageRef update = acc.update();
  update.reorder({x, y, s.rvars[0]}).vectorize(x).unroll(y);
  const int64_t* k = Halide::Internal::as_const_int(s.rvars[0].extent());
  if (k && *k % kMatmulUnrollK == 0) {
    Halide::RVar ko(s.rvars[0].name() + "_o"), ki(s.rvars[0].name() + "_i");
    update.split(s.rvars[0], ko, ki, kMatmulUnrollK).unroll(ki);
  }
  return nm(s.func) + ": root tiles of " + std::to_string(kMatmulTileX) + "x" + std::to_string(kMatmulTileY) + ", " +
         std::to_string(kMatmulRegsX) + "x" + std::to_string(kMatmulRegsY) + " outputs a thread in registers";
}

// A convolution whose output width, height and channels are whole tiles (8, 4, 32): a block per
// tile of 64 threads (2 across x, 4 across y, 8 across channels), each accumulating 4 columns x 4
// output channels in registers, so that each input value it loads feeds four channels and each
// weight four columns. Other shapes take the tiled kernel of root_kernel.
constexpr int kConvTileX = 8, kConvTileY = 4, kConvTileC = 32, kConvRegs = 4;

std::optional<std::string> register_blocked_conv(Schedule& out, const Stage& s) {
  if (gpu_rules(s.op).kernel != GpuKernel::BlockedConvolution || s.vars.size() != 4 || !s.reduction.defined() || s.rvars.size() != 3) return std::nullopt;
  if (s.extents[0] % kConvTileX != 0 || s.extents[1] % kConvTileY != 0 || s.extents[2] % kConvTileC != 0) return std::nullopt;
  const std::vector<std::string> v = names(s.vars);  // ox, oy, co, n
  Var x(v[0]), y(v[1]), c(v[2]), n(v[3]);
  Var xo(v[0] + "_bk"), xi(v[0] + "_in"), xt(v[0] + "_th"), xr(v[0] + "_rg");
  Var yo(v[1] + "_bk"), yt(v[1] + "_th");
  Var co(v[2] + "_bk"), ci(v[2] + "_in"), ct(v[2] + "_th"), cr(v[2] + "_rg"), cn(v[2] + "_n");
  FuncRef result(&out, s.func);
  result.compute_root();
  result.split(x, xo, xi, kConvTileX).split(xi, xt, xr, kConvRegs);
  result.split(y, yo, yt, kConvTileY);
  result.split(c, co, ci, kConvTileC).split(ci, ct, cr, kConvRegs);
  result.reorder({xr, cr, xt, yt, ct, xo, yo, co, n});
  result.fuse(co, n, cn);
  result.gpu_blocks({xo, yo, cn}).gpu_threads({xt, yt, ct}).unroll(xr).unroll(cr);
  FuncRef acc(&out, s.reduction);
  acc.compute_at(result, xt).unroll(x).unroll(c);
  acc.update().reorder({x, c, s.rvars[0], s.rvars[1], s.rvars[2]}).unroll(x).unroll(c);
  return nm(s.func) + ": root tiles of " + std::to_string(kConvTileX) + "x" + std::to_string(kConvTileY) + "x" +
         std::to_string(kConvTileC) + ", " + std::to_string(kConvRegs) + "x" + std::to_string(kConvRegs) +
         " outputs (columns x channels) a thread in registers";
}

// Attention with a tile of query rows per block: the block computes its rows' scores into shared
// memory (threads across keys and rows), then each row's maximum and sum (a thread per row), then
// the output (threads across values and rows), each thread folding over the keys; the [T, S]
// score and probability matrices never reach global memory. For key counts whose score tile fits
// in shared memory (kAttentionRows x T floats up to 16 KiB); longer ones: a root kernel per helper.
constexpr int kAttentionRows = 8;
constexpr int64_t kAttentionSharedBytes = 16 * 1024;

std::optional<std::string> attention_query_tiles(Schedule& out, const Stage& s) {
  if (gpu_rules(s.op).kernel != GpuKernel::AttentionQueryTiles || s.vars.size() < 2 || !s.reduction.defined()) return std::nullopt;
  const backend::Helper *scores = nullptr, *row_max = nullptr, *row_sum = nullptr;
  for (const backend::Helper& h : s.helpers) {
    if (h.role == "scores") scores = &h;
    if (h.role == "row_max") row_max = &h;
    if (h.role == "row_sum") row_sum = &h;
  }
  if (!scores || !row_max || !row_sum) return std::nullopt;
  const int64_t T = scores->extents[0];
  if (T * kAttentionRows * 4 > kAttentionSharedBytes) return std::nullopt;
  const std::vector<std::string> vars = names(s.vars);  // e, i, batch...
  const int rows = clamp_tile(s.extents[1], kAttentionRows);
  const int lanes = clamp_tile(s.extents[0], 32);
  Var e(vars[0]), i(vars[1]), io(vars[1] + "_bk"), ii(vars[1] + "_th"), eo(vars[0] + "_o"), ei(vars[0] + "_th");
  const auto tail = Halide::TailStrategy::GuardWithIf;
  FuncRef result(&out, s.func);
  result.compute_root();
  result.split(i, io, ii, rows, tail).split(e, eo, ei, lanes, tail).reorder({ei, ii, eo, io});
  std::vector<VarOrRVar> blocks{io};
  if (vars.size() > 2) blocks.push_back(fuse_outer_dims(result, vars));  // the batch dimensions, as one
  result.gpu_blocks(blocks).gpu_threads({ei, ii});
  FuncRef acc(&out, s.reduction);
  acc.compute_at(result, ei);
  // Per block: the scores of its rows (shared memory), their maxima and sums.
  auto per_block = [&](const backend::Helper& h, bool over_keys) {
    FuncRef f(&out, h.func);
    f.compute_at(result, io);
    const std::vector<std::string> hv = names(h.vars);
    if (over_keys) {
      Var j(hv[0]), jo(hv[0] + "_o"), ji(hv[0] + "_th"), r(hv[1]);
      const int kt = clamp_tile(h.extents[0], 32);
      f.split(j, jo, ji, kt, tail).reorder({ji, r, jo}).gpu_threads({ji, r});
      f.update().split(j, jo, ji, kt, tail).reorder({ji, r, jo}).gpu_threads({ji, r});
    } else {
      f.gpu_threads({Var(hv[0])});
      f.update().gpu_threads({Var(hv[0])});
    }
  };
  per_block(*scores, true);
  per_block(*row_max, false);
  per_block(*row_sum, false);
  return nm(s.func) + ": blocks of " + std::to_string(rows) + " query rows, scores in shared memory, " +
         std::to_string(lanes) + " threads across values";
}

// Stages that run on the host (Halide copies their operands there).
bool host_only(const Stage& s) { return gpu_rules(s.op).kernel == GpuKernel::OnHost; }

// Stored rather than inlined: operands of contractions (each element is read many times) and of
// host-only stages (the host cannot run device code such as libdevice's functions).
bool stored_for_consumers(const LoweredPipeline& p, const Stage& s) {
  for (int c : s.consumers)
    if (gpu_rules(p.stages[size_t(c)].op).operands_stored) return true;
  return false;
}

}  // namespace

std::string gpu_identity() {
  return "gpu v6 tiles=" + std::to_string(kTileX) + "x" + std::to_string(kTileY) + " row=" + std::to_string(kRowThreads);
}

backend::Schedule schedule_gpu(const LoweredPipeline& p, bool fuse) {
  Schedule out;
  std::ostringstream os;
  for (const Stage& s : p.stages) {
    if (is_source(s) || !s.func.defined() || s.absorbed || (s.consumers.empty() && !s.is_output)) continue;
    if (std::optional<std::string> tiles = attention_query_tiles(out, s)) {
      os << *tiles << "\n";
      continue;
    }
    for (const backend::Helper& h : s.helpers) os << root_kernel(out, h.func, h.vars, h.extents) << "\n";
    if (host_only(s)) {
      if (!s.is_output) FuncRef(&out, s.func).compute_root();
      os << nm(s.func) << ": root, on the host (index checks)\n";
      continue;
    }
    std::optional<std::string> mm = register_blocked_matmul(out, s);
    if (!mm) mm = register_blocked_conv(out, s);
    if (mm) {
      os << *mm << "\n";
      continue;
    }
    if (has_reduction(s)) {
      if (std::optional<std::string> shared = block_reduction(out, p, s)) os << *shared << "\n";
      else os << root_kernel(out, s.reduction, s.vars, s.extents) << "\n";
      if (!s.is_output) continue;  // its reader is a copy, inlined into the consumers
    } else if (!s.is_output) {
      // Fused: element-wise and data movement inline into the kernels that read them; operands of
      // contractions are stored, since each element is read many times.
      if (!fuse || stored_for_consumers(p, s)) os << root_kernel(out, s.func, s.vars, s.extents) << "\n";
      continue;
    }
    FuncRef f(&out, s.func);
    os << nm(s.func) << ": " << tile(f, names(s.vars), s.extents) << "\n";
  }
  for (size_t k = 0; k < p.outputs.size(); ++k)
    if (p.output_is_wrapper[k] && p.outputs[k].defined()) {
      const Stage& s = p.stages[size_t(p.output_node[k])];
      if (host_only(s)) {  // the wrapper inlines the gather: on the host too
        os << nm(p.outputs[k]) << ": on the host (index checks)\n";
        continue;
      }
      os << nm(p.outputs[k]) << ": " << tile(FuncRef(&out, p.outputs[k]), names(s.vars), s.extents) << "\n";
    }
  out.notes = note_lines(os.str());
  out.source = gpu_identity() + (fuse ? " fused" : " unfused");
  return out;
}

}  // namespace hjit::schedules
