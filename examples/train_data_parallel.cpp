// W9's ResNet block trained data-parallel: each rank takes its shard of every global batch,
// batch statistics are synchronized across ranks (nn::SyncBatchNorm: one all_gather of each
// layer's statistics, differentiated like any op), the gradients are averaged by all_reduce (in buckets
// the compiler starts as soon as they are computed), and SGD steps on every rank alike. The whole
// step, collectives included, is one jitted function.
//
//   train_data_parallel --save ref.npz                   # one process, the global batch
//   mpirun -np 2 train_data_parallel --compare ref.npz   # two ranks: the same loss and parameters
//
// Options: --steps N (20), --batch N (global, 32), --channels C (64), --size S (56), --save F,
// --compare F (fails unless the last loss, every parameter and the batch norms' running statistics
// equal F's within numpy's allclose with rtol = atol = 1e-5).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <algorithm>
#include <cmath>
#include <string>

#include <hjit/io.h>
#include <hjit/nn.h>  // layers, and with them all of hjit

namespace dist = hjit::dist;
using hjit::Tensor;

namespace {

struct Options {
  int steps = 20;
  int64_t batch = 32, channels = 64, size = 56;
  std::string save, compare;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw hjit::ValueError(a + " needs a value");
      return argv[++i];
    };
    if (a == "--steps") o.steps = std::stoi(value());
    else if (a == "--batch") o.batch = std::stoll(value());
    else if (a == "--channels") o.channels = std::stoll(value());
    else if (a == "--size") o.size = std::stoll(value());
    else if (a == "--save") o.save = value();
    else if (a == "--compare") o.compare = value();
    else throw hjit::ValueError("unknown option " + a + " (--steps --batch --channels --size --save --compare)");
  }
  return o;
}

// W8/W9's BasicBlock: conv3x3 -> batch norm -> relu -> conv3x3 -> batch norm -> + x -> relu. The
// batch norms are nn::SyncBatchNorm: the statistics of the global batch (each rank's mean,
// variance and count gathered in one exchange, its gradient carrying every rank's share of the
// loss back), so two ranks compute what one process computes from the whole batch; in a world of
// one process it is BatchNorm.
struct Block {
  hjit::nn::SyncBatchNorm bn1, bn2;
  std::vector<Tensor> params;  // conv1, bn1 weight, bn1 bias, conv2, bn2 weight, bn2 bias
  explicit Block(int64_t c) : bn1(c), bn2(c) {
    const double scale = std::sqrt(2.0 / (9.0 * double(c)));
    params = {Tensor::randn({c, c, 3, 3}, 7) * scale, bn1.weight, bn1.bias, Tensor::randn({c, c, 3, 3}, 8) * scale, bn2.weight, bn2.bias};
  }
  Tensor operator()(const Tensor& x) {
    Tensor y = hjit::relu(bn1(hjit::conv2d(x, params[0], std::nullopt, {1, 1}, {1, 1})));
    y = bn2(hjit::conv2d(y, params[3], std::nullopt, {1, 1}, {1, 1}));
    return hjit::relu(y + x);
  }
  // What the run's future depends on besides the parameters: the running statistics.
  std::vector<Tensor> buffers() const { return {bn1.running_mean, bn1.running_var, bn2.running_mean, bn2.running_var}; }
};

// Sample i of step s, the same whichever rank draws it: a rank's shard is samples
// [rank * shard, (rank + 1) * shard) of the global batch.
Tensor samples(int step, int64_t first, int64_t count, const Options& o, uint64_t stream) {
  std::vector<Tensor> v;
  for (int64_t i = first; i < first + count; ++i)
    v.push_back(Tensor::randn({1, o.channels, o.size, o.size}, stream * 1000003 + uint64_t(step) * 4096 + uint64_t(i)));
  return hjit::concat(v, 0);
}

// numpy's allclose(got, want, rtol=1e-5, atol=1e-5): how far each element is past its tolerance
// (<= 0: within), the largest.
double past_tolerance(const Tensor& got, const Tensor& want) {
  return hjit::max(hjit::abs(got - want) - 1e-5 * hjit::abs(want) - 1e-5).item<double>();
}


}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    dist::init();
    const int ranks = dist::world_size(), rank = dist::rank();
    if (o.batch % ranks != 0)
      throw hjit::ValueError("the global batch " + std::to_string(o.batch) + " does not split into " + std::to_string(ranks) + " equal shards");
    const int64_t shard = o.batch / ranks;

    Block block(o.channels);
    dist::broadcast_parameters(block.params, 0);
    hjit::optim::SGD opt(block.params, 0.05, 0.9);
    auto loss_fn = [&](const Tensor& x, const Tensor& target) {
      const Tensor d = (block(x) - target).astype(hjit::DType::F64);  // a mean of millions of values: in f64
      return hjit::mean(d * d);
    };
    auto step = hjit::jit([&](const Tensor& x, const Tensor& target) {
      auto [loss, grads] = hjit::value_and_grad(loss_fn, block.params)(x, target);
      for (Tensor& g : grads) g = dist::all_reduce(g, dist::ReduceOp::Mean);
      opt.step(grads);
      return dist::all_reduce(loss, dist::ReduceOp::Mean);
    }, hjit::JitOptions{.name = "train_data_parallel"});

    std::vector<double> step_ms;
    double loss = 0;
    for (int s = 0; s < o.steps; ++s) {
      const Tensor x = samples(s, rank * shard, shard, o, 1), target = samples(s, rank * shard, shard, o, 2) * 0.5;
      dist::barrier();  // every rank starts the step together: the time is the step's, not the data's
      const auto start = std::chrono::steady_clock::now();
      loss = step(x, target).item<double>();
      step_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      if (rank == 0 && (s < 3 || s == o.steps - 1)) std::printf("step %d loss %.6f (%.1f ms)\n", s + 1, loss, step_ms.back());
    }
    dist::check_parameters_equal(block.params);
    std::vector<double> steady(step_ms.begin() + std::min<size_t>(2, step_ms.size()), step_ms.end());
    std::sort(steady.begin(), steady.end());
    if (rank == 0)
      std::printf("%d rank(s) x %d thread(s), global batch %lld: median step %.2f ms; every rank's parameters are identical\n", ranks,
                  hjit::dist::threads_per_rank(), (long long)o.batch, steady.empty() ? 0.0 : steady[steady.size() / 2]);

    if (rank == 0 && !o.save.empty()) {
      hjit::NamedTensors out = {{"loss", Tensor::scalar(loss, hjit::DType::F64)}};
      for (size_t i = 0; i < block.params.size(); ++i) out.push_back({"param" + std::to_string(i), block.params[i]});
      const std::vector<Tensor> buffers = block.buffers();
      for (size_t i = 0; i < buffers.size(); ++i) out.push_back({"buffer" + std::to_string(i), buffers[i]});
      hjit::save_npz(o.save, out);
    }
    int status = 0;
    if (rank == 0 && !o.compare.empty()) {
      std::map<std::string, Tensor> ref;
      for (auto& [name, t] : hjit::load_npz(o.compare)) ref[name] = t;
      const Tensor want_loss = ref.at("loss");
      double worst = past_tolerance(Tensor::scalar(loss, hjit::DType::F64), want_loss), largest = std::abs(loss - want_loss.item<double>());
      std::printf("loss %.9g, single process %.9g\n", loss, want_loss.item<double>());
      auto compare = [&](const Tensor& got, const std::string& name) {
        const Tensor& want = ref.at(name);
        worst = std::max(worst, past_tolerance(got, want));
        largest = std::max(largest, hjit::max(hjit::abs(got - want)).item<double>());
      };
      for (size_t i = 0; i < block.params.size(); ++i) compare(block.params[i], "param" + std::to_string(i));
      const std::vector<Tensor> buffers = block.buffers();
      for (size_t i = 0; i < buffers.size(); ++i) compare(buffers[i], "buffer" + std::to_string(i));
      std::printf("largest difference from %s (loss, parameters and running statistics): %.3g; within rtol = atol = 1e-5: %s\n", o.compare.c_str(),
                  largest, worst <= 0 ? "yes" : "no");
      status = worst <= 0 ? 0 : 1;
      std::printf(status == 0 ? "data-parallel training equals the single-process run\n" : "MISMATCH with the single-process run\n");
    }
    dist::finalize();
    return status;
  } catch (const hjit::Error& e) {
    std::fprintf(stderr, "train_data_parallel: %s\n", e.what());
    return 1;
  }
}
