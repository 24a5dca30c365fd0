// The features of a cached jit() call, each as the unit it is (frontend/jit/): build-once
// synchronisation, the bounded version cache, re-trace warnings, guards, check_trace, donation,
// dynamic sizes and running a version. test_jit, test_trace, test_donate and test_dynamic_dims
// check them together through jit().
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <hjit/hjit.h>

#include "frontend/jit/build_once.h"
#include "frontend/jit/check_trace.h"
#include "frontend/jit/donation.h"
#include "frontend/jit/dynamic_sizes.h"
#include "frontend/jit/guards.h"
#include "frontend/jit/retraces.h"
#include "frontend/jit/captured.h"
#include "frontend/jit/version_cache.h"
#include "frontend/ops/op_support.h"
#include "frontend/tracing/traced.h"
#include "tests/support.h"

namespace {

using hjit::Tensor;
using namespace hjit::detail;

CallArgs call_of(const std::vector<const Tensor*>& tensors) {
  CallArgs c;
  for (size_t i = 0; i < tensors.size(); ++i) c.push(*tensors[i], int(i));
  return c;
}

// A version held under the signature of `args`, built (or not).
std::shared_ptr<Version> version_for(const CallArgs& args, bool built = true, uint64_t hash = 0) {
  auto v = std::make_shared<Version>();
  v->key = Signature::of(args, hash ? hash : Signature::hash_of(args, "f"));
  if (built) v->built.done();
  return v;
}

// A compiled function that computes nothing and says which outputs may take which inputs' storage.
class StubExecutable final : public hjit::backend::Executable {
 public:
  explicit StubExecutable(std::vector<std::pair<int, int>> in_place) : in_place_(std::move(in_place)) {}
  void run(const void* const*, void* const*) const override {}
  std::string explain() const override { return "stub"; }
  std::string summary() const override { return "stub"; }
  std::string name() const override { return "stub"; }
  std::vector<std::pair<int, int>> in_place() const override { return in_place_; }

 private:
  std::vector<std::pair<int, int>> in_place_;
};

// A compiled function of a graph whose parameters have the types `in` and whose outputs are those
// parameters of `outputs` (by index), around a stub; with `updated`: parameter 0 is assigned.
std::shared_ptr<CompiledFunction> stub_function(const std::vector<hjit::TensorType>& in, const std::vector<int>& outputs,
                                                std::vector<std::pair<int, int>> in_place = {}, bool updated = false) {
  hjit::Graph g;
  g.name = "stub";
  for (const hjit::TensorType& t : in) g.add_parameter(t);
  for (int o : outputs) g.outputs.push_back(g.inputs[size_t(o)]);
  if (updated) g.updates.push_back(hjit::Update{g.inputs[0], g.inputs[0]});
  return std::make_shared<CompiledFunction>(g, FunctionRequest{}, std::make_shared<StubExecutable>(std::move(in_place)));
}

}  // namespace

TEST_CASE("build once: waiters block until the builder is done, and see its error") {
  BuildOnce ok;
  CHECK_FALSE(ok.built());
  std::atomic<int> woke{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 4; ++i) waiters.emplace_back([&] {
    ok.wait();
    ++woke;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(woke == 0);
  ok.done();
  for (std::thread& t : waiters) t.join();
  CHECK(woke == 4);
  CHECK(ok.built());
  CHECK(ok.succeeded());

  BuildOnce failing;
  std::atomic<int> rethrown{0};
  waiters.clear();
  for (int i = 0; i < 3; ++i) waiters.emplace_back([&] {
    try {
      failing.wait();
    } catch (const hjit::ShapeError&) {
      ++rethrown;
    }
  });
  failing.failed(std::make_exception_ptr(hjit::ShapeError("bad shape")));
  for (std::thread& t : waiters) t.join();
  CHECK(rethrown == 3);
  CHECK_FALSE(failing.built());
  CHECK_FALSE(failing.succeeded());
  CHECK_THROWS_AS(failing.wait(), hjit::ShapeError);
}

TEST_CASE("version cache: found by signature, least recently used dropped first, never one being built") {
  VersionCache cache(2);
  Tensor a = Tensor::zeros({2}), b = Tensor::zeros({3}), c = Tensor::zeros({4}), d = Tensor::zeros({5});
  const CallArgs ca = call_of({&a}), cb = call_of({&b}), cc = call_of({&c}), cd = call_of({&d});
  auto insert = [&](const CallArgs& args, bool built = true) {
    const uint64_t h = Signature::hash_of(args, "f");
    auto [v, made] = cache.find_or_insert(std::span(&h, 1), args, [&] { return version_for(args, built); });
    CHECK(made);
    return v;
  };
  auto va = insert(ca), vb = insert(cb);
  CHECK(cache.find(Signature::hash_of(ca, "f"), ca) == va);  // a is now the most recently used
  CHECK(cache.find(Signature::hash_of(cb, "f"), ca) == nullptr);  // b's hash, a's signature
  insert(cc);
  CHECK(cache.size() == 2);
  CHECK(cache.evictions() == 1);
  CHECK(cache.find(Signature::hash_of(cb, "f"), cb) == nullptr);  // b went
  CHECK(cache.find(Signature::hash_of(ca, "f"), ca) == va);
  // A version being built is never dropped, even past the bound.
  auto vd = insert(cd, false);
  CHECK(cache.find(Signature::hash_of(cd, "f"), cd) == vd);
  vd->built.done();
  // Found, not made, by a second caller; forgotten, then made anew.
  const uint64_t hd = Signature::hash_of(cd, "f");
  auto [again, made] = cache.find_or_insert(std::span(&hd, 1), cd, [&] { return version_for(cd); });
  CHECK_FALSE(made);
  CHECK(again == vd);
  cache.forget(vd);
  CHECK(cache.find(hd, cd) == nullptr);
}

TEST_CASE("version cache: signatures sharing a hash are told apart; a version moves to another key") {
  VersionCache cache(0);
  Tensor a = Tensor::zeros({2}), b = Tensor::zeros({2, 1});
  const CallArgs ca = call_of({&a}), cb = call_of({&b});
  const uint64_t same = 42;
  auto [va, made_a] = cache.find_or_insert(std::span(&same, 1), ca, [&] { return version_for(ca, true, same); });
  auto [vb, made_b] = cache.find_or_insert(std::span(&same, 1), cb, [&] { return version_for(cb, true, same); });
  CHECK((made_a && made_b));
  CHECK(cache.find(same, ca) == va);
  CHECK(cache.find(same, cb) == vb);
  cache.rekey(vb, Signature::of(cb, 7));
  CHECK(cache.find(same, cb) == nullptr);
  CHECK(cache.find(7, cb) == vb);
  // all() holds every version and the versions chained after them (guards).
  va->next = version_for(ca);
  CHECK(cache.all().size() == 3);
}

TEST_CASE("re-traces: counted after the first, with a warning past the threshold naming what changed") {
  Retraces r("unit_retraces", 2, false);
  Tensor x = Tensor::zeros({2});
  const CallArgs first = call_of({&x});
  r.on_trace(Signature::of(first, 1));
  r.on_built(Signature::of(first, 1));
  CHECK(r.warning().empty());
  for (int n = 3; n <= 5; ++n) {
    Tensor y = Tensor::zeros({n});
    r.on_trace(Signature::of(call_of({&y}), uint64_t(n)));
  }
  CHECK(r.warning().find("re-traced 3 times") != std::string::npos);
  CHECK(r.warning().find("f32[5]") != std::string::npos);
  CHECK(r.warning().find("name them in JitOptions::dynamic_dims") != std::string::npos);
  // With dynamic_dims set, the advice is not to set them: what keeps each size apart, where one
  // pipeline was found unable to serve them, else a size outside them.
  for (const bool fixed : {true, false}) {
    CAPTURE(fixed);
    Retraces d("unit_retraces_dynamic", 2, true);
    d.on_trace(Signature::of(first, 1));
    d.on_built(Signature::of(first, 1));
    if (fixed) d.on_sizes_fixed("C++ branches on the size");
    for (int n = 3; n <= 5; ++n) {
      Tensor y = Tensor::zeros({n});
      d.on_trace(Signature::of(call_of({&y}), uint64_t(n)));
    }
    CHECK(d.warning().find("name them in JitOptions::dynamic_dims") == std::string::npos);
    CHECK(d.warning().find("dynamic_dims are set") != std::string::npos);
    CHECK((d.warning().find("C++ branches on the size") != std::string::npos) == fixed);
    CHECK((d.warning().find("outside them") != std::string::npos) == !fixed);
  }
}

TEST_CASE("guards: a version's values read while tracing, compared byte for byte") {
  Version v;
  v.fn = stub_function({hjit::TensorType{hjit::DType::F32, {2}}, hjit::TensorType{hjit::DType::Bool, {}}}, {0, 1});
  v.guards = {{1}};  // read `true` while tracing
  CHECK_FALSE(failed_guard(v, {Tensor::zeros({2}), Tensor::scalar(1, hjit::DType::Bool)}));
  CHECK(failed_guard(v, {Tensor::zeros({2}), Tensor::scalar(0, hjit::DType::Bool)}) == size_t(0));
}

TEST_CASE("check_trace's comparison: within tolerance relative to eager, NaN equals NaN, shapes must agree") {
  const Tensor eager = test::f32({1, 100, NAN}, {3});
  CHECK(compare_with_eager(test::f32({1, 100.00001f, NAN}, {3}), eager, 1e-5, "out").empty());
  CHECK(compare_with_eager(test::f32({1, 101, NAN}, {3}), eager, 1e-5, "out").find("element 1") != std::string::npos);
  CHECK(compare_with_eager(test::f32({1, 100, 0}, {3}), eager, 1e-5, "out").find("element 2") != std::string::npos);
  CHECK(compare_with_eager(test::f32({1, 100}, {2}), eager, 1e-5, "out").find("compiled f32[2] but eager f32[3]") !=
        std::string::npos);
}

TEST_CASE("donation: positions checked, storage taken only where nothing else holds it, arguments consumed") {
  Tensor x = Tensor::ones({4}), y = Tensor::ones({4});
  const CallArgs args = call_of({&x, &y});
  CHECK_THROWS_WITH_AS(check_donate("f", {2}, args), doctest::Contains("the call has 2 tensor arguments"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(check_donate("f", {1, 1}, args), doctest::Contains("twice"), hjit::ValueError);
  CHECK_NOTHROW(check_donate("f", {0, 1}, args));

  // Which result took which argument's storage: the result is a fresh tensor, or an alias of it.
  const hjit::TensorType f32_4{hjit::DType::F32, {4}};
  auto took = [&](const std::shared_ptr<CompiledFunction>& f, const std::vector<Tensor*>& inputs) {
    CallInputs in;
    for (Tensor* t : inputs) in.push(t->impl().get());
    std::vector<Tensor> out;
    const int64_t reused = f->run(in.view(), out, {.reuse_donated = true});
    CHECK(reused == (out[0].same_storage(*inputs[0]) ? 16 : 0));
    return out[0].same_storage(*inputs[0]);
  };
  auto f = stub_function({f32_4, f32_4}, {0}, {{0, 0}});
  CHECK(took(f, {&x, &y}));
  {
    Tensor sharing = x;  // another handle: the storage is still x's alone
    CHECK(took(f, {&x, &y}));
  }
  CHECK_FALSE(took(f, {&x, &x}));  // the same tensor as two inputs (an argument, or captured too)
  Tensor z = Tensor::ones({4});
  Tensor alias = alias_tensor(z.impl()->storage, f32_4);  // another tensor on z's storage
  CHECK_FALSE(took(f, {&z, &y}));
  CHECK_FALSE(took(stub_function({f32_4, f32_4}, {0}), {&x, &y}));  // the code does not allow it
  Version v;
  v.captured = {x.impl()};  // also read as a captured tensor
  CHECK_THROWS_AS(check_donated_not_captured("f", {0}, v, args), hjit::ValueError);

  consume_donated("f", {0}, args);
  CHECK_THROWS_WITH_AS(x.to_vector<float>(), doctest::Contains("donated"), hjit::ValueError);
  CHECK(y.to_vector<float>() == std::vector<float>{1, 1, 1, 1});
}

TEST_CASE("dynamic sizes: one symbol per distinct size, found by tracing again; what cannot serve every size is said once") {
  auto fn = [](const Tensor& x) { return hjit::sum(x * 2.0, {1}); };
  auto trace_at = [&](const CallArgs& a) {
    auto tracer = [&](const std::vector<Tensor>& t, std::vector<int>*) { return std::vector<Tensor>{fn(t[0])}; };
    return trace_and_optimize("dyn", false, a, tracer).graph;
  };
  Tensor x = Tensor::ones({3, 8});
  const CallArgs args = call_of({&x});
  DynamicSizes dynamic({{0, 1}});
  std::string why;
  auto sizes = dynamic.fit(args, trace_at(args), trace_at, &why);
  REQUIRE_MESSAGE(sizes, why);
  CHECK(sizes->sources.size() == 1);
  CHECK(dynamic.impossible().empty());

  Version v;
  v.dynamic = sizes;
  v.min_dynamic_size = 4;
  FunctionRequest request;
  request.dynamic = sizes;
  v.fn = std::make_shared<CompiledFunction>(trace_at(args), request, nullptr);
  Tensor small = Tensor::ones({3, 2}), large = Tensor::ones({3, 100}), other_rows = Tensor::ones({5, 100});
  CHECK_FALSE(serves(v, call_of({&small})));
  CHECK(serves(v, call_of({&large})));
  CHECK_FALSE(serves(v, call_of({&other_rows})));  // a size the pipeline was compiled for, fixed
  v.sizes_key = Signature::of(args, 1);  // built for these sizes only
  CHECK(serves(v, args));
  CHECK_FALSE(serves(v, call_of({&large})));

  Tensor one = Tensor::ones({3, 1});
  CHECK_FALSE(dynamic.fit(call_of({&one}), trace_at(call_of({&one})), trace_at, &why));
  CHECK(why.find("size 1") != std::string::npos);
  CHECK(dynamic.impossible().empty());  // other sizes may still be served
  auto failing_at = [](const CallArgs&) -> hjit::Graph { throw hjit::ShapeError("only at 8"); };
  CHECK_FALSE(dynamic.fit(args, trace_at(args), failing_at, &why));
  CHECK(dynamic.impossible().find("only at 8") != std::string::npos);  // no size will be
}

TEST_CASE("running a compiled function: assign()ed values trade storage with their tensors, borrowed storage is copied first") {
  const hjit::TensorType f32_3{hjit::DType::F32, {3}};
  Tensor w = Tensor::ones({3});
  auto f = stub_function({f32_3}, {}, {}, /*updated=*/true);
  CallInputs in;
  in.push(w.impl().get());
  std::vector<Tensor> out;
  f->run(in.view(), out);  // the stub computes nothing: the new value is what its buffer holds
  Tensor computed = f->updated_value(0, f32_3);
  void* const buffer = const_cast<void*>(computed.data());
  for (int i = 0; i < 3; ++i) static_cast<float*>(buffer)[i] = 7;
  void* const before = const_cast<void*>(w.data());
  CHECK(f->apply_updates(in.view()) == 0);  // no bytes copied: the buffers traded
  CHECK(w.to_vector<float>() == std::vector<float>{7, 7, 7});
  CHECK(w.data() == buffer);
  CHECK(f->updated_value(0, f32_3).data() == before);  // the next call computes into the old bytes

  Tensor source = Tensor::ones({3});
  Tensor alias = hjit::detail::same_value(source);  // shares source's storage until written
  CallInputs borrowed;
  borrowed.push(alias.impl().get());
  f->run(borrowed.view(), out);
  f->apply_updates(borrowed.view());
  CHECK(alias.impl()->storage != source.impl()->storage);
  CHECK(source.to_vector<float>() == std::vector<float>{1, 1, 1});
}
