#include <hjit/hjit.h>

#include <cstdio>

int main() {
  using hjit::Tensor;
  Tensor a = Tensor::randn({2, 3}, 1), b = Tensor::randn({2, 3}, 2), c = Tensor::randn({2, 3}, 3);
  auto f = hjit::jit([](const Tensor& a, const Tensor& b, const Tensor& c) { return a * b + c; });
  std::vector<float> got = f(a, b, c).to_vector<float>(), want = (a * b + c).to_vector<float>();
  if (got != want) {
    std::printf("consumer: jit and eager differ\n");
    return 1;
  }
  f(a, b, c);
  if (f.stats().traces != 1 || f.stats().compiles + f.stats().loaded != 1 || f.stats().cache_hits != 1) {
    std::printf("consumer: a second call with the same shapes traced or compiled again\n");
    return 1;
  }
  std::printf("consumer: ok (%lld trace, %lld compile, %lld loaded)\n", (long long)f.stats().traces, (long long)f.stats().compiles,
              (long long)f.stats().loaded);
  return 0;
}
