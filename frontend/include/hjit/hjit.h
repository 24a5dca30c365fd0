// hjit: tensor programs in C++, traced into a graph, compiled with Halide, memoized by signature.
//
//   #include <hjit/hjit.h>
//   using hjit::Tensor;
//
//   Tensor selu(const Tensor& x) {
//     return 1.05 * hjit::where(x > 0, x, 1.67 * hjit::exp(x) - 1.67);
//   }
//
//   int main() {
//     Tensor x = Tensor::randn({1 << 20}, /*seed=*/0);
//     Tensor y = selu(x);                      // eager: runs now, op by op
//     auto fast = hjit::jit(selu);             // traced on the first call, compiled with Halide
//     Tensor z = fast(x);                      // first call: trace + compile + run
//     z = fast(x);                             // same shape and dtype: straight to compiled code
//     std::cout << hjit::make_graph(selu, x).str();   // the traced graph, jaxpr style
//     std::cout << fast.stats().cache_hits << "\n";   // 1
//   }
//
// Tensor and std::vector<Tensor> arguments are traced; every other argument (int, double, bool,
// enum, std::string) is static: its value is part of the cache key. Tensors a jitted function
// captures (model parameters) are read at every call; Tensor::assign on them inside the function
// writes the new value after every call. docs/ has the rest; tuning runs are <hjit/tune.h>'s.
#pragma once

#include <hjit/autocast.h>
#include <hjit/control_flow.h>
#include <hjit/device.h>
#include <hjit/distributed.h>
#include <hjit/dtype.h>
#include <hjit/eager.h>
#include <hjit/error.h>
#include <hjit/export.h>
#include <hjit/grad.h>
#include <hjit/graph.h>
#include <hjit/jit.h>
#include <hjit/jit_options.h>
#include <hjit/memory.h>
#include <hjit/module.h>
#include <hjit/ops.h>
#include <hjit/optim.h>
#include <hjit/optim_schedule.h>
#include <hjit/random.h>
#include <hjit/settings.h>
#include <hjit/tensor.h>
#include <hjit/threads.h>
