#include "bench/workloads.h"

#include "examples/llama_attention.h"
#include "examples/mlp.h"
#include "examples/resnet_block.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#ifdef HJIT_BENCH_DNNL
#include <oneapi/dnnl/dnnl.h>
#elif defined(HJIT_BENCH_OPENBLAS)
extern "C" void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha, const float* a, int lda,
                            const float* b, int ldb, float beta, float* c, int ldc);
#endif

namespace bench {

using hjit::Tensor;

namespace {

template <class Fn, class... T>
std::function<Runner(const hjit::JitOptions*)> runner(Fn fn, T... inputs) {
  return [=](const hjit::JitOptions* options) -> Runner {
    // A function may return several tensors (a loss and its gradients): all are computed, the
    // first is the one compared.
    auto first = [](auto&& r) -> Tensor {
      if constexpr (std::is_same_v<std::decay_t<decltype(r)>, Tensor>) return r;
      else return r[0];
    };
    if (!options) return Runner{[=] { return first(fn(inputs...)); }, nullptr};
    auto jitted = hjit::jit(fn, *options);
    return Runner{[=] { return first(jitted(inputs...)); }, [=] { return jitted.stats(); }};
  };
}

// The workload's function on its inputs: run (eager or jitted) by hjit-bench, tuned by hjit-tune.
template <class Fn, class... T>
void attach(Workload& w, Fn fn, T... inputs) {
  w.make_runner = runner(fn, inputs...);
  w.tune = [=](const hjit::TuneOptions& o) { return hjit::tune(fn, o, inputs...); };
  w.export_to = [=](const std::string& dir, const std::string& name, const hjit::ExportOptions& options) {
    hjit::export_library_with(options, dir, name, fn, inputs...);
    // The library's arguments: the function's own inputs (the tensors it captures are constants
    // in it with bake_parameters, arguments after them without), which jit's graph lists first.
    hjit::Graph g = hjit::jit(fn, {.name = name}).graph(inputs...);
    if (options.bake_parameters) g.inputs.resize(sizeof...(inputs));
    return g;
  };
  w.trace = [=] { return hjit::trace(fn, inputs...); };
}

double max_diff(const std::vector<float>& a, const Tensor& b) {
  std::vector<float> v = b.to_vector<float>();
  double m = 0;
  for (size_t i = 0; i < v.size(); ++i) m = std::max(m, double(std::fabs(a[i] - v[i])));
  return m;
}

Tensor selu(const Tensor& x) { return 1.05 * hjit::where(x > 0, x, 1.67 * hjit::exp(x) - 1.67); }

Workload w1() {
  Tensor a = Tensor::randn({2, 3}, 1), b = Tensor::randn({2, 3}, 2), c = Tensor::randn({2, 3}, 3);
  Workload w;
  w.id = "W1", w.name = "tiny_fma", w.shapes = "a,b,c: [2,3]";
  attach(w, [](const Tensor& a, const Tensor& b, const Tensor& c) { return a * b + c; }, a, b, c);
  return w;
}

Workload w2() {
  const int64_t n = 1 << 20;
  Tensor x = Tensor::randn({n}, 1);
  auto out = std::make_shared<std::vector<float>>(size_t(n));
  Workload w;
  w.id = "W2", w.name = "selu", w.shapes = "x: [1048576]";
  w.bytes = 2.0 * 4 * 1048576;
  attach(w, selu, x);
  w.reference = "C++ OpenMP loop";
  w.run_reference = [x, out, n] {
    const float* p = x.data_ptr<float>();
    float* o = out->data();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) o[i] = 1.05f * (p[i] > 0 ? p[i] : 1.67f * std::exp(p[i]) - 1.67f);
  };
  w.reference_error = [w, out, x] {
    w.run_reference();
    return max_diff(*out, selu(x));
  };
  return w;
}

Workload w3() {
  const int n = 1024;
  Tensor a = Tensor::randn({n, n}, 1), b = Tensor::randn({n, n}, 2);
  Workload w;
  w.id = "W3", w.name = "matmul", w.shapes = "a,b: [1024,1024]";
  attach(w, [](const Tensor& a, const Tensor& b) { return hjit::matmul(a, b); }, a, b);
  w.flops = 2.0 * n * n * n;
  w.bytes = 3.0 * 4 * n * n;
#if defined(HJIT_BENCH_DNNL) || defined(HJIT_BENCH_OPENBLAS)
  auto out = std::make_shared<std::vector<float>>(size_t(n) * n);
#ifdef HJIT_BENCH_DNNL
  w.reference = "oneDNN sgemm";
  w.run_reference = [a, b, out, n] {
    dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data_ptr<float>(), n, b.data_ptr<float>(), n, 0.0f, out->data(), n);
  };
#else
  w.reference = "OpenBLAS sgemm";
  w.run_reference = [a, b, out, n] {
    cblas_sgemm(101 /*row major*/, 111, 111, n, n, n, 1.0f, a.data_ptr<float>(), n, b.data_ptr<float>(), n, 0.0f,
                out->data(), n);
  };
#endif
  w.reference_error = [w, out, a, b] {
    w.run_reference();
    return max_diff(*out, hjit::matmul(a, b));
  };
#endif
  return w;
}

Workload w4() {
  const int64_t rows = 4096, cols = 1024;
  Tensor x = Tensor::randn({rows, cols}, 1);
  auto out = std::make_shared<std::vector<float>>(size_t(rows * cols));
  Workload w;
  w.id = "W4", w.name = "softmax", w.shapes = "x: [4096,1024]";
  w.bytes = 2.0 * 4 * rows * cols;
  attach(w, [](const Tensor& x) { return hjit::softmax(x); }, x);
  w.reference = "C++ OpenMP rows";
  w.run_reference = [x, out, rows, cols] {
    const float* p = x.data_ptr<float>();
    float* o = out->data();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* in = p + r * cols;
      float* y = o + r * cols;
      float m = in[0];
      for (int64_t c = 1; c < cols; ++c) m = std::max(m, in[c]);
      float s = 0;
      for (int64_t c = 0; c < cols; ++c) s += (y[c] = std::exp(in[c] - m));
      const float inv = 1.0f / s;
      for (int64_t c = 0; c < cols; ++c) y[c] *= inv;
    }
  };
  w.reference_error = [w, out, x] {
    w.run_reference();
    return max_diff(*out, hjit::softmax(x));
  };
  return w;
}

Workload w5() {
  const int64_t rows = 4096, cols = 1024;
  Tensor x = Tensor::randn({rows, cols}, 1), g = Tensor::randn({cols}, 2), b = Tensor::randn({cols}, 3);
  auto out = std::make_shared<std::vector<float>>(size_t(rows * cols));
  auto ln = [](const Tensor& x, const Tensor& g, const Tensor& b) { return hjit::layer_norm(x, g, b, 1e-5); };
  Workload w;
  w.id = "W5", w.name = "layernorm", w.shapes = "x: [4096,1024], w,b: [1024]";
  w.bytes = 2.0 * 4 * rows * cols + 2.0 * 4 * cols;
  attach(w, ln, x, g, b);
  w.reference = "C++ OpenMP rows";
  w.run_reference = [x, g, b, out, rows, cols] {
    const float *p = x.data_ptr<float>(), *gp = g.data_ptr<float>(), *bp = b.data_ptr<float>();
    float* o = out->data();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* in = p + r * cols;
      float* y = o + r * cols;
      float s = 0;
      for (int64_t c = 0; c < cols; ++c) s += in[c];
      const float mean = s / float(cols);
      float v = 0;
      for (int64_t c = 0; c < cols; ++c) v += (in[c] - mean) * (in[c] - mean);
      const float inv = 1.0f / std::sqrt(v / float(cols) + 1e-5f);
      for (int64_t c = 0; c < cols; ++c) y[c] = (in[c] - mean) * inv * gp[c] + bp[c];
    }
  };
  w.reference_error = [w, out, x, g, b, ln] {
    w.run_reference();
    return max_diff(*out, ln(x, g, b));
  };
  return w;
}

Workload w6() {
  Tensor x = Tensor::randn({64, 784}, 1), w1 = Tensor::randn({784, 256}, 2) * 0.05, b1 = Tensor::randn({256}, 3),
         w2 = Tensor::randn({256, 10}, 4) * 0.05, b2 = Tensor::randn({10}, 5);
  auto mlp = [](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2) {
    return hjit::matmul(hjit::relu(hjit::matmul(x, w1) + b1), w2) + b2;
  };
  Workload w;
  w.id = "W6", w.name = "mlp_fwd", w.shapes = "x: [64,784], w1: [784,256], w2: [256,10]";
  attach(w, mlp, x, w1, b1, w2, b2);
  w.flops = 2.0 * 64 * (784 * 256 + 256 * 10);
  return w;
}

// W7: one SGD training step of the W6 MLP against int32 labels, returning the loss.
Workload w7() {
  auto model = std::make_shared<Mlp>(11);
  auto opt = std::make_shared<hjit::optim::SGD>(model->parameters(), 0.01);
  Tensor x = Tensor::randn({64, 784}, 1);
  Tensor labels = hjit::floor(Tensor::uniform({64}, 2, 0, 10)).astype(hjit::DType::I32);
  Workload w;
  w.id = "W7", w.name = "mlp_train", w.shapes = "W6 + cross-entropy, SGD lr 0.01";
  attach(w, 
      [model, opt](const Tensor& x, const Tensor& y) {
        auto loss = [&](const Tensor& x, const Tensor& y) { return hjit::cross_entropy((*model)(x), y); };
        auto [value, grads] = hjit::value_and_grad(loss, model->parameters())(x, y);
        opt->step(grads);
        return value;
      },
      x, labels);
  w.flops = 3 * 2.0 * 64 * (784 * 256 + 256 * 10);
  w.stateful = true;
  return w;
}

// W8: ResNet BasicBlock inference; the model's parameters are captured by the jitted function.
Workload w8() {
  auto block = std::make_shared<BasicBlock>(64);
  Tensor x = Tensor::randn({4, 64, 56, 56}, 1);
  Workload w;
  w.id = "W8", w.name = "resnet_blk", w.shapes = "x: [4,64,56,56], 3x3 convs 64->64";
  attach(w, [block](const Tensor& x) { return (*block)(x); }, x);
  w.flops = 2 * 2.0 * 4 * 64 * 56 * 56 * 64 * 9;
  return w;
}

// W9: W8 in training form, mean of the output as loss, gradients of every weight.
Workload w9() {
  auto block = std::make_shared<BasicBlock>(64);
  Tensor x = Tensor::randn({4, 64, 56, 56}, 1);
  Workload w;
  w.id = "W9", w.name = "resnet_trn", w.shapes = "W8, training form, d mean / d weights";
  attach(w, 
      [block](const Tensor& x) {
        auto loss = [&](const Tensor& x) { return hjit::mean((*block)(x, true)); };
        auto [value, grads] = hjit::value_and_grad(loss, block->parameters())(x);
        grads.insert(grads.begin(), value);
        return grads;
      },
      x);
  w.flops = 5 * 2.0 * 4 * 64 * 56 * 56 * 64 * 9;  // 2 convs forward, 1 grad-input, 2 grad-weight
  return w;
}

// W10: Llama-style attention (rotary, causal, 8 heads of 64, seq 256).
Workload w10() {
  auto attn = std::make_shared<LlamaAttention>(512, 8, 256);
  Tensor x = Tensor::randn({1, 256, 512}, 1);
  Workload w;
  w.id = "W10", w.name = "attention", w.shapes = "x: [1,256,512], 8 heads of 64";
  attach(w, [attn](const Tensor& x) { return (*attn)(x); }, x);
  w.flops = 4 * 2.0 * 256 * 512 * 512 + 2 * 2.0 * 8 * 256 * 256 * 64;
  return w;
}

// W11: W10, mean of the output as loss, gradients of the four weights.
Workload w11() {
  auto attn = std::make_shared<LlamaAttention>(512, 8, 256);
  Tensor x = Tensor::randn({1, 256, 512}, 1);
  Workload w;
  w.id = "W11", w.name = "attn_train", w.shapes = "W10, d mean / d weights";
  attach(w, 
      [attn](const Tensor& x) {
        auto loss = [&](const Tensor& x) { return hjit::mean((*attn)(x)); };
        auto [value, grads] = hjit::value_and_grad(loss, attn->parameters())(x);
        grads.insert(grads.begin(), value);
        return grads;
      },
      x);
  return w;
}

}  // namespace

std::vector<std::string> workload_ids() { return {"W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9", "W10", "W11"}; }

Workload make_workload(const std::string& id) {
  if (id == "W1") return w1();
  if (id == "W2") return w2();
  if (id == "W3") return w3();
  if (id == "W4") return w4();
  if (id == "W5") return w5();
  if (id == "W6") return w6();
  if (id == "W7") return w7();
  if (id == "W8") return w8();
  if (id == "W9") return w9();
  if (id == "W10") return w10();
  if (id == "W11") return w11();
  throw std::invalid_argument("unknown workload " + id);
}

std::vector<std::string> split_list(const std::string& comma_separated) {
  std::vector<std::string> out;
  std::stringstream ss(comma_separated);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace bench
