// The conversions hjit::autocast's rules make at the ops they name (hjit/autocast.h): each a
// no-op while autocast is off.
#pragma once
#include <optional>

#include <hjit/tensor.h>

namespace hjit::detail {

// A floating operand of a contraction, in the autocast dtype.
Tensor autocast_low(const Tensor& x);
std::optional<Tensor> autocast_low(const std::optional<Tensor>& x);
// A 16-bit operand of a reduction or normalization, in f32.
Tensor autocast_f32(const Tensor& x);

}  // namespace hjit::detail
