// Reverse-mode automatic differentiation: grad and value_and_grad, like JAX's.
//
//   auto loss = [&](const Tensor& x, const Tensor& y) { return hjit::mean(hjit::square_error(model(x), y)); };
//   Tensor dx = hjit::grad(loss)(x, y);                             // d loss / d x
//   auto [l, g] = hjit::value_and_grad(loss, model.params)(x, y);  // gradients of captured parameters
//   auto step = hjit::jit([&](const Tensor& x, const Tensor& y) {   // forward + backward + update,
//     auto [l, g] = hjit::value_and_grad(loss, params)(x, y);       // compiled into one pipeline
//     opt.step(g);
//     return l;
//   });
//
// The differentiated function returns a 0-d floating point tensor (the loss). It is traced into a
// graph, the graph is differentiated (one gradient rule per op), and the gradient graph runs
// through the op API: eagerly, or, inside jit, as part of the jitted function's graph.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <hjit/jit.h>

namespace hjit {

namespace detail {

// The type-erased part: tracing, differentiating, caching by signature, replaying. In frontend/grad.cpp.
class GradCore {
 public:
  GradCore(std::vector<int> argnums, std::vector<Tensor> params, std::string name);
  ~GradCore();
  // [value, gradient...]: one gradient per tensor of the argnums arguments (a vector<Tensor>
  // argument contributes all of its tensors), or per parameter.
  std::vector<Tensor> call(const CallArgs& args, Tracer trace);

  struct State;

 private:
  std::unique_ptr<State> s_;
};

enum class GradShape { One, Many };

template <class Fn, GradShape Shape, bool WithValue>
class GradFn {
 public:
  GradFn(Fn fn, std::vector<int> argnums, std::vector<Tensor> params)
      : fn_(std::move(fn)),
        core_(std::make_shared<GradCore>(std::move(argnums), std::move(params), "grad(" + default_name(typeid(Fn)) + ")")) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    using Inv = Invocation<Fn, Args...>;
    static_assert(std::is_same_v<typename Inv::R, Tensor>,
                  "hjit::grad: the differentiated function must return a Tensor (a 0-d loss)");
    CallArgs call = Inv::collect_all(args...);
    auto tracer = [&](const std::vector<Tensor>& tracers, std::vector<int>* tree) {
      return Inv::trace(fn_, tracers, tree, args...);
    };
    std::vector<Tensor> r = core_->call(call, tracer);
    if constexpr (Shape == GradShape::One) {
      if constexpr (WithValue) return std::pair<Tensor, Tensor>{r[0], r[1]};
      else return r[1];
    } else {
      std::vector<Tensor> grads(r.begin() + 1, r.end());
      if constexpr (WithValue) return std::pair<Tensor, std::vector<Tensor>>{r[0], std::move(grads)};
      else return grads;
    }
  }

 private:
  Fn fn_;
  std::shared_ptr<GradCore> core_;
};

}  // namespace detail

// d fn / d (argument argnum): a callable returning one Tensor.
template <class Fn>
auto grad(Fn&& fn, int argnum = 0) {
  return detail::GradFn<std::decay_t<Fn>, detail::GradShape::One, false>(std::forward<Fn>(fn), {argnum}, {});
}
// Gradients with respect to several arguments: a std::vector<Tensor> in argnums order.
template <class Fn>
auto grad(Fn&& fn, std::vector<int> argnums) {
  return detail::GradFn<std::decay_t<Fn>, detail::GradShape::Many, false>(std::forward<Fn>(fn), std::move(argnums), {});
}
// Gradients with respect to tensors the function captures (model parameters), in that order.
template <class Fn>
auto grad(Fn&& fn, std::vector<Tensor> params) {
  return detail::GradFn<std::decay_t<Fn>, detail::GradShape::Many, false>(std::forward<Fn>(fn), {}, std::move(params));
}
// The same, returning the value too: std::pair<Tensor, Tensor> or std::pair<Tensor, std::vector<Tensor>>.
template <class Fn>
auto value_and_grad(Fn&& fn, int argnum = 0) {
  return detail::GradFn<std::decay_t<Fn>, detail::GradShape::One, true>(std::forward<Fn>(fn), {argnum}, {});
}
template <class Fn>
auto value_and_grad(Fn&& fn, std::vector<int> argnums) {
  return detail::GradFn<std::decay_t<Fn>, detail::GradShape::Many, true>(std::forward<Fn>(fn), std::move(argnums), {});
}
template <class Fn>
auto value_and_grad(Fn&& fn, std::vector<Tensor> params) {
  return detail::GradFn<std::decay_t<Fn>, detail::GradShape::Many, true>(std::forward<Fn>(fn), {}, std::move(params));
}

}  // namespace hjit
