// The bytes of Halide's runtime compiled for this machine's architecture and OS (see
// runtime_object.cpp).
#pragma once
#include <string_view>

namespace hjit::backend {

std::string_view halide_runtime_object();

}  // namespace hjit::backend
