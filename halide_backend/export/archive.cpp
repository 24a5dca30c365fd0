// The archive: the wrapper compiled, the constants assembled from their bytes (.incbin), Halide's
// runtime for the target, the providers' kernels where a pipeline calls them, and the pipelines'
// objects, put together by ar.
#include <Halide.h>

#include <fstream>
#include <sstream>

#include "halide_backend/export/library.h"
#include "halide_backend/providers/provider.h"
#include "support/child_process.h"

namespace hjit::backend {
namespace {

void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) throw ValueError("hjit: export: cannot write " + path);
}

// Runs a tool found on PATH; CompileError with what it printed when it fails.
void tool(const std::vector<std::string>& argv) {
  const std::string program = find_program(argv[0]);
  if (program.empty()) throw CompileError("hjit: export needs '" + argv[0] + "' on PATH (install gcc and binutils)");
  std::vector<std::string> cmd = argv;
  cmd[0] = program;
  std::string output;
  if (run_program(cmd, &output) != 0) throw CompileError("hjit: export: " + argv[0] + " failed: " + output);
}

// The constants' bytes as files, and an assembly file that places each in .rodata, 64-byte aligned,
// under the name the wrapper declares.
std::string constants_assembly(const ExportPlan& plan, const std::string& scratch) {
  std::ostringstream s;
  s << "  .section .rodata\n";
  for (const ExportedPipeline& p : plan.pipelines)
    for (size_t i = 0; i < p.info.constants.size(); ++i) {
      const std::string symbol = "hjit_" + p.function + "_c" + std::to_string(i), file = scratch + "/" + symbol + ".bin";
      const std::vector<uint8_t>& bytes = *p.info.constants[i];
      write_file(file, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
      s << "  .balign 64\n  .globl " << symbol << "\n  .hidden " << symbol << "\n" << symbol << ":\n  .incbin \"" << file << "\"\n";
    }
  s << "  .section .note.GNU-stack,\"\",@progbits\n";
  return s.str();
}

}  // namespace

void archive_library(const ExportPlan& plan, const ExportRequest& r, const std::string& scratch, const std::string& library) {
  std::vector<std::string> members = plan.objects;
  std::vector<std::string> cc{"cc", "-c", "-O2", "-fPIC", "-I" HJIT_HALIDE_INCLUDE_DIR, "-I" + r.directory, scratch + "/wrapper.c",
                              "-o", scratch + "/wrapper.o"};
  if (plan.target.kind().host()) cc.push_back("-pthread");  // its parallel loops (export/c_thread_pool.cpp)
  tool(cc);
  members.push_back(scratch + "/wrapper.o");
  write_file(scratch + "/constants.s", constants_assembly(plan, scratch));
  tool({"cc", "-c", scratch + "/constants.s", "-o", scratch + "/constants.o"});
  members.push_back(scratch + "/constants.o");
  try {
    Halide::compile_standalone_runtime(scratch + "/runtime.o", plan.target.halide(false).without_feature(Halide::Target::UserContext));
  } catch (const Halide::Error& e) {
    throw CompileError(std::string("hjit: export: Halide could not compile its runtime: ") + e.what());
  }
  members.push_back(scratch + "/runtime.o");
  for (const ExportedPipeline& p : plan.pipelines)
    if (p.calls_kernels) {
      if (kernels_object().empty()) throw CompileError("hjit: export: a pipeline calls a library kernel this build does not have");
      write_file(scratch + "/kernels.o", kernels_object());
      members.push_back(scratch + "/kernels.o");
      break;
    }
  std::remove(library.c_str());
  std::vector<std::string> ar{"ar", "rcs", library};
  ar.insert(ar.end(), members.begin(), members.end());
  tool(ar);
}

}  // namespace hjit::backend
