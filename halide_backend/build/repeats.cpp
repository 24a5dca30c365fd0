#include "halide_backend/build/repeats.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "graph/op_def.h"

namespace hjit::backend {
namespace {

std::string attr_text(const AttrValue& v) {
  struct Text {
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return std::to_string(d); }
    std::string operator()(const std::vector<int64_t>& v) const {
      std::string s;
      for (int64_t i : v) s += std::to_string(i) + ",";
      return s;
    }
    std::string operator()(DType d) const { return dtype_name(d); }
    std::string operator()(const std::string& s) const { return s; }
    // (a subgraph by identity: blocks with control flow are seldom alike, and never wrongly)
    std::string operator()(const std::shared_ptr<const Graph>& g) const { return std::to_string(reinterpret_cast<uintptr_t>(g.get())); }
  };
  return std::visit(Text{}, v);
}

size_t node_hash(const Graph& g, const Node& n) {
  std::string s = std::to_string(int(n.op)) + "|" + n.type.str();
  for (const auto& [name, value] : n.attrs.items()) s += "|" + name + "=" + attr_text(value);
  for (int in : n.inputs) s += "|" + std::to_string(int(g.node(in).op)) + ":" + g.type(in).str();
  return std::hash<std::string>{}(s);
}

}  // namespace

std::vector<size_t> node_hashes(const Graph& g) {
  std::vector<size_t> h(g.nodes.size());
  for (size_t k = 0; k < h.size(); ++k) h[k] = node_hash(g, g.nodes[k]);
  return h;
}

std::vector<Repeat> find_repeats(const std::vector<size_t>& h, size_t min_period, size_t most) {
  const size_t n = h.size();
  if (n > 12000 || n < 2 * min_period) return {};
  std::vector<bool> taken(n, false);
  std::vector<Repeat> out;
  while (out.size() < most) {
    Repeat best;
    for (size_t period = std::max<size_t>(min_period, 1); 2 * period <= n; ++period) {
      size_t run = 0;
      for (size_t k = 0; k + period <= n; ++k) {
        const bool alike = k + period < n && !taken[k] && !taken[k + period] && h[k] == h[k + period];
        if (alike) {
          ++run;
          continue;
        }
        // nodes [k - run, k + period) repeat with this period
        const size_t copies = (run + period) / period;
        if (copies >= 2 && copies * period > best.copies * best.period) best = Repeat{k - run, period, copies};
        run = 0;
      }
    }
    if (best.copies < 2) break;
    for (size_t k = best.begin; k < best.begin + best.copies * best.period; ++k) taken[k] = true;
    out.push_back(best);
  }
  return out;
}

std::vector<std::pair<size_t, size_t>> alike_stretches(const Graph& g, const std::vector<size_t>& h, size_t a, size_t b,
                                                       size_t min_copies) {
  struct Stretch {
    size_t begin, end, hash;
  };
  std::vector<Stretch> stretches;
  std::map<size_t, size_t> copies;  // by a stretch's hash
  for (size_t start = a, k = a; k < b; ++k) {
    if (!has_trait(g.nodes[k].op, Contraction)) continue;
    size_t hash = k - start;
    for (size_t i = start; i <= k; ++i) hash = hash * 1000003 ^ h[i];
    stretches.push_back({start, k + 1, hash});
    ++copies[hash];
    start = k + 1;
  }
  std::vector<std::pair<size_t, size_t>> out;
  for (const Stretch& s : stretches)
    if (copies.at(s.hash) >= min_copies) out.emplace_back(s.begin, s.end);
  return out;
}

}  // namespace hjit::backend
