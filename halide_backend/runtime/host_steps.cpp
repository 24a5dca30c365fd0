#include "halide_backend/runtime/host_steps.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "distributed/collectives.h"
#include "graph/op_def.h"
#include "support/allocator.h"

namespace hjit::backend {
namespace {

size_t bytes_of(const TensorType& t) { return size_t(t.numel()) * size_t(dtype_size(t.dtype)); }
void copy_bytes(void* dst, const void* src, size_t n) {
  if (n > 0 && dst != src) std::memcpy(dst, src, n);
}

constexpr size_t kAlignment = 64;
bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kAlignment == 0; }

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


}  // namespace

size_t SizedBytes::at(const std::vector<int64_t>& symbols) const {
  size_t n = element;
  for (const Affine& e : extents) n *= size_t(std::max<int64_t>(0, e.at(symbols)));
  return n;
}

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

void HostStepsExecutable::run(const void* const* inputs, void* const* outputs) const { run_sized(inputs, outputs, {}); }

int64_t HostStepsExecutable::min_dynamic_size() const {
  int64_t most = 0;
  for (const Step& s : steps)
    if (s.sized) most = std::max(most, s.exe->min_dynamic_size());
  return most;
}

void HostStepsExecutable::run_sized(const void* const* inputs, void* const* outputs, const std::vector<int64_t>& symbols) const {
  for (const Step& s : steps)
    for (int k : s.symbols)
      if (size_t(k) >= symbols.size())
        throw InternalError("hjit: '" + graph_name + "' has parts of dynamic sizes and was called without the sizes");
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
      boundary[size_t(b)] = cached_alloc(std::max<size_t>(boundary_bytes[size_t(b)].at(symbols), 64));
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
      run_op(s, in, out, buffers, symbols);
    } else if (s.sized) {
      std::vector<int64_t> own;
      for (int k : s.symbols) own.push_back(symbols[size_t(k)]);
      s.exe->run_sized(in.data(), out.data(), own);
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
  for (const Copy& c : copies) copy_bytes(outputs[c.slot], at(c.from), c.bytes.at(symbols));
  int64_t most = peak_buffers_.load();
  while (most_held > most && !peak_buffers_.compare_exchange_weak(most, most_held)) {
  }
}

int64_t HostStepsExecutable::temporary_bytes() const {
  int64_t inner = 0;
  for (const Step& s : steps)
    for (const auto& e : {s.exe, s.a, s.b})
      if (e) inner = std::max(inner, e->temporary_bytes());
  return peak_buffers_.load() + inner;
}

void HostStepsExecutable::run_on_device(const DeviceBuffer* const* inputs, DeviceBuffer* const* outputs) const {
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

std::string HostStepsExecutable::device_code() const {
  std::string code;
  for (const Step& s : steps)
    for (const auto& e : {s.exe, s.a, s.b})
      if (e) code += e->device_code();
  return code;
}

std::string HostStepsExecutable::explain() const {
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
    else os << "body, " << s.length.str() << " steps\n--- body:\n" << s.a->explain();
  }
  return os.str();
}

std::string HostStepsExecutable::summary() const {
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

void HostStepsExecutable::run_op(const Step& s, const std::vector<const void*>& in, std::vector<void*> res, CallBuffers& buffers,
                                 const std::vector<int64_t>& symbols) const {
  const std::vector<TensorType>& rt = s.result_types;
  // Results no node reads (dropped by DCE) still need somewhere to go.
  auto scratch_for_unread = [&] {
    for (size_t r = 0; r < res.size(); ++r)
      if (!res[r]) res[r] = buffers.get(bytes_of(rt[r]));
  };
  switch (s.op.op) {
    case OpKind::Cond: {
      scratch_for_unread();
      const bool pred = *static_cast<const uint8_t*>(in[0]) != 0;
      (pred ? s.a : s.b)->run(in.data() + 1, res.data());
      return;
    }
    case OpKind::While: return run_while(s, in, res, buffers);
    case OpKind::Scan: return run_scan(s, in, res, buffers, symbols);
    case OpKind::Checkpoint:  // its own pipeline: what it computes on the way is freed when it ends
      scratch_for_unread();
      s.a->run(in.data(), res.data());
      return;
    default: throw InternalError(std::string(op_name(s.op.op)) + " is not a control flow op");
  }
}

void HostStepsExecutable::run_while(const Step& s, const std::vector<const void*>& in, std::vector<void*>& res,
                                    CallBuffers& buffers) const {
  const std::vector<TensorType>& rt = s.result_types;
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
}

void HostStepsExecutable::run_scan(const Step& s, const std::vector<const void*>& in, std::vector<void*>& res,
                                   CallBuffers& buffers, const std::vector<int64_t>& symbols) const {
  const std::vector<TensorType>& rt = s.result_types;
  const Graph& body = s.op.attrs.graph("body");
  const size_t n = size_t(s.op.attrs.i("carries")), k = size_t(s.op.attrs.i("xs")), j = rt.size() - n;
  const int64_t length = s.length.at(symbols);
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
  // Compiled code takes 64-byte aligned buffers: a row at an unaligned offset goes through an
  // aligned copy (rows of a multiple of 64 bytes never do).
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
}

}  // namespace hjit::backend
