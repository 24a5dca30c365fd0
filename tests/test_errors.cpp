// Bad input gets a typed hjit::Error whose message a user can act on, eagerly and while tracing
// (with the same words, plus the name of the function being traced).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <string>

#include "tests/support.h"

using hjit::DType;
using hjit::Shape;
using hjit::Tensor;

namespace {

// Runs `op` eagerly and inside a jitted function named "traced_fn"; both must throw E with a
// message containing `words`; the traced one names the function.
template <class E>
void both_throw(const std::function<Tensor(const Tensor&)>& op, const Tensor& x, const std::string& words) {
  try {
    op(x);
    FAIL("eager: no exception");
  } catch (const E& e) {
    CHECK_MESSAGE(std::string(e.what()).find(words) != std::string::npos, e.what());
  }
  hjit::JitOptions o;
  o.name = "traced_fn";
  auto j = hjit::jit(op, o);
  try {
    j(x);
    FAIL("traced: no exception");
  } catch (const E& e) {
    std::string m = e.what();
    CHECK_MESSAGE(m.find(words) != std::string::npos, m);
    CHECK_MESSAGE(m.find("traced_fn") != std::string::npos, m);
  }
}

}  // namespace

TEST_CASE("mismatched shapes") {
  Tensor x = Tensor::zeros({2, 3});
  both_throw<hjit::ShapeError>([](const Tensor& x) { return x + Tensor::zeros({4}); }, x, "cannot be broadcast");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::matmul(x, Tensor::zeros({2, 2})); }, x, "contraction");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::matmul(x, Tensor::scalar(1)); }, x, "at least one dimension");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return x.reshape({4, 2}); }, x, "cannot reshape");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return x.reshape({-1, 4}); }, x, "cannot reshape");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return x.transpose({0, 0}); }, x, "not a permutation");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::broadcast_to(x, {3, 3}); }, x, "cannot broadcast");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::concat({x, Tensor::zeros({2, 2})}, 0); }, x, "differ");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::stack({x, Tensor::zeros({3, 2})}); }, x, "one shape");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::pad(x, {{1, 1}}); }, x, "one (before, after) pair");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::squeeze(x, {0}); }, x, "not 1");
  both_throw<hjit::ShapeError>(
      [](const Tensor& x) { return hjit::layer_norm(x, Tensor::ones({2}), std::nullopt); }, x, "weight and bias");
  CHECK_THROWS_AS(Tensor::from_vector<float>({1, 2, 3}, {2, 2}), hjit::ShapeError);
  CHECK_THROWS_AS(Tensor::zeros({2, -1}), hjit::ShapeError);
  Tensor p = Tensor::zeros({2, 2});
  CHECK_THROWS_AS(p.assign(Tensor::zeros({3})), hjit::ShapeError);
}

TEST_CASE("out-of-range and repeated axes, empty reductions") {
  Tensor x = Tensor::zeros({2, 3});
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::sum(x, {2}); }, x, "out of range");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::argmax(x, -3); }, x, "out of range");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::unsqueeze(x, 4); }, x, "out of range");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::slice(x, 5, 0, 1); }, x, "out of range");
  both_throw<hjit::ValueError>([](const Tensor& x) { return hjit::sum(x, {1, -1}); }, x, "repeated");
  Tensor empty = Tensor::zeros({0, 3});
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::max(x, {0}); }, empty, "size 0");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::argmin(x, 0); }, empty, "size 0");
  CHECK_THROWS_AS(Tensor::zeros({2}).dim(3), hjit::ShapeError);
}

TEST_CASE("unsupported dtypes") {
  Tensor b = Tensor::zeros({2}, DType::Bool);
  both_throw<hjit::DTypeError>([](const Tensor& x) { return x - x; }, b, "logical_xor");
  both_throw<hjit::DTypeError>([](const Tensor& x) { return -x; }, b, "logical_not");
  both_throw<hjit::DTypeError>([](const Tensor& x) { return hjit::pow(x, x); }, b, "numeric");
  both_throw<hjit::DTypeError>([](const Tensor& x) { return hjit::matmul(x, x); }, b, "numeric");
  both_throw<hjit::DTypeError>([](const Tensor& x) { return hjit::mean(x); }, Tensor::zeros({2}, DType::I32), "floating");
  both_throw<hjit::DTypeError>([](const Tensor& x) { return x + Tensor::zeros({2}, DType::U64); }, Tensor::zeros({2}, DType::I8),
                               "no integer type");
  CHECK_THROWS_AS(Tensor::zeros({2}).data_ptr<double>(), hjit::DTypeError);
  CHECK_THROWS_AS(Tensor::arange(3, DType::Bool), hjit::DTypeError);
  CHECK_THROWS_AS(hjit::dtype_from_name("f31"), hjit::DTypeError);
}

TEST_CASE("bad argument values") {
  Tensor x = Tensor::zeros({4});
  both_throw<hjit::ValueError>([](const Tensor& x) { return hjit::slice(x, 0, 0, 4, 0); }, x, "step must be positive");
  both_throw<hjit::ValueError>([](const Tensor& x) { return x.reshape({-1, -1}); }, x, "only one dimension can be -1");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::pad(x, {{-3, -2}}); }, x, "crop more than");
  both_throw<hjit::ValueError>([](const Tensor& x) { return hjit::pow(x.astype(DType::I32), -1); }, x, "negative integer powers");
  both_throw<hjit::ValueError>([](const Tensor& x) { return x + Tensor::full({1}, 1e10, DType::I32); }, x, "without overflow");
  CHECK_THROWS_AS(Tensor::full({2}, 70000, DType::F16), hjit::ValueError);
  CHECK_THROWS_AS(Tensor::full({2}, 256, DType::U8), hjit::ValueError);
  CHECK_THROWS_AS(Tensor::scalar(-129, DType::I8), hjit::ValueError);
  CHECK(Tensor::full({1}, -1, DType::U8).item<uint8_t>() == 255);  // PyTorch lets negatives wrap into unsigned types
  CHECK(std::isinf(Tensor::full({1}, HUGE_VAL, DType::F16).item<float>()));
  CHECK_THROWS_AS(Tensor::zeros({int64_t(1) << 40, int64_t(1) << 40}), hjit::ShapeError);
  CHECK_THROWS_AS(Tensor::zeros({int64_t(1) << 62}), hjit::ShapeError);  // its bytes overflow
  CHECK_THROWS_AS(Tensor::zeros({int64_t(1) << 45}), hjit::OutOfMemoryError);
  CHECK_THROWS_WITH_AS(Tensor::zeros({int64_t(1) << 45}), doctest::Contains("memory limit"), hjit::ResourceError);  // before the allocation
  CHECK_THROWS_AS(hjit::concat({}), hjit::ValueError);
  CHECK_THROWS_AS(hjit::stack({}), hjit::ValueError);
  CHECK_THROWS_AS(Tensor::arange(-1), hjit::ValueError);
  CHECK_THROWS_AS(Tensor::uniform({2}, 1, 3, 2), hjit::ValueError);
  CHECK_THROWS_AS(Tensor::zeros({2}).item<float>(), hjit::ValueError);
  CHECK_THROWS_AS((void)bool(Tensor::zeros({2})), hjit::ValueError);
  Tensor undefined;
  CHECK_THROWS_AS(undefined + x, hjit::ValueError);
  CHECK_THROWS_AS(undefined.shape(), hjit::ValueError);
}

TEST_CASE("bad jit options and arguments") {
  auto fn = [](const Tensor& x) { return x; };
  hjit::JitOptions o;
  o.opt_level = 3;
  CHECK_THROWS_AS(hjit::jit(fn, o), hjit::ValueError);
  o = {};
  o.autoscheduler = "Adams2020";
  CHECK_THROWS_AS(hjit::jit(fn, o), hjit::ValueError);
  o = {};
  o.opt_level = 1;
  o.autoscheduler = "Li2018";
  CHECK_THROWS_AS(hjit::jit(fn, o), hjit::ValueError);
  o = {};
  o.device = hjit::Device::CUDA;
  o.cuda_capability = 90;  // Halide 14 generates 30 to 86
  CHECK_THROWS_AS(hjit::jit(fn, o)(Tensor::zeros({2})), hjit::ValueError);
  CHECK_THROWS_AS(hjit::jit(fn)(Tensor()), hjit::ValueError);
}

TEST_CASE("an error while tracing leaves the function usable") {
  auto f = hjit::jit([](const Tensor& x) { return x + Tensor::zeros({3}); });
  CHECK_THROWS_AS(f(Tensor::zeros({4})), hjit::ShapeError);
  CHECK_THROWS_AS(f(Tensor::zeros({4})), hjit::ShapeError);  // not cached as a success
  CHECK(f(Tensor::ones({3})).to_vector<float>() == std::vector<float>{1, 1, 1});
}

TEST_CASE("bad layer arguments") {
  Tensor x = Tensor::zeros({1, 4, 8, 8});
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::conv2d(x, Tensor::zeros({2, 3, 3, 3})); }, x, "input channels per group");
  both_throw<hjit::ValueError>([](const Tensor& x) { return hjit::conv2d(x, Tensor::zeros({6, 1, 3, 3}), std::nullopt, {1, 1}, {0, 0}, {1, 1}, 4); }, x,
                               "groups=4 must divide");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::conv2d(x, Tensor::zeros({2, 4, 9, 9})); }, x, "larger than the padded input");
  both_throw<hjit::ValueError>([](const Tensor& x) { return hjit::conv2d(x, Tensor::zeros({2, 4, 3, 3}), std::nullopt, {0, 1}); }, x,
                               "stride must be");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::conv2d(x.reshape({4, 8, 8}), Tensor::zeros({2, 4, 3, 3})); }, x, "NCHW");
  both_throw<hjit::ValueError>([](const Tensor& x) { return hjit::max_pool2d(x, {2, 2}, {1, 1}, {2, 2}); }, x, "at most half the kernel");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::batch_norm(x, Tensor::zeros({3}), Tensor::ones({4}), std::nullopt, std::nullopt); },
                               x, "running_mean must have shape [4]");
  both_throw<hjit::ShapeError>([](const Tensor& x) { return hjit::scaled_dot_product_attention(x, x, Tensor::zeros({1, 4, 7, 8})); }, x,
                               "must agree");
  both_throw<hjit::DTypeError>([](const Tensor& x) { return hjit::take(x, Tensor::zeros({2})); }, x, "indices must be i32 or i64");
  CHECK_THROWS_AS(hjit::embedding(Tensor::zeros({3}), Tensor::zeros({1}, DType::I32)), hjit::ShapeError);
  CHECK_THROWS_AS(hjit::take(Tensor::zeros({3, 2}), Tensor::full({1}, -4, DType::I64)), hjit::IndexError);
  CHECK_THROWS_AS(hjit::adaptive_avg_pool2d(x, {0, 2}), hjit::ValueError);
  CHECK_THROWS_AS(hjit::batch_norm_training(x, std::nullopt, std::nullopt, std::nullopt, std::nullopt, 2.0), hjit::ValueError);
  CHECK_THROWS_AS(hjit::batch_norm_training(Tensor::zeros({1, 3}), Tensor::zeros({3}), std::nullopt, std::nullopt, std::nullopt),
                  hjit::ValueError);
  CHECK_THROWS_AS(hjit::cross_entropy(Tensor::zeros({2, 3}), Tensor::zeros({2})), hjit::DTypeError);
  CHECK_THROWS_AS(hjit::cross_entropy(Tensor::zeros({2, 3}), Tensor::zeros({3}, DType::I64)), hjit::ShapeError);
}

// Compiled code has no checks of its own where hjit needs none (codegen.cpp's code_target): a
// temporary that cannot be allocated skips what needed it, and the call says so afterwards.
// (Not under AddressSanitizer, whose shadow memory a data limit would cut off.)
#if !defined(__SANITIZE_ADDRESS__)
TEST_CASE("a compiled call whose temporaries cannot be allocated throws OutOfMemoryError") {
  // A running sum of a 16384 x 16384 outer product: 1 GiB of temporaries, from 128 KiB of inputs.
  const int64_t n = 16384;
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Half a GiB more than this process holds: enough to compile, not to compute.
    rlimit limit{};
    getrlimit(RLIMIT_DATA, &limit);
    std::ifstream status("/proc/self/status");
    std::string line;
    rlim_t data_kib = 0;
    while (std::getline(status, line))
      if (line.rfind("VmData:", 0) == 0) data_kib = rlim_t(std::stoull(line.substr(7)));
    limit.rlim_cur = (data_kib << 10) + (rlim_t(512) << 20);
    setrlimit(RLIMIT_DATA, &limit);
    int code = 3;
    try {
      auto f = hjit::jit([](const Tensor& x, const Tensor& y) { return hjit::sum(hjit::cumsum(x * y, 1), {1}); },
                         {.name = "running_sums"});
      f(Tensor::ones({n, 1}), Tensor::ones({1, n}));
      code = 1;  // no error
    } catch (const hjit::OutOfMemoryError&) {
      code = 0;
    } catch (...) {
      code = 2;  // another error
    }
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE_MESSAGE(WIFEXITED(status), "the child died of signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0));
  CHECK(WEXITSTATUS(status) == 0);
}
#endif

TEST_CASE("from_bytes checks the buffer's size against the tensor's") {
  const std::vector<float> three = {1, 2, 3};
  CHECK_THROWS_WITH_AS(Tensor::from_bytes(three.data(), three.size() * sizeof(float), {4}, DType::F32),
                       doctest::Contains("12 bytes for a tensor f32[4] of 16 bytes"), hjit::ValueError);
  CHECK(Tensor::from_bytes(three.data(), 12, {3}, DType::F32).to_vector<float>() == three);
  CHECK(Tensor::from_bytes(three.data(), 12, {3}, DType::I32).shape() == hjit::Shape{3});
  CHECK(Tensor::from_bytes(nullptr, 0, {0, 2}, DType::F32).numel() == 0);
}
