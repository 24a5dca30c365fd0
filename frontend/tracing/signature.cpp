#include "frontend/tracing/signature.h"

#include <map>

#include <hjit/autocast.h>

#include "frontend/tensor/tensor_impl.h"
#include "support/hash.h"

namespace hjit::detail {
namespace {

// A function traced under autocast records its conversions: the state is part of the key.
int64_t autocast_key() {
  const std::optional<DType> d = autocast_dtype();
  return d ? int64_t(*d) : -1;
}

const TensorImpl& arg_impl(const CallArgs& a, size_t i, const std::string& fn) {
  const Tensor& t = a.tensor(i);
  if (!t.impl())
    throw ValueError("'" + fn + "': argument " + std::to_string(a.arg_index(i)) + " is an undefined Tensor");
  const TensorImpl& im = *t.impl();
  if (im.traced() && !im.storage && !tracing_active())
    throw ValueError("'" + fn + "': argument " + std::to_string(a.arg_index(i)) +
                     " is a tracer whose trace has ended: a traced value escaped its function");
  if (!im.donated_to.empty()) check_not_donated(im, ("'" + fn + "': argument " + std::to_string(a.arg_index(i))).c_str());
  return im;
}

// Per argument position: its tensors' types, as "f32[2,3]" (a list for vector<Tensor> arguments).
std::map<int, std::string> describe_tensors(const std::vector<int64_t>& sig) {
  std::map<int, std::string> out;
  for (size_t k = 0; k < sig.size();) {
    int arg = int(sig[k]);
    TensorType t{DType(sig[k + 1]), Shape(sig.begin() + std::ptrdiff_t(k + 3), sig.begin() + std::ptrdiff_t(k + 3 + size_t(sig[k + 2])))};
    k += 3 + size_t(sig[k + 2]);
    std::string& s = out[arg];
    s += (s.empty() ? "" : ", ") + t.str();
  }
  return out;
}

}  // namespace

bool Signature::is_dynamic(const CallArgs& a, size_t i, int d, int rank, const DynamicDims* dynamic) {
  if (!dynamic) return false;
  for (const auto& [arg, axis] : *dynamic)
    if (arg == a.arg_index(i) && (axis < 0 ? axis + rank : axis) == d) return true;
  return false;
}

uint64_t Signature::hash_of(const CallArgs& a, const std::string& fn, const DynamicDims* dynamic) {
  Hasher h;
  for (size_t i = 0; i < a.count; ++i) {
    const TensorImpl& im = arg_impl(a, i, fn);
    h.add(a.arg_index(i)).add(im.type.dtype);
    if (!dynamic) {
      h.add_range(im.type.shape);
      continue;
    }
    for (int d = 0; d < im.type.rank(); ++d)
      h.add(is_dynamic(a, i, d, im.type.rank(), dynamic) ? int64_t(-1) : im.type.shape[size_t(d)]);
  }
  h.add(autocast_key());
  return h.value() ^ (a.statics.empty() ? 0 : a.statics.hash());
}

Signature Signature::of(const CallArgs& a, uint64_t hash, const DynamicDims* dynamic) {
  Signature s;
  s.hash = hash;
  for (size_t i = 0; i < a.count; ++i) {
    const TensorType& t = a.tensor(i).impl()->type;
    s.sig.push_back(a.arg_index(i));
    s.sig.push_back(int64_t(t.dtype));
    s.sig.push_back(t.rank());
    for (int d = 0; d < t.rank(); ++d) s.sig.push_back(is_dynamic(a, i, d, t.rank(), dynamic) ? -1 : t.shape[size_t(d)]);
  }
  s.statics = a.statics;
  s.autocast = autocast_key();
  return s;
}

bool Signature::matches(const CallArgs& a) const {
  size_t k = 0;
  for (size_t i = 0; i < a.count; ++i) {
    const TensorType& t = a.tensor(i).impl()->type;
    if (k + 3 + t.shape.size() > sig.size() || sig[k] != a.arg_index(i) || sig[k + 1] != int64_t(t.dtype) ||
        sig[k + 2] != t.rank())
      return false;
    k += 3;
    for (int64_t d : t.shape)
      if (sig[k] != d && sig[k] != -1) return false;
      else ++k;
  }
  return k == sig.size() && autocast == autocast_key() && (a.statics.empty() ? statics.empty() : a.statics == statics);
}

std::string Signature::describe_change_to(const Signature& now) const {
  std::string what;
  auto before = describe_tensors(sig), after = describe_tensors(now.sig);
  for (const auto& [arg, s] : after)
    if (before[arg] != s) what += " argument " + std::to_string(arg) + ": " + before[arg] + " -> " + s + ";";
  std::map<int, std::string> sb, sa;
  for (const auto& [i, v] : statics.values()) sb[i] = v->str();
  for (const auto& [i, v] : now.statics.values()) sa[i] = v->str();
  for (const auto& [arg, s] : sa)
    if (sb[arg] != s) what += " static argument " + std::to_string(arg) + ": " + sb[arg] + " -> " + s + ";";
  auto autocast_name = [](int64_t d) { return d < 0 ? std::string("off") : std::string(dtype_name(DType(d))); };
  if (autocast != now.autocast) what += " autocast: " + autocast_name(autocast) + " -> " + autocast_name(now.autocast) + ";";
  return what.empty() ? " (no difference found)" : what;
}

}  // namespace hjit::detail
