// hjit in five minutes: eager tensors, jit, printed graphs, static arguments, and what to do when
// a traced function wants to read a value. Mirrors the JAX "Just-in-time compilation" tutorial.
#include <hjit/hjit.h>

#include "timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>

using hjit::Tensor;

// The tutorial's SELU.
Tensor selu(const Tensor& x) {
  const double alpha = 1.67, lambda = 1.05;
  return lambda * hjit::where(x > 0, x, alpha * hjit::exp(x) - alpha);
}

// The tutorial's log2: the constant log(2) is folded when the graph is optimized.
Tensor log_base2(const Tensor& x) { return hjit::log(x) / hjit::log(Tensor::scalar(2.0)); }

double max_abs_diff(const Tensor& a, const Tensor& b) { return hjit::max(hjit::abs(a - b)).item<double>(); }

int main() {
  // 1. Eager: every operation runs when it is called.
  Tensor a = Tensor::randn({2, 3}, 1), b = Tensor::randn({2, 3}, 2), c = Tensor::randn({2, 3}, 3);
  Tensor y = a * b + c;
  std::cout << "eager a * b + c =\n" << y.str() << "\n\n";

  // 2. jit: traced on the first call, compiled with Halide, cached by shape and dtype.
  auto f = hjit::jit([](const Tensor& a, const Tensor& b, const Tensor& c) { return a * b + c; });
  Tensor z = f(a, b, c);  // traced, lowered, compiled, run
  z = f(a, b, c);         // cache hit: nothing traced or compiled
  hjit::JitStats s = f.stats();
  std::cout << "jit a * b + c: " << s.traces << " trace, " << s.compiles << " compile (" << s.compile_ms << " ms), "
            << s.cache_hits << " cache hit; max |jit - eager| = " << max_abs_diff(z, y) << "\n\n";

  // 3. What was traced, as a jaxpr-like listing.
  Tensor x = Tensor::randn({1 << 20}, 4);
  std::cout << "make_graph(selu):\n" << hjit::make_graph(selu, x).str() << "\n";
  std::cout << "make_graph(log_base2):\n" << hjit::make_graph(log_base2, x).str() << "\n";
  auto fast_log2 = hjit::jit(log_base2);
  std::cout << "log_base2 after optimization (log(2) folded):\n" << fast_log2.graph(x).str() << "\n";

  auto fast_selu = hjit::jit(selu);
  Tensor r = fast_selu(x);
  double eager_ms = median_ms([&] { selu(x); }), jit_ms = median_ms([&] { fast_selu(x); });
  std::cout << "selu on 1M floats: eager " << eager_ms << " ms, jit " << jit_ms << " ms (" << eager_ms / jit_ms
            << "x); max |jit - eager| = " << max_abs_diff(r, selu(x)) << "\n\n";

  // 4. Static arguments: anything that is not a Tensor is part of the cache key, so C++ control
  //    flow on it is fine (one compiled version per value).
  auto maybe_negate = hjit::jit([](const Tensor& x, bool neg) { return neg ? -x : x; });
  Tensor small = Tensor::arange(4);
  std::cout << "static argument: f(x, true) = " << maybe_negate(small, true).str()
            << ", f(x, false) = " << maybe_negate(small, false).str() << " (" << maybe_negate.stats().traces
            << " traces)\n\n";

  // 5. Control flow on a traced value cannot be compiled: its value is not known while tracing.
  auto branchy = hjit::jit([](const Tensor& x) { return hjit::sum(x).item<float>() > 0 ? x : -x; },
                           hjit::JitOptions{.name = "branchy"});
  try {
    branchy(small);
  } catch (const hjit::ConcretizationError& e) {
    std::cout << "ConcretizationError: " << e.what() << "\n\n";
  }
  // The fix: compute both branches and select inside the graph ...
  auto fixed = hjit::jit([](const Tensor& x) { return hjit::where(hjit::sum(x) > 0, x, -x); });
  std::cout << "fixed with where: " << fixed(small).str() << "\n";
  // ... or trace concretely (like torch.jit.trace): the first call runs eagerly and the graph is
  // specialized to the branch it took.
  auto concrete = hjit::jit([](const Tensor& x) { return hjit::sum(x).item<float>() > 0 ? x : -x; },
                            hjit::JitOptions{.name = "concrete", .trace_mode = hjit::TraceMode::Concrete});
  std::cout << "or traced concretely: " << concrete(small).str() << "\n";

  bool ok = max_abs_diff(z, y) == 0 && max_abs_diff(r, selu(x)) < 1e-5;
  std::cout << (ok ? "quickstart: compiled results match eager\n" : "quickstart: MISMATCH\n");
  return ok ? 0 : 1;
}
