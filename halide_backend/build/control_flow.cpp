// Planning a graph with host steps (runtime/host_steps.h runs the plan): the graph cut into steps,
// each value given a place, each step compiled, then the copies into outputs and the lifetimes of
// the values between steps. compile_control_flow lists those phases in order.
#include "halide_backend/build/control_flow.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "graph/op_def.h"
#include "graph/passes/bucket_collectives.h"
#include "graph/rewriter.h"
#include "halide_backend/runtime/host_steps.h"
#include "support/allocator.h"
#include "support/log.h"

namespace hjit::backend {
namespace {

size_t bytes_of(const TensorType& t) { return size_t(t.numel()) * size_t(dtype_size(t.dtype)); }

bool is_source(const Node& n) { return has_trait(n.op, Source); }

bool same_loc(const Loc& a, const Loc& b) { return a.kind == b.kind && a.index == b.index; }

SizedBytes fixed_bytes(const TensorType& t) {
  SizedBytes b{dtype_size(t.dtype), {}};
  for (int64_t x : t.shape) b.extents.push_back(Affine{x, {}});
  return b;
}
// Dynamic sizes: the forms of a node's extents (its fixed extents where none vary).
std::vector<Affine> extent_forms(const Graph& g, const SymbolicSizes* d, int v) {
  return d && d->extent_varies(v) ? d->extents[size_t(v)] : fixed_bytes(g.type(v)).extents;
}
SizedBytes sized_bytes(const Graph& g, const SymbolicSizes* d, int v) { return {dtype_size(g.type(v).dtype), extent_forms(g, d, v)}; }

// What the inner compiles found: all in memory (a cache hit), all there or on disk (loaded), or
// something compiled here.
struct Found {
  bool all_hits = true, all_loaded = true;
  std::shared_ptr<const Executable> operator()(const Graph& g, const Options& o) {
    const Compiled c = compile(g, o);
    all_hits &= c.cache_hit;
    all_loaded &= c.cache_hit || c.loaded;
    return c.executable;
  }
};

// A host step of a graph with dynamic sizes: only a scan's trip count (with its scanned operands'
// and stacked results' first axis) may vary. Its body, carries and captures are those of every
// size (fit_symbolic_sizes compared the bodies).
void check_dynamic_host_step(const Graph& g, const SymbolicSizes& d, const std::vector<int>& members) {
  const Node& first = g.node(members.front());
  auto fixed_from = [&](int v, size_t dim) {
    const std::vector<Affine>& e = d.extents[size_t(v)];
    for (size_t k = dim; k < e.size(); ++k)
      if (!e[k].is_constant()) return false;
    return true;
  };
  bool varies = false;
  for (int m : members) {
    varies |= d.varies(m);
    for (int in : g.node(m).inputs) varies |= d.extent_varies(in);
  }
  if (!varies) return;
  const std::string what = std::string(op_name(first.op)) + " (node %" + std::to_string(members.front()) + ")";
  if (first.op != OpKind::Scan) throw ValueError(what + " compiles for fixed sizes only");
  const size_t carries = size_t(first.attrs.i("carries")), xs = size_t(first.attrs.i("xs"));
  for (int m : members) {
    for (const auto& [name, forms] : d.attrs[size_t(m)])
      if (name != "length") throw ValueError(what + ": its attribute '" + name + "' varies with a dynamic size");
    const bool stacked = size_t(g.node(m).attrs.i("result")) >= carries;
    if (!fixed_from(m, stacked ? 1 : 0)) throw ValueError(what + ": its carries vary with a dynamic size (a scan's body has fixed sizes)");
  }
  for (size_t i = 0; i < first.inputs.size(); ++i) {
    const bool scanned = i >= carries && i < carries + xs;
    if (!fixed_from(first.inputs[i], scanned ? 1 : 0))
      throw ValueError(what + ": its operand " + std::to_string(i) + " varies with a dynamic size other than along the scanned axis");
  }
}

// The graph cut into steps: maximal runs of ordinary nodes, and each host step (a control flow
// operation with its sibling result nodes, or a collective).
struct Cut {
  std::vector<int> step_of;             // per node; -1 for sources
  std::vector<std::vector<int>> members;
  std::vector<bool> host;               // per step: a host step
};
Cut cut_into_steps(const Graph& g) {
  const size_t n = g.nodes.size();
  Cut c;
  c.step_of.assign(n, -1);
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g.nodes[id];
    if (is_source(node) || c.step_of[id] >= 0) continue;
    if (is_host_step(node.op)) {
      c.members.emplace_back();
      c.host.push_back(true);
      const int step = int(c.members.size()) - 1;
      if (has_trait(node.op, Collective)) {  // one result, no siblings
        c.step_of[id] = step;
        c.members.back().push_back(int(id));
        continue;
      }
      for (size_t s = id; s < n; ++s)
        if (c.step_of[s] < 0 && same_control_flow(node, g.nodes[s])) c.step_of[s] = step, c.members.back().push_back(int(s));
      continue;
    }
    if (c.host.empty() || c.host.back()) c.members.emplace_back(), c.host.push_back(false);
    c.step_of[id] = int(c.members.size()) - 1;
    c.members.back().push_back(int(id));
  }
  return c;
}

// Where each value read by a later step or held by an output lives during a call: an input, a
// constant made once now (sources), an output slot, or a value between steps.
class Places {
 public:
  Places(const Graph& g, const Options& o, HostStepsExecutable& exe, const std::vector<int>& slot_value, Found& found)
      : g_(g), o_(o), exe_(exe), found_(found), loc_(g.nodes.size()), has_(g.nodes.size(), false) {
    for (size_t s = 0; s < slot_value.size(); ++s) first_slot_.emplace(slot_value[s], int(s));
  }
  Loc of(int v) {
    if (has_[size_t(v)]) return loc_[size_t(v)];
    const Node& node = g_.node(v);
    Loc l;
    if (node.op == OpKind::Parameter) {
      l = Loc{Loc::Input, int(node.attrs.i("index"))};
    } else if (is_source(node)) {
      if (o_.dynamic && o_.dynamic->varies(v))
        throw ValueError(std::string(op_name(node.op)) + " (node %" + std::to_string(v) + ") of a dynamic size is read by a host step");
      exe_.consts.push_back(source_bytes(node));
      l = Loc{Loc::Const, int(exe_.consts.size()) - 1};
    } else if (auto it = first_slot_.find(v); it != first_slot_.end()) {
      l = Loc{Loc::Output, it->second};
    } else {
      l = between(sized_bytes(g_, o_.dynamic.get(), v));
    }
    has_[size_t(v)] = true;
    return loc_[size_t(v)] = l;
  }
  // A value between steps of this size.
  Loc between(SizedBytes bytes) {
    exe_.boundary_bytes.push_back(std::move(bytes));
    return Loc{Loc::Boundary, int(exe_.boundary_bytes.size()) - 1};
  }

 private:
  // A source's value, made once (a constant's bytes, a fill, or a one-node pipeline run now).
  std::shared_ptr<void> source_bytes(const Node& node) {
    const size_t size = bytes_of(node.type);
    std::shared_ptr<void> bytes(cached_alloc(std::max<size_t>(size, 64)), cached_free);
    if (node.op == OpKind::Constant || node.op == OpKind::Full) {
      const ConstData data = node.op == OpKind::Constant ? g_.constants[size_t(node.constant)] : fill_bytes(node.type, node.attrs.f("value"));
      if (size > 0) std::memcpy(bytes.get(), data.data, size);
      return bytes;
    }
    Graph one;
    one.name = g_.name + "_source";
    one.outputs.push_back(one.add(Node(node)));
    void* out = bytes.get();
    Options fixed = o_;
    fixed.dynamic = nullptr;
    found_(one, fixed)->run(nullptr, &out);
    return bytes;
  }
  const Graph& g_;
  const Options& o_;
  HostStepsExecutable& exe_;
  Found& found_;
  std::vector<Loc> loc_;
  std::vector<bool> has_;
  std::map<int, int> first_slot_;
};

Step collective_step(const Graph& g, int node, Places& places) {
  Step s;
  s.collective = true;
  s.op = g.node(node);
  for (int in : s.op.inputs) {
    s.in.push_back(places.of(in));
    s.operand_types.push_back(g.type(in));
  }
  s.out.push_back(places.of(node));
  return s;
}

// A scan's body with the operands that are the same at every step and constants outside (a frozen
// model's weights) read as constants: compiled, a contraction packs such a weight once, where as a
// parameter each step read it as it lies (a recurrent step's product, [8, 256] x [256, 1024], its
// weight's rows 4 KiB apart). The parameters stay, unread: the body is called with every operand.
Graph with_constant_operands(const Graph& outer, const Node& scan) {
  const Graph& body = scan.attrs.graph("body");
  const size_t first = size_t(scan.attrs.i("carries") + scan.attrs.i("xs"));
  Rewriter rw(body);
  bool any = false;
  for (size_t i = first; i < scan.inputs.size() && i < body.inputs.size(); ++i) {
    const Node& operand = outer.node(scan.inputs[i]);
    if (operand.op != OpKind::Constant) continue;
    rw.map(body.inputs[i], rw.out().add_constant(operand.type, outer.constants[size_t(operand.constant)]));
    any = true;
  }
  return any ? rw.finish() : body;
}

// A control flow operation: its results' places (scratch, made per call, for those no step reads)
// and its graphs compiled.
Step control_flow_step(const Graph& g, const std::vector<int>& members, const Options& options, Places& places, Found& found) {
  Step s;
  const Node& first = g.node(members.front());
  if (options.dynamic) check_dynamic_host_step(g, *options.dynamic, members);
  Options o = options;  // (the graphs it calls have fixed sizes)
  o.dynamic = nullptr;
  s.control_flow = true;
  s.op = first;
  if (first.op == OpKind::Scan) {
    s.length = Affine{first.attrs.i("length"), {}};
    if (options.dynamic && options.dynamic->attr_varies(members.front(), "length"))
      s.length = options.dynamic->attrs[size_t(members.front())].at("length").at(0);
  }
  const int results = control_flow_results(first);
  const Graph& shape_source = first.attrs.graph(first.op == OpKind::Cond ? "then" : "body");
  std::vector<SizedBytes> result_bytes;
  for (int r = 0; r < results; ++r) {
    TensorType t = shape_source.type(shape_source.outputs[size_t(r)]);
    SizedBytes b = fixed_bytes(t);
    if (first.op == OpKind::Scan && r >= first.attrs.i("carries")) {
      t.shape.insert(t.shape.begin(), first.attrs.i("length"));
      b.extents.insert(b.extents.begin(), s.length);
    }
    s.result_types.push_back(t);
    result_bytes.push_back(std::move(b));
  }
  for (int in : first.inputs) s.in.push_back(places.of(in));
  s.out.assign(size_t(results), Loc{Loc::Boundary, -1});
  std::vector<bool> present(size_t(results), false);
  for (int m : members) {
    const size_t r = size_t(g.node(m).attrs.i("result"));
    present[r] = true;
    s.out[r] = places.of(m);
  }
  for (int r = 0; r < results; ++r)
    if (!present[size_t(r)]) s.out[size_t(r)] = places.between(result_bytes[size_t(r)]);
  auto compiled = [&](const char* graph) { return found(first.attrs.graph(graph), o); };
  if (first.op == OpKind::Cond) s.a = compiled("then"), s.b = compiled("else");
  else if (first.op == OpKind::While) s.a = compiled("cond"), s.b = compiled("body");
  else if (first.op == OpKind::Scan) s.a = found(with_constant_operands(g, first), o);
  else s.a = compiled("body");
  return s;
}

// A part's sizes as forms of the symbols of the whole graph it uses (`id`: the graph's node -> the
// part's), renumbered in s.symbols' order, each taken from an input of the part that has it as an
// extent; null where nothing in the part varies. A ValueError where no input has a symbol the part
// uses (Halide reads a size only off a buffer the pipeline reads).
std::shared_ptr<const SymbolicSizes> part_sizes(const Graph& g, const SymbolicSizes& d, const Graph& part,
                                               const std::map<int, int>& id, Step& s) {
  std::vector<bool> used(size_t(d.num_symbols), false);
  auto note = [&](const Affine& a) {
    for (size_t k = 0; k < a.coef.size(); ++k) used[k] = used[k] || a.coef[k] != 0;
  };
  for (const auto& [outer, inner] : id) {
    for (const Affine& a : extent_forms(g, &d, outer)) note(a);
    for (const auto& [name, forms] : d.attrs[size_t(outer)])
      for (const Affine& a : forms) note(a);
  }
  std::vector<int> new_index(size_t(d.num_symbols), -1);
  for (int k = 0; k < d.num_symbols; ++k)
    if (used[size_t(k)]) new_index[size_t(k)] = int(s.symbols.size()), s.symbols.push_back(k);
  if (s.symbols.empty()) return nullptr;
  auto renumbered = [&](const Affine& a) {
    if (a.is_constant()) return Affine{a.constant, {}};
    Affine r{a.constant, std::vector<int64_t>(s.symbols.size(), 0)};
    for (size_t k = 0; k < a.coef.size(); ++k)
      if (a.coef[k] != 0) r.coef[size_t(new_index[k])] = a.coef[k];
    return r;
  };
  auto sizes = std::make_shared<SymbolicSizes>();
  sizes->num_symbols = int(s.symbols.size());
  sizes->serves_from = d.serves_from;
  sizes->extents.resize(part.nodes.size());
  sizes->attrs.resize(part.nodes.size());
  for (const auto& [outer, inner] : id) {
    for (const Affine& a : extent_forms(g, &d, outer)) sizes->extents[size_t(inner)].push_back(renumbered(a));
    for (const auto& [name, forms] : d.attrs[size_t(outer)])
      for (const Affine& a : forms) sizes->attrs[size_t(inner)][name].push_back(renumbered(a));
  }
  for (size_t j = 0; j < s.symbols.size(); ++j) {
    Affine alone{0, std::vector<int64_t>(s.symbols.size(), 0)};
    alone.coef[j] = 1;
    std::optional<SymbolicSizes::Source> found;
    for (size_t i = 0; i < part.inputs.size() && !found; ++i) {
      const std::vector<Affine>& e = sizes->extents[size_t(part.inputs[i])];
      for (size_t dim = 0; dim < e.size() && !found; ++dim)
        if (e[dim] == alone) found = SymbolicSizes::Source{int(i), int(dim)};
    }
    if (!found)
      throw ValueError("a compiled part between host steps ('" + part.name + "') has no input of dynamic size s" +
                       std::to_string(s.symbols[j]) + " (it makes that size itself)");
    sizes->sources.push_back(*found);
  }
  return sizes;
}

// A run of ordinary nodes compiled as one pipeline: the values of other steps (and the call's
// inputs) it reads become its parameters, sources are copied in; it hands on what is `needed`.
// No step when it computes nothing anyone reads.
std::optional<Step> part_step(const Graph& g, const Cut& cut, size_t k, const std::vector<bool>& needed, const Options& o,
                              Places& places, Found& found) {
  Step s;
  Graph part;
  part.name = g.name + "_part" + std::to_string(k + 1);
  std::map<int, int> id;  // g's node -> part's
  for (int m : cut.members[k])
    for (int v : g.node(m).inputs)
      if (cut.step_of[size_t(v)] != int(k) && !id.count(v) && (g.node(v).op == OpKind::Parameter || !is_source(g.node(v)))) {
        id[v] = part.add_parameter(g.type(v));
        s.in.push_back(places.of(v));
      }
  for (int m : cut.members[k]) {
    Node c = g.node(m);
    for (int& in : c.inputs) {
      if (!id.count(in)) {  // a source
        const Node& src = g.node(in);
        id[in] = src.op == OpKind::Constant ? part.add_constant(src.type, g.constants[size_t(src.constant)]) : part.add(Node(src));
      }
      in = id.at(in);
    }
    id[m] = part.add(std::move(c));
  }
  for (int m : cut.members[k])
    if (needed[size_t(m)]) {
      part.outputs.push_back(id.at(m));
      s.out.push_back(places.of(m));
    }
  if (part.outputs.empty()) return std::nullopt;
  Options po = o;
  po.dynamic = o.dynamic ? part_sizes(g, *o.dynamic, part, id, s) : nullptr;
  s.sized = po.dynamic != nullptr;
  s.exe = found(part, po);
  return s;
}

// The lifetimes of the values between steps: from the first step that writes one to the last that
// reads it (those the final copies read, and any no step writes, live through the call). A
// collective's operand and result stay until it is waited for: before the first step that reads
// its result, or at the end of the call.
void plan_lifetimes(HostStepsExecutable& exe) {
  const size_t steps = exe.steps.size(), values = exe.boundary_bytes.size();
  std::vector<size_t> first(values, 0), last(values, 0);
  std::vector<bool> written(values, false), forever(values, steps == 0);
  for (size_t k = 0; k < steps; ++k) {
    for (const Loc& l : exe.steps[k].out)
      if (l.kind == Loc::Boundary && l.index >= 0 && !written[size_t(l.index)])
        written[size_t(l.index)] = true, first[size_t(l.index)] = k, last[size_t(l.index)] = std::max(last[size_t(l.index)], k);
    for (const Loc& l : exe.steps[k].in)
      if (l.kind == Loc::Boundary) last[size_t(l.index)] = std::max(last[size_t(l.index)], k);
  }
  for (const auto& c : exe.copies)
    if (c.from.kind == Loc::Boundary) forever[size_t(c.from.index)] = true;
  exe.waits_before.assign(std::max<size_t>(steps, 1), {});
  for (size_t c = 0; c < steps; ++c) {
    const Step& s = exe.steps[c];
    if (!s.collective) continue;
    size_t reader = steps;
    for (size_t k = c + 1; k < steps && reader == steps; ++k)
      for (const Loc& l : exe.steps[k].in)
        if (same_loc(l, s.out[0])) reader = k;
    if (reader < steps) exe.waits_before[reader].push_back(int(c));
    else exe.waits_at_end.push_back(int(c));
    for (const std::vector<Loc>* locs : {&s.in, &s.out})
      for (const Loc& l : *locs)
        if (l.kind == Loc::Boundary && l.index >= 0) {
          if (reader == steps) forever[size_t(l.index)] = true;
          else last[size_t(l.index)] = std::max(last[size_t(l.index)], reader);
        }
  }
  exe.born_at.assign(std::max<size_t>(steps, 1), {});
  exe.dies_after.assign(std::max<size_t>(steps, 1), {});
  for (size_t b = 0; b < values; ++b) {
    exe.born_at[written[b] ? first[b] : 0].push_back(int(b));
    if (written[b] && !forever[b]) exe.dies_after[last[b]].push_back(int(b));
  }
}

}  // namespace

bool has_host_steps(const Graph& g) {
  for (const Node& n : g.nodes)
    if (is_host_step(n.op)) return true;
  return false;
}

Compiled compile_control_flow(const Graph& traced, const Options& o) {
  Timer t;
  Found found;
  // All_reduces in buckets, each started right after its last operand is computed: the steps split
  // there, so the exchange overlaps the steps after it.
  const Graph g = bucket_all_reduces(traced);
  auto exe = std::make_shared<HostStepsExecutable>();
  exe->graph_name = g.name;
  std::vector<int> slot_value(g.outputs);  // output slots: outputs, then updates' values
  for (const Update& u : g.updates) slot_value.push_back(u.value);
  for (int in : g.inputs) exe->input_bytes.push_back(bytes_of(g.type(in)));
  for (int v : slot_value) exe->output_bytes.push_back(bytes_of(g.type(v)));
  const Cut cut = cut_into_steps(g);
  Places places(g, o, *exe, slot_value, found);
  // Values a step must hand on: read by another step, or an output.
  std::vector<bool> needed(g.nodes.size(), false);
  for (size_t id = 0; id < g.nodes.size(); ++id)
    for (int in : g.nodes[id].inputs)
      if (cut.step_of[size_t(in)] >= 0 && cut.step_of[size_t(in)] != cut.step_of[id]) needed[size_t(in)] = true;
  for (int v : slot_value) needed[size_t(v)] = true;
  for (size_t k = 0; k < cut.members.size(); ++k) {
    const int head = cut.members[k].front();
    if (cut.host[k] && has_trait(g.node(head).op, Collective)) {
      if (o.dynamic) check_dynamic_host_step(g, *o.dynamic, cut.members[k]);
      exe->steps.push_back(collective_step(g, head, places));
    } else if (cut.host[k]) {
      exe->steps.push_back(control_flow_step(g, cut.members[k], o, places, found));
    } else if (std::optional<Step> part = part_step(g, cut, k, needed, o, places, found)) {
      exe->steps.push_back(std::move(*part));
    }
  }
  // Outputs not written in place: sources, inputs, and values that appear in several slots.
  for (size_t s = 0; s < slot_value.size(); ++s) {
    const Loc l = places.of(slot_value[s]);
    if (l.kind != Loc::Output || l.index != int(s)) exe->copies.push_back({l, int(s), sized_bytes(g, o.dynamic.get(), slot_value[s])});
  }
  plan_lifetimes(*exe);
  log().debug("backend: '{}' runs {} steps, {} of them on the host", g.name, exe->steps.size(),
              std::count(cut.host.begin(), cut.host.end(), true));
  return Compiled{exe, found.all_hits, t.ms(), !found.all_hits && found.all_loaded};
}

}  // namespace hjit::backend
