// Classifies a picture with an ONNX model: the model read and compiled by hjit, the picture (a
// binary PPM, as `convert photo.jpg photo.ppm` writes) resized and normalized as torchvision's
// ImageNet models expect, and the most likely classes printed.
//
//   onnx_classify resnet50.onnx photo.ppm [--labels imagenet_classes.txt] [--top 5]
//   onnx_classify tiny_classifier.onnx picture.ppm --expect 9     # fails unless class 9 comes first
//
// tools/models/reference_models.py exports torchvision's classifiers (export) and the small one
// this example is tested with (example).
#include <hjit/hjit.h>
#include <hjit/onnx.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

using hjit::Tensor;

namespace {

struct Picture {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // height x width x 3
};

// A binary PPM (P6, 8 bits per channel); comments in the header are skipped.
Picture read_ppm(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open the picture '" + path + "'");
  auto token = [&] {
    std::string t;
    while (in >> t && t[0] == '#') std::getline(in, t);
    return t;
  };
  if (token() != "P6") throw std::runtime_error("'" + path + "' is not a binary PPM (P6)");
  Picture p;
  p.width = std::stoi(token());
  p.height = std::stoi(token());
  if (std::stoi(token()) != 255 || p.width <= 0 || p.height <= 0 || p.width > 16384 || p.height > 16384)
    throw std::runtime_error("'" + path + "' is not an 8-bit PPM of a sensible size");
  in.get();  // the one whitespace before the pixels
  p.rgb.resize(size_t(p.width) * size_t(p.height) * 3);
  if (!in.read(reinterpret_cast<char*>(p.rgb.data()), std::streamsize(p.rgb.size())))
    throw std::runtime_error("'" + path + "' ends before its pixels do");
  return p;
}

// torchvision's preprocessing: the shorter side resized to `size` (bilinear, half-pixel centres),
// the centre size x size cut out, scaled to [0, 1] and normalized with ImageNet's mean and
// deviation; NCHW.
Tensor preprocess(const Picture& p, int size) {
  const bool tall = p.height > p.width;
  const int nh = tall ? int(std::lround(double(p.height) * size / p.width)) : size;
  const int nw = tall ? size : int(std::lround(double(p.width) * size / p.height));
  const int top = (nh - size) / 2, left = (nw - size) / 2;
  const float mean[3] = {0.485f, 0.456f, 0.406f}, std_dev[3] = {0.229f, 0.224f, 0.225f};
  auto pixel = [&](int y, int x, int c) { return float(p.rgb[(size_t(y) * size_t(p.width) + size_t(x)) * 3 + size_t(c)]) / 255.0f; };
  std::vector<float> out(size_t(3) * size_t(size) * size_t(size));
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x) {
      // Source coordinates of this output pixel's centre, clamped as PyTorch's interpolate does.
      const double sy = std::max(0.0, (y + top + 0.5) * double(p.height) / nh - 0.5);
      const double sx = std::max(0.0, (x + left + 0.5) * double(p.width) / nw - 0.5);
      const int y0 = std::min(int(sy), p.height - 1), x0 = std::min(int(sx), p.width - 1);
      const int y1 = std::min(y0 + 1, p.height - 1), x1 = std::min(x0 + 1, p.width - 1);
      const float ly = float(sy - y0), lx = float(sx - x0);
      for (int c = 0; c < 3; ++c) {
        const float v = (1 - ly) * ((1 - lx) * pixel(y0, x0, c) + lx * pixel(y0, x1, c)) +
                        ly * ((1 - lx) * pixel(y1, x0, c) + lx * pixel(y1, x1, c));
        out[(size_t(c) * size_t(size) + size_t(y)) * size_t(size) + size_t(x)] = (v - mean[c]) / std_dev[c];
      }
    }
  return Tensor::from_vector<float>(out, {1, 3, size, size});
}

std::vector<std::string> read_labels(const std::string& path) {
  std::vector<std::string> labels;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open the labels '" + path + "'");
  for (std::string line; std::getline(in, line);) labels.push_back(line);
  return labels;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: onnx_classify MODEL.onnx PICTURE.ppm [--labels FILE] [--top K] [--expect CLASS]\n";
    return 2;
  }
  std::string labels_path;
  int top = 5, expect = -1;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--labels") labels_path = argv[i + 1];
    else if (a == "--top") top = std::stoi(argv[i + 1]);
    else if (a == "--expect") expect = std::stoi(argv[i + 1]);
  }
  try {
    // The model's input says the picture's size: [N, 3, H, W] with H = W (any symbolic batch is 1).
    const hjit::onnx::Model model = hjit::onnx::Model::read(argv[1]);
    const hjit::onnx::ValueInfo& input = model.info().inputs.at(0);
    if (input.shape.size() != 4 || input.shape[2] <= 0 || input.shape[2] != input.shape[3])
      throw std::runtime_error("the model's input is " + input.str() + ", not a square picture [N, 3, S, S]");
    const int size = int(input.shape[2]);
    const Tensor x = preprocess(read_ppm(argv[2]), size);
    hjit::Module classify = model.module({{hjit::DType::F32, x.shape()}});  // compiled on the first call
    const Tensor logits = classify(x);
    const Tensor probabilities = hjit::softmax(logits.reshape({-1}), 0);

    const std::vector<float> p = probabilities.to_vector<float>();
    std::vector<int> order(p.size());
    std::iota(order.begin(), order.end(), 0);
    top = std::min<int>(top, int(p.size()));
    std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
    const std::vector<std::string> labels = labels_path.empty() ? std::vector<std::string>{} : read_labels(labels_path);
    for (int k = 0; k < top; ++k) {
      const int c = order[size_t(k)];
      const std::string name = size_t(c) < labels.size() ? labels[size_t(c)] : "class " + std::to_string(c);
      std::printf("%6.2f%%  %s\n", 100.0 * p[size_t(c)], name.c_str());
    }
    if (expect >= 0 && order[0] != expect) {
      std::fprintf(stderr, "expected class %d first, got class %d\n", expect, order[0]);
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "onnx_classify: " << e.what() << "\n";
    return 1;
  }
}
