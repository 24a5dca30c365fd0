#include "bench/exported_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace bench {

ExportedLibrary::ExportedLibrary(const std::string& dir, const std::string& name) {
  std::ifstream header(dir + "/" + name + ".h");
  const std::string marker = "Link with lib" + name + ".a ";
  for (std::string line; std::getline(header, line);) {
    const size_t at = line.find(marker);
    if (at == std::string::npos) continue;
    flags_ = line.substr(at + marker.size());
    if (!flags_.empty() && flags_.back() == '.') flags_.pop_back();
    break;
  }
  if (flags_.empty()) throw std::runtime_error(dir + "/" + name + ".h does not say what to link with");
  const std::string so = dir + "/lib" + name + ".so";
  const std::string cmd = "cc -shared -o '" + so + "' -Wl,--whole-archive '" + dir + "/lib" + name + ".a' -Wl,--no-whole-archive " + flags_;
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("linking the exported library failed: " + cmd);
  handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) throw std::runtime_error(std::string("loading the exported library failed: ") + dlerror());
  fn_ = reinterpret_cast<int (*)(void* const*)>(dlsym(handle_, (name + "_argv").c_str()));
  if (!fn_) throw std::runtime_error("the exported library has no " + name + "_argv");
  release_ = reinterpret_cast<void (*)()>(dlsym(handle_, (name + "_release_memory").c_str()));
  if (!release_) throw std::runtime_error("the exported library has no " + name + "_release_memory");
}

ExportedLibrary::~ExportedLibrary() {
  if (handle_) dlclose(handle_);
}

int ExportedLibrary::call(const std::vector<hjit::Tensor>& inputs, const std::vector<hjit::Tensor>& outputs) const {
  std::vector<void*> args;
  for (const hjit::Tensor& t : inputs) args.push_back(const_cast<void*>(t.data()));
  for (const hjit::Tensor& t : outputs) args.push_back(const_cast<void*>(t.data()));
  return fn_(args.data());
}

}  // namespace bench
