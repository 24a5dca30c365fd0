#include "bench/models.h"

#include "bench/ort_peer.h"
#include "bench/timing.h"

#include <hjit/onnx.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#ifdef HJIT_BENCH_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/dnn.hpp>
#endif

namespace bench {

namespace {

namespace fs = std::filesystem;
using hjit::Tensor;

// The largest difference from PyTorch's output relative to its largest magnitude (the issue's
// measure: 1e-3 passes).
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, double(std::abs(want[i])));
    worst = std::max(worst, std::isnan(got[i]) ? INFINITY : double(std::abs(got[i] - want[i])));
  }
  return worst / std::max(scale, 1e-30);
}

struct Child {
  bool ok = false;
  double read = 0, convert = 0, first = 0, steady = 0, err = 0;
  std::string failure;
};

// Runs `cmd`, reading its "MODEL read convert first steady err" line.
Child run(const std::string& cmd) {
  Child c;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return c;
  char line[4096];
  while (std::fgets(line, sizeof line, p)) {
    if (std::sscanf(line, "MODEL %lf %lf %lf %lf %lf", &c.read, &c.convert, &c.first, &c.steady, &c.err) == 5) c.ok = true;
    else c.failure = line;
  }
  pclose(p);
  while (!c.failure.empty() && c.failure.back() == '\n') c.failure.pop_back();
  return c;
}

// Tuned PyTorch's steady time for the model, from the export script's `time` command (the
// peers' settings: OpenBLAS's AVX-512 kernel, one OpenMP pool, large blocks kept on the heap).
double torch_ms(const std::string& dir, const std::string& name) {
  const std::string script = std::string(HJIT_SOURCE_DIR) + "/tools/models/reference_models.py";
  const std::string cmd =
      "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp "
      "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824 "
      "/usr/bin/python3 '" + script + "' time '" + dir + "' " + name + " 2 2>/dev/null";
  return number_after(cmd, "steady_med_ms=");
}

std::string fmt(double v, const char* f) {
  if (v < 0) return "-";
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

std::vector<Tensor> read_set(const std::string& folder_path, const std::string& prefix) {
  const fs::path folder(folder_path);
  std::vector<Tensor> ts;
  for (int k = 0; fs::exists(folder / "test_data_set_0" / (prefix + std::to_string(k) + ".pb")); ++k)
    ts.push_back(hjit::onnx::read_tensor((folder / "test_data_set_0" / (prefix + std::to_string(k) + ".pb")).string()));
  return ts;
}

int model_child(const std::string& folder, bool quick) {
  try {
    auto t = Clock::now();
    const hjit::onnx::Model model = hjit::onnx::Model::read((fs::path(folder) / "model.onnx").string());
    const double read = ms_since(t);
    const std::vector<Tensor> in = read_set(folder, "input_"), want = read_set(folder, "output_");
    std::vector<hjit::TensorType> types;
    for (const Tensor& x : in) types.push_back({x.dtype(), x.shape()});
    t = Clock::now();
    hjit::Module m = model.module(types);
    const double convert = ms_since(t);
    t = Clock::now();
    const std::vector<Tensor> out = m.call(in);
    const double first = ms_since(t);
    double err = 0;
    for (size_t k = 0; k < want.size() && k < out.size(); ++k)
      err = std::max(err, relative_error(out[k].to_vector<float>(), want[k].to_vector<float>()));
    const double steady = steady_ms([&] { m.call(in); }, quick ? 1.0 : 3.0);
    std::printf("MODEL %.3f %.3f %.3f %.4f %.3e\n", read, convert, first, steady, err);
    return 0;
  } catch (const std::exception& e) {
    std::printf("failed: %s\n", e.what());
    return 1;
  }
}

int opencv_child(const std::string& folder, bool quick) {
#ifdef HJIT_BENCH_OPENCV
  try {
    cv::setNumThreads(2);
    auto t = Clock::now();
    cv::dnn::Net net = cv::dnn::readNetFromONNX((fs::path(folder) / "model.onnx").string());
    const double read = ms_since(t);
    const std::vector<Tensor> in = read_set(folder, "input_"), want = read_set(folder, "output_");
    if (in.size() != 1 || want.empty()) throw std::runtime_error("the OpenCV row takes models of one input");
    std::vector<int> dims(in[0].shape().begin(), in[0].shape().end());
    cv::Mat x(int(dims.size()), dims.data(), CV_32F, const_cast<void*>(in[0].data()));
    t = Clock::now();
    net.setInput(x);
    cv::Mat y = net.forward();
    const double first = ms_since(t);
    std::vector<float> got(y.ptr<float>(), y.ptr<float>() + y.total());
    const double err = relative_error(got, want[0].to_vector<float>());
    const double steady = steady_ms([&] { net.setInput(x), net.forward(); }, quick ? 1.0 : 3.0);
    std::printf("MODEL %.3f %.3f %.3f %.4f %.3e\n", read, 0.0, first, steady, err);
    return 0;
  } catch (const std::exception& e) {
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    std::printf("failed: %s\n", what.substr(0, 300).c_str());
    return 1;
  }
#else
  std::printf("failed: hjit-bench was built without OpenCV (Debian's libopencv-dnn-dev)\n");
  return 1;
#endif
}

int model_rows(const std::string& self, const std::string& dir, const std::string& only, bool quick) {
  std::vector<fs::path> folders;
  for (const auto& e : fs::directory_iterator(dir))
    if (fs::exists(e.path() / "model.onnx") && (only.empty() || ("," + only + ",").find("," + e.path().filename().string() + ",") != std::string::npos))
      folders.push_back(e.path());
  std::sort(folders.begin(), folders.end());
  std::printf("hjit-bench --models %s: batch as exported; cold = read + convert + first call (compile) in a fresh process\n"
              "with an empty compile cache, warm = the first call in a fresh process with that cache filled, steady = median\n"
              "per call; err = max |hjit - PyTorch| / max |PyTorch| (1e-3 passes); torch = tuned PyTorch, opencv = OpenCV\n"
              "DNN and ort = ONNX Runtime's CPU engine (bench/ort_peer.h; 2 threads), each in its own process, one after the\n"
              "other in this sitting; 'x' columns are their steady time over hjit's; ort 1st = its session creation and first\n"
              "run (cold and warm alike: it keeps nothing between processes).\n\n",
              dir.c_str());
  std::printf("%-26s %9s %9s %9s %10s %10s %9s %10s %7s %10s %7s %9s %9s %7s %11s\n", "model", "read ms", "convert", "cold s", "warm ms",
              "steady ms", "err", "torch ms", "x", "opencv ms", "x", "cv err", "ort ms", "x", "ort 1st ms");
  bool all_ok = true;
  for (const fs::path& folder : folders) {
    const std::string name = folder.filename().string();
    char cache[] = "/tmp/hjit_bench_models_XXXXXX";
    if (!mkdtemp(cache)) return 1;
    const std::string env = "HJIT_CACHE_DIR=" + std::string(cache) + " ";
    const std::string q = quick ? " --quick" : "";
    const Child cold = run(env + self + " --model-child '" + folder.string() + "'" + q);
    const Child warm = cold.ok ? run(env + self + " --model-child '" + folder.string() + "'" + q) : Child{};
    std::system(("rm -rf " + std::string(cache)).c_str());
    const Child cv = run(self + " --opencv-child '" + folder.string() + "'" + q);
    const OrtTimes ort_run = ort_times(folder.string(), 2);
    const double torch = torch_ms(dir, name), ort = ort_run.median_ms;
    if (!cold.ok) {
      std::printf("%-26s failed: %s\n", name.c_str(), cold.failure.c_str());
      all_ok = false;
      continue;
    }
    const double steady = warm.ok ? warm.steady : cold.steady;
    const bool matches = cold.err <= 1e-3;
    all_ok &= matches;
    std::printf("%-26s %9.1f %9.1f %9.2f %10s %10.2f %9.1e %10s %7s %10s %7s %9s %9s %7s %11s%s\n", name.c_str(), cold.read, cold.convert,
                (cold.read + cold.convert + cold.first) / 1e3, fmt(warm.ok ? warm.first : -1, "%.1f").c_str(), steady, cold.err,
                fmt(torch, "%.2f").c_str(), fmt(torch > 0 ? torch / steady : -1, "%.2fx").c_str(),
                fmt(cv.ok ? cv.steady : -1, "%.2f").c_str(), fmt(cv.ok ? cv.steady / steady : -1, "%.2fx").c_str(),
                cv.ok ? fmt(cv.err, "%.1e").c_str() : "-", fmt(ort, "%.2f").c_str(), fmt(ort > 0 ? ort / steady : -1, "%.2fx").c_str(),
                fmt(ort_run.first_call_ms(), "%.1f").c_str(), matches ? "" : "  (differs from PyTorch!)");
    if (!cv.ok) std::printf("%-26s   opencv: %s\n", "", cv.failure.c_str());
    std::fflush(stdout);
  }
  return all_ok ? 0 : 1;
}

}  // namespace bench

namespace bench {

namespace {

// The largest relative difference of b's outputs from a's, and how many of a classifier's rows
// (its first output, 2-D logits) have the same top class in both.
struct Agreement {
  double err = 0;
  int agree = 0, rows = 0;
};
Agreement agreement(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  Agreement g;
  for (size_t k = 0; k < a.size() && k < b.size(); ++k) {
    const std::vector<float> x = a[k].astype(hjit::DType::F32).to_vector<float>(), y = b[k].astype(hjit::DType::F32).to_vector<float>();
    g.err = std::max(g.err, relative_error(y, x));
    if (k == 0 && a[k].ndim() == 2) {
      const int64_t n = a[k].shape()[0], c = a[k].shape()[1];
      for (int64_t r = 0; r < n; ++r, ++g.rows) {
        auto top = [&](const std::vector<float>& v) { return std::max_element(v.begin() + r * c, v.begin() + (r + 1) * c) - v.begin(); };
        g.agree += top(x) == top(y);
      }
    }
  }
  return g;
}

// The model quantized by hjit::onnx::quantize, calibrated on the case's input and three random
// batches like it (a speed measure: the accuracy of a real calibration set is the digits and GPT
// examples' to show); loaded with its weights as constants, packed once while compiling (ONNX
// Runtime packs its weights when the session is made).
hjit::Module quantized_model(const std::string& model, const std::vector<Tensor>& in) {
  std::vector<std::vector<Tensor>> batches{in};
  for (uint64_t b = 1; b <= 3; ++b) {
    std::vector<Tensor> r;
    for (const Tensor& x : in) r.push_back(hjit::is_floating(x.dtype()) ? Tensor::randn(x.shape(), 77 * b).astype(x.dtype()) : x);
    batches.push_back(r);
  }
  char scratch[] = "/tmp/hjit_bench_int8_XXXXXX";
  if (!mkdtemp(scratch)) throw std::runtime_error("no scratch directory");
  const std::string quantized = std::string(scratch) + "/model_int8.onnx";
  hjit::onnx::quantize(model, quantized, batches);
  hjit::Module m = hjit::onnx::load(quantized, {.freeze = true});
  fs::remove_all(scratch);
  return m;
}

}  // namespace

int low_precision_child(const std::string& folder, const std::string& kind, bool quick) {
  try {
    const std::string model = (fs::path(folder) / "model.onnx").string();
    if (hjit::onnx::Model::read(model).info().op_counts.count("QuantizeLinear")) {
      std::printf("SKIP already int8 (QDQ): --models times it as it is\n");
      return 0;
    }
    const std::vector<Tensor> in = read_set(folder, "input_");
    auto t = Clock::now();
    const hjit::Module low = kind == "int8" ? quantized_model(model, in) : hjit::onnx::load(model, {.freeze = true, .autocast = hjit::DType::BF16});
    const double prepare_ms = kind == "int8" ? ms_since(t) : 0;
    const hjit::Module f32 = hjit::onnx::load(model, {.freeze = true});
    const Agreement g = agreement(f32.call(in), low.call(in));
    const std::vector<double> ms = interleaved_ms({[&] { f32.call(in); }, [&] { low.call(in); }}, 1, quick ? 2.0 : 6.0);
    std::printf("LOWP %.4f %.4f %.3e %d %d %.1f\n", ms[0], ms[1], g.err, g.agree, g.rows, prepare_ms);
    return 0;
  } catch (const std::exception& e) {
    std::printf("failed: %s\n", e.what());
    return 1;
  }
}

int low_precision_model_rows(const std::string& self, const std::string& dir, const std::string& kind, const std::string& only, bool quick) {
  if (kind == "int8")
    std::printf("hjit-bench --models %s --int8: each model quantized by hjit::onnx::quantize (QDQ, u8 activations per\n"
                "tensor, i8 weights per channel; calibrated on the case's input and 3 random batches), both it and the f32 model\n"
                "loaded with frozen weights and timed alternately in one process; err = max |int8 - f32| / max |f32|, top-1 =\n"
                "rows whose largest logit is the same class.\n\n", dir.c_str());
  else
    std::printf("hjit-bench --models %s --bf16: each model loaded with LoadOptions::autocast = bf16 (convolutions and\n"
                "products in bf16 with f32 sums, reductions and normalizations in f32) and as it is, both with frozen weights and\n"
                "timed alternately in one process; err = max |bf16 - f32| / max |f32|, top-1 = rows whose largest logit is the\n"
                "same class.\n\n", dir.c_str());
  std::printf("%-26s %10s %10s %8s %9s %8s %12s\n", "model", "f32 ms", (kind + " ms").c_str(), "x", "err", "top-1", kind == "int8" ? "quantize ms" : "");
  bool ok = true;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!fs::exists(e.path() / "model.onnx") || (!only.empty() && ("," + only + ",").find("," + name + ",") == std::string::npos)) continue;
    FILE* p = popen((self + " --low-precision-child " + kind + " '" + e.path().string() + "'" + (quick ? " --quick" : "") + " 2>&1").c_str(), "r");
    if (!p) return 1;
    char line[4096];
    double f = 0, q = 0, err = 0, prepare = 0;
    int agree = 0, rows = 0;
    bool got = false;
    std::string failure;
    while (std::fgets(line, sizeof line, p)) {
      if (std::sscanf(line, "LOWP %lf %lf %lf %d %d %lf", &f, &q, &err, &agree, &rows, &prepare) == 6) got = true;
      else failure = line;
    }
    pclose(p);
    if (failure.rfind("SKIP ", 0) == 0) {
      std::printf("%-26s %s", name.c_str(), failure.c_str() + 5);
      continue;
    }
    if (!got) {
      std::printf("%-26s failed: %s", name.c_str(), failure.c_str());
      ok = false;
      continue;
    }
    std::printf("%-26s %10.3f %10.3f %7.2fx %9.1e %8s %12s\n", name.c_str(), f, q, f / q, err,
                rows > 0 ? (std::to_string(agree) + "/" + std::to_string(rows)).c_str() : "-", kind == "int8" ? fmt(prepare, "%.0f").c_str() : "");
    std::fflush(stdout);
  }
  return ok ? 0 : 1;
}

}  // namespace bench
