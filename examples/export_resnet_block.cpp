// Ahead of time: the ResNet block (W8) exported as a static library and a C header, and saved as a
// module file. Neither needs this program's source to run; the library needs neither hjit nor
// Halide nor LLVM (examples/export/consumer.c is a C program built from it, see run.sh there).
//
//   export_resnet_block out/     writes out/libresnet_block.a, out/resnet_block.h,
//                                out/resnet_block.hjit, and out/x.bin, out/y_eager.bin to check with
#include <cstdio>
#include <fstream>

#include <hjit/hjit.h>

#include "resnet_block.h"

using hjit::Tensor;

namespace {

void write_floats(const std::string& path, const Tensor& t) {
  std::vector<float> v = t.to_vector<float>();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * 4));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string out = argc > 1 ? argv[1] : "export_out";
  BasicBlock block(64, 7);
  auto forward = [&](const Tensor& x) { return block(x); };
  Tensor x = Tensor::randn({1, 64, 56, 56}, 1);

  // 1. A static library and a header: the parameters baked in, the host CPU's target.
  for (const std::string& f : hjit::export_library(out, "resnet_block", forward, x)) std::printf("wrote %s\n", f.c_str());

  // 2. A module file: graph, parameters and signature. Loaded here, as another program would.
  hjit::save(out + "/resnet_block.hjit", forward, x);
  hjit::Module m = hjit::Module::load(out + "/resnet_block.hjit");
  Tensor y = m(x), want = block(x);
  double worst = 0;
  std::vector<float> a = y.to_vector<float>(), b = want.to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])) / (1 + std::fabs(b[i])));
  std::printf("wrote %s/resnet_block.hjit: %zu parameters; loaded and run: max error vs eager %.2e\n", out.c_str(),
              m.parameters().size(), worst);

  write_floats(out + "/x.bin", x);
  write_floats(out + "/y_eager.bin", want);
  std::printf("build a program from the library alone:\n  cc -O2 examples/export/consumer.c -I%s %s/libresnet_block.a "
              "-lpthread -ldl -lm\n", out.c_str(), out.c_str());
  return worst < 1e-3 ? 0 : 1;
}
