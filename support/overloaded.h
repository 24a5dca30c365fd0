// A visitor from lambdas, one per alternative of a std::variant: std::visit over it does not
// compile until every alternative has its lambda.
#pragma once

namespace hjit {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};

}  // namespace hjit
