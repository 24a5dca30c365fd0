// Reverse-mode automatic differentiation: grad and value_and_grad, like JAX's.
//
//   auto loss = [&](const Tensor& x, const Tensor& y) { Tensor d = model(x) - y; return hjit::mean(d * d); };
//   Tensor dx = hjit::grad(loss)(x, y);                             // d loss / d x
//   Tensor dy = hjit::grad<1>(loss)(x, y);                          // d loss / d y
//   auto [l, g] = hjit::value_and_grad(loss, model.params)(x, y);  // gradients of captured parameters
//   auto mse = [&](const std::vector<Tensor>& ws, const Tensor& x) { ... };
//   std::vector<Tensor> dws = hjit::grad(mse)(ws, x);               // one gradient per element of ws
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
#include <tuple>
#include <utility>
#include <vector>

#include <hjit/detail/tracing.h>

namespace hjit {

namespace detail {

// The type-erased part: tracing, differentiating, caching by signature, replaying. In frontend/transforms/grad.cpp.
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

// Whether argument Argnum of a call with Args is a std::vector<Tensor> (false for a runtime argnum).
template <int Argnum, class... Args>
constexpr bool argument_is_list() {
  if constexpr (Argnum >= 0 && Argnum < int(sizeof...(Args))) return is_tensor_list<std::tuple_element_t<size_t(Argnum), std::tuple<Args...>>>;
  else return false;
}

// Argnum >= 0: the differentiated argument is known when grad() is called (grad<N>(fn), or
// grad(fn) for argument 0), so a std::vector<Tensor> argument gets a std::vector of gradients.
template <class Fn, GradShape Shape, bool WithValue, int Argnum = -1>
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
    static_assert(Argnum < int(sizeof...(Args)), "hjit::grad<N>: the function is called with fewer than N + 1 arguments");
    CallArgs call = Inv::collect_all(args...);
    auto tracer = [&](const std::vector<Tensor>& tracers, std::vector<int>* tree) {
      return Inv::trace(fn_, tracers, tree, args...);
    };
    std::vector<Tensor> r = core_->call(call, tracer);
    constexpr bool list = argument_is_list<Argnum, Args...>();
    if constexpr (Shape == GradShape::One && !list) {
      if (r.size() != 2) throw_list_argument(r.size() - 1);
      if constexpr (WithValue) return std::pair<Tensor, Tensor>{r[0], r[1]};
      else return r[1];
    } else {
      std::vector<Tensor> grads(r.begin() + 1, r.end());
      if constexpr (WithValue) return std::pair<Tensor, std::vector<Tensor>>{r[0], std::move(grads)};
      else return grads;
    }
  }

 private:
  [[noreturn]] void throw_list_argument(size_t n) const;
  Fn fn_;
  std::shared_ptr<GradCore> core_;
};

[[noreturn]] void throw_grad_of_list(size_t n);
template <class Fn, GradShape Shape, bool WithValue, int Argnum>
void GradFn<Fn, Shape, WithValue, Argnum>::throw_list_argument(size_t n) const {
  throw_grad_of_list(n);
}

}  // namespace detail

// d fn / d (argument Argnum): one Tensor, or a std::vector<Tensor> when that argument is a
// std::vector<Tensor> (one gradient per element).
template <int Argnum = 0, class Fn>
auto grad(Fn&& fn) {
  return detail::GradFn<std::decay_t<Fn>, detail::GradShape::One, false, Argnum>(std::forward<Fn>(fn), {Argnum}, {});
}
// d fn / d (argument argnum) for an argnum chosen at run time: one Tensor (a std::vector<Tensor>
// argument is a ValueError: use grad<N>(fn) or grad(fn, {N})).
template <class Fn>
auto grad(Fn&& fn, int argnum) {
  return detail::GradFn<std::decay_t<Fn>, detail::GradShape::One, false>(std::forward<Fn>(fn), {argnum}, {});
}
// Gradients with respect to several arguments: a std::vector<Tensor> in argnums order (a
// std::vector<Tensor> argument contributes one gradient per element).
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
template <int Argnum = 0, class Fn>
auto value_and_grad(Fn&& fn) {
  return detail::GradFn<std::decay_t<Fn>, detail::GradShape::One, true, Argnum>(std::forward<Fn>(fn), {Argnum}, {});
}
template <class Fn>
auto value_and_grad(Fn&& fn, int argnum) {
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
