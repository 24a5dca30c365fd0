// W7: training the MLP on a synthetic 10-class problem, written like MegEngine's train_func: a
// plain eager loop first, then the very same step under jit (forward + backward + SGD update in
// one compiled pipeline), with the loss per epoch, the final accuracy and the speed-up.
#include <algorithm>
#include <chrono>
#include <iostream>

#include "mlp.h"
#include "timing.h"

using hjit::Tensor;

// Points around 10 random class centers in 784 dimensions.
struct Dataset {
  Tensor x, labels;
  Dataset(int64_t n, uint64_t seed) {
    Tensor centers = Tensor::randn({10, 784}, 1000);  // the same classes for every split
    labels = hjit::floor(Tensor::uniform({n}, seed, 0, 10)).astype(hjit::DType::I32);
    x = hjit::take(centers, labels, 0) + 3.0 * Tensor::randn({n, 784}, seed + 1);
  }
  std::pair<Tensor, Tensor> batch(int64_t i, int64_t size) const {
    return {hjit::slice(x, 0, i * size, (i + 1) * size), hjit::slice(labels, 0, i * size, (i + 1) * size)};
  }
};

double accuracy(const Mlp& model, const Dataset& d) {
  Tensor predicted = hjit::argmax(model(d.x), 1);
  return hjit::mean((predicted == d.labels.astype(hjit::DType::I64)).astype(hjit::DType::F32)).item<double>();
}

int main() {
  const int64_t batch = 64, batches = 32, epochs = 5;
  Dataset train(batch * batches, 1), test(1024, 2);

  // One training step: loss, gradients of the parameters, SGD update (lr 0.01), returns the loss.
  auto run = [&](bool compiled) {
    Mlp model(11);
    hjit::optim::SGD opt(model.parameters(), 0.01);
    auto loss_fn = [&](const Tensor& x, const Tensor& y) { return hjit::cross_entropy(model(x), y); };
    auto train_step = [&](const Tensor& x, const Tensor& y) {
      auto [loss, grads] = hjit::value_and_grad(loss_fn, model.parameters())(x, y);
      opt.step(grads);
      return loss;
    };
    auto jitted = hjit::jit(train_step, hjit::JitOptions{.name = "train_step"});
    std::vector<double> step_ms;
    std::vector<std::pair<Tensor, Tensor>> batches_of_data;
    for (int64_t i = 0; i < batches; ++i) batches_of_data.push_back(train.batch(i, batch));
    std::cout << (compiled ? "jit:" : "eager:") << "\n";
    for (int64_t epoch = 0; epoch < epochs; ++epoch) {
      double total = 0;
      for (int64_t i = 0; i < batches; ++i) {
        const auto& [x, y] = batches_of_data[size_t(i)];
        auto start = std::chrono::steady_clock::now();
        Tensor loss = compiled ? jitted(x, y) : train_step(x, y);
        if (epoch > 0 || i > 0) step_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        total += loss.item<double>();
      }
      std::cout << "  epoch " << epoch + 1 << ": mean loss " << total / double(batches) << "\n";
    }
    std::sort(step_ms.begin(), step_ms.end());
    double acc = accuracy(model, test);
    std::cout << "  test accuracy " << acc * 100 << "%, median step " << step_ms[step_ms.size() / 2] << " ms\n";
    return std::make_pair(acc, step_ms[step_ms.size() / 2]);
  };
  auto [eager_acc, eager_ms] = run(false);
  auto [jit_acc, jit_ms] = run(true);
  std::cout << "speed-up of the jitted step: " << eager_ms / jit_ms << "x\n";
  bool ok = eager_acc > 0.9 && jit_acc > 0.9 && std::abs(eager_acc - jit_acc) < 0.02;
  std::cout << (ok ? "train_mlp: both runs learned the task\n" : "train_mlp: FAILED to learn\n");
  return ok ? 0 : 1;
}
