#include "halide_backend/codegen/object_file.h"

#include <Halide.h>
#include <cpuid.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>

namespace hjit::backend {

bool cpu_has_avx512_fp16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 23));
}

namespace {
// What LLVM 14's sapphirerapids has that AMD's AVX-512 CPUs lack and LLVM may choose on its own:
// AVX512-FP16 (for f16 values, and vmovw for any 16-bit element moved into a vector: a SIGILL on
// Zen 5 in code without one f16 value), AVX-VNNI (the VEX form of 256-bit dot products, which Zen 4
// lacks), and AMX.
constexpr const char* kNotOnAmd = ",-avx512fp16,-avxvnni,-amx-tile,-amx-int8,-amx-bf16";
}  // namespace

void write_object(const Halide::Module& module, const std::string& path) {
  if (!module.target().has_feature(Halide::Target::AVX512_SapphireRapids) || cpu_has_avx512_fp16()) {
    module.compile({{Halide::OutputFileType::object, path}});
    return;
  }
  // Halide 14 gives LLVM the CPU and its features through two module flags, read when the object
  // is emitted: the features are those of the sapphirerapids CPU less the ones above.
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> m = Halide::compile_module_to_llvm_module(module, context);
  std::string mattrs;
  if (auto* s = llvm::dyn_cast_or_null<llvm::MDString>(m->getModuleFlag("halide_mattrs"))) mattrs = s->getString().str();
  m->setModuleFlag(llvm::Module::Warning, "halide_mattrs", llvm::MDString::get(context, mattrs + kNotOnAmd));
  std::unique_ptr<llvm::raw_fd_ostream> out = Halide::make_raw_fd_ostream(path);
  Halide::compile_llvm_module_to_object(*m, *out);
}

}  // namespace hjit::backend
