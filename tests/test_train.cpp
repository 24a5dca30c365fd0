// Training: a few optimizer steps give the same parameters eagerly and jitted; a jitted step keeps
// parameters and optimizer state in their storage and allocates no new buffers for them; batch
// norm's running statistics move through assign inside a jitted step.
#include <functional>

#include "bench/workloads.h"
#include "frontend/tensor/tensor_impl.h"
#include "tests/support.h"

using hjit::DType;
using hjit::Tensor;

namespace {

struct Model {
  Tensor w1 = Tensor::randn({6, 8}, 1) * 0.5, b1 = Tensor::zeros({8}), w2 = Tensor::randn({8, 3}, 2) * 0.5, b2 = Tensor::zeros({3});
  std::vector<Tensor> params() const { return {w1, b1, w2, b2}; }
  Tensor operator()(const Tensor& x) const { return hjit::matmul(hjit::tanh(hjit::matmul(x, w1) + b1), w2) + b2; }
};

Tensor labels() { return Tensor::from_vector<int32_t>({0, 2, 1, 1, 0}, {5}); }

template <class Opt>
std::vector<Tensor> train(bool jitted, int steps, std::function<Opt(std::vector<Tensor>)> make_opt) {
  Model m;
  Opt opt = make_opt(m.params());
  Tensor x = Tensor::randn({5, 6}, 3), y = labels();
  auto step = [&](const Tensor& x, const Tensor& y) {
    auto [loss, grads] = hjit::value_and_grad([&](const Tensor& x, const Tensor& y) { return hjit::cross_entropy(m(x), y); },
                                              m.params())(x, y);
    opt.step(grads);
    return loss;
  };
  auto compiled = hjit::jit(step);
  for (int i = 0; i < steps; ++i) jitted ? compiled(x, y) : step(x, y);
  std::vector<Tensor> out;
  for (const Tensor& p : m.params()) out.push_back(p.astype(DType::F32));
  return out;
}

}  // namespace

TEST_CASE("SGD and Adam: the same parameters after a few steps, eagerly and jitted") {
  auto sgd = [](std::vector<Tensor> p) { return hjit::optim::SGD(std::move(p), 0.1, 0.9, 1e-3); };
  auto adam = [](std::vector<Tensor> p) { return hjit::optim::Adam(std::move(p), 0.05); };
  std::vector<Tensor> eager = train<hjit::optim::SGD>(false, 5, sgd), compiled = train<hjit::optim::SGD>(true, 5, sgd);
  for (size_t i = 0; i < eager.size(); ++i) CHECK_CLOSE_TOL(compiled[i], eager[i], 1e-5);
  eager = train<hjit::optim::Adam>(false, 5, adam);
  compiled = train<hjit::optim::Adam>(true, 5, adam);
  for (size_t i = 0; i < eager.size(); ++i) CHECK_CLOSE_TOL(compiled[i], eager[i], 1e-5);
  // And training does something: the loss falls.
  Model m;
  hjit::optim::Adam opt(m.params(), 0.05);
  Tensor x = Tensor::randn({5, 6}, 3);
  auto loss_of = [&](const Tensor& x, const Tensor& y) { return hjit::cross_entropy(m(x), y); };
  auto step = hjit::jit([&](const Tensor& x, const Tensor& y) {
    auto [loss, grads] = hjit::value_and_grad(loss_of, m.params())(x, y);
    opt.step(grads);
    return loss;
  });
  double first = step(x, labels()).item<double>(), last = first;
  for (int i = 0; i < 30; ++i) last = step(x, labels()).item<double>();
  CHECK(last < first * 0.2);
}

TEST_CASE("a jitted training step updates without copies and allocates no parameter or state buffers after its first call") {
  Model m;
  hjit::optim::Adam opt(m.params(), 0.01);
  std::vector<Tensor> watched = m.params();
  for (const Tensor& s : opt.state()) watched.push_back(s);
  std::vector<const void*> storage;
  for (const Tensor& t : watched) storage.push_back(t.data());
  Tensor x = Tensor::randn({5, 6}, 3), y = labels();
  auto step = hjit::jit([&](const Tensor& x, const Tensor& y) {
    auto [loss, grads] = hjit::value_and_grad([&](const Tensor& x, const Tensor& y) { return hjit::cross_entropy(m(x), y); },
                                              m.params())(x, y);
    opt.step(grads);
    return loss;
  });
  step(x, y);
  // Each tensor's new value and its old one trade bytes: two buffers, in turn, and no copy.
  std::vector<const void*> other;
  for (const Tensor& t : watched) other.push_back(t.data());
  const int64_t before = hjit::detail::storage_allocations();
  for (int i = 0; i < 10; ++i) {
    step(x, y);
    for (size_t k = 0; k < watched.size(); ++k) CHECK(watched[k].data() == (i % 2 == 0 ? storage[k] : other[k]));
  }
  // One allocation a call: the loss it returns. None for parameters or state (4 + 9 tensors).
  CHECK(hjit::detail::storage_allocations() - before == 10);
  CHECK(step.stats().update_bytes_copied == 0);
  CHECK(opt.state().back().item<float>() == 11);  // Adam's step count, counted by the compiled step
  CHECK(step.stats().traces == 1);
}

TEST_CASE("batch norm in training: running statistics move through assign, eagerly and jitted") {
  auto run = [](bool jitted) {
    Tensor running_mean = Tensor::zeros({3}), running_var = Tensor::ones({3});
    Tensor w = Tensor::ones({3}), b = Tensor::zeros({3});
    Tensor x = Tensor::randn({4, 3, 5, 5}, 7) * 2 + 1;
    auto forward = [&](const Tensor& x) { return hjit::batch_norm_training(x, running_mean, running_var, w, b, 0.1); };
    auto loss = [&](const Tensor& x) { return hjit::mean(forward(x) * forward(x)); };
    auto step = hjit::jit(hjit::value_and_grad(loss, std::vector<Tensor>{w, b}));
    for (int i = 0; i < 3; ++i) jitted ? step(x) : hjit::value_and_grad(loss, std::vector<Tensor>{w, b})(x);
    return std::make_pair(running_mean, running_var);
  };
  auto [em, ev] = run(false);
  auto [jm, jv] = run(true);
  CHECK_CLOSE_TOL(jm, em, 1e-5);
  CHECK_CLOSE_TOL(jv, ev, 1e-5);
  CHECK(em.to_vector<float>()[0] != 0);  // moved toward the batch mean
}

TEST_CASE("optimizers reject what they cannot use") {
  Tensor p = Tensor::zeros({3});
  CHECK_THROWS_AS(hjit::optim::SGD({p}, -1), hjit::ValueError);
  CHECK_THROWS_AS(hjit::optim::Adam({p}, 0.1, 1.5), hjit::ValueError);
  CHECK_THROWS_AS(hjit::optim::SGD({Tensor::zeros({2}, DType::I32)}, 0.1), hjit::DTypeError);
  hjit::optim::SGD sgd({p}, 0.1);
  CHECK_THROWS_AS(sgd.step({}), hjit::ValueError);
  CHECK_THROWS_AS(sgd.step({Tensor::zeros({4})}), hjit::ShapeError);
}

TEST_CASE("W7's jitted step copies no parameter and allocates only its loss per step") {
  bench::Workload w = bench::make_workload("W7");
  hjit::JitOptions o;
  o.opt_level = 1;
  bench::Runner run = w.make_runner(&o);
  run.call();
  const int64_t before = hjit::detail::storage_allocations();
  for (int i = 0; i < 10; ++i) run.call();
  CHECK(hjit::detail::storage_allocations() - before == 10);  // the loss
  CHECK(run.stats().update_bytes_copied == 0);                // w1, b1, w2, b2: new values swapped in
  CHECK(run.stats().traces == 1);
}
