#include "graph/passes/constant_indices.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <string>

namespace hjit {
namespace {

// Calls f on each integer value of node `id` when they are known before the graph runs (a fill or
// a constant of an integer dtype); false when they are not.
// (above: an unsigned value beyond i64's range, which no range holds; raw its bits.)
bool for_each_known(const Graph& g, int id, const std::function<void(int64_t, bool above, uint64_t raw)>& f) {
  const Node& n = g.node(id);
  const DType dt = n.type.dtype;
  if (is_floating(dt) || dt == DType::Bool) return false;
  if (n.op == OpKind::Full) {
    const double v = n.attrs.f("value");
    if (n.type.numel() > 0) f(std::isfinite(v) && std::fabs(v) < 9.2e18 ? int64_t(v) : (v < 0 ? INT64_MIN : INT64_MAX), v >= 9.2e18, uint64_t(v >= 9.2e18 ? v : 0));
    return true;
  }
  if (n.op != OpKind::Constant || n.constant < 0 || size_t(n.constant) >= g.constants.size()) return false;
  const ConstData& c = g.constants[size_t(n.constant)];
  const size_t size = size_t(dtype_size(dt)), count = size_t(n.type.numel());
  if (!c.data || c.nbytes < count * size) return false;
  const auto* bytes = static_cast<const uint8_t*>(c.data);
  for (size_t i = 0; i < count; ++i) {
    uint64_t raw = 0;
    std::memcpy(&raw, bytes + i * size, size);
    int64_t v;
    bool above = false;
    if (dtype_info(dt).kind == DTypeKind::SignedInt) {
      const int shift = int(64 - 8 * size);
      v = int64_t(raw << shift) >> shift;  // sign-extended
    } else {
      above = raw > uint64_t(INT64_MAX);
      v = above ? INT64_MAX : int64_t(raw);
    }
    f(v, above, raw);
  }
  return true;
}

void check_take(const Graph& g, const Node& n, const SymbolicSizes* dynamic) {
  const int x = n.inputs[0];
  const size_t axis = size_t(n.attrs.i("axis"));
  if (dynamic && size_t(x) < dynamic->extents.size() && axis < dynamic->extents[size_t(x)].size() &&
      !dynamic->extents[size_t(x)][axis].is_constant())
    return;
  const int64_t extent = g.type(x).shape[axis];
  for_each_known(g, n.inputs[1], [&](int64_t k, bool above, uint64_t raw) {
    if (above || k < -extent || k >= extent)
      throw IndexError("take: index " + (above ? std::to_string(raw) : std::to_string(k)) + " is out of range for axis " + std::to_string(axis) + " of " +
                       g.type(x).str() + " (valid: " + std::to_string(-extent) + " to " + std::to_string(extent - 1) + ")");
  });
}

void check_check_index(const Graph& g, const Node& n) {
  const int64_t lo = n.attrs.i("lo"), hi = n.attrs.i("hi");
  for_each_known(g, n.inputs[0], [&](int64_t k, bool above, uint64_t raw) {
    if (above || k < lo || k >= hi)
      throw IndexError(n.attrs.s("what") + " " + (above ? std::to_string(raw) : std::to_string(k)) + " is out of range [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + ")");
  });
}

}  // namespace

void check_constant_indices(const Graph& g, const SymbolicSizes* dynamic) {
  for (const Node& n : g.nodes) {
    if (n.op == OpKind::Take) check_take(g, n, dynamic);
    else if (n.op == OpKind::CheckIndex) check_check_index(g, n);
  }
}

}  // namespace hjit
