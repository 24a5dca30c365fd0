#include "tests/device_bundle.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support.h"

namespace fs = std::filesystem;

namespace test {
namespace {

void write_tensor(const std::string& path, const hjit::Tensor& t) {
  const size_t n = size_t(t.numel()) * hjit::dtype_size(t.dtype());
  write_file(path, n ? std::string(static_cast<const char*>(t.data()), n) : std::string());
}

std::string shell_quote(const std::string& s) { return "'" + s + "'"; }

// One argument's manifest line: kind, dtype, elements, bytes, tolerance, shape ("-" for 0-d).
std::string arg_line(const char* kind, const hjit::TensorType& t, double tol) {
  std::ostringstream m;
  m << kind << " " << hjit::dtype_name(t.dtype) << " " << t.numel() << " " << size_t(t.numel()) * hjit::dtype_size(t.dtype)
    << " " << tol << " ";
  if (t.shape.empty()) m << "-";
  for (size_t d = 0; d < t.shape.size(); ++d) m << (d ? "," : "") << t.shape[d];
  m << "\n";
  return m.str();
}

}  // namespace

std::string opencl_loader() {
  const std::string loader = "/usr/lib/x86_64-linux-gnu/libOpenCL.so.1";
  if (access(loader.c_str(), R_OK) != 0) return "";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/etc/OpenCL/vendors", ec))
    if (e.path().extension() == ".icd") return loader;
  return "";
}

DeviceBundle::DeviceBundle(std::string dir, std::string target) : dir_(std::move(dir)), target_(std::move(target)) {
  fs::remove_all(dir_);
  fs::create_directories(dir_);
}

bool DeviceBundle::add(const std::string& name, const Group& group, const std::vector<hjit::Tensor>& inputs) {
  const std::vector<hjit::Tensor> want = group(inputs);
  int64_t elements = 0;
  for (const hjit::Tensor& t : want) elements += t.numel();
  if (elements == 0) return false;
  const std::string case_dir = dir_ + "/" + name;
  fs::create_directories(case_dir);
  hjit::export_library(case_dir, name, group, inputs, {.target = target_});
  std::ostringstream m;
  m << "case " << name << "\n";
  for (size_t i = 0; i < inputs.size(); ++i) {
    write_tensor(case_dir + "/in" + std::to_string(i) + ".bin", inputs[i]);
    m << arg_line("in", hjit::TensorType{inputs[i].dtype(), inputs[i].shape()}, 0);
  }
  for (size_t k = 0; k < want.size(); ++k) {
    write_tensor(case_dir + "/want" + std::to_string(k) + ".bin", want[k]);
    m << arg_line("out", hjit::TensorType{want[k].dtype(), want[k].shape()}, tolerance(want[k].dtype()));
  }
  manifest_ += m.str();
  names_.push_back(name);
  return true;
}

void DeviceBundle::add_timing(const std::string& name, const Exporter& export_to) {
  const std::string case_dir = dir_ + "/" + name;
  fs::create_directories(case_dir);
  const hjit::Graph g = export_to(case_dir, name, {.target = target_});
  std::string m = "case " + name + " time\n";
  for (int in : g.inputs) m += arg_line("in", g.type(in), 0);
  for (int out : g.outputs) m += arg_line("out", g.type(out), 0);
  for (const hjit::Update& u : g.updates) m += arg_line("out", g.type(u.value), 0);
  manifest_ += m;
  names_.push_back(name);
}

void DeviceBundle::build_runner() const {
  write_file(dir_ + "/manifest.txt", manifest_);
  std::ostringstream inc;
  for (const std::string& n : names_) inc << "#include \"" << n << "/" << n << ".h\"\n";
  inc << "#define HJIT_CASES(X)";
  for (const std::string& n : names_) inc << " X(" << n << ")";
  inc << "\n";
  write_file(dir_ + "/cases.inc", inc.str());
  const bool opencl = target_.find("opencl") != std::string::npos;
  const std::string driver = opencl ? "libOpenCL.so.1" : "libcuda.so.1";
  std::string cmd = "cd " + shell_quote(dir_) + " && c++ -std=c++17 -O1 -I. -DHJIT_BUNDLE_DRIVER='\"" + driver + "\"' -o runner " +
                    shell_quote(HJIT_DEVICE_RUNNER_SOURCE);
  for (const std::string& n : names_) cmd += " " + n + "/lib" + n + ".a";
  // Every library holds Halide's runtime: the first one linked serves all.
  if (opencl) cmd += " -Wl,--no-as-needed " + opencl_loader() + " -Wl,--as-needed";
  cmd += " -lpthread -ldl -lm > build.log 2>&1";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("building the device runner failed: " + read_file(dir_ + "/build.log"));
}

int DeviceBundle::run(std::string* report, const std::string& extra_args) const {
  const std::string cmd = "cd " + shell_quote(dir_) + " && ./runner " + extra_args + " > report.txt 2>&1";
  const int status = std::system(cmd.c_str());
  *report = read_file(dir_ + "/report.txt");
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace test
