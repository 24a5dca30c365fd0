#include "frontend/jit/dynamic_sizes.h"

#include <algorithm>

namespace hjit::detail {

std::string DynamicSizes::impossible() const {
  std::lock_guard lock(mu_);
  return impossible_;
}

void DynamicSizes::set_impossible(const std::string& why) {
  std::lock_guard lock(mu_);
  impossible_ = why;
}

std::shared_ptr<const SymbolicSizes> DynamicSizes::fit(const CallArgs& args, const Graph& base, const TraceAt& trace_at,
                                                       std::string* why) {
  bool permanent = false;
  auto sizes = fit_marked(
      args, base, trace_at,
      [this](const CallArgs& a, size_t i, int d, int rank) { return Signature::is_dynamic(a, i, d, rank, dims()); }, why,
      &permanent);
  if (!sizes && permanent) set_impossible(*why);
  return sizes;
}

std::shared_ptr<const SymbolicSizes> DynamicSizes::fit_marked(const CallArgs& args, const Graph& base, const TraceAt& trace_at,
                                                              const Marked& marked, std::string* why, bool* permanent) {
  *permanent = false;
  std::vector<int64_t> values;
  std::vector<SymbolicSizes::Source> sources;
  std::vector<std::vector<std::pair<size_t, int>>> members;
  for (size_t i = 0; i < args.count; ++i) {
    const TensorType& t = args.tensor(i).impl()->type;
    for (int d = 0; d < t.rank(); ++d) {
      if (!marked(args, i, d, t.rank())) continue;
      size_t k = size_t(std::find(values.begin(), values.end(), t.shape[size_t(d)]) - values.begin());
      if (k == values.size()) values.push_back(t.shape[size_t(d)]), sources.push_back({int(i), d}), members.emplace_back();
      members[k].emplace_back(i, d);
    }
  }
  if (values.empty()) {
    *why = "no argument has the dimensions dynamic_dims names";
    return nullptr;
  }
  for (int64_t v : values)
    if (v < 2) {
      *why = "a dynamic dimension has size " + std::to_string(v) + " (a size below 2 could be a broadcast)";
      return nullptr;
    }
  // The call traced with the symbols' sizes changed to `vals`.
  auto traced_at = [&](const std::vector<int64_t>& vals) {
    const std::unique_ptr<ResizedArgs> r = resized_args(args, [&](size_t i, int d, int64_t size) {
      for (size_t k = 0; k < members.size(); ++k)
        for (const auto& [mi, md] : members[k])
          if (mi == i && md == d) return vals[k];
      return size;
    });
    return trace_at(r->args);
  };
  std::vector<std::vector<int64_t>> at{values};
  for (size_t k = 0; k < values.size(); ++k) {
    at.push_back(values);
    at.back()[k] += 3;
  }
  at.push_back(values);
  for (int64_t& v : at.back()) v += 8;
  std::vector<Graph> traced;
  try {
    for (size_t t = 1; t < at.size(); ++t) traced.push_back(traced_at(at[t]));
  } catch (const Error& e) {
    *why = std::string("tracing at another size failed: ") + e.what();
    *permanent = true;
    return nullptr;
  }
  std::vector<const Graph*> graphs{&base};
  for (const Graph& g : traced) graphs.push_back(&g);
  std::optional<SymbolicSizes> sizes = fit_symbolic_sizes(graphs, at, sources, why);
  if (!sizes) {
    *permanent = true;
    return nullptr;
  }
  return std::make_shared<const SymbolicSizes>(std::move(*sizes));
}

std::unique_ptr<ResizedArgs> resized_args(const CallArgs& args, const std::function<int64_t(size_t i, int d, int64_t size)>& size_of) {
  auto out = std::make_unique<ResizedArgs>();
  out->holders.reserve(args.count);
  for (size_t i = 0; i < args.count; ++i) {
    const TensorType& t = args.tensor(i).impl()->type;
    Shape shape = t.shape;
    for (int d = 0; d < t.rank(); ++d) shape[size_t(d)] = size_of(i, d, shape[size_t(d)]);
    out->holders.push_back(shape == t.shape ? args.tensor(i) : Tensor::zeros(shape, t.dtype));
  }
  out->args.statics = args.statics;
  for (size_t i = 0; i < args.count; ++i) out->args.push(out->holders[i], args.arg_index(i));
  return out;
}

bool serves(const Version& v, const CallArgs& args) {
  if (v.sizes_key) return v.sizes_key->matches(args);
  if (!v.dynamic) return true;
  std::vector<int64_t> symbols;
  for (const SymbolicSizes::Source& src : v.dynamic->sources) {
    symbols.push_back(args.tensor(size_t(src.input)).impl()->type.shape[size_t(src.dim)]);
    if (symbols.back() < v.min_dynamic_size) return false;
  }
  // Sizes that were equal when traced and differ now: a call for a version of its own sizes,
  // whose trace gives eager's error where they do not fit.
  for (size_t i = 0; i < args.count; ++i)
    if (!v.fn->input_sizes().agrees(i, args.tensor(i).impl()->type, symbols)) return false;
  return true;
}

}  // namespace hjit::detail
