// Control flow as ops, as JAX's lax.cond / while_loop / fori_loop / scan. Run eagerly, each is the
// C++ it stands for. Inside a traced function each branch or body is traced once, into a graph of
// its own held by one node of the traced graph (printed there, nested), compiled once and run as a
// loop of compiled bodies driven by the host: a loop of a million steps is one body in the graph,
// not a million unrolled copies, and a branch is chosen by the value at each call, not frozen at
// the first. cond, fori_loop (integer bounds) and scan are differentiable; while_loop is not (its
// trip count is known only when it runs), as in JAX.
//
//   Tensor y = hjit::cond(hjit::sum(x) > 0.0, [](const Tensor& v) { return v * 2.0; },
//                         [](const Tensor& v) { return -v; }, x);
//   Tensor z = hjit::fori_loop(0, n, [](const Tensor& i, const Tensor& acc) { return acc * 0.5 + i; }, init);
//
// Branches and bodies may read tensors of the enclosing function (they become operands of the op)
// but not assign to them: return new values instead. A carry keeps its shape and dtype.
#pragma once
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include <hjit/tensor.h>

namespace hjit {

using Tensors = std::vector<Tensor>;

// The branch `pred` (a bool[]) selects, applied to the operands. Both branches take the operands
// and return results of the same shapes and dtypes.
Tensors cond(const Tensor& pred, const std::function<Tensors(const Tensors&)>& then_fn,
             const std::function<Tensors(const Tensors&)>& else_fn, const Tensors& operands);
Tensor cond(const Tensor& pred, const std::function<Tensor(const Tensor&)>& then_fn,
            const std::function<Tensor(const Tensor&)>& else_fn, const Tensor& operand);

// state = init; while (cond_fn(state)) state = body_fn(state); return state. cond_fn gives a bool[].
Tensors while_loop(const std::function<Tensor(const Tensors&)>& cond_fn, const std::function<Tensors(const Tensors&)>& body_fn,
                   const Tensors& init);
Tensor while_loop(const std::function<Tensor(const Tensor&)>& cond_fn, const std::function<Tensor(const Tensor&)>& body_fn,
                  const Tensor& init);

// state = init; for (i = lower; i < upper; ++i) state = body(i, state); with i an i32[]. Integer
// bounds make a scan (differentiable); tensor bounds (0-d integers, traced) a while_loop.
Tensors fori_loop(int64_t lower, int64_t upper, const std::function<Tensors(const Tensor&, const Tensors&)>& body,
                  const Tensors& init);
Tensor fori_loop(int64_t lower, int64_t upper, const std::function<Tensor(const Tensor&, const Tensor&)>& body,
                 const Tensor& init);
Tensors fori_loop(const Tensor& lower, const Tensor& upper, const std::function<Tensors(const Tensor&, const Tensors&)>& body,
                  const Tensors& init);
Tensor fori_loop(const Tensor& lower, const Tensor& upper, const std::function<Tensor(const Tensor&, const Tensor&)>& body,
                 const Tensor& init);

// lax.scan: for each t (backwards with reverse), (carries, y_t) = body(carries, x_t), where x_t is
// row t of each of xs (their leading axis has `length` rows; length may be left -1 when xs is not
// empty). Returns the last carries and the ys stacked along a new leading axis.
struct ScanResult {
  Tensors carries;
  Tensors ys;
};
using ScanBody = std::function<std::pair<Tensors, Tensors>(const Tensors& carries, const Tensors& x)>;
ScanResult scan(const ScanBody& body, const Tensors& init, const Tensors& xs, int64_t length = -1, bool reverse = false);

// jax.checkpoint (remat), torch.utils.checkpoint: fn with its intermediate values recomputed in
// the backward pass instead of kept from the forward pass. Only fn's arguments (and the tensors it
// reads) and its results are held between the two; memory for a little more compute:
//
//   auto loss = [&](const Tensor& x) { return hjit::sum(hjit::checkpoint(block)(x)); };
//
// Eagerly and without gradients it is fn itself. Traced, fn becomes one checkpoint op holding its
// graph, compiled as a pipeline of its own (its temporaries freed when it ends); its gradient is a
// checkpoint of fn's vector-Jacobian product, which computes fn's forward values again.
std::function<Tensors(const Tensors&)> checkpoint(std::function<Tensors(const Tensors&)> fn);
std::function<Tensor(const Tensor&)> checkpoint(std::function<Tensor(const Tensor&)> fn);

}  // namespace hjit
