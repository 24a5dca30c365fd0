// Tensors on a GPU: Tensor::to, eager ops on device tensors (single-op pipelines compiled for the
// device), jitted functions whose results stay on the device, gradients and optimizers there.
// Run on Device::OpenCL through pocl (Debian's pocl-opencl-icd, an OpenCL driver for the CPU): the
// same code paths serve Device::CUDA, with the other device runtime. Where no OpenCL driver is
// installed the test reports itself skipped (exit 77), never passed.
#include <doctest/doctest.h>

#include <hjit/hjit.h>

#include "tests/support.h"

using hjit::Device;
using hjit::DType;
using hjit::Tensor;

namespace {
constexpr Device kGpu = Device::OpenCL;
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
