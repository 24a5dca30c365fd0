// A CNN on scikit-learn's digits (8x8 images of handwritten digits, UCI; examples/data), trained
// with AdamW in one jitted step; examples/torch/digits_cnn.py is the same program in PyTorch. Then
// quantized to int8 (nn::quantize), which must keep its accuracy within 1%.
//   digits_cnn [digits.csv.gz] [epochs] [accuracy it must reach, for the test suite]
#include <hjit/nn.h>  // layers, and with them all of hjit: ops, jit, grad, optimizers, data

#include <cstdio>
using namespace hjit;

int main(int argc, char** argv) {
  nn::manual_seed(0);
  const Tensor data = data::read_csv(argc > 1 ? argv[1] : "examples/data/digits.csv.gz").values;
  const Tensor x = slice(data, 1, 0, 64).reshape({-1, 1, 8, 8}) / 16.0;
  const Tensor y = slice(data, 1, 64, 65).reshape({-1}).astype(DType::I64);
  const Tensor order = data::permutation(random::key(0), x.dim(0));
  const Tensor train = slice(order, 0, 0, 1437), test = slice(order, 0, 1437, std::nullopt);

  nn::Sequential model;
  model.add<nn::Conv2d>(1, 16, 3, 1, 1), model.add<nn::BatchNorm2d>(16), model.add<nn::ReLU>(), model.add<nn::MaxPool2d>(2);
  model.add<nn::Conv2d>(16, 32, 3, 1, 1), model.add<nn::ReLU>(), model.add<nn::MaxPool2d>(2);
  model.add<nn::Flatten>(), model.add<nn::Dropout>(0.2), model.add<nn::Linear>(32 * 2 * 2, 10);
  const std::vector<Tensor> params = model.parameters();
  optim::AdamW opt(params, 3e-3);

  auto loss_of = [&](const Tensor& xb, const Tensor& yb) { return cross_entropy(model(xb), yb); };
  auto step = jit([&](const Tensor& xb, const Tensor& yb) {
    auto [loss, grads] = value_and_grad(loss_of, params)(xb, yb);
    opt.step(grads);
    return loss;
  });
  auto predict = jit([&](const Tensor& xb) { return argmax(model(xb), 1); });

  data::Batches batches({take(x, train, 0), take(y, train, 0)}, 32, data::LastBatch::Drop);
  Tensor loss;
  double accuracy = 0;
  const int epochs = argc > 2 ? std::stoi(argv[2]) : 20;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    model.train();
    batches.shuffle(random::key(uint64_t(epoch)));  // a new order every epoch
    for (const data::Batch& b : batches) loss = step(b[0], b[1]);
    model.eval();
    accuracy = mean((predict(take(x, test, 0)) == take(y, test, 0)).astype(DType::F32)).item<float>();
    std::printf("epoch %d: loss %.4f, test accuracy %.2f%%\n", epoch, loss.item<float>(), 100 * accuracy);
  }
  nn::save_checkpoint("digits_cnn.hjit", model, &opt);

  // Post-training quantization: the convolutions and the linear layer in int8, their inputs'
  // ranges calibrated on eight training batches run eagerly.
  const int layers = nn::quantize(model, [&] {
    int calls = 0;
    for (const data::Batch& b : batches)
      if (calls++ < 8) model(b[0]);
  });
  // (Run eagerly: the jitted predict keeps the trace it made, of the float layers.)
  const double int8_accuracy = mean((argmax(model(take(x, test, 0)), 1) == take(y, test, 0)).astype(DType::F32)).item<float>();
  std::printf("int8 (%d layers quantized): test accuracy %.2f%%\n", layers, 100 * int8_accuracy);
  const bool reached = argc <= 3 || accuracy >= std::stod(argv[3]);
  return reached && int8_accuracy >= accuracy - 0.01 ? 0 : 1;
}
