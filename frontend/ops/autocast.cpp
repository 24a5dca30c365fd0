// hjit::autocast's state (one per thread, as torch's) and the conversions its rules apply.
#include <hjit/autocast.h>

#include "frontend/ops/autocast_rules.h"
#include "frontend/ops/op_support.h"

namespace hjit {
namespace {
thread_local std::optional<DType> active;
}  // namespace

Autocast::Autocast(DType dtype, bool enabled) : previous_(active) {
  if (dtype != DType::BF16 && dtype != DType::F16)
    throw ValueError(std::string("autocast: computes contractions in bf16 or f16, not ") + dtype_name(dtype) +
                     "; for f32 throughout leave autocast off (hjit::autocast(DType::BF16, false) inside a region)");
  active = enabled ? std::optional<DType>(dtype) : std::nullopt;
}

Autocast::~Autocast() { active = previous_; }

std::optional<DType> autocast_dtype() { return active; }

namespace detail {

Tensor autocast_low(const Tensor& x) {
  if (!active || !x.defined() || !is_floating(x.dtype()) || x.dtype() == *active) return x;
  return cast_to(x, *active);
}

std::optional<Tensor> autocast_low(const std::optional<Tensor>& x) {
  return x ? std::optional<Tensor>(autocast_low(*x)) : std::nullopt;
}

Tensor autocast_f32(const Tensor& x) {
  if (!active || !x.defined() || (x.dtype() != DType::BF16 && x.dtype() != DType::F16)) return x;
  return cast_to(x, DType::F32);
}

}  // namespace detail
}  // namespace hjit
