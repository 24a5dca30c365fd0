// A device bundle: functions exported ahead of time for a GPU target (export_library), each with
// inputs and the outputs eager execution computed, and a runner program (device_runner.cpp) built
// against all of them. Running the runner calls every function on the device and compares.
//
// It is how exported GPU code is checked: OpenCL through pocl (a CPU OpenCL driver) here, and CUDA
// on a machine with a GPU but no Halide, where the directory alone is carried (see DEVELOPERS.md,
// "Running on a GPU").
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <hjit/hjit.h>

namespace test {

class DeviceBundle {
 public:
  using Group = std::function<std::vector<hjit::Tensor>(const std::vector<hjit::Tensor>&)>;
  // dir is emptied; target is a Halide target string with a GPU feature.
  DeviceBundle(std::string dir, std::string target);

  // Exports `group` on `inputs` as one case, its expected outputs computed eagerly now. Returns
  // false, adding nothing, when every output is empty (there is nothing to compute).
  bool add(const std::string& name, const Group& group, const std::vector<hjit::Tensor>& inputs);
  // A timing case: export_to(dir, name, target) exports a function there (a workload, with inputs
  // too big to carry) and returns its graph, whose inputs and outputs are the function's arguments.
  // The runner fills the inputs itself and times the function on device-resident buffers.
  using Exporter = std::function<hjit::Graph(const std::string& dir, const std::string& name, const hjit::ExportOptions& options)>;
  void add_timing(const std::string& name, const Exporter& export_to);
  size_t size() const { return names_.size(); }
  const std::string& dir() const { return dir_; }

  // Writes the manifest and cases.inc, and builds `runner` in the bundle (throws with the
  // compiler's output when that fails). The OpenCL runner links the ICD loader, libOpenCL.so.1.
  void build_runner() const;
  // Runs the runner in the bundle: its exit status, and what it printed in `report`.
  int run(std::string* report, const std::string& extra_args = "") const;

 private:
  std::string dir_, target_, manifest_;
  std::vector<std::string> names_;
};

// The OpenCL ICD loader's path where one is installed with a driver that sees a device ("" where
// not): pocl's CPU device on a machine without a GPU.
std::string opencl_loader();

}  // namespace test
