// Tensors on a GPU: Tensor::to, eager ops on device tensors (single-op pipelines compiled for the
// device), jitted functions whose results stay on the device, gradients and optimizers there.
// Run on Device::OpenCL through pocl (Debian's pocl-opencl-icd, an OpenCL driver for the CPU): the
// same code paths serve Device::CUDA, with the other device runtime. Where no OpenCL driver is
// installed the test reports itself skipped (exit 77), never passed.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>

#include <hjit/hjit.h>

#include "tests/support.h"

using hjit::Device;
using hjit::DType;
using hjit::Tensor;

namespace {
constexpr Device kGpu = Device::OpenCL;

// Skipped, and saying why, where this machine has no OpenCL driver.
const bool g_checked = [] {
  std::string why;
  if (!hjit::device_available(kGpu, &why)) {
    std::fprintf(stderr, "test_device skipped: no OpenCL device: %s\n", why.c_str());
    std::exit(77);
  }
  return true;
}();

hjit::DeviceStats transfers() { return hjit::device_stats(); }
}

TEST_CASE("to() copies to the device and back, for every dtype and shape") {
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::U8, DType::Bool, DType::F16, DType::I64}) {
    for (hjit::Shape s : {hjit::Shape{}, hjit::Shape{0}, hjit::Shape{3, 0, 2}, hjit::Shape{7}, hjit::Shape{4, 33}}) {
      CAPTURE(hjit::dtype_name(t));
      CAPTURE(hjit::shape_str(s));
      Tensor x = test::random(s, t, 11);
      Tensor d = x.to(kGpu);
      CHECK(d.device() == kGpu);
      CHECK(d.shape() == s);
      CHECK(d.dtype() == t);
      Tensor back = d.to(Device::CPU);
      CHECK(back.device() == Device::CPU);
      CHECK(test::compare(back, x, 0).empty());
      CHECK(test::compare(d, x, 0).empty());  // read through a copy down
      CHECK(d.to(kGpu).same_storage(d));      // already there: itself
    }
  }
}

TEST_CASE("eager ops on device tensors compute what they compute on the CPU, and stay on the device") {
  Tensor a = test::random({5, 7}, DType::F32, 1), b = test::random({7}, DType::F32, 2);
  Tensor m = test::random({7, 3}, DType::F32, 3);
  Tensor da = a.to(kGpu), db = b.to(kGpu), dm = m.to(kGpu);
  auto same = [](const Tensor& got, const Tensor& want) {
    CHECK(got.device() == kGpu);
    CHECK_CLOSE(got, want);
  };
  same(da + db, a + b);                                  // broadcasting
  same(hjit::exp(da) * 2.0, hjit::exp(a) * 2.0);          // a scalar operand
  same(hjit::matmul(da, dm), hjit::matmul(a, m));
  same(hjit::sum(da, {1}), hjit::sum(a, {1}));
  same(hjit::softmax(da, -1), hjit::softmax(a, -1));
  same(da.transpose(), a.transpose());
  same(hjit::where(da > 0.0, da, db), hjit::where(a > 0.0, a, b));
  same(da.astype(DType::F64), a.astype(DType::F64));
  same(da + b, a + b);  // a CPU operand is copied to the device
  CHECK(hjit::max(da).item<float>() == hjit::max(a).item<float>());
}

TEST_CASE("a function jitted for the device takes and returns device tensors, nothing copied through the host") {
  auto block = [](const Tensor& x, const Tensor& w) { return hjit::sum(hjit::relu(hjit::matmul(x, w) * 0.5 + 1.0), {-1}); };
  auto f = hjit::jit(block, {.name = "device_block", .device = kGpu});
  Tensor x = test::random({6, 8}, DType::F32, 4), w = test::random({8, 8}, DType::F32, 5);
  const Tensor want = block(x, w);
  Tensor dx = x.to(kGpu), dw = w.to(kGpu);
  const hjit::DeviceStats before = transfers();
  Tensor y = f(dx, dw);
  Tensor z = f(dx, dw);
  CHECK(y.device() == kGpu);
  const hjit::DeviceStats after = transfers();
  CHECK(after.uploads == before.uploads);      // operands were there already
  CHECK(after.downloads == before.downloads);  // results stay until read
  CHECK(after.allocations == before.allocations + 2);
  CHECK_CLOSE(y.to(Device::CPU), want);
  CHECK(transfers().downloads == after.downloads + 1);
  CHECK_CLOSE(z, want);
  CHECK(f.stats().traces == 1);
  // CPU operands are copied up for the call; the result is on the device either way.
  Tensor from_host = f(x, dw);
  CHECK(from_host.device() == kGpu);
  CHECK_CLOSE(from_host, want);
  // explain shows the kernels' OpenCL C.
  const std::string ex = f.explain(dx, dw);
  CHECK(ex.find("__kernel") != std::string::npos);
}

TEST_CASE("a chain of device functions and eager ops keeps every value on the device") {
  auto f = hjit::jit([](const Tensor& a) { return hjit::tanh(a) * 3.0; }, {.name = "device_chain", .device = kGpu});
  Tensor a = test::random({33, 17}, DType::F32, 6);
  Tensor da = a.to(kGpu);
  f(da);  // compiled, and the eager ops' pipelines warmed below
  const hjit::DeviceStats before = transfers();
  Tensor d = f(hjit::exp(da) - 1.0);
  Tensor e = hjit::mean(d, {0});
  CHECK(e.device() == kGpu);
  CHECK(transfers().downloads == before.downloads);
  CHECK(transfers().upload_bytes - before.upload_bytes <= 16);  // only the scalars (1.0, the mean's count)
  CHECK_CLOSE(e, hjit::mean(hjit::tanh(hjit::exp(a) - 1.0) * 3.0, {0}));
}

TEST_CASE("a CPU function given device tensors reads them through copies down") {
  auto f = hjit::jit([](const Tensor& a, const Tensor& b) { return a * b; }, {.name = "cpu_fn_device_args"});
  Tensor a = test::random({4, 5}, DType::F32, 7), b = test::random({4, 5}, DType::F32, 8);
  Tensor y = f(a.to(kGpu), b);
  CHECK(y.device() == Device::CPU);
  CHECK_CLOSE(y, a * b);
}

TEST_CASE("assign, clone and in-place updates work on device tensors") {
  Tensor a = test::random({3, 4}, DType::F32, 9);
  Tensor d = a.to(kGpu);
  Tensor c = d.clone();
  CHECK(c.device() == kGpu);
  CHECK(!c.same_storage(d));
  d.assign(d * 2.0);
  CHECK(d.device() == kGpu);
  CHECK_CLOSE(d, a * 2.0);
  CHECK_CLOSE(c, a);  // the clone kept its own bytes
  d.assign(Tensor::scalar(7.0));  // a CPU value, broadcast
  CHECK(hjit::sum(d).item<float>() == doctest::Approx(7.0 * 12));
  Tensor host = Tensor::zeros({3, 4});
  host.assign(c);  // a device value into CPU storage
  CHECK(host.device() == Device::CPU);
  CHECK_CLOSE(host, a);
  d.assign_slice(0, 1, 2, Tensor::zeros({1, 4}).to(kGpu));
  CHECK(hjit::sum(d, {1}).to_vector<float>() == std::vector<float>{28, 0, 28});
  // A jitted update writes device parameters in place.
  Tensor w = Tensor::ones({5}).to(kGpu);
  auto step = hjit::jit([&](const Tensor& g) { w.assign(w - 0.5 * g); return hjit::sum(w); }, {.name = "device_update", .device = kGpu});
  Tensor g = Tensor::full({5}, 2.0).to(kGpu);
  step(g);
  Tensor total = step(g);
  CHECK(w.device() == kGpu);
  CHECK(w.to_vector<float>() == std::vector<float>(5, -1.0f));
  CHECK(total.item<float>() == -5.0f);
}

TEST_CASE("gradients and optimizers on device tensors match the CPU's") {
  Tensor x = test::random({8, 6}, DType::F32, 10), y = test::random({8, 3}, DType::F32, 11);
  Tensor w0 = test::random({6, 3}, DType::F32, 12) * 0.3, b0 = Tensor::zeros({3});
  auto train = [&](Device device, bool jitted, int steps) {
    Tensor w = w0.clone().to(device), b = b0.clone().to(device);
    Tensor xd = x.to(device), yd = y.to(device);
    auto loss = [&](const Tensor& xs, const Tensor& ys) {
      Tensor d = hjit::tanh(hjit::matmul(xs, w) + b) - ys;
      return hjit::mean(d * d);
    };
    hjit::optim::Adam opt({w, b}, 0.05);
    auto step = [&](const Tensor& xs, const Tensor& ys) {
      auto [l, g] = hjit::value_and_grad(loss, std::vector<Tensor>{w, b})(xs, ys);
      opt.step(g);
      return l;
    };
    auto jstep = hjit::jit(step, {.name = "device_train", .device = device});
    Tensor l;
    for (int i = 0; i < steps; ++i) l = jitted ? jstep(xd, yd) : step(xd, yd);
    CHECK(w.device() == device);
    CHECK(l.device() == device);
    return std::vector<Tensor>{l, w, b};
  };
  const std::vector<Tensor> want = train(Device::CPU, false, 4);
  for (bool jitted : {false, true}) {
    CAPTURE(jitted);
    const std::vector<Tensor> got = train(kGpu, jitted, 4);
    for (size_t k = 0; k < want.size(); ++k) CHECK_CLOSE_TOL(got[k], want[k], 1e-4);
  }
  // grad of an argument on the device
  auto f = [](const Tensor& v) { return hjit::sum(hjit::sin(v) * v); };
  Tensor v = test::random({9}, DType::F32, 13);
  Tensor gv = hjit::grad(f)(v.to(kGpu));
  CHECK(gv.device() == kGpu);
  CHECK_CLOSE(gv, hjit::grad(f)(v));
}

TEST_CASE("device errors are typed and say what to do") {
  Tensor d = test::random({2, 3}, DType::F32, 14).to(kGpu);
  CHECK_THROWS_AS(d.data(), hjit::DeviceError);
  CHECK_THROWS_WITH(d.data(), doctest::Contains("to(Device::CPU)"));
  std::string why;
  if (!hjit::device_available(Device::CUDA, &why)) {
    CHECK(why.find("libcuda.so.1") != std::string::npos);
    CHECK_THROWS_AS(Tensor::ones({2}).to(Device::CUDA), hjit::DeviceError);
    CHECK_THROWS_WITH(Tensor::ones({2}).to(Device::CUDA), doctest::Contains("libcuda.so.1"));
  }
  // Values are checked as on the CPU: a bad gather index is an IndexError.
  Tensor idx = Tensor::from_vector<int32_t>({0, 5}).to(kGpu);
  CHECK_THROWS_AS(hjit::take(d.reshape({6}), idx * 2).to_vector<float>(), hjit::IndexError);
}
