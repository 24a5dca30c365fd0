#include "halide_backend/build/control_flow.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>

#include "distributed/collectives.h"
#include "graph/op_def.h"
#include "graph/passes/bucket_collectives.h"
#include "graph/rewriter.h"
#include "support/allocator.h"
#include "support/log.h"

namespace hjit::backend {
namespace {

size_t bytes_of(const TensorType& t) { return size_t(t.numel()) * size_t(dtype_size(t.dtype)); }
void copy_bytes(void* dst, const void* src, size_t n) {
  if (n > 0 && dst != src) std::memcpy(dst, src, n);
}

constexpr size_t kAlignment = 64;
bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kAlignment == 0; }

// Where a value lives during a call.
struct Loc {
  enum Kind : uint8_t { Input, Const, Output, Boundary } kind = Input;
  int index = 0;
};

// A run of ordinary nodes compiled as one pipeline, one control flow operation, or one collective.
struct Step {
  std::shared_ptr<const Executable> exe;  // a part
  std::vector<Loc> in, out;               // a part: its inputs and outputs; an op: operands, results
  // A control flow operation: the node (result 0's attributes), and its graphs compiled.
  bool control_flow = false;
  // A collective (the node; its operand's type): an exchange with the other ranks.
  bool collective = false;
  std::vector<TensorType> operand_types;
  Node op;
  std::vector<TensorType> result_types;
  std::shared_ptr<const Executable> a, b;  // cond: then, else; while: cond, body; scan: body
};

// The collectives a call started, by step; whatever is still under way when the call ends (an
// error in a later step) is waited for, so that no exchange writes into freed buffers.
struct Exchanges {
  std::vector<std::unique_ptr<distributed::Pending>> at;
  explicit Exchanges(size_t steps) : at(steps) {}
  void wait(int step) {
    if (!at[size_t(step)]) return;
    auto p = std::move(at[size_t(step)]);
    p->wait();
  }
  ~Exchanges() {
    for (auto& p : at)
      if (p) try {
          p->wait();
        } catch (const std::exception&) {  // the call is failing already; its own error is the one to report
        }
  }
};

// Buffers for a call: the boundary values and scratch space, freed when the call ends.
struct CallBuffers {
  std::vector<void*> owned;
  int64_t bytes = 0;
  ~CallBuffers() {
    for (void* p : owned) cached_free(p);
  }
  void* get(size_t n) {
    owned.push_back(cached_alloc(std::max<size_t>(n, 64)));
    bytes += int64_t(cached_size(owned.back()));
    return owned.back();
  }
};

class ControlFlowExecutable final : public Executable {
 public:
  std::vector<Step> steps;
  std::vector<std::shared_ptr<void>> consts;  // 64-byte aligned, as compiled code wants them
  std::vector<size_t> boundary_bytes;
  // Outputs another output slot or a source already holds: copied at the end of a call.
  struct Copy {
    Loc from;
    int slot;
    size_t bytes;
  };
  std::vector<Copy> copies;
  std::string graph_name;
  mutable std::atomic<int64_t> peak_buffers{0};  // the most a call's own buffers took

  // Per step: the boundary values it writes first (allocated just before it), and those no later
  // step reads (freed just after it): a value is held only while it is needed.
  std::vector<std::vector<int>> born_at, dies_after;
  // All_reduces exchange while the steps after them run: per step, the started ones whose results
  // it reads (waited for before it runs); the rest are waited for at the end of the call.
  std::vector<std::vector<int>> waits_before;
  std::vector<int> waits_at_end;

  void run(const void* const* inputs, void* const* outputs) const override {
    CallBuffers buffers;
    CachedBlocks held(boundary_bytes.size());
    // Declared after the buffers, so destroyed first: an error leaves no exchange writing into freed memory.
    Exchanges started(steps.size());
    std::vector<void*>& boundary = held.slots;
    int64_t held_bytes = 0, most_held = 0;
    auto at = [&](const Loc& l) -> void* {
      switch (l.kind) {
        case Loc::Input: return const_cast<void*>(inputs[l.index]);
        case Loc::Const: return consts[size_t(l.index)].get();
        case Loc::Output: return outputs[l.index];
        case Loc::Boundary: return boundary[size_t(l.index)];
      }
      return nullptr;
    };
    for (size_t k = 0; k < steps.size(); ++k) {
      const Step& s = steps[k];
      for (int c : waits_before[k]) started.wait(c);
      for (int b : born_at[k]) {
        boundary[size_t(b)] = cached_alloc(std::max<size_t>(boundary_bytes[size_t(b)], 64));
        held_bytes += int64_t(cached_size(boundary[size_t(b)]));
      }
      most_held = std::max(most_held, held_bytes + buffers.bytes);
      std::vector<const void*> in;
      std::vector<void*> out;
      for (const Loc& l : s.in) in.push_back(at(l));
      for (const Loc& l : s.out) out.push_back(at(l));
      if (s.collective) {
        started.at[k] = distributed::start_collective(s.op.op, s.op.attrs, s.operand_types.empty() ? nullptr : &s.operand_types[0],
                                                      in.empty() ? nullptr : in[0], s.op.type, out[0]);
      } else if (s.control_flow) {
        run_op(s, in, out, buffers);
      } else {
        s.exe->run(in.data(), out.data());
      }
      most_held = std::max(most_held, held_bytes + buffers.bytes);
      for (int b : dies_after[k]) {
        held_bytes -= int64_t(cached_size(boundary[size_t(b)]));
        cached_free(boundary[size_t(b)]);
        boundary[size_t(b)] = nullptr;
      }
    }
    for (int c : waits_at_end) started.wait(c);
    for (const Copy& c : copies) copy_bytes(outputs[c.slot], at(c.from), c.bytes);
    int64_t most = peak_buffers.load();
    while (most_held > most && !peak_buffers.compare_exchange_weak(most, most_held)) {
    }
  }

  std::string name() const override { return graph_name; }
  // Its buffers, and the most any compiled part or body took besides.
  int64_t temporary_bytes() const override {
    int64_t inner = 0;
    for (const Step& s : steps)
      for (const auto& e : {s.exe, s.a, s.b})
        if (e) inner = std::max(inner, e->temporary_bytes());
    return peak_buffers.load() + inner;
  }

  // The host drives the loops and reads the predicates, so the values meet in host memory: the
  // GPU pipelines of the parts and bodies copy their operands to the device and back per call.
  void run_on_device(const DeviceBuffer* const* inputs, DeviceBuffer* const* outputs) const override {
    CallBuffers host;
    std::vector<const void*> in;
    std::vector<void*> out;
    for (size_t i = 0; i < input_bytes.size(); ++i) {
      void* p = host.get(input_bytes[i]);
      if (inputs[i] && input_bytes[i] > 0) inputs[i]->download(p);
      in.push_back(p);
    }
    for (size_t i = 0; i < output_bytes.size(); ++i) out.push_back(host.get(output_bytes[i]));
    run(in.data(), out.data());
    for (size_t i = 0; i < output_bytes.size(); ++i)
      if (outputs[i] && output_bytes[i] > 0) outputs[i]->upload(out[i]);
  }
  std::vector<size_t> input_bytes, output_bytes;

  std::string device_code() const override {
    std::string code;
    for (const Step& s : steps)
      for (const auto& e : {s.exe, s.a, s.b})
        if (e) code += e->device_code();
    return code;
  }

  std::string explain() const override {
    std::ostringstream os;
    for (size_t k = 0; k < steps.size(); ++k) {
      const Step& s = steps[k];
      os << "step " << k + 1 << " of " << steps.size() << ": ";
      if (s.collective) {
        os << distributed::describe_collective(s.op.op, s.op.attrs, s.operand_types.empty() ? s.op.type : s.operand_types[0])
           << " on the host, with the other ranks\n";
        continue;
      }
      if (!s.control_flow) {
        os << "compiled part\n" << s.exe->explain();
        continue;
      }
      os << op_name(s.op.op) << " on the host, calling compiled ";
      if (s.op.op == OpKind::Cond) os << "branches\n--- then:\n" << s.a->explain() << "--- else:\n" << s.b->explain();
      else if (s.op.op == OpKind::While) os << "condition and body\n--- cond:\n" << s.a->explain() << "--- body:\n" << s.b->explain();
      else if (s.op.op == OpKind::Checkpoint) os << "body\n--- body:\n" << s.a->explain();
      else os << "body, " << s.op.attrs.i("length") << " steps\n--- body:\n" << s.a->explain();
    }
    return os.str();
  }
  // The first compiled part's schedule, and what runs on the host between the parts.
  std::string summary() const override {
    bool control_flow = false, collectives = false;
    const Executable* first = nullptr;
    for (const Step& s : steps) {
      control_flow |= s.control_flow, collectives |= s.collective;
      if (!first) first = s.exe ? s.exe.get() : s.a.get();
    }
    const std::string host = control_flow && collectives ? "host control flow and collectives"
                             : control_flow             ? "host control flow"
                                                        : "collectives on the host";
    return first ? first->summary() + ", with " + host : steps.empty() ? "nothing" : host;
  }

 private:
  void run_op(const Step& s, const std::vector<const void*>& in, const std::vector<void*>& out, CallBuffers& buffers) const {
    const std::vector<TensorType>& rt = s.result_types;
    // Results no node reads (dropped by DCE) still need somewhere to go.
    std::vector<void*> res(out);
    switch (s.op.op) {
      case OpKind::Cond: {
        for (size_t r = 0; r < res.size(); ++r)
          if (!res[r]) res[r] = buffers.get(bytes_of(rt[r]));
        const bool pred = *static_cast<const uint8_t*>(in[0]) != 0;
        (pred ? s.a : s.b)->run(in.data() + 1, res.data());
        return;
      }
      case OpKind::While: {
        const size_t n = rt.size();
        std::vector<const void*> args(in);
        std::vector<void*> cur(n), next(n);
        for (size_t i = 0; i < n; ++i) {
          cur[i] = buffers.get(bytes_of(rt[i])), next[i] = buffers.get(bytes_of(rt[i]));
          copy_bytes(cur[i], in[i], bytes_of(rt[i]));
        }
        void* pred = buffers.get(1);
        while (true) {
          for (size_t i = 0; i < n; ++i) args[i] = cur[i];
          s.a->run(args.data(), &pred);
          if (!*static_cast<uint8_t*>(pred)) break;
          s.b->run(args.data(), next.data());
          std::swap(cur, next);
        }
        for (size_t i = 0; i < n; ++i)
          if (res[i]) copy_bytes(res[i], cur[i], bytes_of(rt[i]));
        return;
      }
      case OpKind::Scan: {
        const Graph& body = s.op.attrs.graph("body");
        const size_t n = size_t(s.op.attrs.i("carries")), k = size_t(s.op.attrs.i("xs")), j = rt.size() - n;
        const int64_t length = s.op.attrs.i("length");
        const bool reverse = s.op.attrs.i("reverse") != 0;
        std::vector<const void*> args(in);
        std::vector<void*> cur(n), next(n), body_out(n + j);
        for (size_t i = 0; i < n; ++i) {
          cur[i] = buffers.get(bytes_of(rt[i])), next[i] = buffers.get(bytes_of(rt[i]));
          copy_bytes(cur[i], in[i], bytes_of(rt[i]));
        }
        std::vector<size_t> x_step(k), y_step(j);
        for (size_t i = 0; i < k; ++i) x_step[i] = bytes_of(body.type(body.inputs[n + i]));
        for (size_t i = 0; i < j; ++i) {
          y_step[i] = bytes_of(body.type(body.outputs[n + i]));
          if (!res[n + i]) res[n + i] = buffers.get(y_step[i] * size_t(length));
        }
        // Compiled code takes 64-byte aligned buffers: a row at an unaligned offset goes through
        // an aligned copy (rows of a multiple of 64 bytes never do).
        std::vector<void*> x_copy(k, nullptr), y_copy(j, nullptr);
        for (size_t i = 0; i < k; ++i)
          if (x_step[i] % kAlignment) x_copy[i] = buffers.get(x_step[i]);
        for (size_t i = 0; i < j; ++i)
          if (y_step[i] % kAlignment) y_copy[i] = buffers.get(y_step[i]);
        for (int64_t step = 0; step < length; ++step) {
          const size_t t = size_t(reverse ? length - 1 - step : step);
          for (size_t i = 0; i < n; ++i) args[i] = cur[i], body_out[i] = next[i];
          for (size_t i = 0; i < k; ++i) {
            const uint8_t* row = static_cast<const uint8_t*>(in[n + i]) + t * x_step[i];
            args[n + i] = aligned(row) ? row : (copy_bytes(x_copy[i], row, x_step[i]), x_copy[i]);
          }
          for (size_t i = 0; i < j; ++i) {
            uint8_t* row = static_cast<uint8_t*>(res[n + i]) + t * y_step[i];
            body_out[n + i] = aligned(row) ? row : y_copy[i];
          }
          s.a->run(args.data(), body_out.data());
          for (size_t i = 0; i < j; ++i)
            if (body_out[n + i] == y_copy[i]) copy_bytes(static_cast<uint8_t*>(res[n + i]) + t * y_step[i], y_copy[i], y_step[i]);
          std::swap(cur, next);
        }
        for (size_t i = 0; i < n; ++i)
          if (res[i]) copy_bytes(res[i], cur[i], bytes_of(rt[i]));
        return;
      }
      case OpKind::Checkpoint: {  // its own pipeline: what it computes on the way is freed when it ends
        for (size_t r = 0; r < res.size(); ++r)
          if (!res[r]) res[r] = buffers.get(bytes_of(rt[r]));
        s.a->run(in.data(), res.data());
        return;
      }
      default: throw InternalError(std::string(op_name(s.op.op)) + " is not a control flow op");
    }
  }
};

bool is_source(const Node& n) { return has_trait(n.op, Source); }

bool same_loc(const Loc& a, const Loc& b) { return a.kind == b.kind && a.index == b.index; }

}  // namespace

bool has_host_steps(const Graph& g) {
  for (const Node& n : g.nodes)
    if (is_host_step(n.op)) return true;
  return false;
}

std::shared_ptr<const Executable> compile_control_flow(const Graph& traced, const Options& o) {
  // All_reduces in buckets, each started right after its last operand is computed: the steps split
  // there, so the exchange overlaps the steps after it.
  const Graph g = bucket_all_reduces(traced);
  auto exe = std::make_shared<ControlFlowExecutable>();
  exe->graph_name = g.name;
  const size_t n = g.nodes.size();
  // Output slots: outputs, then updates' values.
  std::vector<int> slot_value(g.outputs);
  for (const Update& u : g.updates) slot_value.push_back(u.value);
  for (int in : g.inputs) exe->input_bytes.push_back(bytes_of(g.type(in)));
  for (int v : slot_value) exe->output_bytes.push_back(bytes_of(g.type(v)));
  std::map<int, int> first_slot;
  for (size_t s = 0; s < slot_value.size(); ++s) first_slot.emplace(slot_value[s], int(s));

  // Steps: maximal runs of ordinary nodes, and each control flow operation (its sibling nodes together).
  std::vector<int> step_of(n, -1);
  std::vector<std::vector<int>> members;
  std::vector<bool> is_op;
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g.nodes[id];
    if (is_source(node) || step_of[id] >= 0) continue;
    if (is_host_step(node.op)) {
      members.emplace_back();
      is_op.push_back(true);
      if (has_trait(node.op, Collective)) {  // one result, no siblings
        step_of[id] = int(members.size()) - 1;
        members.back().push_back(int(id));
        continue;
      }
      for (size_t s = id; s < n; ++s)
        if (step_of[s] < 0 && same_control_flow(node, g.nodes[s])) step_of[s] = int(members.size()) - 1, members.back().push_back(int(s));
      continue;
    }
    if (is_op.empty() || is_op.back()) members.emplace_back(), is_op.push_back(false);
    step_of[id] = int(members.size()) - 1;
    members.back().push_back(int(id));
  }
  // Every value read by a later step or held by an output: its location.
  std::vector<Loc> loc(n);
  std::vector<bool> has_loc(n, false);
  auto locate = [&](int v) -> Loc {
    if (has_loc[size_t(v)]) return loc[size_t(v)];
    const Node& node = g.node(v);
    Loc l;
    if (node.op == OpKind::Parameter) {
      l = Loc{Loc::Input, int(node.attrs.i("index"))};
    } else if (is_source(node)) {  // a value known before the call: made once, now
      const size_t size = bytes_of(node.type);
      std::shared_ptr<void> bytes(cached_alloc(std::max<size_t>(size, 64)), cached_free);
      if (node.op == OpKind::Constant) {
        copy_bytes(bytes.get(), g.constants[size_t(node.constant)].data, size);
      } else if (node.op == OpKind::Full) {
        copy_bytes(bytes.get(), fill_bytes(node.type, node.attrs.f("value")).data, size);
      } else {
        Graph one;
        one.name = g.name + "_source";
        one.outputs.push_back(one.add(Node(node)));
        void* out = bytes.get();
        compile(one, o).executable->run(nullptr, &out);
      }
      exe->consts.push_back(std::move(bytes));
      l = Loc{Loc::Const, int(exe->consts.size()) - 1};
    } else {
      auto it = first_slot.find(v);
      if (it != first_slot.end()) {
        l = Loc{Loc::Output, it->second};
      } else {
        l = Loc{Loc::Boundary, int(exe->boundary_bytes.size())};
        exe->boundary_bytes.push_back(bytes_of(node.type));
      }
    }
    has_loc[size_t(v)] = true;
    return loc[size_t(v)] = l;
  };
  // Values a step must hand on: read by another step, or an output.
  std::vector<bool> needed(n, false);
  for (size_t id = 0; id < n; ++id)
    for (int in : g.nodes[id].inputs)
      if (step_of[size_t(in)] >= 0 && step_of[size_t(in)] != step_of[id]) needed[size_t(in)] = true;
  for (int v : slot_value) needed[size_t(v)] = true;

  for (size_t k = 0; k < members.size(); ++k) {
    Step s;
    if (is_op[k] && has_trait(g.node(members[k].front()).op, Collective)) {
      const int m = members[k].front();
      s.collective = true;
      s.op = g.node(m);
      for (int in : s.op.inputs) {
        s.in.push_back(locate(in));
        s.operand_types.push_back(g.type(in));
      }
      s.out.push_back(locate(m));
      exe->steps.push_back(std::move(s));
      continue;
    }
    if (is_op[k]) {
      const Node& first = g.node(members[k].front());
      s.control_flow = true;
      s.op = first;
      const int results = control_flow_results(first);
      for (int r = 0; r < results; ++r) {
        TensorType t = first.op == OpKind::Cond ? first.attrs.graph("then").type(first.attrs.graph("then").outputs[size_t(r)])
                                                : first.attrs.graph("body").type(first.attrs.graph("body").outputs[size_t(r)]);
        if (first.op == OpKind::Scan && r >= first.attrs.i("carries")) t.shape.insert(t.shape.begin(), first.attrs.i("length"));
        s.result_types.push_back(t);
      }
      for (int in : first.inputs) s.in.push_back(locate(in));
      s.out.assign(size_t(results), Loc{Loc::Boundary, -1});
      std::vector<bool> present(size_t(results), false);
      for (int m : members[k]) {
        const size_t r = size_t(g.node(m).attrs.i("result"));
        present[r] = true;
        s.out[r] = locate(m);
      }
      // Results no step reads: scratch, made per call (a null output pointer says so).
      for (int r = 0; r < results; ++r)
        if (!present[size_t(r)]) {
          s.out[size_t(r)] = Loc{Loc::Boundary, int(exe->boundary_bytes.size())};
          exe->boundary_bytes.push_back(bytes_of(s.result_types[size_t(r)]));
        }
      switch (first.op) {
        case OpKind::Cond:
          s.a = compile(first.attrs.graph("then"), o).executable;
          s.b = compile(first.attrs.graph("else"), o).executable;
          break;
        case OpKind::While:
          s.a = compile(first.attrs.graph("cond"), o).executable;
          s.b = compile(first.attrs.graph("body"), o).executable;
          break;
        default: s.a = compile(first.attrs.graph("body"), o).executable;
      }
      exe->steps.push_back(std::move(s));
      continue;
    }
    // A part: the values of other steps (and the call's inputs) it reads become its parameters,
    // sources are copied in.
    Graph part;
    part.name = g.name + "_part" + std::to_string(k + 1);
    std::map<int, int> id;  // g's node -> part's
    for (int m : members[k])
      for (int v : g.node(m).inputs)
        if (step_of[size_t(v)] != int(k) && !id.count(v) && (g.node(v).op == OpKind::Parameter || !is_source(g.node(v)))) {
          id[v] = part.add_parameter(g.type(v));
          s.in.push_back(locate(v));
        }
    for (int m : members[k]) {
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
    for (int m : members[k])
      if (needed[size_t(m)]) {
        part.outputs.push_back(id.at(m));
        s.out.push_back(locate(m));
      }
    if (part.outputs.empty()) continue;  // computes nothing anyone reads
    s.exe = compile(part, o).executable;
    exe->steps.push_back(std::move(s));
  }
  // Outputs not written in place: sources, inputs, and values that appear in several slots.
  for (size_t s = 0; s < slot_value.size(); ++s) {
    const int v = slot_value[s];
    const Loc l = locate(v);
    if (l.kind == Loc::Output && l.index == int(s)) continue;
    exe->copies.push_back({l, int(s), bytes_of(g.type(v))});
  }
  // Boundary lifetimes: from the first step that writes one to the last that reads it (those the
  // final copies read, and any no step writes, live through the call).
  const size_t steps = exe->steps.size(), values = exe->boundary_bytes.size();
  std::vector<size_t> first(values, 0), last(values, 0);
  std::vector<bool> written(values, false), forever(values, steps == 0);
  for (size_t k = 0; k < steps; ++k) {
    for (const Loc& l : exe->steps[k].out)
      if (l.kind == Loc::Boundary && l.index >= 0 && !written[size_t(l.index)]) written[size_t(l.index)] = true, first[size_t(l.index)] = k, last[size_t(l.index)] = std::max(last[size_t(l.index)], k);
    for (const Loc& l : exe->steps[k].in)
      if (l.kind == Loc::Boundary) last[size_t(l.index)] = std::max(last[size_t(l.index)], k);
  }
  for (const auto& c : exe->copies)
    if (c.from.kind == Loc::Boundary) forever[size_t(c.from.index)] = true;
  // A collective's operand and result stay until it is waited for: before the first step that
  // reads its result, or at the end of the call.
  exe->waits_before.assign(std::max<size_t>(steps, 1), {});
  for (size_t c = 0; c < steps; ++c) {
    const Step& s = exe->steps[c];
    if (!s.collective) continue;
    size_t reader = steps;
    for (size_t k = c + 1; k < steps && reader == steps; ++k)
      for (const Loc& l : exe->steps[k].in)
        if (same_loc(l, s.out[0])) reader = k;
    if (reader < steps) exe->waits_before[reader].push_back(int(c));
    else exe->waits_at_end.push_back(int(c));
    for (const std::vector<Loc>* locs : {&s.in, &s.out})
      for (const Loc& l : *locs)
        if (l.kind == Loc::Boundary && l.index >= 0) {
          if (reader == steps) forever[size_t(l.index)] = true;
          else last[size_t(l.index)] = std::max(last[size_t(l.index)], reader);
        }
  }
  exe->born_at.assign(std::max<size_t>(steps, 1), {});
  exe->dies_after.assign(std::max<size_t>(steps, 1), {});
  for (size_t b = 0; b < values; ++b) {
    exe->born_at[written[b] ? first[b] : 0].push_back(int(b));
    if (written[b] && !forever[b]) exe->dies_after[last[b]].push_back(int(b));
  }
  log().debug("backend: '{}' runs {} steps, {} of them on the host", g.name, exe->steps.size(),
              std::count(is_op.begin(), is_op.end(), true));
  return exe;
}

}  // namespace hjit::backend
