#include "halide_backend/build/partition.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "graph/op_def.h"
#include "graph/passes/dce.h"
#include "halide_backend/build/repeats.h"
#include "support/log.h"
#include "support/settings.h"

namespace hjit::backend {
namespace {

int work_of(OpKind op) {
  if (has_trait(op, Source) || op == OpKind::Parameter || op == OpKind::Constant) return 0;
  if (has_trait(op, Contraction)) return 4;
  if (has_trait(op, Reduction)) return 2;
  return 1;
}

// What a node costs to compile, in element-wise ops: measured here, a 64x64 matmul (its tile loop
// nest, unrolled) takes about 35 ms to lower and code-generate, an inlined element-wise op about
// 1.5 ms; a row reduction a few ops.
int compile_cost_of(OpKind op) {
  if (has_trait(op, Source) || op == OpKind::Parameter || op == OpKind::Constant) return 0;
  if (has_trait(op, Contraction)) return 24;
  if (has_trait(op, Reduction)) return 4;
  return 1;
}

}  // namespace

int64_t compile_cost(const Graph& g) {
  int64_t c = 0;
  for (const Node& n : g.nodes) c += compile_cost_of(n.op);
  return c;
}

namespace {

bool is_source(const Node& n) { return n.op == OpKind::Parameter || has_trait(n.op, Source) || n.op == OpKind::Constant; }

int64_t bytes_of(const Graph& g, int v) { return g.type(v).numel() * int64_t(dtype_size(g.type(v).dtype)); }

bool recomputable(const Node& n) {
  return !is_source(n) && !has_trait(n.op, ControlFlow) && (has_trait(n.op, Elementwise) || has_trait(n.op, Movement));
}

// A conversion to a narrower type (a quantized network's 8-bit activation): a recomputation
// receives it rather than recomputing it from the wider values it rounds (the int8 ResNet-50's
// cuts handed on the f32 values around each u8 one).
bool narrowing(const Graph& g, int v) {
  const Node& n = g.node(v);
  return n.op == OpKind::Cast && n.inputs.size() == 1 && dtype_size(n.type.dtype) < dtype_size(g.type(n.inputs[0]).dtype);
}

// The earlier parts' element-wise and movement values part p recomputes instead of receiving: a
// training step's backward pass reads many values of the forward pass that are cheap functions of
// a few stored ones (normalized activations, masks, sums), and handing them all on held six
// activation-sized tensors between W9's parts where two do (torch.compile's partitioner recomputes
// pointwise ops in the backward pass for the same reason). Value by value, in the graph's order: one
// is recomputed when the values its recomputation reads, besides those the part receives anyway,
// take no more bytes than it does (not counting those under a 16th of its size: a normalization's
// statistics), and the recomputation is small (at most 32 nodes computing at
// most 8 times its bytes: a part never recompiles a long chain).
// A part that is a block of a run of alike blocks (block_of: the block of each node, -1 outside)
// recomputes only within one block: a value of no block is received, and a recomputation stops
// where its block does. Otherwise what lies next to the run decides (the first layer's input is
// the embedding, a gather of parameters, which its gradient recomputed; the other layers' inputs
// are sums with matmuls, received), and the first block's part was unlike the others'.
std::set<int> recomputed_in(const Graph& g, const std::vector<size_t>& part_of, const std::vector<int>& block_of, size_t p,
                            size_t begin, size_t end) {
  const bool in_run = block_of[begin] >= 0;
  std::set<int> direct, received, taken;
  for (size_t k = begin; k < end; ++k)
    for (int in : g.nodes[k].inputs)
      if (part_of[size_t(in)] < p && !is_source(g.node(in)))
        (recomputable(g.node(in)) && (!in_run || block_of[size_t(in)] >= 0) ? direct : received).insert(in);
  for (int v : direct) {
    std::set<int> cone, frontier;
    std::vector<int> todo{v};
    while (!todo.empty() && cone.size() <= 32) {
      const int at = todo.back();
      todo.pop_back();
      if (taken.count(at) || !cone.insert(at).second) continue;
      for (int in : g.node(at).inputs) {
        if (is_source(g.node(in))) continue;
        if (recomputable(g.node(in)) && !narrowing(g, in) && (!in_run || block_of[size_t(in)] == block_of[size_t(v)])) todo.push_back(in);
        else if (!received.count(in)) frontier.insert(in);
      }
    }
    int64_t added = 0, recomputed = 0;
    for (int f : frontier) added += bytes_of(g, f) * 16 < bytes_of(g, v) ? 0 : bytes_of(g, f);
    for (int c : cone) recomputed += bytes_of(g, c);
    if (cone.size() > 32 || added > bytes_of(g, v) || recomputed > 8 * bytes_of(g, v)) continue;
    taken.insert(cone.begin(), cone.end());
    received.insert(frontier.begin(), frontier.end());
  }
  return taken;
}

// Builds one part: the caller's parameters first (all of them, in order), then a parameter per
// boundary value it reads, then its nodes [begin, end) with sources it reads from before `begin`
// copied in.
struct Builder {
  const Graph& g;
  Graph out;
  std::vector<int> id;  // original node -> node in out, -1 when not there yet
  explicit Builder(const Graph& graph) : g(graph), id(graph.nodes.size(), -1) { out.name = g.name; }
  // The caller's inputs among `reads`, as the part's first parameters; returns their indices.
  std::vector<int> add_inputs(const std::set<int>& reads) {
    std::vector<int> indices;
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      const int in = g.inputs[i];
      if (!reads.count(in)) continue;
      id[size_t(in)] = out.add_parameter(g.type(in), g.is_captured(in));
      indices.push_back(int(i));
    }
    return indices;
  }
  int copy_source(int n) {
    if (id[size_t(n)] >= 0) return id[size_t(n)];
    const Node& node = g.node(n);
    if (node.op == OpKind::Constant) return id[size_t(n)] = out.add_constant(node.type, g.constants[size_t(node.constant)]);
    Node copy = node;
    return id[size_t(n)] = out.add(std::move(copy));
  }
  int copy_source_or_mapped(int n) { return id[size_t(n)] >= 0 ? id[size_t(n)] : copy_source(n); }
  void copy(int n) {
    if (id[size_t(n)] >= 0) return;
    Node copy = g.node(n);
    for (int& in : copy.inputs) in = id[size_t(in)];
    id[size_t(n)] = out.add(std::move(copy));
  }
};

int64_t cost_between(const Graph& g, size_t a, size_t b) {
  int64_t c = 0;
  for (size_t k = a; k < b; ++k) c += compile_cost_of(g.nodes[k].op);
  return c;
}

// Appends the starts of parts of equal compile cost over nodes [a, b): `count` of them, or, 0, as
// few as keep each within `most`.
void equal_cost_begins(const Graph& g, size_t a, size_t b, int64_t most, int64_t count, std::vector<size_t>& out) {
  if (a >= b) return;
  const int64_t total = cost_between(g, a, b);
  if (count <= 0) count = std::max<int64_t>(1, (total + most - 1) / most);
  out.push_back(a);
  int64_t done = 0, made = 1;
  for (size_t k = a; k + 1 < b && made < count; ++k) {
    done += compile_cost_of(g.nodes[k].op);
    if (done * count >= total * made) out.push_back(k + 1), ++made;
  }
}

// Whether a cut between r's blocks costs little: what a block hands the next that nothing after the
// run reads (which the cut stores besides) takes at most a quarter of the bytes the block hands
// past the run anyway. A training step's forward blocks store what the backward pass reads; the
// residual stream between them (a GPT's) is one more tensor. An optimizer's steps hand each other
// nothing. A network's layers in inference hand on only what the next one reads.
bool cuts_between_blocks_cheap(const Graph& g, const Repeat& r) {
  const size_t end = r.begin + r.copies * r.period;
  std::set<int> read_after(g.outputs.begin(), g.outputs.end());
  for (const Update& u : g.updates) read_after.insert(u.value);
  for (size_t k = end; k < g.nodes.size(); ++k) read_after.insert(g.nodes[k].inputs.begin(), g.nodes[k].inputs.end());
  std::set<int> handed_on, handed_past;
  for (size_t k = r.begin + r.period; k < r.begin + 2 * r.period; ++k)
    for (int in : g.nodes[k].inputs)
      if (size_t(in) >= r.begin && size_t(in) < r.begin + r.period && !read_after.count(in)) handed_on.insert(in);
  for (size_t k = r.begin; k < r.begin + r.period; ++k)
    if (read_after.count(int(k))) handed_past.insert(int(k));
  int64_t extra = 0, stored = 0;
  for (int v : handed_on) extra += bytes_of(g, v);
  for (int v : handed_past) stored += bytes_of(g, v);
  return extra * 4 <= stored;
}

// Each node's last reader (0 where none).
std::vector<size_t> last_readers(const Graph& g) {
  std::vector<size_t> last_read(g.nodes.size(), 0);
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (int in : g.nodes[k].inputs) last_read[size_t(in)] = std::max(last_read[size_t(in)], k);
  return last_read;
}

// What a cut before node k hands on, for every k in [lo, hi]: the bytes of the values computed
// before it that nodes from it on read (sources aside: every part copies those).
std::vector<int64_t> bytes_handed_on(const Graph& g, const std::vector<size_t>& last_read, size_t lo, size_t hi) {
  auto handed = [&](size_t v, size_t at) { return v < at && last_read[v] >= at && !is_source(g.nodes[v]); };
  std::vector<int64_t> out;
  int64_t bytes = 0;
  for (size_t v = 0; v < lo; ++v)
    if (handed(v, lo)) bytes += bytes_of(g, int(v));
  out.push_back(bytes);
  for (size_t at = lo + 1; at <= hi; ++at) {
    const size_t added = at - 1;  // now before the cut
    if (handed(added, at)) bytes += bytes_of(g, int(added));
    for (int in : std::set<int>(g.nodes[added].inputs.begin(), g.nodes[added].inputs.end()))
      if (last_read[size_t(in)] == added && !is_source(g.node(in))) bytes -= bytes_of(g, in);  // read last by it
    out.push_back(bytes);
  }
  return out;
}

// Where in its period a run's blocks are best cut: the shift from the run's first node whose cut
// hands the next block the fewest bytes, where that is at most half of what the unshifted cut
// hands on; else 0 (the blocks as found, which a transformer's training step needs alike at its
// edges). find_repeats starts a block wherever the likeness starts, which in a quantized network
// was just before an 8-bit value was widened: the cut stored the f32 (or i32) value, four times
// the bytes, in the layout a pipeline's output must have.
size_t cheapest_shift(const Graph& g, const std::vector<size_t>& last_read, const Repeat& r) {
  if (r.copies < 3) return 0;
  const std::vector<int64_t> bytes = bytes_handed_on(g, last_read, r.begin + r.period, r.begin + 2 * r.period - 1);
  const size_t best = size_t(std::min_element(bytes.begin(), bytes.end()) - bytes.begin());
  if (2 * bytes[best] > bytes[0]) return 0;
  log().debug("partition: the run of {} blocks from node {} cut {} nodes later ({} bytes handed on a cut, not {})", r.copies, r.begin, best,
              bytes[best], bytes[0]);
  return best;
}

// Cuts moved, each within a few nodes (kCutSlack) and keeping at least half of each neighbouring
// part's cost, to where they hand on the fewest bytes: a quantized network's 8-bit values rather
// than the f32 values next to them. Only the cuts `movable` says: not those between alike blocks
// in parts of their own, which must stay alike.
constexpr size_t kCutSlack = 12;
void cheapest_nearby(const Graph& g, const std::vector<size_t>& last_read, std::vector<size_t>& cuts, const std::vector<bool>& movable) {
  for (size_t i = 1; i + 1 < cuts.size(); ++i) {
    if (!movable[i]) continue;
    const size_t prev = cuts[i - 1], next = cuts[i + 1], at = cuts[i];
    const size_t lo = std::max(at > kCutSlack ? at - kCutSlack : 0, prev + 1), hi = std::min(at + kCutSlack, next - 1);
    if (lo >= hi || at < lo || at > hi) continue;
    const int64_t before = cost_between(g, prev, at), after = cost_between(g, at, next);
    const std::vector<int64_t> bytes = bytes_handed_on(g, last_read, lo, hi);
    size_t best = at;
    for (size_t k = lo; k <= hi; ++k)
      if (bytes[k - lo] < bytes[best - lo] && 2 * cost_between(g, prev, k) >= before && 2 * cost_between(g, k, next) >= after) best = k;
    if (best != at) log().debug("partition: a cut moved from node {} to {} ({} bytes handed on, not {})", at, best, bytes[best - lo], bytes[at - lo]);
    cuts[i] = best;
  }
}

// How many stretches alike make each a part of its own: more than a network's stage of alike
// blocks outside the runs find_repeats takes (MobileNet V2's, EfficientNet's: 2 to 4), which cut
// a conv a part ran 2-7% slower; DenseNet-121's blocks have 6 to 24 layers.
constexpr size_t kAlikeStretches = 6;

// Where parts begin (and n, where the last ends), and each node's block (-1 outside runs). A run
// of alike blocks (the layers of a network, their gradients, their optimizer steps: find_repeats)
// is cut at its blocks, as many a part as fit `most` (a block over it cut alike at the same
// offsets in each), so that its parts are one graph, compiled once; the rest at equal compile
// cost, parts within `most`, two at least.
std::vector<size_t> part_begins(const Graph& g, int64_t total, int64_t most, std::vector<int>& block_of) {
  const size_t n = g.nodes.size();
  block_of.assign(n, -1);
  int blocks = 0;
  std::vector<size_t> begin;
  std::vector<bool> movable;  // per begin: free to move to a cheaper cut nearby (cheapest_nearby)
  auto equal_cost = [&](size_t a, size_t b, int64_t count) {
    const size_t first = begin.size();
    equal_cost_begins(g, a, b, most, count, begin);
    for (size_t k = first; k < begin.size(); ++k) movable.push_back(k > first);  // (not where it starts)
  };
  // Stretches alike in many places outside runs (alike_stretches: DenseNet's) a part each, compiled
  // once for all: DenseNet-121's cold first call took 11.8 s in 11 parts of equal cost, 4.7 s so
  // (its 58 3x3 convolutions in 4 distinct parts), and ran as fast (19.6 -> 19.7 ms). The nodes
  // between them at equal cost.
  const std::vector<size_t> hashes = node_hashes(g);
  auto segment = [&](size_t a, size_t b, int64_t count) {
    const std::vector<std::pair<size_t, size_t>> alike = alike_stretches(g, hashes, a, b, kAlikeStretches);
    if (alike.empty()) return equal_cost(a, b, count);
    log().debug("partition: {} stretches of nodes {}-{} alike in {} places or more, a part each", alike.size(), a, b, kAlikeStretches);
    size_t at = a;
    for (const auto& [from, to] : alike) {
      if (from > at) equal_cost(at, from, 0);
      begin.push_back(from), movable.push_back(false);
      at = to;
    }
    if (at < b) equal_cost(at, b, 0);
  };
  std::vector<Repeat> repeats = find_repeats(hashes, 8);
  // (Blocks without a contraction, a few element-wise ops alike, are not worth a part each.)
  std::erase_if(repeats, [&](const Repeat& r) { return cost_between(g, r.begin, r.begin + r.period) < 24; });
  std::sort(repeats.begin(), repeats.end(), [](const Repeat& a, const Repeat& b) { return a.begin < b.begin; });
  const std::vector<size_t> last_read = last_readers(g);
  size_t at = 0;
  bool after_one_part_run = false;
  for (Repeat r : repeats) {
    // Shifted, the blocks but the last stay alike (a block's tail is the next one's head); the
    // last block's tail joins what follows the run.
    const size_t shift = cheapest_shift(g, last_read, r);
    r.begin += shift;
    if (shift > 0) --r.copies;
    const size_t first = begin.size();
    segment(at, r.begin, 0);
    if (after_one_part_run && first < begin.size()) movable[first] = true;
    // As many blocks a part as fit `most`: every cut stores the values that cross it and ends a
    // fusion (a small transformer's layers a part each ran 40% slower than in two halves). Where
    // a cut between blocks costs little, one a part: all of them one compiled pipeline (a GPT
    // training step of 2 blocks compiled its forward blocks, 2 a part, in 2.9 s of its 9).
    const int64_t block = cost_between(g, r.begin, r.begin + r.period);
    const size_t group = cuts_between_blocks_cheap(g, r) ? 1 : size_t(std::clamp<int64_t>(most / std::max<int64_t>(block, 1), 1, int64_t(r.copies)));
    std::vector<size_t> offsets;
    equal_cost_begins(g, r.begin, r.begin + r.period, most, 0, offsets);
    // A run that is one part has no alike parts to keep alike: its ends may move.
    const bool one_part = group >= r.copies && offsets.size() == 1;
    for (size_t c = 0; c < r.copies; c += group)
      for (size_t off : offsets) begin.push_back(off + c * r.period), movable.push_back(one_part);
    for (size_t c = 0; c < r.copies; ++c, ++blocks)
      std::fill_n(block_of.begin() + std::ptrdiff_t(r.begin + c * r.period), r.period, blocks);
    at = r.begin + r.copies * r.period;
    after_one_part_run = one_part;
    log().debug("partition: {} blocks of {} nodes from node {}, {} a part", r.copies, r.period, r.begin, group);
  }
  const size_t first = begin.size();
  if (repeats.empty()) segment(0, n, std::max<int64_t>(2, (total + most - 1) / most));
  else segment(at, n, 0);
  if (after_one_part_run && first < begin.size()) movable[first] = true;
  if (begin.empty() || begin.front() != 0) begin.insert(begin.begin(), 0), movable.insert(movable.begin(), false);
  begin.push_back(n);
  movable.push_back(false);
  cheapest_nearby(g, last_read, begin, movable);
  return begin;
}

// The same graph with its sources (parameters, constants, fills) first, the rest in their order.
// Sources are copied into each part that reads them, so their place cuts nothing; but CSE leaves a
// constant every layer uses among the first layer's nodes, where it kept the first layer from
// being like the others. The same goes for cheap values of constants alone (a causal mask, `iota
// <= iota`, which the gradient of every attention reads, made once where the backward pass first
// reads it: the first block's gradient was one node longer than the others', so no run of alike
// blocks was found and a GPT's 2-block step compiled its two gradient blocks apart): they come next,
// outside every block.
Graph sources_first(const Graph& g) {
  Graph out;
  out.name = g.name;
  out.constants = g.constants;
  std::vector<int> tier(g.nodes.size(), 2);  // 0: sources, 1: cheap values of constants alone, 2: the rest
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& node = g.nodes[k];
    if (is_source(node)) {
      tier[k] = 0;
      continue;
    }
    const bool of_constants = std::all_of(node.inputs.begin(), node.inputs.end(), [&](int in) {
      return tier[size_t(in)] == 1 || (tier[size_t(in)] == 0 && g.node(in).op != OpKind::Parameter);
    });
    if (of_constants && recomputable(node)) tier[k] = 1;
  }
  std::vector<int> id(g.nodes.size(), -1);
  for (int t : {0, 1, 2})
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      if (tier[k] != t) continue;
      Node copy = g.nodes[k];
      for (int& in : copy.inputs) in = id[size_t(in)];
      id[k] = int(out.nodes.size());
      out.nodes.push_back(std::move(copy));
    }
  for (int v : g.inputs) out.inputs.push_back(id[size_t(v)]);
  for (int v : g.outputs) out.outputs.push_back(id[size_t(v)]);
  for (const Update& u : g.updates) out.updates.push_back({id[size_t(u.target)], id[size_t(u.value)]});
  return out;
}

}  // namespace

namespace {

// Where a graph is cut: each node's part, each part's nodes (its own and those it recomputes), the
// values later parts read (boundary ids, in the order they are first read), and the output slots'
// values.
struct Cuts {
  size_t count = 0;
  std::vector<size_t> part_of;
  std::vector<std::vector<int>> nodes_of;
  std::vector<std::set<int>> recomputed;
  std::map<int, int> boundary_of;
  std::set<int> channels_last;  // boundary values handed on [N, H, W, C] (is_8_bit_image)
  std::vector<int> slot_node;
};

// In a network of integer convolutions, an 8-bit image is handed to the next part [N, H, W, C]
// (a transpose in each part's graph): inside a part such values are stored channels innermost
// (the convolutions' tiles store, and their packed inputs read, a pixel's channels contiguous), and
// in NCHW the part before stored its last tile a byte per plane (16 byte stores a vector) and the
// part after copied the value back channels innermost. Int8 ResNet-50 on Zen 5, the old and new
// library alternated: 9.35-9.48 -> 7.59-7.67 ms; MobileNet V2 2.57-2.76 -> 2.15-2.25 ms.
bool is_8_bit_image(const Graph& g, int v) { return g.type(v).rank() == 4 && dtype_size(g.type(v).dtype) == 1; }

// Part p as a graph of its own: the caller's inputs it reads, then the values handed in, in the
// order its nodes first read them; the values it hands on, in the order they are computed, then
// the caller's outputs it computes. Alike blocks are then alike parts, whatever else reads them.
Part part_graph(const Graph& g, const Cuts& c, size_t p) {
  Builder b(g);
  Part part;
  std::set<int> reads;
  for (int k : c.nodes_of[p]) reads.insert(g.nodes[size_t(k)].inputs.begin(), g.nodes[size_t(k)].inputs.end());
  for (size_t s = 0; s < c.slot_node.size(); ++s)
    if (p + 1 == c.count && is_source(g.node(c.slot_node[s]))) reads.insert(c.slot_node[s]);
  part.caller_inputs = b.add_inputs(reads);
  std::set<int> handed;
  for (int k : c.nodes_of[p])
    for (int v : g.nodes[size_t(k)].inputs)
      if (c.boundary_of.count(v) && c.part_of[size_t(v)] < p && !c.recomputed[p].count(v) && handed.insert(v).second) {
        if (c.channels_last.count(v)) {
          const TensorType& t = g.type(v);
          const int stored = b.out.add_parameter(TensorType{t.dtype, {t.shape[0], t.shape[2], t.shape[3], t.shape[1]}});
          b.id[size_t(v)] = b.out.add_op(OpKind::Transpose, {stored}, Attrs{{"perm", kFromChannelsLast}});
        } else {
          b.id[size_t(v)] = b.out.add_parameter(g.type(v));
        }
        part.boundary_inputs.push_back(c.boundary_of.at(v));
      }
  // Sources are copied where they are read (and the caller's inputs are parameters already).
  for (int k : c.nodes_of[p]) {
    if (is_source(g.nodes[size_t(k)])) continue;
    for (int in : g.nodes[size_t(k)].inputs)
      if (b.id[size_t(in)] < 0) b.copy_source(in);
    b.copy(k);
  }
  for (const auto& [v, id] : c.boundary_of)  // (in node order)
    if (c.part_of[size_t(v)] == p) {
      b.out.outputs.push_back(c.channels_last.count(v) ? b.out.add_op(OpKind::Transpose, {b.id[size_t(v)]}, Attrs{{"perm", kToChannelsLast}})
                                                      : b.id[size_t(v)]);
      part.output_slot.push_back(-1 - id);
    }
  // A caller's output is computed by its node's part; a source output is copied into the last.
  for (size_t s = 0; s < c.slot_node.size(); ++s) {
    const int v = c.slot_node[s];
    const bool here = is_source(g.node(v)) ? p + 1 == c.count : c.part_of[size_t(v)] == p;
    if (!here) continue;
    b.out.outputs.push_back(b.copy_source_or_mapped(v));
    part.output_slot.push_back(int(s));
  }
  // (A value only later parts read, and recompute, is computed here for nothing: dropped.)
  part.graph = dce(b.out);
  return part;
}

}  // namespace

std::vector<Part> partition(const Graph& original, bool at_once) {
  const Graph g = sources_first(original);
  int64_t work = 0;
  for (const Node& node : g.nodes) work += work_of(node.op);
  const int64_t total = compile_cost(g);
  const int64_t most = std::max<int64_t>(1, *setting::count(setting::Id::PartMaxCost));
  const bool halves = at_once && work >= *setting::count(setting::Id::PartitionWork);
  if (!halves && total <= most) return {};
  std::vector<int> block_of;
  const std::vector<size_t> begin = part_begins(g, total, most, block_of);
  Cuts c;
  c.count = begin.size() - 1;
  if (c.count < 2) return {};
  c.part_of.resize(g.nodes.size());
  for (size_t p = 0; p < c.count; ++p)
    for (size_t k = begin[p]; k < begin[p + 1]; ++k) c.part_of[k] = p;
  c.nodes_of.resize(c.count);
  c.recomputed.resize(c.count);
  for (size_t p = 0; p < c.count; ++p) {
    c.recomputed[p] = recomputed_in(g, c.part_of, block_of, p, begin[p], begin[p + 1]);
    c.nodes_of[p].assign(c.recomputed[p].begin(), c.recomputed[p].end());
    for (size_t k = begin[p]; k < begin[p + 1]; ++k) c.nodes_of[p].push_back(int(k));
  }
  // Values a later part reads (sources are copied into each part that reads them, not handed on).
  for (size_t p = 0; p < c.count; ++p)
    for (int b : c.nodes_of[p])
      for (int in : g.nodes[size_t(b)].inputs)
        if (c.part_of[size_t(in)] < p && !is_source(g.node(in)) && !c.recomputed[p].count(in) && !c.boundary_of.count(in))
          c.boundary_of.emplace(in, int(c.boundary_of.size()));
  const bool integer_convolutions = std::any_of(g.nodes.begin(), g.nodes.end(), [](const Node& n) {
    return n.op == OpKind::IntConv2d || n.op == OpKind::IntDepthwise2d;
  });
  for (const auto& [v, id] : c.boundary_of)
    if (integer_convolutions && is_8_bit_image(g, v)) c.channels_last.insert(v);
  c.slot_node = g.outputs;
  for (const Update& u : g.updates) c.slot_node.push_back(u.value);
  std::vector<Part> parts;
  for (size_t p = 0; p < c.count; ++p) parts.push_back(part_graph(g, c, p));
  // (A part whose values nobody reads, a run of sources say, has nothing to run.)
  parts.erase(std::remove_if(parts.begin(), parts.end(), [](const Part& p) { return p.graph.outputs.empty(); }), parts.end());
  if (parts.size() < 2) return {};
  return parts;
}

}  // namespace hjit::backend
