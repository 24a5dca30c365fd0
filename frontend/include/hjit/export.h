// Ahead-of-time export: a traced function compiled into a static library and a C header that
// need neither hjit nor Halide nor LLVM (link with -lpthread -ldl -lm), for any Halide target:
//
//   hjit::export_library("out", "block", block, x);   // out/libblock.a, out/block.h
//   // block.h: int block(const float* in0, float* out0);  shapes as constants beside it
//   hjit::export_library("out", "block", block, x, {.target = "host-cuda-cuda_capability_80"});
//   // the same for a CUDA GPU, made on any machine (GPU schedules; out/block.ptx is the PTX):
//   // the library then needs NVIDIA's driver where it runs, and nothing else
#pragma once
#include <string>
#include <vector>

#include <hjit/detail/tracing.h>

namespace hjit {

struct ExportOptions {
  // "host": this machine, and the library computes with exactly the code jit() compiles here for
  // the same options (the same schedules, fitted parameters and library kernels, bit for bit).
  // Any other Halide target string ("x86-64-linux-avx2", "host-cuda", ...) is planned for that
  // target, without trial runs or library kernels (the code cannot run here).
  std::string target = "host";
  bool bake_parameters = true;  // captured tensors' current values become constants in the
                                // library; otherwise they are arguments after the function's own
  // The schedule, as JitOptions chooses it (checked the same way).
  int opt_level = 1;            // 0: unfused; 1: the built-in schedules; 2: the autoscheduler's,
                                // where it beats them
  std::string autoscheduler{};  // opt_level 2
  std::string tuning_db{};      // a tuning database whose best schedules the library uses (never
                                // $HJIT_TUNING_DB: a library is what it is where it runs)
};

namespace detail {
std::vector<std::string> export_traced(const std::string& directory, const std::string& name, const ExportOptions& options,
                                       const std::string& fn_name, const CallArgs& args, Tracer trace);
}

// Returns the paths written (the library, then the header, then the PTX for CUDA targets).
template <class Fn, class... Args>
std::vector<std::string> export_library_with(const ExportOptions& options, const std::string& directory,
                                             const std::string& name, Fn&& fn, const Args&... example_args) {
  auto use = [&](const std::string& fn_name, const detail::CallArgs& call, detail::Tracer tracer) {
    return detail::export_traced(directory, name, options, fn_name, call, tracer);
  };
  return detail::traced_once(fn, use, example_args...);
}

// The same with the options last: export_library(dir, name, fn, x, w, {.target = "host-cuda"}).
template <class Fn, class A>
std::vector<std::string> export_library(const std::string& dir, const std::string& name, Fn&& fn, const A& a,
                                        const ExportOptions& o = {}) {
  return export_library_with(o, dir, name, std::forward<Fn>(fn), a);
}
template <class Fn, class A, class B>
std::vector<std::string> export_library(const std::string& dir, const std::string& name, Fn&& fn, const A& a, const B& b,
                                        const ExportOptions& o = {}) {
  return export_library_with(o, dir, name, std::forward<Fn>(fn), a, b);
}
template <class Fn, class A, class B, class C>
std::vector<std::string> export_library(const std::string& dir, const std::string& name, Fn&& fn, const A& a, const B& b,
                                        const C& c, const ExportOptions& o = {}) {
  return export_library_with(o, dir, name, std::forward<Fn>(fn), a, b, c);
}
template <class Fn, class A, class B, class C, class D>
std::vector<std::string> export_library(const std::string& dir, const std::string& name, Fn&& fn, const A& a, const B& b,
                                        const C& c, const D& d, const ExportOptions& o = {}) {
  return export_library_with(o, dir, name, std::forward<Fn>(fn), a, b, c, d);
}

}  // namespace hjit
