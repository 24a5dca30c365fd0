// Dropout with a new random key every step, compiled once: the key is an argument of the jitted
// training step (split into the next key and this step's subkey, as in JAX), so each call draws a
// new mask and nothing is re-traced. The same loop eagerly draws the very same masks, so eager and
// compiled training follow one trajectory; the example checks that and prints both.
#include <cmath>
#include <iostream>

#include "mlp.h"

using hjit::Tensor;

int main() {
  const int64_t batch = 64, steps = 40;
  Tensor centers = Tensor::randn({10, 784}, 1000);
  Tensor labels = hjit::floor(Tensor::uniform({batch}, 1, 0, 10)).astype(hjit::DType::I32);
  Tensor x = hjit::take(centers, labels, 0) + 3.0 * Tensor::randn({batch, 784}, 2);

  auto train = [&](bool compiled) {
    Mlp model(11);
    hjit::optim::SGD opt(model.parameters(), 0.05);
    auto step = [&](const Tensor& key, const Tensor& x, const Tensor& y) {
      auto [next, sub] = hjit::random::split(key);
      auto loss_fn = [&](const Tensor& x, const Tensor& y) {
        Tensor h = hjit::dropout(sub, hjit::relu(hjit::matmul(x, model.w1) + model.b1), 0.5);
        return hjit::cross_entropy(hjit::matmul(h, model.w2) + model.b2, y);
      };
      auto [loss, grads] = hjit::value_and_grad(loss_fn, model.parameters())(x, y);
      opt.step(grads);
      return std::make_pair(loss, next);
    };
    auto jitted = hjit::jit(step, hjit::JitOptions{.name = "dropout_step"});
    Tensor key = hjit::random::key(0), loss;
    std::vector<double> losses;
    for (int64_t i = 0; i < steps; ++i) {
      std::tie(loss, key) = compiled ? jitted(key, x, labels) : step(key, x, labels);
      losses.push_back(loss.item<double>());
    }
    if (compiled) std::cout << "jit: traced " << jitted.stats().traces << " time(s) for " << steps << " steps\n";
    return losses;
  };
  std::vector<double> eager = train(false), compiled = train(true);
  double worst = 0;
  for (size_t i = 0; i < eager.size(); ++i) worst = std::max(worst, std::fabs(eager[i] - compiled[i]) / (1 + std::fabs(eager[i])));
  for (size_t i = 0; i < eager.size(); i += 10)
    std::cout << "step " << i + 1 << ": loss eager " << eager[i] << ", compiled " << compiled[i] << "\n";
  std::cout << "final loss " << eager.back() << " (eager), " << compiled.back() << " (compiled); largest relative difference "
            << worst << "\n";
  if (!(worst < 1e-3) || !(compiled.back() < compiled.front())) {
    std::cerr << "train_dropout: eager and compiled training diverged, or the loss did not fall\n";
    return 1;
  }
}
