// Tensors in files: numpy's .npy and .npz (files numpy wrote, read; files hjit writes, read back and
// byte-for-byte the layout numpy reads), hjit's tensor files, and training checkpoints that resume
// a run exactly.
#include <cstdio>
#include <vector>

#include <hjit/io.h>
#include <hjit/nn.h>

#include "tests/support.h"

using hjit::DType;
using hjit::Shape;
using hjit::Tensor;

namespace {

std::string data(const std::string& name) { return std::string(HJIT_TEST_DATA_DIR) + "/npy/" + name; }

void check_same(const Tensor& got, const Tensor& want) {
  REQUIRE(got.dtype() == want.dtype());
  REQUIRE(got.shape() == want.shape());
  CHECK(test::compare(got, want, 0).empty());
}

}  // namespace

TEST_CASE("npy files numpy wrote: C and Fortran order, either byte order, bool, f16, empty") {
  check_same(hjit::load_npy(data("f32_c.npy")), Tensor::arange(6).reshape({2, 3}));
  // np.asfortranarray(arange(6).reshape(3, 2)): the same values, in row-major order once read.
  check_same(hjit::load_npy(data("f64_fortran.npy")), Tensor::arange(6, DType::F64).reshape({3, 2}));
  check_same(hjit::load_npy(data("i32_big.npy")), Tensor::from_vector<int32_t>({-2, -1, 0, 1, 2}));
  check_same(hjit::load_npy(data("bool.npy")), Tensor::from_vector<bool>({true, false, false, true}, {2, 2}));
  check_same(hjit::load_npy(data("f16_scalar.npy")), Tensor::scalar(1.5, DType::F16));
  check_same(hjit::load_npy(data("u8_empty.npy")), Tensor::zeros({0, 3}, DType::U8));
  const hjit::NamedTensors plain = hjit::load_npz(data("plain.npz"));
  REQUIRE(plain.size() == 2);
  CHECK(plain[0].first == "a");
  check_same(plain[0].second, Tensor::arange(3, DType::I64));
  check_same(plain[1].second, Tensor::ones({2, 2}));
  const hjit::NamedTensors packed = hjit::load_npz(data("compressed.npz"));  // deflated members
  REQUIRE(packed.size() == 2);
  check_same(packed[0].second, Tensor::arange(1000, DType::I16));
  check_same(packed[1].second, Tensor::full({4}, 7.25, DType::F64));
}

TEST_CASE("npy, npz and tensor files round-trip every dtype") {
  const std::string dir = test::scratch_dir("io");
  hjit::NamedTensors all;
  for (DType t : {DType::Bool, DType::I8, DType::I16, DType::I32, DType::I64, DType::U8, DType::U16, DType::U32, DType::U64, DType::F16,
                  DType::F32, DType::F64}) {
    const Tensor x = test::random({3, 2}, t, uint64_t(t) + 1);
    hjit::save_npy(dir + "/x.npy", x);
    check_same(hjit::load_npy(dir + "/x.npy"), x);
    all.push_back({std::string(hjit::dtype_name(t)), x});
  }
  all.push_back({"scalar", Tensor::scalar(3.5)});
  all.push_back({"empty", Tensor::zeros({0}, DType::I32)});
  for (bool compressed : {false, true}) {
    hjit::save_npz(dir + "/all.npz", all, compressed);
    const hjit::NamedTensors back = hjit::load_npz(dir + "/all.npz");
    REQUIRE(back.size() == all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      CHECK(back[i].first == all[i].first);
      check_same(back[i].second, all[i].second);
    }
  }
  // The numpy header hjit writes: format 1.0, data 64-byte aligned, as numpy writes it.
  const std::string npy = hjit::npy_to_bytes(Tensor::arange(6).reshape({2, 3}));
  CHECK(npy.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  CHECK(npy.find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }") == 10);
  CHECK((npy.size() - 24) % 64 == 0);
  CHECK(npy == test::read_file(data("f32_c.npy")));  // byte for byte numpy's own file

  // bf16 has no numpy dtype; hjit's tensor file keeps it.
  const Tensor b = test::random({4}, DType::BF16, 9);
  CHECK_THROWS_AS(hjit::save_npy(dir + "/b.npy", b), hjit::DTypeError);
  all.push_back({"bf16", b});
  hjit::save_tensors(dir + "/all.hjit", all);
  const hjit::NamedTensors back = hjit::load_tensors(dir + "/all.hjit");
  REQUIRE(back.size() == all.size());
  for (size_t i = 0; i < all.size(); ++i) check_same(back[i].second, all[i].second);

  CHECK_THROWS_AS(hjit::load_npy(dir + "/missing.npy"), hjit::ValueError);
  CHECK_THROWS_AS(hjit::load_npz(data("f32_c.npy")), hjit::ValueError);
  CHECK_THROWS_AS(hjit::load_tensors(data("plain.npz")), hjit::ValueError);
  CHECK_THROWS_AS(hjit::save_npz(dir + "/twice.npz", {{"a", Tensor::ones({1})}, {"a", Tensor::ones({1})}}), hjit::ValueError);
  CHECK_THROWS_AS(hjit::save_tensors(dir + "/none.hjit", {{"a", Tensor()}}), hjit::ValueError);
  CHECK_THROWS_AS(hjit::save_npy("/nonexistent-dir/x.npy", b.astype(DType::F32)), hjit::ValueError);
}

namespace {

struct Model : hjit::nn::Module {
  hjit::nn::Linear fc{3, 4}, out{4, 1};
  hjit::nn::BatchNorm bn{4};
  Model() {
    register_module("fc", fc);
    register_module("bn", bn);
    register_module("out", out);
  }
  Tensor operator()(const Tensor& x) { return out(hjit::relu(bn(fc(x)))); }
};

// `steps` jitted AdamW steps of a regression.
void train(Model& m, hjit::optim::AdamW& opt, int steps) {
  const Tensor x = test::random({8, 3}, DType::F32, 11), y = test::random({8, 1}, DType::F32, 12);
  const std::vector<Tensor> params = m.parameters();
  auto loss = [&](const Tensor& x, const Tensor& y) {
    const Tensor d = m(x) - y;
    return hjit::mean(d * d);
  };
  auto step = hjit::jit([&](const Tensor& x, const Tensor& y) {
    auto [l, g] = hjit::value_and_grad(loss, params)(x, y);
    opt.step(g);
    return l;
  });
  for (int i = 0; i < steps; ++i) step(x, y);
}

}  // namespace

TEST_CASE("a checkpoint resumes training exactly: parameters, buffers and Adam's state") {
  namespace nn = hjit::nn;
  const std::string path = test::scratch_dir("checkpoint") + "/step3.hjit";
  nn::manual_seed(1);
  Model whole;
  hjit::optim::AdamW whole_opt(whole.parameters(), 0.01);
  train(whole, whole_opt, 6);

  nn::manual_seed(1);
  Model first;
  hjit::optim::AdamW first_opt(first.parameters(), 0.01);
  train(first, first_opt, 3);
  nn::save_checkpoint(path, first, &first_opt);

  nn::manual_seed(99);  // other initial values and another learning rate: all replaced
  Model resumed;
  hjit::optim::AdamW resumed_opt(resumed.parameters(), 0.5);
  nn::load_checkpoint(path, resumed, &resumed_opt);
  CHECK(resumed_opt.lr() == doctest::Approx(0.01));
  CHECK(resumed.bn.num_batches_tracked.item<int64_t>() == 3);
  train(resumed, resumed_opt, 3);
  const hjit::NamedTensors want = whole.state(), got = resumed.state();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(want[i].first);
    CHECK(test::compare(got[i].second, want[i].second, 1e-6).empty());
  }
  CHECK(test::compare(resumed_opt.state_dict()[1].second, whole_opt.state_dict()[1].second, 0).empty());  // the step count

  // A model of other shapes, or an optimizer the file lacks: typed errors, nothing assigned.
  struct Wider : nn::Module {
    nn::Linear fc{3, 5}, out{5, 1};
    nn::BatchNorm bn{5};
    Wider() {
      register_module("fc", fc);
      register_module("bn", bn);
      register_module("out", out);
    }
  } wider;
  hjit::optim::AdamW wider_opt(wider.parameters(), 0.5);
  const std::vector<float> before = wider.fc.bias.to_vector<float>();
  CHECK_THROWS_AS(nn::load_checkpoint(path, wider, &wider_opt), hjit::ShapeError);
  CHECK(wider.fc.bias.to_vector<float>() == before);
  CHECK(wider_opt.lr() == doctest::Approx(0.5));
  nn::save_checkpoint(path, first);
  CHECK_THROWS_WITH_AS(nn::load_checkpoint(path, resumed, &resumed_opt), doctest::Contains("no optimizer state"), hjit::ValueError);
  nn::load_checkpoint(path, resumed);
}
