// Tensors in files: numpy's .npy and .npz (files numpy wrote, read; files hjit writes, read back and
// byte-for-byte the layout numpy reads), hjit's tensor files, and training checkpoints that resume
// a run exactly.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <hjit/io.h>
#include <hjit/data.h>
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
  CHECK_THROWS_WITH_AS(hjit::save_npy("/nonexistent-dir/x.npy", b.astype(DType::F32)),
                       "hjit: cannot write npy '/nonexistent-dir/x.npy': No such file or directory", hjit::ValueError);
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

// `steps` jitted AdamW steps of a regression on inputs drawn from `seed`, a schedule (if any)
// stepped after each: the losses.
template <class M>
std::vector<float> train_steps(M& m, hjit::optim::AdamW& opt, int steps, uint64_t seed, hjit::optim::LRScheduler* schedule = nullptr) {
  const Tensor x = test::random({8, 3}, DType::F32, seed), y = test::random({8, 1}, DType::F32, seed + 1);
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
  std::vector<float> losses;
  for (int i = 0; i < steps; ++i) {
    losses.push_back(step(x, y).template item<float>());
    if (schedule) schedule->step();
  }
  return losses;
}

void train(Model& m, hjit::optim::AdamW& opt, int steps) { train_steps(m, opt, steps, 11); }

// With dropout between the layers, and a cosine schedule stepped after each jitted step: the
// losses of `steps` steps.
struct DropModel : hjit::nn::Module {
  hjit::nn::Linear fc{3, 16}, out{16, 1};
  hjit::nn::BatchNorm bn{16};
  hjit::nn::Dropout drop{0.3};
  DropModel() {
    register_module("fc", fc);
    register_module("bn", bn);
    register_module("drop", drop);
    register_module("out", out);
  }
  Tensor operator()(const Tensor& x) { return out(drop(hjit::relu(bn(fc(x))))); }
};

std::vector<float> train_scheduled(DropModel& m, hjit::optim::AdamW& opt, hjit::optim::LRScheduler& schedule, int steps) {
  return train_steps(m, opt, steps, 13, &schedule);
}

}  // namespace

TEST_CASE("a resumed training run is bit-identical to the uninterrupted one: dropout's keys, AdamW, a cosine schedule, batch norm") {
  namespace nn = hjit::nn;
  const std::string path = test::scratch_dir("checkpoint") + "/resume.hjit";
  nn::manual_seed(5);
  DropModel whole;
  hjit::optim::AdamW whole_opt(whole.parameters(), 0.05);
  hjit::optim::CosineAnnealingLR whole_schedule(whole_opt, 8);
  const std::vector<float> whole_losses = train_scheduled(whole, whole_opt, whole_schedule, 8);
  const Tensor whole_process_key = nn::process_key_now();

  nn::manual_seed(5);
  DropModel first;
  hjit::optim::AdamW first_opt(first.parameters(), 0.05);
  hjit::optim::CosineAnnealingLR first_schedule(first_opt, 8);
  const std::vector<float> first_losses = train_scheduled(first, first_opt, first_schedule, 4);
  nn::save_checkpoint(path, first, &first_opt, &first_schedule);

  // Another seed, rate and schedule start: the checkpoint replaces them all.
  nn::manual_seed(77);
  DropModel resumed;
  hjit::optim::AdamW resumed_opt(resumed.parameters(), 0.5);
  hjit::optim::CosineAnnealingLR resumed_schedule(resumed_opt, 8);
  nn::load_checkpoint(path, resumed, &resumed_opt, true, &resumed_schedule);
  CHECK(resumed_schedule.steps() == 4);
  CHECK(resumed_schedule.base_lr() == 0.05);
  CHECK(resumed_opt.lr() == first_opt.lr());
  std::vector<float> losses = first_losses;
  for (float l : train_scheduled(resumed, resumed_opt, resumed_schedule, 4)) losses.push_back(l);
  CHECK(losses == whole_losses);
  const hjit::NamedTensors want = whole.state(), got = resumed.state();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(want[i].first);
    CHECK(test::compare(got[i].second, want[i].second, 0).empty());
  }
  CHECK(test::compare(resumed.drop.key, whole.drop.key, 0).empty());
  CHECK(test::compare(nn::process_key_now(), whole_process_key, 0).empty());
  const hjit::NamedTensors opt_want = whole_opt.state_dict(), opt_got = resumed_opt.state_dict();
  REQUIRE(opt_got.size() == opt_want.size());
  for (size_t i = 0; i < opt_want.size(); ++i) CHECK(test::compare(opt_got[i].second, opt_want[i].second, 0).empty());

  // Modes come back as they were saved, module by module.
  first.eval();
  first.drop.train();
  nn::save_checkpoint(path, first, &first_opt, &first_schedule);
  resumed.train();
  nn::load_checkpoint(path, resumed, &resumed_opt, true, &resumed_schedule);
  CHECK_FALSE(resumed.training());
  CHECK_FALSE(resumed.bn.training());
  CHECK(resumed.drop.training());
  // A schedule the file lacks, or a broken one: typed errors, nothing assigned.
  nn::save_checkpoint(path, first, &first_opt);
  CHECK_THROWS_WITH_AS(nn::load_checkpoint(path, resumed, &resumed_opt, true, &resumed_schedule), doctest::Contains("no schedule state"),
                       hjit::ValueError);
  CHECK_THROWS_AS(resumed_schedule.load_state_dict({{"steps", Tensor::scalar(-1, DType::I64)}, {"base_lr", Tensor::scalar(0.1, DType::F64)}}),
                  hjit::ValueError);
  CHECK_THROWS_AS(resumed_schedule.load_state_dict({{"steps", Tensor::scalar(1.5, DType::F32)}, {"base_lr", Tensor::scalar(0.1, DType::F64)}}),
                  hjit::DTypeError);
  CHECK(resumed_schedule.steps() == 4);
}

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
  // Blamed on the model's layer, not on the optimizer's state of it ("exp_avg.0").
  CHECK_THROWS_WITH_AS(nn::load_checkpoint(path, wider, &wider_opt), doctest::Contains("the model's 'fc.weight' is [5,3] but [4,3]"),
                       hjit::ShapeError);
  CHECK(wider.fc.bias.to_vector<float>() == before);
  CHECK(wider_opt.lr() == doctest::Approx(0.5));
  nn::save_checkpoint(path, first);
  CHECK_THROWS_WITH_AS(nn::load_checkpoint(path, resumed, &resumed_opt), doctest::Contains("no optimizer state"), hjit::ValueError);
  nn::load_checkpoint(path, resumed);
}

TEST_CASE("CSV files: headers detected, quoted and missing fields, errors that name the line") {
  namespace data = hjit::data;
  data::Csv t = data::parse_csv("sepal length, sepal width ,class\n5.1,3.5,0\n\n4.9,\"3.0\",1\n6.3,2.5,2\n");
  CHECK(t.columns == std::vector<std::string>{"sepal length", "sepal width", "class"});
  CHECK(t.values.shape() == Shape{3, 3});
  CHECK(t.values.to_vector<float>() == std::vector<float>{5.1f, 3.5f, 0, 4.9f, 3.0f, 1, 6.3f, 2.5f, 2});
  t = data::parse_csv("1;2\n3;nan\n-inf;4e2\n", {.delimiter = ';', .dtype = DType::F64});
  CHECK(t.columns == std::vector<std::string>{"0", "1"});
  CHECK(t.values.dtype() == DType::F64);
  const std::vector<double> v = t.values.to_vector<double>();
  CHECK(std::isnan(v[3]));
  CHECK(v[4] == -INFINITY);
  CHECK(v[5] == 400);
  CHECK(data::parse_csv("1,,3\n", {.missing = -1.0}).values.to_vector<float>() == std::vector<float>{1, -1, 3});
  CHECK_THROWS_WITH_AS(data::parse_csv("a,b\n1,2\n3\n"), doctest::Contains("line 3 has 1 fields"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(data::parse_csv("1,2\n3,x4\n"), doctest::Contains("line 2, column 2: 'x4' is not a number"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(data::parse_csv("1,,3\n"), doctest::Contains("empty"), hjit::ValueError);
  CHECK_THROWS_AS(data::parse_csv("\n\n"), hjit::ValueError);
  CHECK_THROWS_AS(data::read_csv("/nonexistent.csv"), hjit::ValueError);
  const std::string path = test::scratch_dir("csv") + "/x.csv";
  test::write_file(path, "x,y\n1,2\n");
  CHECK(data::read_csv(path, {.header = data::Header::Yes, .dtype = DType::I32}).values.to_vector<int32_t>() == std::vector<int32_t>{1, 2});
}

TEST_CASE("keyed shuffles and batches: every row once per pass, padded or dropped last batches") {
  namespace data = hjit::data;
  const Tensor p = data::permutation(hjit::random::key(5), 50);
  std::vector<int64_t> order = p.to_vector<int64_t>();
  CHECK(order == data::permutation(hjit::random::key(5), 50).to_vector<int64_t>());
  CHECK(order != data::permutation(hjit::random::key(6), 50).to_vector<int64_t>());
  std::sort(order.begin(), order.end());
  for (int64_t i = 0; i < 50; ++i) CHECK(order[size_t(i)] == i);

  const Tensor x = Tensor::arange(10).reshape({10, 1}), y = Tensor::arange(10, DType::I64);
  data::Batches keep({x, y}, 4);
  CHECK(keep.size() == 3);
  CHECK(keep[2].rows == 2);
  CHECK(keep[2][1].to_vector<int64_t>() == std::vector<int64_t>{8, 9});
  data::Batches drop({x, y}, 4, data::LastBatch::Drop);
  CHECK(drop.size() == 2);
  data::Batches padded({x, y}, 4, data::LastBatch::Pad);
  CHECK(padded.size() == 3);
  const data::Batch last = padded[2];
  CHECK(last[0].shape() == Shape{4, 1});
  CHECK(last[1].to_vector<int64_t>() == std::vector<int64_t>{8, 9, 0, 0});
  CHECK(last.mask().to_vector<bool>() == std::vector<bool>{true, true, false, false});
  // Shuffled: the rows of x and y stay together, and one pass holds every row once.
  padded.shuffle(hjit::random::key(1));
  std::vector<int64_t> seen;
  for (const data::Batch& b : padded) {
    const std::vector<float> xs = b[0].to_vector<float>();
    const std::vector<int64_t> ys = b[1].to_vector<int64_t>();
    for (int64_t r = 0; r < b.rows; ++r) {
      CHECK(xs[size_t(r)] == float(ys[size_t(r)]));
      seen.push_back(ys[size_t(r)]);
    }
  }
  CHECK(seen != y.to_vector<int64_t>());
  std::sort(seen.begin(), seen.end());
  CHECK(seen == y.to_vector<int64_t>());
  CHECK_THROWS_AS(data::Batches({x, Tensor::arange(9)}, 4), hjit::ShapeError);
  CHECK_THROWS_AS(data::Batches({x}, 0), hjit::ValueError);
  CHECK_THROWS_AS(keep[3], hjit::IndexError);
}
