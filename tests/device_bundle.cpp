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
    m << "in " << hjit::dtype_name(inputs[i].dtype()) << " " << inputs[i].numel() << " "
      << size_t(inputs[i].numel()) * hjit::dtype_size(inputs[i].dtype()) << " 0\n";
  }
  for (size_t k = 0; k < want.size(); ++k) {
    write_tensor(case_dir + "/want" + std::to_string(k) + ".bin", want[k]);
    m << "out " << hjit::dtype_name(want[k].dtype()) << " " << want[k].numel() << " "
      << size_t(want[k].numel()) * hjit::dtype_size(want[k].dtype()) << " " << tolerance(want[k].dtype()) << "\n";
  }
  manifest_ += m.str();
  names_.push_back(name);
  return true;
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
