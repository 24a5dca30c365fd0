// Ahead-of-time export: the library and header build a separate program, with no hjit, Halide or
// LLVM (only what the header names: -lpthread -ldl -lm), whose results equal eager execution.
#include <doctest/doctest.h>

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <filesystem>
#include <fstream>

#include "bench/exported_library.h"
#include "bench/workloads.h"
#include "frontend/compiled/function.h"
#include "halide_backend/providers/extern_stages.h"
#include "tests/support.h"

using hjit::Tensor;
namespace fs = std::filesystem;

namespace {


void write_floats(const std::string& path, const Tensor& t) {
  std::vector<float> v = t.to_vector<float>();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
}

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(s.size() / sizeof(float));
  std::memcpy(v.data(), s.data(), v.size() * sizeof(float));
  return v;
}

int run(const std::string& cmd) { return std::system(cmd.c_str()); }

// What the header says a program linking the library needs ("Link with lib<name>.a FLAGS.").
std::string header_link_flags(const std::string& dir, const std::string& name) {
  std::ifstream h(dir + "/" + name + ".h");
  const std::string marker = "Link with lib" + name + ".a ";
  for (std::string line; std::getline(h, line);)
    if (const size_t at = line.find(marker); at != std::string::npos) {
      std::string flags = line.substr(at + marker.size());
      if (!flags.empty() && flags.back() == '.') flags.pop_back();
      return flags;
    }
  FAIL("the header names no link flags");
  return "";
}

// Builds dir/main.cpp against dir/lib<name>.a with only the C++ standard library (no hjit include
// path or library), runs it on dir/<in>, and returns the floats it wrote to dir/<out>.
std::vector<float> build_and_run(const std::string& dir, const std::string& name, const std::string& in, const std::string& out) {
  const std::string build = "c++ -O1 -o " + dir + "/prog " + dir + "/main.cpp -I" + dir + " " + dir + "/lib" + name +
                            ".a " + header_link_flags(dir, name);
  REQUIRE(run(build) == 0);
  REQUIRE(run(dir + "/prog " + dir + "/" + in + " " + dir + "/" + out) == 0);
  return read_floats(dir + "/" + out);
}

}  // namespace

TEST_CASE("an exported function builds a program without hjit that computes what eager computes") {
  const std::string dir = test::scratch_dir("block");
  Tensor w = Tensor::randn({32, 16}, 1), b = Tensor::randn({16}, 2);
  auto block = [&](const Tensor& x) { return hjit::softmax(hjit::relu(hjit::matmul(x, w) + b)); };
  Tensor x = Tensor::randn({8, 32}, 3);
  std::vector<std::string> files = hjit::export_library(dir, "block", block, x);
  REQUIRE(files.size() == 2);
  CHECK(fs::exists(dir + "/libblock.a"));
  CHECK(fs::exists(dir + "/block.h"));
  std::ifstream h(dir + "/block.h");
  std::string header((std::istreambuf_iterator<char>(h)), std::istreambuf_iterator<char>());
  CHECK(header.find("int block(const float* in0, float* out0);") != std::string::npos);
  CHECK(header.find("block_in0_shape[] = {8, 32}") != std::string::npos);
  CHECK(header.find("halide_") == std::string::npos);  // nothing of Halide's in the interface
  std::ofstream(dir + "/main.cpp") << R"(#include <cstdio>
#include <cstdlib>
#include "block.h"
int main(int argc, char** argv) {
  float* in = static_cast<float*>(aligned_alloc(64, 8 * 32 * 4));
  float* out = static_cast<float*>(aligned_alloc(64, 8 * 16 * 4));
  FILE* f = fopen(argv[1], "rb");
  if (!f || fread(in, 4, 8 * 32, f) != 8 * 32) return 3;
  fclose(f);
  if (block(in, out) != 0) return 4;
  if (block(in + 1, out) != -1) return 5;  // misaligned: refused
  f = fopen(argv[2], "wb");
  fwrite(out, 4, 8 * 16, f);
  fclose(f);
  return 0;
}
)";
  write_floats(dir + "/x.bin", x);
  CHECK_CLOSE(Tensor::from_vector(build_and_run(dir, "block", "x.bin", "y.bin"), {8, 16}), block(x));
  fs::remove_all(dir);
}

// Results returned in another order than the graph computes them (the pipeline realizes its
// outputs in the graph's order: each output buffer must still reach its own result).
TEST_CASE("an exported function's results in the order it returns them") {
  const std::string dir = test::scratch_dir("order");
  auto fn = [](const Tensor& x) {
    Tensor a = x * 2.0;
    Tensor b = hjit::exp(a) + 1.0;
    return std::vector<Tensor>{b, a};
  };
  Tensor x = Tensor::randn({8, 32}, 4);
  hjit::export_library(dir, "order", fn, x);
  std::ofstream(dir + "/main.cpp") << R"(#include <cstdio>
#include <cstdlib>
#include "order.h"
int main(int argc, char** argv) {
  float* in = static_cast<float*>(aligned_alloc(64, 8 * 32 * 4));
  float* out = static_cast<float*>(aligned_alloc(64, 2 * 8 * 32 * 4));
  FILE* f = fopen(argv[1], "rb");
  if (!f || fread(in, 4, 8 * 32, f) != 8 * 32) return 3;
  fclose(f);
  if (order(in, out, out + 8 * 32) != 0) return 4;
  f = fopen(argv[2], "wb");
  fwrite(out, 4, 2 * 8 * 32, f);
  fclose(f);
  return 0;
}
)";
  write_floats(dir + "/x.bin", x);
  const std::vector<float> got = build_and_run(dir, "order", "x.bin", "y.bin");
  REQUIRE(got.size() == 2 * 8 * 32);
  const std::vector<Tensor> want = fn(x);
  CHECK_CLOSE(Tensor::from_vector(std::vector<float>(got.begin(), got.begin() + 256), {8, 32}), want[0]);
  CHECK_CLOSE(Tensor::from_vector(std::vector<float>(got.begin() + 256, got.end()), {8, 32}), want[1]);
  fs::remove_all(dir);
}

TEST_CASE("parameters passed as arguments, and another x86 target") {
  const std::string dir = test::scratch_dir("params");
  Tensor w = Tensor::randn({4, 3}, 1);
  auto f = [&](const Tensor& x) { return hjit::tanh(hjit::matmul(x, w)); };
  Tensor x = Tensor::randn({2, 4}, 2);
  hjit::ExportOptions o;
  o.bake_parameters = false;
  o.target = "x86-64-linux-avx2";
  hjit::export_library(dir, "f", f, x, o);
  std::ifstream h(dir + "/f.h");
  std::string header((std::istreambuf_iterator<char>(h)), std::istreambuf_iterator<char>());
  CHECK(header.find("int f(const float* in0, const float* param0, float* out0);") != std::string::npos);
  CHECK(header.find("x86-64-linux-avx2") != std::string::npos);
  std::ofstream(dir + "/main.cpp") << R"(#include <cstdio>
#include <cstdlib>
#include "f.h"
int main(int argc, char** argv) {
  float* in = static_cast<float*>(aligned_alloc(64, 64));
  float* w = static_cast<float*>(aligned_alloc(64, 64));
  float* out = static_cast<float*>(aligned_alloc(64, 64));
  FILE* fi = fopen(argv[1], "rb");
  if (!fi || fread(in, 4, 8, fi) != 8 || fread(w, 4, 12, fi) != 12) return 3;
  fclose(fi);
  if (f(in, w, out) != 0) return 4;
  FILE* fo = fopen(argv[2], "wb");
  fwrite(out, 4, 6, fo);
  fclose(fo);
  return 0;
}
)";
  {
    std::vector<float> xs = x.to_vector<float>(), ws = w.to_vector<float>();
    std::ofstream out(dir + "/in.bin", std::ios::binary);
    out.write(reinterpret_cast<const char*>(xs.data()), 32);
    out.write(reinterpret_cast<const char*>(ws.data()), 48);
  }
  CHECK_CLOSE(Tensor::from_vector(build_and_run(dir, "f", "in.bin", "out.bin"), {2, 3}), f(x));
  fs::remove_all(dir);
}

// A CUDA library is made on a machine with no GPU: GPU schedules, PTX beside the library (which
// ptxas accepts, where it is installed), and a program built against it that, where no driver is,
// gets an error code back from the call instead of a crash.
TEST_CASE("a function exported for CUDA builds here, and fails softly where no GPU is") {
  const std::string dir = test::scratch_dir("cuda");
  Tensor w = Tensor::randn({32, 16}, 1);
  auto block = [&](const Tensor& x) { return hjit::softmax(hjit::relu(hjit::matmul(x, w))) * 2.0; };
  Tensor x = Tensor::randn({8, 32}, 3);
  hjit::ExportOptions o;
  o.target = "host-cuda-cuda_capability_80";
  std::vector<std::string> files = hjit::export_library_with(o, dir, "gpublock", block, x);
  REQUIRE(files.size() == 3);
  CHECK(files[2] == dir + "/gpublock.ptx");
  std::ifstream p(files[2]);
  const std::string ptx((std::istreambuf_iterator<char>(p)), std::istreambuf_iterator<char>());
  CHECK(ptx.find(".target sm_80") != std::string::npos);
  CHECK(ptx.find(".entry") != std::string::npos);
  if (access("/usr/local/cuda/bin/ptxas", X_OK) == 0)
    CHECK(run("/usr/local/cuda/bin/ptxas -arch=sm_90 " + files[2] + " -o /dev/null") == 0);
  std::ofstream(dir + "/main.cpp") << R"(#include <cstdlib>
#include "gpublock.h"
int main() {
  float* in = static_cast<float*>(aligned_alloc(64, 8 * 32 * 4));
  float* out = static_cast<float*>(aligned_alloc(64, 8 * 16 * 4));
  for (int i = 0; i < 8 * 32; ++i) in[i] = 0.5f;
  return gpublock(in, out) == 0 ? 0 : 7;  // 7: the call returned an error code
}
)";
  REQUIRE(run("c++ -O1 -o " + dir + "/prog " + dir + "/main.cpp -I" + dir + " " + dir + "/libgpublock.a " +
              header_link_flags(dir, "gpublock")) == 0);
  const int status = run(dir + "/prog > " + dir + "/log 2>&1");
  REQUIRE(WIFEXITED(status));
  // Without a driver the call fails with a Halide error code; with one it computes.
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!driver) CHECK(WEXITSTATUS(status) == 7);
  else dlclose(driver);
  fs::remove_all(dir);
}

TEST_CASE("export errors are typed and say what is wrong") {
  const std::string dir = test::scratch_dir("errors");
  auto f = [](const Tensor& x) { return x * 2.0; };
  Tensor x = Tensor::ones({4});
  CHECK_THROWS_AS(hjit::export_library(dir, "not a name", f, x), hjit::ValueError);
  CHECK_THROWS_AS(hjit::export_library(dir, "9lives", f, x), hjit::ValueError);
  hjit::ExportOptions o;
  o.target = "no-such-target";
  CHECK_THROWS_AS(hjit::export_library(dir, "f", f, x, o), hjit::ValueError);
  o = {};
  o.opt_level = 3;
  CHECK_THROWS_WITH_AS(hjit::export_library(dir, "f", f, x, o), doctest::Contains("opt_level must be 0, 1 or 2"), hjit::ValueError);
  auto looping = [](const Tensor& v) { return hjit::fori_loop(0, 3, [](const Tensor&, const Tensor& a) { return a * 2.0; }, v); };
  CHECK_THROWS_WITH_AS(hjit::export_library(dir, "looping", looping, x), doctest::Contains("control flow"), hjit::ValueError);
  fs::remove_all(dir);
}

// The library export_library writes for this machine is the compiled function jit() runs: its
// pipelines, cut and scheduled as they run here (fitted parameters, extern stages and all), written
// out under the library's names. Every workload of hjit-bench, W1 to W11 (W7, W9 and W11 are
// training steps: partitioned, and W7 assigns its parameters, which become outputs), bit for bit.
TEST_CASE("every hjit-bench workload exported for this machine computes the jitted function's bits") {
  using hjit::detail::CompiledFunction;
  for (const std::string& id : bench::workload_ids()) {
    CAPTURE(id);
    const bench::Workload w = bench::make_workload(id);
    const std::string dir = test::scratch_dir("bits_" + id);
    const hjit::TracedFunction traced = w.trace();
    const hjit::Graph& g = traced.graph;
    hjit::detail::FunctionRequest request;
    request.name = id;
    request.schedule = hjit::backend::schedule_request("test", {.opt_level = 1, .tuning_db_from_environment = false});
    const std::shared_ptr<CompiledFunction> jitted = CompiledFunction::compile(g, request);
    hjit::backend::ExportRequest r;
    r.directory = dir, r.name = "w", r.target = "host", r.source = id;
    CompiledFunction::write_library(g, request, r);

    // The same inputs for both (each its own copy: W7 assigns to its parameters).
    const std::vector<Tensor>& inputs = traced.inputs;
    auto copies = [&] {
      std::vector<Tensor> c;
      for (const Tensor& t : inputs) c.push_back(t.clone());
      return c;
    };
    std::vector<Tensor> jit_inputs = copies(), jit_outputs;
    hjit::detail::CallInputs bound;
    for (const Tensor& t : jit_inputs) bound.push(t.impl().get());
    jitted->run(bound.view(), jit_outputs);
    for (size_t k = 0; k < g.updates.size(); ++k)
      jit_outputs.push_back(jitted->updated_value(k, g.type(g.updates[k].value)).clone());

    std::vector<Tensor> lib_outputs;
    for (int o : g.outputs) lib_outputs.push_back(Tensor::empty(g.type(o).shape, g.type(o).dtype));
    for (const hjit::Update& u : g.updates) lib_outputs.push_back(Tensor::empty(g.type(u.value).shape, g.type(u.value).dtype));
    const bench::ExportedLibrary lib(dir, "w");
    REQUIRE(lib.call(copies(), lib_outputs) == 0);
    REQUIRE(lib_outputs.size() == jit_outputs.size());
    for (size_t k = 0; k < lib_outputs.size(); ++k) {
      CAPTURE(k);
      const Tensor& a = lib_outputs[k];
      const Tensor& b = jit_outputs[k];
      REQUIRE(a.shape() == b.shape());
      const size_t bytes = size_t(a.numel()) * size_t(hjit::dtype_size(a.dtype()));
      CHECK(std::memcmp(a.data(), b.data(), bytes) == 0);
    }
    // The blocks a call kept for the next go back to the system; the next call makes its own.
    lib.release_memory();
    std::vector<Tensor> again;
    for (const Tensor& t : lib_outputs) again.push_back(Tensor::empty(t.shape(), t.dtype()));
    REQUIRE(lib.call(copies(), again) == 0);
    for (size_t k = 0; k < again.size(); ++k)
      CHECK(std::memcmp(again[k].data(), lib_outputs[k].data(), size_t(again[k].numel()) * size_t(hjit::dtype_size(again[k].dtype()))) == 0);
    fs::remove_all(dir);
  }
}

// Extern stages (a schedule whose matmul and convolution call a provider's kernels, as tuning runs
// find them): the library carries the kernels and names what they link with, and computes what
// the jitted function computes.
TEST_CASE("a library whose pipelines call library kernels carries them") {
  using hjit::detail::CompiledFunction;
  if (!*hjit::backend::extern_gemm_library()) return;  // a build without oneDNN or OpenBLAS has no kernels
  const std::string dir = test::scratch_dir("kernels");
  Tensor w = Tensor::randn({64, 48}, 1), x = Tensor::randn({32, 64}, 2);
  auto f = [&](const Tensor& x) { return hjit::relu(hjit::matmul(x, w)) * 2.0; };
  const hjit::TracedFunction traced = hjit::trace(f, x);
  hjit::backend::BuiltinParams params;
  params.extern_gemm = params.extern_conv = true;
  hjit::detail::FunctionRequest request;
  request.name = "kernels";
  request.schedule = {hjit::backend::BuiltIn{params}};
  const auto jitted = CompiledFunction::compile(traced.graph, request);
  CHECK(jitted->executable().explain().find("extern sgemm") != std::string::npos);
  hjit::backend::ExportRequest r;
  r.directory = dir, r.name = "k", r.target = "host", r.source = "kernels";
  CompiledFunction::write_library(traced.graph, request, r);
  const bench::ExportedLibrary lib(dir, "k");
  CHECK(lib.link_flags().find(std::string("-l") + (std::string(hjit::backend::extern_gemm_library()) == "oneDNN" ? "dnnl" : "openblas")) !=
        std::string::npos);
  std::vector<Tensor> jit_out;
  hjit::detail::CallInputs bound;
  for (const Tensor& t : traced.inputs) bound.push(t.impl().get());
  jitted->run(bound.view(), jit_out);
  std::vector<Tensor> lib_out{Tensor::empty({32, 48})};
  REQUIRE(lib.call(traced.inputs, lib_out) == 0);
  CHECK(std::memcmp(lib_out[0].data(), jit_out[0].data(), 32 * 48 * sizeof(float)) == 0);
  CHECK_CLOSE(lib_out[0], f(x));
  fs::remove_all(dir);
}

namespace {
int threads_of_this_process() {
  return int(std::distance(fs::directory_iterator("/proc/self/task"), fs::directory_iterator{}));
}
}  // namespace

// A CPU library's parallel loops run on a pool of its own (export/c_thread_pool.cpp): calls from
// several application threads at once (one at a time on the pool, the others on their callers),
// HJIT_THREADS=1, a task that fails, and an unload that takes the pool's threads with it.
TEST_CASE("an exported library's thread pool: concurrent calls, one thread, errors, unloading") {
  const Tensor x = Tensor::randn({512, 256}, 21), w = Tensor::randn({256, 384}, 22);
  const Tensor idx = Tensor::from_vector(std::vector<int32_t>{0, 5, 511, 7}, {4});
  auto f = [](const Tensor& x, const Tensor& w, const Tensor& i) {
    const Tensor h = hjit::softmax(hjit::matmul(x, w));
    return std::vector<Tensor>{h, hjit::take(h, i, 0)};
  };
  const std::vector<Tensor> want = f(x, w, idx);
  auto outputs = [&] { return std::vector<Tensor>{Tensor::empty({512, 384}), Tensor::empty({4, 384})}; };
  auto same = [](const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
    for (size_t k = 0; k < a.size(); ++k)
      if (std::memcmp(a[k].data(), b[k].data(), size_t(a[k].numel()) * 4) != 0) return false;
    return true;
  };
  for (const char* threads : {"", "1"}) {
    CAPTURE(threads);
    const std::string dir = test::scratch_dir(std::string("pool") + threads);
    hjit::export_library(dir, "pooled", f, x, w, idx);
    if (*threads) setenv("HJIT_THREADS", threads, 1);  // read at the library's first loop
    const int before = threads_of_this_process();
    {
      const bench::ExportedLibrary lib(dir, "pooled");
      std::vector<Tensor> first = outputs();
      REQUIRE(lib.call({x, w, idx}, first) == 0);
      // Its own workers: one per CPU but the caller's, none with HJIT_THREADS=1.
      if (*threads) CHECK(threads_of_this_process() == before);
      else if (hjit::num_threads() > 1) CHECK(threads_of_this_process() > before);
      CHECK_CLOSE(first[0], want[0]);
      CHECK_CLOSE(first[1], want[1]);
      std::vector<std::thread> callers;
      std::atomic<int> wrong{0};
      for (int t = 0; t < 3; ++t)
        callers.emplace_back([&] {
          for (int k = 0; k < 10; ++k) {
            std::vector<Tensor> out = outputs();
            if (lib.call({x, w, idx}, out) != 0 || !same(out, first)) ++wrong;
          }
        });
      for (std::thread& c : callers) c.join();
      CHECK(wrong.load() == 0);
      // An index out of range fails the call (in whichever task reads it), and the next call works.
      const Tensor bad = Tensor::from_vector(std::vector<int32_t>{0, 512, 1, 2}, {4});
      std::vector<Tensor> out = outputs();
      CHECK(lib.call({x, w, bad}, out) != 0);
      CHECK(lib.call({x, w, idx}, out) == 0);
      CHECK(same(out, first));
    }
    unsetenv("HJIT_THREADS");
    // Unloaded, the library's workers are gone (their code goes with it).
    CHECK(threads_of_this_process() == before);
    fs::remove_all(dir);
  }
}
