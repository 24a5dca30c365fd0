// The differential harness: every op, compiled, against eager execution (the oracle), over shapes
// with broadcasting, size-1 and size-0 dimensions and 0-d scalars, and over dtypes.
//
// The configuration comes from HJIT_TEST_CONFIG: O0, O1 (default), Adams2019, Li2018 or
// Mullapudi2016; ctest runs this binary once per configuration. CUDA-O1 and CUDA-Li2018 compile
// every group for a CUDA GPU instead of running it, and assemble the PTX with ptxas for sm_80 and
// sm_90 (where no ptxas is found, the binary exits with 77: ctest reports the test skipped).
// OpenCL-O1 runs the GPU schedules: every group is exported for an OpenCL GPU target into a device
// bundle, whose runner (a process without Halide) runs them through pocl, a CPU OpenCL driver, and
// compares with eager (no OpenCL driver: skipped, 77). With HJIT_DEVICE_BUNDLE=dir, CUDA-O1 also
// writes such a bundle for CUDA, to be carried to a machine with a GPU. Ops are grouped: one jitted
// function returns every op of a group, so one compile checks a dozen ops.
//
// Adding an op: add it to the group whose inputs it takes (or a new group), nothing else.
#include <cstdlib>
#include <array>
#include <fstream>
#include <map>
#include <set>
#include <unistd.h>
#include <limits>
#include <random>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>

#include "bench/workloads.h"
#include "graph/op_def.h"
#include "support/settings.h"
#include "tests/device_bundle.h"
#include "tests/support.h"

using hjit::DType;
using hjit::Shape;
using hjit::Tensor;
using Group = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

namespace {

std::string config() {
  return *hjit::setting::text(hjit::setting::Id::TestConfig);
}

bool cuda() { return config().rfind("CUDA-", 0) == 0; }
bool opencl() { return config() == "OpenCL-O1"; }
// OpenCL-device: in this process, on device tensors: each group jitted for Device::OpenCL, and
// each group's ops run eagerly on the device (single-op device pipelines), against CPU eager.
bool on_device() { return config() == "OpenCL-device"; }
bool autoscheduled() {
  return config() != "O0" && config() != "O1" && config() != "CUDA-O1" && !opencl() && !on_device();
}
// Configurations whose cases cost seconds each (an autoscheduler's search; OpenCL's export and
// driver compile) run fewer dtypes and shapes.
bool reduced() { return autoscheduled() || opencl() || on_device(); }

// The bundle this run exports its groups into: OpenCL-O1's, or CUDA-O1's where HJIT_DEVICE_BUNDLE
// names a directory; null otherwise.
test::DeviceBundle* bundle() {
  static std::unique_ptr<test::DeviceBundle> b = []() -> std::unique_ptr<test::DeviceBundle> {
    const std::string bundle_dir = hjit::setting::text(hjit::setting::Id::DeviceBundle).value_or("");
    const char* dir = bundle_dir.empty() ? nullptr : bundle_dir.c_str();
    if (opencl())
      return std::make_unique<test::DeviceBundle>(dir ? dir : "device_bundle_opencl", "host-opencl-cl_doubles");
    if (config() == "CUDA-O1" && dir) return std::make_unique<test::DeviceBundle>(dir, "host-cuda-cuda_capability_80");
    return nullptr;
  }();
  return b.get();
}

hjit::JitOptions options(const std::string& name) {
  hjit::JitOptions o;
  o.name = name;
  std::string c = config();
  if (cuda()) o.device = hjit::Device::CUDA, c = c.substr(5);
  if (on_device()) o.device = hjit::Device::OpenCL, c = "O1";
  if (c == "O0") o.opt_level = 0;
  else if (c == "O1") o.opt_level = 1;
  else o.opt_level = 2, o.autoscheduler = c;
  return o;
}

std::string ptxas() {
  for (std::string p : {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"})
    if (access(p.c_str(), X_OK) == 0) return p;
  return "";
}

// The ops (with the dtypes of their values) whose PTX ptxas accepted.
std::set<std::pair<hjit::OpKind, DType>>& assembled() {
  static std::set<std::pair<hjit::OpKind, DType>> ops;
  return ops;
}

// CUDA configurations: `group` compiled for the GPU (not run), its PTX assembled for sm_80 and sm_90.
void check_ptx(const Group& group, const std::vector<Tensor>& inputs, const std::string& name) {
  std::vector<Tensor> want = group(inputs);
  int64_t elements = 0;
  for (const Tensor& t : want) elements += t.numel();
  auto jitted = hjit::jit(group, options(name));
  const std::string ptx = jitted.device_code(inputs);
  if (elements > 0) REQUIRE(ptx.find(".entry") != std::string::npos);
  if (ptx.empty()) return;
  // A pipeline compiled in parts gives one PTX module after another: each is assembled alone.
  std::vector<std::string> modules;
  for (size_t at = 0; at < ptx.size();) {
    size_t next = ptx.find(".version", ptx.find(".version", at) + 1);
    if (next != std::string::npos) next = ptx.rfind("//\n// Generated", next);
    if (next == std::string::npos || next <= at) next = ptx.size();
    modules.push_back(ptx.substr(at, next - at));
    at = next;
  }
  bool ok = true;
  for (const std::string& module : modules) {
    char path[] = "/tmp/hjit_test_ptx_XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    std::ofstream(path) << module;
    for (const char* arch : {"sm_80", "sm_90"}) {
      const std::string log = std::string(path) + ".log";
      const std::string cmd = ptxas() + " -arch=" + arch + " " + path + " -o /dev/null > " + log + " 2>&1";
      const int status = std::system(cmd.c_str());
      std::ifstream in(log);
      const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::remove(log.c_str());
      INFO("ptxas " << arch << " said: " << said);
      CHECK(status == 0);
      ok &= status == 0;
    }
    std::remove(path);
  }
  if (!ok) return;
  const hjit::Graph g = jitted.graph(inputs);
  for (const hjit::Node& n : g.nodes) assembled().insert({n.op, n.type.dtype});
}

// OpenCL-device: the group jitted for the device on device tensors, its results left there; and,
// for the first inputs each group gets, its ops run eagerly on the device.
void check_on_device(const std::string& name, const Group& group, const std::vector<Tensor>& inputs) {
  static std::set<std::string> eager_done;
  const std::vector<Tensor> want = group(inputs);
  std::vector<Tensor> on_gpu;
  for (const Tensor& t : inputs) on_gpu.push_back(t.to(hjit::Device::OpenCL));
  auto jitted = hjit::jit(group, options(name));
  std::vector<std::vector<Tensor>> runs{jitted(on_gpu)};
  if (eager_done.insert(name).second) runs.push_back(group(on_gpu));
  for (size_t r = 0; r < runs.size(); ++r) {
    REQUIRE(runs[r].size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("output " << i << std::string(r == 0 ? " (jitted)" : " (eager on the device)"));
      CHECK(runs[r][i].device() == hjit::Device::OpenCL);
      CHECK_CLOSE(runs[r][i], want[i]);
    }
  }
}

// make test (CI) runs every case in O1, the configuration users get, and in the others (the
// unfused lowering, the autoschedulers, the GPU targets) every other case of a group and dtype
// signature, the first always: every op still meets every dtype there, in half the time. CUDA's
// (code generation and ptxas only, the longest configuration) every fourth. On the OpenCL device
// (pocl compiling each kernel, the longest configuration of make test) the first case of each
// group: OpenCL-O1's export meets every dtype signature.
// make test-full (HJIT_TEST_FULL=1) runs every case everywhere.
bool sampled_out(const std::string& group, const std::string& dtypes) {
  static const bool full = hjit::setting::flag(hjit::setting::Id::TestFull);
  if (full || config() == "O1") return false;
  static std::map<std::string, int> seen;
  const int k = seen[on_device() ? group : group + dtypes]++;
  return on_device() ? k > 0 : k % (cuda() ? 4 : 2) != 0;
}

// Runs `group` eagerly and compiled (twice: the second call is a cache hit) and compares.
void check(const std::string& name, const Group& group, const std::vector<Tensor>& inputs) {
  std::string shapes;
  for (const Tensor& t : inputs) shapes += std::string(hjit::dtype_name(t.dtype())) + hjit::shape_str(t.shape()) + " ";
  INFO(name << " on " << shapes << "with " << config());
  // OpenCL-O1 checks the exported path (library, runner) with each group once per dtype signature:
  // every shape runs on the device in process in OpenCL-device. CUDA's bundle keeps every case.
  static std::set<std::string> exported;
  std::string dtypes;
  for (const Tensor& t : inputs) dtypes += std::string(" ") + hjit::dtype_name(t.dtype());
  if (sampled_out(name, dtypes)) return;
  if (bundle() && (!opencl() || exported.insert(name + dtypes).second))
    bundle()->add(name + "_" + std::to_string(bundle()->size()), group, inputs);
  if (cuda()) return check_ptx(group, inputs, name);
  if (on_device()) return check_on_device(name, group, inputs);
  if (opencl()) return;  // run at the end, all groups in one process
  std::vector<Tensor> want = group(inputs);
  auto jitted = hjit::jit(group, options(name));
  for (int call = 0; call < 2; ++call) {
    std::vector<Tensor> got = jitted(inputs);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("output " << i << " (call " << call << ")");
      CHECK_CLOSE(got[i], want[i]);
    }
  }
  CHECK(jitted.stats().traces == 1);
  CHECK(jitted.stats().cache_hits == 1);
}

const std::vector<Shape> kUnaryShapes = {{}, {1}, {7}, {3, 1, 5}, {0, 4}, {33, 17}, {4, 1030}};
const std::vector<std::pair<Shape, Shape>> kBinaryShapes = {
    {{3, 4}, {3, 4}}, {{2, 3, 4}, {4}}, {{1, 5}, {4, 1}}, {{}, {3}}, {{0, 3}, {1, 3}}, {{7}, {1}}, {{2, 1, 3}, {1, 4, 1}}, {{40, 70}, {70}}};

// Autoschedulers compile slowly: they get the shapes that exercise the most (broadcasting, size 1, odd sizes).
template <class T>
std::vector<T> shapes_for_config(const std::vector<T>& all) {
  if (!reduced() && !cuda()) return all;
  return {all[1], all[2], all.back()};
}

Group unary_float() {
  return [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    Tensor pos = hjit::abs(x) + 0.1;
    return std::vector<Tensor>{-x, hjit::abs(x), hjit::sign(x), hjit::relu(x), hjit::floor(x * 4), hjit::ceil(x * 4),
                               hjit::round(x * 4), hjit::exp(x), hjit::log(pos), hjit::log1p(hjit::abs(x)), hjit::sqrt(pos),
                               hjit::rsqrt(pos), hjit::sin(x), hjit::cos(x), hjit::tanh(x), hjit::sigmoid(x), hjit::erf(x),
                               hjit::gelu(x), hjit::gelu(x, true), hjit::hardswish(x * 4), hjit::atan(x * 4), hjit::asin(x), hjit::acos(x), hjit::clamp(x, -0.5, 0.5), x * x, 2.0 - x,
                               1.0 / pos, hjit::pow(pos, 1.5), x.astype(DType::I32), x > 0.25};
  };
}

Group unary_int() {
  return [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    return std::vector<Tensor>{-x, hjit::abs(x), hjit::sign(x), hjit::relu(x), x * 2 + 1, hjit::maximum(x, 0),
                               x > 0, x == 3, x.astype(DType::F32), hjit::exp(x), x / 2};
  };
}

Group unary_bool() {
  return [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    return std::vector<Tensor>{!x, x.astype(DType::I32), x.astype(DType::F32), hjit::where(x, 1.5, -2.0), x == true,
                               hjit::sum(x)};
  };
}

Group binary_numeric() {
  return [](const std::vector<Tensor>& in) {
    const Tensor &a = in[0], &b = in[1];
    return std::vector<Tensor>{a + b, a - b, a * b, hjit::maximum(a, b), hjit::minimum(a, b), a == b, a != b,
                               a < b, a <= b, a > b, a >= b, hjit::where(a > b, a, b), a * 3 - b};
  };
}

Group binary_float() {
  return [](const std::vector<Tensor>& in) {
    const Tensor &a = in[0], &b = in[1];
    Tensor pos = hjit::abs(a) + 0.5;
    return std::vector<Tensor>{a / (hjit::abs(b) + 0.5), hjit::pow(pos, b), hjit::where(a > 0, hjit::exp(a), b * 2)};
  };
}

// A comparison with a literal compiles to a range test on the bits (ieee::compare_with_literal):
// every operator, literals of each sign, zeros of both signs, a subnormal, both orientations.
Group literal_comparisons() {
  return [](const std::vector<Tensor>& in) {
    const Tensor& a = in[0];
    std::vector<Tensor> out;
    for (double c : {0.0, -0.0, 1.5, -2.5, 88.5, 1e-40, -1e-40, 6e4}) {
      Tensor lit = Tensor::scalar(c, a.dtype());
      for (Tensor t : {a == c, a != c, a < c, a <= c, a > c, a >= c, lit < a, lit <= a, lit > a, lit >= a}) out.push_back(t);
    }
    return out;
  };
}

Group binary_bool() {
  return [](const std::vector<Tensor>& in) {
    const Tensor &a = in[0], &b = in[1];
    return std::vector<Tensor>{a && b, a || b, a == b, a != b, hjit::where(a, b, !b), hjit::maximum(a, b), hjit::minimum(a, b)};
  };
}

// Mixed dtypes: the op API inserts the conversions (PyTorch promotion).
Group promotion() {
  return [](const std::vector<Tensor>& in) {
    const Tensor &i = in[0], &f = in[1];
    return std::vector<Tensor>{i + f, i * 2.5, f * 2, i > f, hjit::where(i > 0, i, f), i / 2, i.astype(DType::F64) - f};
  };
}

Group casts() {
  return [](const std::vector<Tensor>& in) {
    std::vector<Tensor> out;
    for (int t = 0; t < hjit::kNumDTypes; ++t) out.push_back(in[0].astype(DType(t)));
    return out;
  };
}

Group reductions(int rank, bool floating, bool empty) {
  return [=](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    std::vector<std::vector<int>> axes_sets = {{}};
    if (rank >= 1) axes_sets.push_back({0}), axes_sets.push_back({-1});
    if (rank >= 2) axes_sets.push_back({0, -1});
    if (rank >= 3) axes_sets.push_back({1});
    std::vector<Tensor> out;
    for (const auto& axes : axes_sets)
      for (bool keep : {false, true}) {
        out.push_back(hjit::sum(x, axes, keep));
        if (floating) out.push_back(hjit::mean(x, axes, keep));
        if (!keep) out.push_back(hjit::numel(x, axes, floating ? x.dtype() : DType::I64));
        if (!empty) out.push_back(hjit::max(x, axes, keep)), out.push_back(hjit::min(x, axes, keep));
      }
    if (!empty && x.dtype() != DType::Bool)
      for (int axis = 0; axis < std::max(rank, 1); ++axis)  // a 0-d tensor has axis 0 (and -1) for argmax
        for (bool keep : {false, true}) out.push_back(hjit::argmax(x, axis, keep)), out.push_back(hjit::argmin(x, axis, keep));
    if (rank == 0 && x.dtype() != DType::Bool) out.push_back(hjit::argmax(x, -1)), out.push_back(hjit::cumsum(x));
    return out;
  };
}

Group movement() {
  return [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];  // [2, 3, 4]
    return std::vector<Tensor>{
        x.reshape({4, 6}), x.reshape({-1}), x.reshape({2, -1, 2}), x.reshape({1, 24, 1}), x.transpose(),
        x.transpose({1, 0, 2}), hjit::broadcast_to(x, {5, 2, 3, 4}), hjit::unsqueeze(x, 1), hjit::squeeze(hjit::unsqueeze(x, 0)),
        hjit::slice(x, 2, 1, std::nullopt), hjit::slice(x, -1, std::nullopt, std::nullopt, 2), hjit::slice(x, 1, -2, 3),
        hjit::slice(x, 0, 5, 10), hjit::slice(x, 2, -100, 100, 3), hjit::concat({x, x * 2}, 1),
        hjit::concat({x, hjit::slice(x, 2, 0, 1), x}, 2), hjit::stack({x, x + 1}, 0), hjit::stack({x, x}, -1),
        hjit::pad(x, {{1, 0}, {0, 2}, {1, 1}}, 1.5), x.transpose({2, 0, 1}).reshape({4, 6}) + 1,
        hjit::maximum(hjit::broadcast_to(hjit::slice(x, 1, 0, 1), {2, 3, 4}), x)};
  };
}

Group matmuls() {
  return [](const std::vector<Tensor>& in) { return std::vector<Tensor>{hjit::matmul(in[0], in[1])}; };
}

Group nn() {
  return [](const std::vector<Tensor>& in) {
    const Tensor &x = in[0], &w = in[1], &b = in[2];
    return std::vector<Tensor>{hjit::softmax(x), hjit::softmax(x, 0), hjit::log_softmax(x), hjit::layer_norm(x, w, b),
                               hjit::layer_norm(x, std::nullopt, std::nullopt, 1e-3)};
  };
}

std::vector<DType> float_dtypes() {
  if (reduced()) return {DType::F32};
  return {DType::F32, DType::F64, DType::F16, DType::BF16};
}

}  // namespace

TEST_CASE("CUDA configurations have ptxas to check their PTX with") {
  if (cuda() && ptxas().empty()) {
    MESSAGE("no ptxas (/usr/local/cuda/bin/ptxas or /usr/bin/ptxas): the CUDA configuration is skipped");
    std::exit(77);  // ctest: SKIP_RETURN_CODE
  }
  if ((opencl() || on_device()) && test::opencl_loader().empty()) {
    MESSAGE("no OpenCL driver (libOpenCL.so.1 and an ICD in /etc/OpenCL/vendors): the OpenCL configuration is skipped");
    std::exit(77);
  }
  std::string why;
  if (on_device() && !hjit::device_available(hjit::Device::OpenCL, &why)) {
    MESSAGE("OpenCL is not usable in this process (" << why << "): the configuration is skipped");
    std::exit(77);
  }
}

TEST_CASE("unary ops on floats") {
  uint64_t seed = 1;
  for (DType t : float_dtypes())
    for (const Shape& s : shapes_for_config(kUnaryShapes)) check("unary_float", unary_float(), {test::random(s, t, seed++)});
}

TEST_CASE("unary ops on integers and bool") {
  uint64_t seed = 100;
  std::vector<DType> ints = reduced() ? std::vector<DType>{DType::I32} : std::vector<DType>{DType::I8, DType::I16, DType::I32, DType::I64, DType::U8};
  for (DType t : ints)
    for (const Shape& s : shapes_for_config(kUnaryShapes)) check("unary_int", unary_int(), {test::random(s, t, seed++)});
  for (const Shape& s : shapes_for_config(kUnaryShapes)) check("unary_bool", unary_bool(), {test::random(s, DType::Bool, seed++)});
}

TEST_CASE("binary ops with broadcasting") {
  uint64_t seed = 200;
  std::vector<DType> numeric = reduced() ? std::vector<DType>{DType::F32, DType::I32}
                                               : std::vector<DType>{DType::F32, DType::F64, DType::I8, DType::I32, DType::I64, DType::U8, DType::F16, DType::BF16};
  for (const auto& [sa, sb] : shapes_for_config(kBinaryShapes)) {
    for (DType t : numeric) check("binary_numeric", binary_numeric(), {test::random(sa, t, seed++), test::random(sb, t, seed++)});
    for (DType t : float_dtypes()) check("binary_float", binary_float(), {test::random(sa, t, seed++), test::random(sb, t, seed++)});
    check("binary_bool", binary_bool(), {test::random(sa, DType::Bool, seed++), test::random(sb, DType::Bool, seed++)});
    check("promotion", promotion(), {test::random(sa, DType::I32, seed++), test::random(sb, DType::F32, seed++)});
  }
}

TEST_CASE("casts between every pair of dtypes") {
  uint64_t seed = 300;
  std::vector<DType> sources = reduced() ? std::vector<DType>{DType::F32}
                                               : std::vector<DType>{DType::Bool, DType::I8, DType::I32, DType::I64, DType::U8,
                                                                    DType::U16, DType::F16, DType::BF16, DType::F32, DType::F64};
  for (DType t : sources) {
    Tensor x = test::random({3, 5}, t, seed++);
    if (hjit::is_floating(t)) x = hjit::clamp(x * 3, -7.0, 7.0);  // in range of every integer type after truncation
    if (t == DType::F32 || t == DType::F64) x = hjit::abs(x);      // float -> unsigned of a negative value is undefined in C++
    check("casts", casts(), {x});
  }
}

// A float the graph shows finite and within an integer type's range converts without tests
// (graph/value_range.h); one that may leave it keeps PyTorch's conversion (truncated to i32, the
// lowest value out of range, wrapped): the same answers either way.
// Scores dequantized from u8 are finite, so their softmax is known within [0, 1]: its row maximum,
// exponential and requantization leave out their NaN tests. With a scale of 2 most exponentials
// underflow to 0.
TEST_CASE("a quantized softmax is eager's: scores from u8, probabilities requantized to u8") {
  for (const double scale : {0.05, 2.0}) {
    const Group group = [scale](const std::vector<Tensor>& in) {
      const Tensor scores = (hjit::astype(in[0], DType::F32) - 125.0) * scale;
      const Tensor p = hjit::softmax(scores, 1);
      const Tensor q = hjit::clamp(hjit::round(p / (1.0 / 255)), 0.0, 255.0);
      return std::vector<Tensor>{hjit::astype(q, DType::U8), hjit::max(scores, {1}, true)};
    };
    std::vector<uint8_t> bytes(8 * 130);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t((i * 37 + i / 130 * 11) % 256);
    check(scale < 1 ? "quantized_softmax" : "quantized_softmax_underflow", group, {Tensor::from_vector(bytes, {8, 130})});
  }
}

TEST_CASE("float to integer conversions: requantized values known in range, and values that may leave it") {
  const Group group = [](const std::vector<Tensor>& in) {
    const Tensor x = hjit::astype(in[0], DType::F32), big = hjit::astype(in[1], DType::F32);
    // (No product feeds a sum before the rounding: compiled code may contract one into an FMA,
    // which moves a value that rounds half-way to the other side.)
    const Tensor requantized = hjit::clamp(hjit::round((x + 0.3) * 1.7) - 17.0, 0.0, 255.0);
    return std::vector<Tensor>{
        hjit::astype(requantized, DType::U8),                                         // within [0, 255]
        hjit::astype(hjit::clamp(hjit::round(x / 3.0) - 40.0, -128.0, 127.0), DType::I8),  // within [-128, 127]
        hjit::astype(x * 2.0, DType::U8),                    // up to 510: wraps
        hjit::astype(x - 300.0, DType::U16),                 // negative: wraps
        hjit::astype(big, DType::I32),                       // 2^31 - 1 is 2^31 in f32: out of range
        hjit::astype(hjit::clamp(x * 0.5, 1.0, 100.0) / hjit::clamp(x, -3.0, 0.0), DType::I16)};  // x / 0: inf
  };
  std::vector<uint8_t> bytes(256);
  for (int i = 0; i < 256; ++i) bytes[size_t(i)] = uint8_t(i);
  const Tensor all = Tensor::from_vector(bytes, {16, 16});
  const Tensor extremes = Tensor::from_vector(std::vector<int32_t>{2147483647, -2147483647 - 1, 16777217, -5, 0, 1 << 30});
  check("float_to_int_ranges", group, {all, extremes});
}

TEST_CASE("reductions over every axis set, with and without keepdims") {
  uint64_t seed = 400;
  // Rows of 70 and 1030 (odd: a tail after every split) take the GPU's block-per-row reductions.
  const std::vector<Shape> shapes = reduced() ? std::vector<Shape>{{4, 6}, {2, 3, 5}, {3, 1030}}
                                              : std::vector<Shape>{{}, {5}, {4, 6}, {2, 3, 5}, {1, 7}, {3, 0}, {64, 200}, {2, 3, 1030}};
  std::vector<DType> dtypes = reduced() ? std::vector<DType>{DType::F32}
                                              : std::vector<DType>{DType::F32, DType::F64, DType::I32, DType::I64, DType::I8, DType::U8, DType::Bool, DType::F16, DType::BF16};
  for (DType t : dtypes)
    for (const Shape& s : shapes) {
      bool empty = hjit::shape_numel(s) == 0;
      check("reductions", reductions(int(s.size()), hjit::is_floating(t), empty), {test::random(s, t, seed++)});
    }
}

// Rows of 64 elements or more are searched in 16 interleaved lanes (halide_backend's arg_reduce):
// the first extreme must come out whichever lane and step holds it, the row's tail included.
TEST_CASE("argmax and argmin along long rows: ties across lanes, NaNs, the tail") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const Group extremes = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{hjit::argmax(in[0], -1), hjit::argmin(in[0], -1, true), hjit::argmax(in[0], 0)};
  };
  for (int64_t n : reduced() ? std::vector<int64_t>{64, 1030} : std::vector<int64_t>{64, 65, 79, 80, 200, 1030}) {
    // Each row a case: ties of the extreme in several lanes, at different steps; all equal;
    // infinities only; a NaN in a late lane, then an earlier NaN at a later step; a NaN only in
    // the tail; -0 before +0; the extreme in the last element.
    std::vector<double> v;
    auto row = [&](auto value) {
      for (int64_t i = 0; i < n; ++i) v.push_back(value(i));
    };
    row([](int64_t i) { return double((i * 37) % 11); });
    row([](int64_t) { return 0.0; });
    row([&](int64_t i) { return i % 3 ? -inf : inf; });
    row([&](int64_t) { return -inf; });
    row([&](int64_t i) { return i == 15 + 16 || i == 2 + 48 ? nan : double(i % 7); });
    row([&](int64_t i) { return i == n - 1 ? nan : -double(i % 5); });
    row([&](int64_t i) { return i == 20 ? -0.0 : i == 21 ? 0.0 : -1.0; });
    row([&](int64_t i) { return i == n - 1 ? 9.0 : double(i % 4); });
    const int64_t rows = int64_t(v.size()) / n;
    for (DType t : reduced() ? std::vector<DType>{DType::F32} : std::vector<DType>{DType::F32, DType::F64, DType::F16})
      check("argmax_long_rows", extremes, {Tensor::from_vector(v, {rows, n}).astype(t)});
    if (reduced()) continue;
    // Integers: many ties (a few distinct values), and the type's lowest everywhere.
    std::vector<int64_t> ints(size_t(rows * n));
    for (size_t i = 0; i < ints.size(); ++i) ints[i] = i < size_t(n) ? INT64_MIN : int64_t((i * 2654435761u) % 5) - 2;
    for (DType t : {DType::I64, DType::I8, DType::U8})
      check("argmax_long_rows", extremes, {Tensor::from_vector(ints, {rows, n}).astype(t)});
  }
}

TEST_CASE("matmul with numpy semantics") {
  uint64_t seed = 500;
  std::vector<std::pair<Shape, Shape>> shapes = {{{3, 4}, {4, 5}},       {{4}, {4, 3}},          {{2, 4}, {4}},
                                                 {{4}, {4}},             {{2, 3, 4}, {4, 5}},    {{2, 1, 3, 4}, {5, 4, 2}},
                                                 {{1, 1}, {1, 1}},       {{3, 0}, {0, 4}},       {{17, 33}, {33, 40}},
                                                 {{65, 70}, {70, 35}},   {{2, 130, 20}, {20, 9}},
                                                 // whole 64x16 tiles: the GPU's register-blocked matmul
                                                 {{64, 48}, {48, 128}},  {{2, 32, 24}, {24, 64}}};
  if (reduced()) shapes = {{{2, 3, 4}, {4, 5}}, {{17, 33}, {33, 40}}, {{65, 70}, {70, 35}}, {{2, 32, 24}, {24, 64}}};
  std::vector<DType> dtypes = reduced() ? std::vector<DType>{DType::F32} : std::vector<DType>{DType::F32, DType::F64, DType::I32};
  for (DType t : dtypes)
    for (const auto& [sa, sb] : shapes) check("matmul", matmuls(), {test::random(sa, t, seed++), test::random(sb, t, seed++)});
  if (!autoscheduled())
    for (DType t : {DType::F16, DType::BF16, DType::I64, DType::I8})
      check("matmul", matmuls(), {test::random({9, 20}, t, seed++), test::random({20, 6}, t, seed++)});
}

// 8-bit contractions into exact i32 sums (docs/low-precision.md): every pair of signedness, a
// contraction of a length not a multiple of 4, broadcast batches, and convolutions with a zero
// point, strides and padding (grouped ones compute in i32).
TEST_CASE("int_matmul and int_conv2d: exact integer sums") {
  uint64_t seed = 560;
  const Group mm = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{hjit::int_matmul(in[0], in[1])}; };
  for (DType ta : {DType::U8, DType::I8})
    for (DType tb : {DType::I8, DType::U8}) {
      check("int_matmul", mm, {test::random({7, 10}, ta, seed++), test::random({10, 33}, tb, seed++)});
      if (!reduced()) check("int_matmul", mm, {test::random({2, 3, 16}, ta, seed++), test::random({16, 20}, tb, seed++)});
    }
  // (With a depthwise convolution of i8 weights: int_depthwise2d, a 5x5 kernel's rows in two fours.)
  const Group conv = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{hjit::int_conv2d(in[0], in[1], in[2], {1, 1}, {1, 1}), hjit::int_conv2d(in[0], in[1], in[2], {2, 2}, {0, 0}),
                               hjit::int_conv2d(in[0], in[3], in[2], {2, 1}, {2, 2}, {1, 1}, 6)};
  };
  for (DType tx : {DType::U8, DType::I8})
    check("int_conv2d", conv, {test::random({2, 6, 9, 8}, tx, seed++), test::random({20, 6, 3, 3}, DType::I8, seed++), Tensor::scalar(3, tx),
                                test::random({6, 1, 5, 5}, DType::I8, seed++)});
}

TEST_CASE("data movement: reshape, transpose, broadcast, slice, concat, stack, pad") {
  uint64_t seed = 600;
  for (DType t : reduced() ? std::vector<DType>{DType::F32} : std::vector<DType>{DType::F32, DType::I64, DType::Bool, DType::F16})
    check("movement", movement(), {test::random({2, 3, 4}, t, seed++)});
}

TEST_CASE("softmax, log_softmax and layer_norm") {
  uint64_t seed = 700;
  const std::vector<Shape> shapes =
      reduced() ? std::vector<Shape>{{8, 33}, {4, 1030}} : std::vector<Shape>{{5}, {8, 33}, {2, 3, 70}, {1, 1}, {3, 4100}};
  for (DType t : float_dtypes())
    for (const Shape& s : shapes)
      check("nn", nn(), {test::random(s, t, seed++), test::random({s.back()}, t, seed++), test::random({s.back()}, t, seed++)});
}

namespace {

struct ConvCase {
  Shape x, w;
  hjit::Pair stride, padding, dilation;
  int64_t groups;
  bool bias;
};

Group conv(const ConvCase& c) {
  return [c](const std::vector<Tensor>& in) {
    std::optional<Tensor> bias;
    if (c.bias) bias = in[2];
    Tensor y = hjit::conv2d(in[0], in[1], bias, c.stride, c.padding, c.dilation, c.groups);
    return std::vector<Tensor>{y, hjit::relu(y * 0.5 + 1)};
  };
}

Group pools() {
  return [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    return std::vector<Tensor>{hjit::max_pool2d(x, {2, 2}),
                               hjit::max_pool2d(x, {3, 3}, {2, 2}, {1, 1}),
                               hjit::max_pool2d(x, {3, 2}, {1, 1}, {1, 0}),
                               hjit::avg_pool2d(x, {2, 2}),
                               hjit::avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}),
                               hjit::avg_pool2d(x, {3, 3}, {2, 1}, {1, 1}, false),
                               hjit::adaptive_avg_pool2d(x, {1, 1})};
  };
}

Group norms() {
  return [](const std::vector<Tensor>& in) {
    const Tensor &x = in[0], &g = in[1], &b = in[2], &rm = in[3], &rv = in[4];
    hjit::BatchNormResult train = hjit::batch_norm_stats(x, g, b);
    return std::vector<Tensor>{hjit::batch_norm(x, rm, hjit::abs(rv) + 0.1, g, b), train.y, train.mean, train.var,
                               hjit::rms_norm(x.transpose({0, 2, 3, 1}), hjit::abs(b.reshape({-1})) + 1),
                               hjit::silu(x), hjit::gelu(x)};
  };
}

Group scans_and_gathers() {
  return [](const std::vector<Tensor>& in) {
    const Tensor &x = in[0], &ids = in[1];  // x [5, 7], ids i32/i64 [2, 3] in [-5, 5)
    return std::vector<Tensor>{hjit::cumsum(x), hjit::cumsum(x, 0), hjit::take(x, ids, 0), hjit::take(x, ids.reshape({-1}), 1),
                               hjit::embedding(x, hjit::minimum(hjit::abs(ids), 4)), hjit::tril(x), hjit::triu(x, 1), hjit::tril(x, -2),
                               x + hjit::iota({5, 7}, 0) * 0.5, hjit::cumsum(ids), hjit::argsort(x), hjit::argsort(x, 0, true),
                               hjit::sort(x).first * 2.0, hjit::argsort(ids, 0)};
  };
}

// 0-d indices select without adding an axis; 0-d tables are errors (checked in test_errors).
Group scalar_index_gathers() {
  return [](const std::vector<Tensor>& in) {
    const Tensor &x = in[0], &i = in[1];  // x [5, 7], i a 0-d index
    return std::vector<Tensor>{hjit::take(x, i, 0), hjit::take(x, i, 1), hjit::embedding(x, hjit::abs(i)), hjit::take(x.reshape({-1}), i)};
  };
}

// Gradients: the ops only gradient rules make (conv2d_weight_grad, flip, max_pool2d_grad,
// slice_update) compiled like every other op.
Group gradients() {
  return [](const std::vector<Tensor>& in) {
    auto loss = [](const Tensor& x, const Tensor& w) {
      Tensor y = hjit::conv2d(x, w, std::nullopt, {1, 1}, {1, 1});
      y = hjit::slice_update(y, hjit::slice(y, 3, 0, 2) * 2.0, 3, 2, 4);
      Tensor p = hjit::slice(hjit::max_pool2d(y, {2, 2}), 3, 1, std::nullopt);
      return hjit::sum(p * p);
    };
    return hjit::grad(loss, std::vector<int>{0, 1})(in[0], in[1]);
  };
}

// Counter-based random draws from a traced key: bit-exact against eager (the bits, the uniform
// floats and dropout's mask), the normal within tolerance.
Group random_draws() {
  return [](const std::vector<Tensor>& in) {
    const Tensor &key = in[0], &x = in[1];
    auto [k1, k2] = hjit::random::split(key);
    return std::vector<Tensor>{hjit::random::bits(key, x.shape()), hjit::random::uniform(k1, x.shape(), x.dtype()),
                               hjit::random::normal(k2, x.shape(), x.dtype()), hjit::dropout(key, x, 0.3),
                               hjit::random::bits(k2, {})};
  };
}

// Control flow: a cond on a reduction, a fori_loop (a scan with an integer carry), a scan over
// the elements with a y per step and a checkpointed function; branches and bodies are pipelines
// of their own.
Group control_flow() {
  return [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    using hjit::Tensors;
    Tensor c = hjit::cond(hjit::sum(x) > 0.0, [](const Tensor& v) { return hjit::exp(v) * 2.0; },
                          [](const Tensor& v) { return v - 1.0; }, x);
    Tensor l = hjit::fori_loop(0, 3, [](const Tensor& i, const Tensor& a) { return hjit::tanh(a) + i.astype(a.dtype()); }, x);
    hjit::ScanResult s = hjit::scan([](const Tensors& carry, const Tensors& e) {
      Tensor next = carry[0] * 0.5 + e[0];
      return std::pair<Tensors, Tensors>{{next}, {next * next}};
    }, {Tensor::zeros({}, x.dtype())}, {x.reshape({-1})});
    Tensor k = hjit::checkpoint([](const Tensor& v) { return hjit::sigmoid(v) * v + 1.0; })(x);
    return std::vector<Tensor>{c, l, s.carries[0], s.ys[0], k};
  };
}

// Collectives in a world of one process (tests/test_distributed.cpp runs them on two ranks): host
// steps between the pipelines before and after them, every shape and dtype.
Group collectives() {
  return [](const std::vector<Tensor>& in) {
    namespace dist = hjit::dist;
    const Tensor& x = in[0];
    std::vector<Tensor> out = {dist::all_reduce(x + x, dist::ReduceOp::Max) * x, dist::broadcast(x * x, 0) - x,
                               dist::reduce(x, dist::ReduceOp::Sum, 0)};
    if (x.ndim() > 0) out.push_back(dist::reduce_scatter(dist::all_gather(x + x, x.ndim() - 1), 0) + x);
    return out;
  };
}

Group losses() {
  return [](const std::vector<Tensor>& in) { return std::vector<Tensor>{hjit::cross_entropy(in[0], in[1])}; };
}

Group attention(bool causal, std::optional<double> scale = std::nullopt) {
  return [causal, scale](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{hjit::scaled_dot_product_attention(in[0], in[1], in[2], causal, scale)};
  };
}

}  // namespace

TEST_CASE("conv2d: strides, paddings, dilations, groups, bias, odd sizes") {
  uint64_t seed = 800;
  std::vector<ConvCase> cases = {
      {{1, 3, 7, 9}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},
      {{2, 4, 8, 8}, {6, 2, 3, 2}, {2, 2}, {1, 0}, {1, 1}, 2, false},
      {{1, 4, 9, 7}, {4, 1, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 4, true},   // depthwise, dilated
      {{2, 3, 5, 5}, {5, 3, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, false},  // 1x1
      {{1, 8, 17, 20}, {16, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true}, // tiles with tails
      {{1, 2, 4, 4}, {3, 2, 5, 5}, {1, 1}, {2, 2}, {1, 1}, 1, false},   // kernel larger than the input
      {{3, 16, 6, 33}, {32, 16, 3, 3}, {1, 2}, {1, 1}, {1, 1}, 1, true},
      {{2, 8, 8, 16}, {32, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true}};  // whole GPU register tiles
  if (reduced()) cases = {cases[0], cases[1], cases[4], cases[7]};
  for (const ConvCase& c : cases)
    for (DType t : reduced() ? std::vector<DType>{DType::F32} : std::vector<DType>{DType::F32, DType::F64}) {
      std::vector<Tensor> in = {test::random(c.x, t, seed++), test::random(c.w, t, seed++) * 0.3};
      if (c.bias) in.push_back(test::random({c.w[0]}, t, seed++));
      check("conv2d", conv(c), in);
    }
}

TEST_CASE("pooling, normalization and activations") {
  uint64_t seed = 900;
  for (DType t : float_dtypes()) {
    if (t == DType::F16 || t == DType::BF16) continue;  // covered by the elementwise groups
    check("pools", pools(), {test::random({2, 3, 9, 8}, t, seed++)});
    check("pools", pools(), {test::random({1, 2, 4, 5}, t, seed++)});
    check("norms", norms(),
          {test::random({2, 3, 4, 5}, t, seed++), test::random({3}, t, seed++), test::random({3}, t, seed++),
           test::random({3}, t, seed++), test::random({3}, t, seed++)});
  }
  check("pools", [](const std::vector<Tensor>& in) { return std::vector<Tensor>{hjit::max_pool2d(in[0], {2, 2}, {1, 1})}; },
        {test::random({2, 6, 6}, DType::I32, seed++)});
}

TEST_CASE("cumsum, take, embedding, tril/triu, iota, sort, cross_entropy") {
  uint64_t seed = 1000;
  for (DType idx : {DType::I32, DType::I64}) {
    Tensor ids = hjit::clamp(test::random({2, 3}, DType::I64, seed++), -5.0, 4.0).astype(idx);
    for (DType t : reduced() ? std::vector<DType>{DType::F32} : std::vector<DType>{DType::F32, DType::F64, DType::I32})
      check("scans_and_gathers", scans_and_gathers(), {test::random({5, 7}, t, seed++), ids});
    Tensor labels = hjit::abs(test::random({6}, idx, seed++));
    check("cross_entropy", losses(), {test::random({6, 11}, DType::F32, seed++), labels});
  }
}

TEST_CASE("random draws from a traced key") {
  uint64_t seed = 1200;
  for (DType t : reduced() ? std::vector<DType>{DType::F32} : std::vector<DType>{DType::F32, DType::F64})
    for (Shape s : {Shape{5, 33}, Shape{1}})
      check("random_draws", random_draws(), {hjit::random::key(seed++), test::random(s, t, seed++)});
}

TEST_CASE("control flow: cond, fori_loop and scan, their bodies compiled") {
  if (bundle()) return;  // an exported library is one pipeline: control flow does not export
  uint64_t seed = 1400;
  for (DType t : reduced() ? std::vector<DType>{DType::F32} : std::vector<DType>{DType::F32, DType::F64})
    for (const Shape& s : shapes_for_config(kUnaryShapes)) {
      check("control_flow", control_flow(), {test::random(s, t, seed++)});
      check("control_flow", control_flow(), {test::random(s, t, seed++) - 5.0});  // the other branch
    }
}

TEST_CASE("collectives in a world of one: host steps between pipelines") {
  if (bundle()) return;  // an exported library is one pipeline: a collective does not export
  uint64_t seed = 1450;
  for (DType t : {DType::F32, DType::I32, DType::F16})
    for (const Shape& s : shapes_for_config(kUnaryShapes)) check("collectives", collectives(), {test::random(s, t, seed++)});
}

TEST_CASE("0-d indices for every gathering op") {
  uint64_t seed = 1050;
  for (DType idx : {DType::I32, DType::I64})
    for (DType t : reduced() ? std::vector<DType>{DType::F32} : std::vector<DType>{DType::F32, DType::F16, DType::I64})
      check("scalar_index_gathers", scalar_index_gathers(), {test::random({5, 7}, t, seed++), Tensor::scalar(-3, idx)});
}

TEST_CASE("gradients of convolution, pooling and slicing") {
  uint64_t seed = 1300;
  for (DType t : reduced() ? std::vector<DType>{DType::F32} : std::vector<DType>{DType::F32, DType::F64})
    check("gradients", gradients(), {test::random({2, 3, 8, 6}, t, seed++), test::random({4, 3, 3, 3}, t, seed++)});
  if (cuda() && !autoscheduled())
    for (DType t : {DType::F16, DType::BF16})
      check("gradients", gradients(), {test::random({1, 2, 4, 4}, t, seed++), test::random({2, 2, 3, 3}, t, seed++)});
}

TEST_CASE("scaled dot-product attention") {
  uint64_t seed = 1100;
  std::vector<std::array<Shape, 3>> shapes = {{Shape{1, 2, 5, 8}, Shape{1, 2, 5, 8}, Shape{1, 2, 5, 8}},
                                              {Shape{2, 3, 7, 16}, Shape{2, 3, 9, 16}, Shape{2, 3, 9, 12}},
                                              {Shape{1, 8, 40, 64}, Shape{1, 8, 40, 64}, Shape{1, 8, 40, 64}},
                                              {Shape{4, 33, 20}, Shape{4, 33, 20}, Shape{4, 33, 20}}};
  if (reduced()) shapes = {shapes[1], shapes[2]};
  for (bool causal : {false, true})
    for (const auto& s : shapes)
      for (DType t : reduced() ? std::vector<DType>{DType::F32} : std::vector<DType>{DType::F32, DType::F64})
        check("attention", attention(causal), {test::random(s[0], t, seed++), test::random(s[1], t, seed++), test::random(s[2], t, seed++)});
  // Given scales (negative: the softmax of the negated scores; zero: uniform) and large scores,
  // whose rounding errors an exponent written as s * scale - max would blow up.
  const std::array<Shape, 3> s = {Shape{1, 2, 6, 8}, Shape{1, 2, 7, 8}, Shape{1, 2, 7, 4}};
  for (double scale : {-0.75, 0.0, 3.0})
    check("attention", attention(true, scale), {test::random(s[0], DType::F32, seed++), test::random(s[1], DType::F32, seed++), test::random(s[2], DType::F32, seed++)});
  check("attention", attention(false), {test::random(s[0], DType::F32, seed++) * 1e4, test::random(s[1], DType::F32, seed++) * 30, test::random(s[2], DType::F32, seed++)});
}

TEST_CASE("infinities and NaNs: in the data and as literals") {
  // Halide compiles with fast-math flags: hjit must keep inf and nan exact anyway.
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  Group specials = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    const double inf = std::numeric_limits<double>::infinity();
    Tensor masked = hjit::where(hjit::triu(Tensor::ones({3, 3}), 1) > 0, -inf, x.reshape({3, 3}));
    return std::vector<Tensor>{hjit::exp(x), hjit::log(hjit::abs(x)), hjit::sigmoid(x), hjit::tanh(x), hjit::maximum(x, 0.0),
                               hjit::minimum(x, 1.0), x * 2 + 1, hjit::where(x > 0, inf, x), masked, hjit::softmax(masked),
                               hjit::sum(x != x)};
  };
  for (DType t : reduced() ? std::vector<DType>{DType::F32} : std::vector<DType>{DType::F32, DType::F64})
    check("specials", specials, {Tensor::from_vector<double>({-inf, -2, -0.5, 0, 0.5, 3, 100, inf, nan}, {9}).astype(t)});
}

// Every group again, on tensors made of special values (NaN, +-inf, +-0, subnormals, values near
// the ends of exp's range and of the dtype's range): compiled code must treat them as eagerly.
TEST_CASE("special values through every group") {
  if (autoscheduled()) {  // compiles are slow here: the groups whose schedules an autoscheduler changes
    const DType t = DType::F32;
    check("unary_float", unary_float(), {test::specials({4, 7}, t, 0)});
    check("binary_numeric", binary_numeric(), {test::specials({9, 1}, t, 0), test::specials({1, 9}, t, 3)});
    check("reductions", reductions(2, true, false), {test::specials({3, 6}, t, 0)});
    check("nn", nn(), {test::specials({3, 6}, t, 4), test::random({6}, t, 8), test::random({6}, t, 9)});
    check("pools", pools(), {test::specials({1, 2, 6, 5}, t, 0)});
    return;
  }
  // OpenCL: f64 too, where Halide's OpenCL code generator lost the bits of 64-bit constants (pocl
  // has no cl_khr_fp16 for f16).
  for (DType t : opencl() || on_device() ? std::vector<DType>{DType::F32, DType::F64} : float_dtypes()) {
    check("unary_float", unary_float(), {test::specials({4, 7}, t, 0)});
    check("unary_float", unary_float(), {test::specials({}, t, 1)});
    check("binary_numeric", binary_numeric(), {test::specials({9, 1}, t, 0), test::specials({1, 9}, t, 3)});
    check("binary_float", binary_float(), {test::specials({9, 1}, t, 0), test::specials({1, 9}, t, 5)});
    check("casts", casts(), {test::specials({3, 6}, t, 0)});
    check("literal_comparisons", literal_comparisons(), {test::specials({4, 5}, t, 0)});
    check("reductions", reductions(2, true, false), {test::specials({3, 6}, t, 0)});
    check("reductions", reductions(0, true, false), {test::specials({}, t, 0)});
    check("movement", movement(), {test::specials({2, 3, 4}, t, 2)});
    check("matmul", matmuls(), {test::specials({3, 5}, t, 0), test::random({5, 2}, t, 7)});
    check("nn", nn(), {test::specials({3, 6}, t, 4), test::random({6}, t, 8), test::random({6}, t, 9)});
    check("promotion", promotion(), {test::random({4}, DType::I32, 10), test::specials({4}, t, 6)});
  }
  for (DType t : {DType::I8, DType::I32, DType::I64, DType::U8}) {
    check("unary_int", unary_int(), {test::specials({3, 5}, t, 0)});
    check("binary_numeric", binary_numeric(), {test::specials({5, 1}, t, 0), test::specials({1, 5}, t, 2)});
    check("reductions", reductions(2, false, false), {test::specials({3, 5}, t, 0)});
    check("casts", casts(), {test::specials({3, 5}, t, 0)});
  }
  for (DType t : {DType::F32, DType::F64}) {
    check("pools", pools(), {test::specials({1, 2, 6, 5}, t, 0)});
    check("conv2d", conv(ConvCase{{1, 2, 5, 6}, {3, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false}),
          {test::specials({1, 2, 5, 6}, t, 0), test::random({3, 2, 3, 3}, t, 11)});
    check("norms", norms(),
          {test::specials({2, 3, 4, 5}, t, 0), test::random({3}, t, 12), test::random({3}, t, 13), test::random({3}, t, 14),
           test::random({3}, t, 15)});
    check("attention", attention(true), {test::specials({1, 2, 5, 8}, t, 0), test::random({1, 2, 5, 8}, t, 16), test::specials({1, 2, 5, 8}, t, 3)});
    Tensor ids = Tensor::from_vector<int64_t>({0, 4, -1, 2, 3, -5}, {2, 3});
    check("scans_and_gathers", scans_and_gathers(), {test::specials({5, 7}, t, 0), ids});
  }
}

TEST_CASE("randomized shapes and convolution parameters") {
  std::mt19937_64 rng(2026);
  auto pick = [&](int lo, int hi) { return int(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  const int rounds = reduced() ? 2 : 8;
  uint64_t seed = 1200;
  // Shapes: a random rank and extents (sometimes 1 or 0); the other operand a suffix of it with
  // some extents replaced by 1, so that broadcasting goes both ways.
  for (int round = 0; round < rounds; ++round) {
    Shape a;
    for (int d = pick(0, 4); d > 0; --d) a.push_back(pick(0, 9) == 0 ? 0 : pick(1, 7));
    Shape b(a.end() - std::ptrdiff_t(pick(0, int(a.size()))), a.end());
    for (int64_t& e : b)
      if (pick(0, 2) == 0) e = 1;
    if (pick(0, 1)) std::swap(a, b);
    check("binary_numeric", binary_numeric(), {test::random(a, DType::F32, seed++), test::random(b, DType::F32, seed++)});
  }
  for (int round = 0; round < rounds; ++round) {
    const int64_t groups = pick(1, 2), kh = pick(1, 4), kw = pick(1, 4);
    ConvCase c{{pick(1, 2), groups * pick(1, 3), pick(3, 12), pick(3, 12)},
               {groups * pick(1, 5), 0, kh, kw},
               {pick(1, 3), pick(1, 3)},
               {pick(0, int(kh) - 1), pick(0, int(kw) - 1)},
               {pick(1, 2), pick(1, 2)},
               groups,
               pick(0, 1) == 1};
    c.w[1] = c.x[1] / groups;
    const bool fits = c.x[2] + 2 * c.padding[0] > c.dilation[0] * (kh - 1) && c.x[3] + 2 * c.padding[1] > c.dilation[1] * (kw - 1);
    if (!fits) continue;
    std::vector<Tensor> in = {test::random(c.x, DType::F32, seed++), test::random(c.w, DType::F32, seed++) * 0.3};
    if (c.bias) in.push_back(test::random({c.w[0]}, DType::F32, seed++));
    check("conv2d", conv(c), in);
  }
}

// Last, in the CUDA configurations: the groups above reached every op of op_list.h, and ptxas took
// its PTX in every floating dtype the op computes in (integer and bool ops: in some dtype).
TEST_CASE("every op's PTX was assembled, in every float dtype") {
  if (!cuda()) return;
  const auto& done = assembled();
  std::set<hjit::OpKind> seen;
  for (const auto& [op, dtype] : done) seen.insert(op);
  std::string missing;
  for (int k = 0; k < hjit::kNumOps; ++k) {
    const auto op = hjit::OpKind(k);
    // Control flow and collectives run on the host; branches and bodies are the ordinary ops checked here.
    if (hjit::has_trait(op, hjit::Source) || hjit::is_host_step(op)) continue;
    if (!seen.count(op)) missing += std::string(" ") + hjit::op_name(op);
  }
  INFO("ops never compiled for CUDA:" << missing);
  CHECK(missing.empty());
  std::string missing_dtypes;
  for (hjit::OpKind op : {hjit::OpKind::Exp, hjit::OpKind::Log, hjit::OpKind::Tanh, hjit::OpKind::Sigmoid, hjit::OpKind::Erf,
                          hjit::OpKind::Add, hjit::OpKind::Mul, hjit::OpKind::Div, hjit::OpKind::Pow, hjit::OpKind::Matmul,
                          hjit::OpKind::ReduceSum, hjit::OpKind::ReduceMax})
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64})
      if (!done.count({op, t})) missing_dtypes += std::string(" ") + hjit::op_name(op) + "/" + hjit::dtype_name(t);
  INFO("op and dtype pairs never compiled for CUDA:" << missing_dtypes);
  if (!autoscheduled()) CHECK(missing_dtypes.empty());  // CUDA-Li2018 compiles f32 only, as the CPU's autoschedulers
}

// Last: the device bundle is built, and (OpenCL) run: every group on the device, against eager.
TEST_CASE("every group runs on the device and matches eager") {
  if (!bundle()) return;
  REQUIRE(bundle()->size() > 0);
  // A matmul of n x n by n x n as a timing case (the runner makes its inputs: none are carried).
  auto square_matmul = [](int64_t n) {
    return [n](const std::string& dir, const std::string& name, const hjit::ExportOptions& options) {
      const Tensor a = Tensor::zeros({n, n}), b = Tensor::zeros({n, n});
      auto mm = [](const Tensor& x, const Tensor& y) { return hjit::matmul(x, y); };
      hjit::export_library(dir, name, mm, a, b, options);
      return hjit::jit(mm, {.name = name}).graph(a, b);
    };
  };
  if (opencl()) {
    bundle()->add_timing("timed_matmul", square_matmul(64));  // the timing path, small enough for pocl
  } else {
    // The workloads a GPU's figures are quoted on, timed on device-resident buffers by the runner,
    // and W3's matmul at 4096^3 (the FP32 bar).
    for (const char* id : {"W2", "W3", "W8", "W10"}) bundle()->add_timing(id, bench::make_workload(id).export_to);
    bundle()->add_timing("W3_4096", square_matmul(4096));
  }
  bundle()->build_runner();
  if (!opencl()) {
    MESSAGE("device bundle for CUDA written to " << bundle()->dir() << ": carry it to a GPU and run ./runner there");
    return;
  }
  std::string report;
  const int status = bundle()->run(&report, "--repeat 2");
  std::istringstream lines(report);
  size_t ok = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("ok ", 0) == 0) ++ok;
    else if (line.rfind("FAIL ", 0) == 0) FAIL_CHECK(line);
  }
  INFO("the runner said:\n" << report);
  CHECK(status == 0);
  CHECK(ok == bundle()->size());
  CHECK(report.find("ok timed_matmul median") != std::string::npos);
}
