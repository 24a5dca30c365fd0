// A separate process for the disk-cache tests: runs a few jitted functions (elementwise,
// reductions, matmul, training steps with updates, pipelines of dynamic sizes) and prints a checksum of every result and
// the cache's counters, one "key value" per line. HJIT_CACHE_DIR says where the cache is.
#include <hjit/hjit.h>
#include <hjit/nn.h>
#include <hjit/optim.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

using hjit::Tensor;

namespace {

uint64_t checksum(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  uint64_t h = 1469598103934665603ull;
  for (double d : v) {
    uint64_t bits = 0;
    float f = float(d);  // results compared at float precision: bits of the f32 value
    std::memcpy(&bits, &f, sizeof f);
    h = (h ^ bits) * 1099511628211ull;
  }
  return h;
}

}  // namespace

int main() {
  try {
    Tensor x = Tensor::randn({64, 96}, 1), w = Tensor::randn({96, 48}, 2);
    auto mlp = hjit::jit([](const Tensor& x, const Tensor& w) { return hjit::softmax(hjit::relu(hjit::matmul(x, w))); });
    auto norm = hjit::jit([](const Tensor& x) { return hjit::layer_norm(x, std::nullopt, std::nullopt) * 2.0 + 1.0; });
    auto idx = hjit::jit([](const Tensor& t, const Tensor& i) { return hjit::take(t, i, 0); });
    Tensor param = Tensor::ones({96, 48});
    auto step = hjit::jit([&](const Tensor& x) {
      Tensor loss = hjit::sum(hjit::matmul(x, param));
      param.assign(param - 0.001 * loss);
      return loss;
    });
    std::printf("mlp %" PRIu64 "\n", checksum(mlp(x, w)));
    std::printf("norm %" PRIu64 "\n", checksum(norm(x)));
    std::printf("take %" PRIu64 "\n", checksum(idx(w, Tensor::from_vector(std::vector<int64_t>{3, 1, 4}, {3}))));
    try {
      idx(w, Tensor::from_vector(std::vector<int64_t>{3, 100}, {2}));
      std::printf("index_error none\n");
    } catch (const hjit::IndexError&) {
      std::printf("index_error raised\n");
    }
    for (int i = 0; i < 3; ++i) step(x);
    std::printf("step %" PRIu64 "\n", checksum(param));
    // A pipeline for every length (dynamic_dims), as generation uses: from the disk cache too.
    hjit::JitOptions every_length;
    every_length.dynamic_dims = {{0, 1}};
    auto last = hjit::jit([&](const Tensor& ids) {
      const Tensor e = hjit::embedding(w, ids);  // [1, T, 48]
      const Tensor h = hjit::scaled_dot_product_attention(e, e, e, true);
      return hjit::slice(h, 1, -1, std::nullopt).reshape({48});
    }, every_length);
    uint64_t h = 0;
    for (int64_t t : {1, 2, 7, 30}) {
      std::vector<int64_t> ids(static_cast<size_t>(t));
      for (int64_t i = 0; i < t; ++i) ids[size_t(i)] = (i * 7) % 96;
      h = h * 31 + checksum(last(Tensor::from_vector(ids, {1, t})));
    }
    std::printf("dynamic %" PRIu64 "\ndynamic_entries %lld\n", h, (long long)last.stats().dynamic_entries);
    // A batch norm CNN's training step over batch sizes 1 to 64: one pipeline, loaded here too.
    hjit::nn::manual_seed(5);
    hjit::nn::Conv2d conv(3, 4, 3, 1, 1);
    hjit::nn::BatchNorm2d bn(4);
    std::vector<Tensor> params = conv.parameters();
    for (const Tensor& p : bn.parameters()) params.push_back(p);
    hjit::optim::SGD opt(params, 0.1);
    hjit::JitOptions every_batch;
    every_batch.dynamic_dims = {{0, 0}};
    auto train = hjit::jit([&](const Tensor& x) {
      auto loss = [&](const Tensor& x) { return hjit::mean(hjit::relu(bn(conv(x)))); };
      auto [l, g] = hjit::value_and_grad(loss, params)(x);
      opt.step(g);
      return l;
    }, every_batch);
    uint64_t losses = 0;
    for (int64_t n : {8, 1, 64, 3}) losses = losses * 31 + checksum(train(Tensor::randn({n, 3, 6, 6}, uint64_t(n))));
    std::printf("batch_norm_step %" PRIu64 "\nbatch_norm_step_pipelines %lld\n", losses,
                (long long)(train.stats().compiles + train.stats().loaded));
    // An LSTM's training step over lengths 16 to 128: host steps (the scans) between pipelines of
    // every length, all of them loaded here too.
    hjit::nn::LSTM lstm(3, 8);
    hjit::optim::SGD lstm_opt(lstm.parameters(), 0.1);
    hjit::JitOptions every_length_step;
    every_length_step.dynamic_dims = {{0, 0}};
    auto lstm_step = hjit::jit([&](const Tensor& x) {  // [T, N, 3]
      auto loss = [&](const Tensor& x) { return hjit::mean(lstm(x).output); };
      auto [l, g] = hjit::value_and_grad(loss, lstm.parameters())(x);
      lstm_opt.step(g);
      return l;
    }, every_length_step);
    uint64_t lstm_losses = 0;
    for (int64_t t : {16, 128, 37}) lstm_losses = lstm_losses * 31 + checksum(lstm_step(Tensor::randn({t, 2, 3}, uint64_t(t))));
    std::printf("lstm_step %" PRIu64 "\nlstm_step_compiles %lld\nlstm_step_pipelines %lld\n", lstm_losses,
                (long long)lstm_step.stats().compiles, (long long)(lstm_step.stats().compiles + lstm_step.stats().loaded));
    const hjit::CacheStats s = hjit::cache_stats();
    std::printf("disk_hits %lld\nmisses %lld\nrejected %lld\nwrites %lld\nentries %lld\nbytes %lld\nevictions %lld\n",
                (long long)s.disk_hits, (long long)s.misses, (long long)s.disk_rejected, (long long)s.disk_writes,
                (long long)s.disk_entries, (long long)s.disk_bytes, (long long)s.disk_evictions);
    std::printf("shared_hits %lld\nshared_rejected %lld\nshared_writes %lld\nshared %s\n", (long long)s.shared_hits,
                (long long)s.shared_rejected, (long long)s.shared_writes, s.shared.empty() ? "off" : s.shared.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::printf("error %s\n", e.what());
    return 1;
  }
}
