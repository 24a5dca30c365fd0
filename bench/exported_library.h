// An exported library (hjit::export_library) loaded into this process: its archive linked into a
// shared object with the flags its header names, and its <name>_argv entry called on tensors'
// storage. How hjit-bench times exported code beside jitted code, and how the test suite checks
// they compute the same bits.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <hjit/hjit.h>

namespace bench {

class ExportedLibrary {
 public:
  // Links dir/lib<name>.a (with the flags the first lines of dir/<name>.h name) into a shared
  // object and loads it. Throws std::runtime_error saying which step failed.
  ExportedLibrary(const std::string& dir, const std::string& name);
  ~ExportedLibrary();
  ExportedLibrary(const ExportedLibrary&) = delete;
  ExportedLibrary& operator=(const ExportedLibrary&) = delete;

  // Calls the function on the inputs' storage, writing its outputs (then updates) into `outputs`,
  // which must have their types; returns its status (0, or a Halide error code).
  int call(const std::vector<hjit::Tensor>& inputs, const std::vector<hjit::Tensor>& outputs) const;
  // The same on pointers bound once (timing loops).
  int call(void* const* args) const { return fn_(args); }
  // Gives the temporaries the library keeps between calls back to the system.
  void release_memory() const { release_(); }
  const std::string& link_flags() const { return flags_; }

 private:
  void* handle_ = nullptr;
  int (*fn_)(void* const*) = nullptr;
  void (*release_)() = nullptr;
  std::string flags_;
};

}  // namespace bench
