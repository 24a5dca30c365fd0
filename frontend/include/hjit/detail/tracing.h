// How every API that traces a C++ function sees a call (jit, grad, save, export_library, tune,
// trace): its arguments flattened into tensors and static values, and the function run on tracers
// in place of the tensors, its result flattened. The machinery behind the public headers, not an
// API of its own.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include <hjit/detail/function_ref.h>
#include <hjit/detail/static_key.h>
#include <hjit/graph.h>
#include <hjit/tensor.h>

namespace hjit::detail {

using Tracer = FunctionRef<std::vector<Tensor>(const std::vector<Tensor>& args, std::vector<int>* tree)>;

// One call's arguments, flattened: the tensors (with the position of the argument each came from)
// and the static values.
struct CallArgs {
  static constexpr int kInline = 16;
  const Tensor* inline_tensors[kInline];
  int inline_index[kInline];
  std::vector<const Tensor*> more_tensors;
  std::vector<int> more_index;
  size_t count = 0;
  StaticKey statics;
  bool any_traced = false;
  // Jitted::into: the tensor whose storage the first result is computed into, where it can be.
  const Tensor* into = nullptr;

  void push(const Tensor& t, int arg) {
    if (count < kInline) inline_tensors[count] = &t, inline_index[count] = arg;
    else more_tensors.push_back(&t), more_index.push_back(arg);
    ++count;
    any_traced |= t.is_traced();
  }
  const Tensor& tensor(size_t i) const { return i < kInline ? *inline_tensors[i] : *more_tensors[i - kInline]; }
  int arg_index(size_t i) const { return i < kInline ? inline_index[i] : more_index[i - kInline]; }
};

// exclude_from_trace's check: host code inside a trace that runs only once is an error.
void check_host_code_allowed();

// Traces without compiling: the raw graph, as make_jaxpr shows it.
Graph trace_graph(const std::string& name, const CallArgs& args, Tracer trace);
bool tracing_active();
std::string default_name(const std::type_info& fn_type);

// ---- flattening arguments and results
template <class T>
using Bare = std::remove_cvref_t<T>;
template <class T>
inline constexpr bool is_tensor = std::is_same_v<Bare<T>, Tensor>;
template <class T>
inline constexpr bool is_tensor_list = std::is_same_v<Bare<T>, std::vector<Tensor>>;

template <class A>
void collect(CallArgs& c, int index, const A& a) {
  if constexpr (is_tensor<A>) {
    c.push(a, index);
  } else if constexpr (is_tensor_list<A>) {
    for (const Tensor& t : a) c.push(t, index);
    if (a.empty()) c.statics.add(index, std::string("<empty tensor list>"));
  } else {
    static_assert(HashableStatic<Bare<A>> || std::is_convertible_v<const A&, std::string>,
                  "hjit::jit: an argument that is not an hjit::Tensor or std::vector<hjit::Tensor> is static: its "
                  "value is part of the cache key, so its type must be arithmetic, an enum, std::string, or have "
                  "std::hash and operator==. Pass arrays as hjit::Tensor instead.");
    c.statics.add(index, a);
  }
}

// The argument the traced function sees in place of `a`.
template <class A>
decltype(auto) substitute(const A& a, const std::vector<Tensor>& tracers, size_t& k) {
  if constexpr (is_tensor<A>) {
    return Tensor(tracers[k++]);
  } else if constexpr (is_tensor_list<A>) {
    std::vector<Tensor> v(tracers.begin() + std::ptrdiff_t(k), tracers.begin() + std::ptrdiff_t(k + a.size()));
    k += a.size();
    return v;
  } else {
    return static_cast<const A&>(a);
  }
}

template <class R>
struct Result;  // flatten/unflatten of a traced function's result
template <>
struct Result<Tensor> {
  static void flatten(const Tensor& r, std::vector<Tensor>& out, std::vector<int>*) { out.push_back(r); }
  static Tensor unflatten(std::vector<Tensor>& in, size_t& pos, const std::vector<int>&, size_t&) { return std::move(in[pos++]); }
};
template <>
struct Result<std::vector<Tensor>> {
  static void flatten(const std::vector<Tensor>& r, std::vector<Tensor>& out, std::vector<int>* tree) {
    tree->push_back(int(r.size()));
    out.insert(out.end(), r.begin(), r.end());
  }
  static std::vector<Tensor> unflatten(std::vector<Tensor>& in, size_t& pos, const std::vector<int>& tree, size_t& t) {
    std::vector<Tensor> v;
    for (int i = 0; i < tree[t]; ++i) v.push_back(std::move(in[pos++]));
    ++t;
    return v;
  }
};
template <class... Ts>
struct Result<std::tuple<Ts...>> {
  static void flatten(const std::tuple<Ts...>& r, std::vector<Tensor>& out, std::vector<int>* tree) {
    std::apply([&](const auto&... x) { (Result<Bare<decltype(x)>>::flatten(x, out, tree), ...); }, r);
  }
  static std::tuple<Ts...> unflatten(std::vector<Tensor>& in, size_t& pos, const std::vector<int>& tree, size_t& t) {
    return std::tuple<Ts...>{Result<Ts>::unflatten(in, pos, tree, t)...};  // braces: left to right
  }
};
template <class A, class B>
struct Result<std::pair<A, B>> {
  static void flatten(const std::pair<A, B>& r, std::vector<Tensor>& out, std::vector<int>* tree) {
    Result<A>::flatten(r.first, out, tree);
    Result<B>::flatten(r.second, out, tree);
  }
  static std::pair<A, B> unflatten(std::vector<Tensor>& in, size_t& pos, const std::vector<int>& tree, size_t& t) {
    A a = Result<A>::unflatten(in, pos, tree, t);
    B b = Result<B>::unflatten(in, pos, tree, t);
    return {std::move(a), std::move(b)};
  }
};

template <class Fn, class... Args>
struct Invocation {
  using R = Bare<std::invoke_result_t<const Fn&, decltype(substitute(std::declval<const Bare<Args>&>(),
                                                                      std::declval<const std::vector<Tensor>&>(),
                                                                      std::declval<size_t&>()))...>>;
  static_assert(std::is_void_v<R> || requires { &Result<R>::flatten; },
                "hjit::jit: a traced function returns Tensor, std::vector<Tensor>, or a std::pair / std::tuple "
                "of those (or nothing)");

  static CallArgs collect_all(const Args&... args) {
    CallArgs c;
    int i = 0;
    (collect(c, i++, args), ...);
    return c;
  }

  // Runs fn with tracers in place of the tensor arguments, flattening what it returns.
  static std::vector<Tensor> trace(const Fn& fn, const std::vector<Tensor>& tracers, std::vector<int>* tree,
                                   const Args&... args) {
    size_t k = 0;
    auto subst = std::tuple<decltype(substitute(args, tracers, k))...>{substitute(args, tracers, k)...};
    std::vector<Tensor> flat;
    if constexpr (std::is_void_v<R>) {
      std::apply(fn, subst);
    } else {
      R r = std::apply(fn, subst);
      Result<R>::flatten(r, flat, tree);
    }
    return flat;
  }
};

// Calls use(name, call, tracer) with fn's default name, the example arguments flattened, and a
// tracer of fn over them: what every API that traces a function once (save, export, tune, trace)
// hands its implementation.
template <class Fn, class Use, class... Args>
decltype(auto) traced_once(const Fn& fn, Use&& use, const Args&... args) {
  using Inv = Invocation<std::decay_t<Fn>, Args...>;
  CallArgs call = Inv::collect_all(args...);
  auto tracer = [&](const std::vector<Tensor>& tracers, std::vector<int>* tree) { return Inv::trace(fn, tracers, tree, args...); };
  return use(default_name(typeid(std::decay_t<Fn>)), call, tracer);
}

}  // namespace hjit::detail
