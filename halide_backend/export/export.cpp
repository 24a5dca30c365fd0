#include "halide_backend/export/export.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "graph/op_def.h"
#include "halide_backend/scheduling/apply_schedule.h"
#include "halide_backend/build/build.h"
#include "halide_backend/codegen/codegen.h"
#include "halide_backend/build/control_flow.h"
#include "halide_backend/codegen/device_pipeline.h"
#include "halide_backend/lowering/lower.h"
#include "halide_backend/scheduling/scheduler.h"
#include "support/child_process.h"
#include "support/log.h"

namespace hjit::backend {
namespace {

const char* c_type(DType t) {
  switch (t) {
    case DType::Bool: case DType::U8: return "uint8_t";
    case DType::I8: return "int8_t";
    case DType::I16: return "int16_t";
    case DType::I32: return "int32_t";
    case DType::I64: return "int64_t";
    case DType::U16: case DType::F16: case DType::BF16: return "uint16_t";
    case DType::U32: return "uint32_t";
    case DType::U64: return "uint64_t";
    case DType::F32: return "float";
    case DType::F64: return "double";
  }
  return "void";
}

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw ValueError("hjit: export: cannot write " + path);
}

std::string shape_text(const Shape& s) {
  std::string t = "{";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + (s.empty() ? "1}" : "}");  // a C array needs one element; rank says how many count
}

// One argument of the exported C function.
struct CArg {
  std::string name;
  TensorType type;
  bool output;
};

}  // namespace

std::vector<std::string> export_static_library(const Graph& g, const ExportRequest& r) {
  if (r.name.empty() || !(std::isalpha(static_cast<unsigned char>(r.name[0])) || r.name[0] == '_'))
    throw ValueError("hjit: export: the name '" + r.name + "' must be a C identifier");
  for (char c : r.name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      throw ValueError("hjit: export: the name '" + r.name + "' must be a C identifier");
  // An exported library is one Halide pipeline; a control flow op is a loop of pipelines run by
  // hjit's host code, which a library does not carry.
  for (const Node& n : g.nodes)
    if (has_trait(n.op, Collective))
      throw ValueError("hjit: export: '" + r.name + "' uses " + op_name(n.op) + ", which exchanges data with the other ranks "
                       "from hjit's host code and cannot be part of an exported library; export the parts before and "
                       "after it");
  if (has_host_steps(g))
    throw ValueError("hjit: export: '" + r.name + "' uses control flow ops (cond, while_loop, fori_loop, scan), which run "
                     "from hjit's host code between pipelines and cannot be exported as one; unroll the loop in C++ "
                     "(static trip counts) or select with hjit::where for the exported function");
  const Target target = r.target.empty() || r.target == "host" ? Target::host(Device::CPU) : Target::parse(r.target);
  std::error_code ec;
  std::filesystem::create_directories(r.directory, ec);
  if (ec) throw ValueError("hjit: export: cannot create the directory " + r.directory + ": " + ec.message());

  const std::string dir = r.directory, impl = r.name + "_halide";
  const std::string header = dir + "/" + r.name + ".h", library = dir + "/lib" + r.name + ".a";
  const std::string scratch = dir + "/." + r.name + ".build";
  std::filesystem::create_directories(scratch, ec);

  // The pipeline and Halide's runtime, as objects.
  std::vector<CArg> cargs;
  std::vector<std::string> const_files;
  std::vector<ArgSpec> specs;
  std::string device_code;  // the GPU kernels' code: PTX for CUDA, OpenCL C for OpenCL
  {
    std::lock_guard lock(compile_mutex());
    Halide::Target ht(target.str());  // no user_context: the C function takes only buffers
    LoweredPipeline p = lower(g, ht);
    std::string why;
    std::optional<Schedule> s = scheduler().schedule(p, r.schedule.choice, &why);
    if (!s) throw CompileError("hjit: export: no schedule: " + why);
    apply_schedule(*s, p);
    PipelineInfo info = describe(g, p, impl, r.schedule.str(), s->str());
    specs = info.args;
    try {
      // (The arguments in the order describe() gave them: outputs in realization order.)
      const std::vector<Halide::Argument> args = halide_arguments(p);
      const std::vector<Halide::Func> outs = defined_outputs(p);
      if (outs.empty()) throw ValueError("hjit: export: the function computes nothing (every output is empty)");
      const Halide::Target no_runtime = ht.with_feature(Halide::Target::NoRuntime);
      Halide::Module module = device_ready_pipeline(outs, no_runtime, Buffers::ByCaller).compile_to_module(args, impl, no_runtime);
      device_code = device_code_of(module);
      module.compile({{Halide::OutputFileType::object, scratch + "/pipeline.o"}});
      Halide::compile_standalone_runtime(scratch + "/runtime.o", ht);
    } catch (const Halide::Error& e) {
      throw CompileError(std::string("hjit: export: Halide could not compile the function: ") + e.what());
    }
    for (size_t i = 0; i < info.constants.size(); ++i) {
      const std::string f = scratch + "/const" + std::to_string(i) + ".bin";
      std::ofstream out(f, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(info.constants[i]->data()), std::streamsize(info.constants[i]->size()));
      const_files.push_back(f);
    }
  }
  for (size_t i = 0; i < g.inputs.size(); ++i)
    cargs.push_back({i < r.input_names.size() ? r.input_names[i] : "in" + std::to_string(i), g.type(g.inputs[i]), false});
  for (size_t k = 0; k < g.outputs.size(); ++k) cargs.push_back({"out" + std::to_string(k), g.type(g.outputs[k]), true});
  for (size_t k = 0; k < g.updates.size(); ++k) {
    const int index = int(g.node(g.updates[k].target).attrs.i("index"));
    cargs.push_back({"new_" + cargs[size_t(index)].name, g.type(g.updates[k].value), true});
  }

  // The header: plain pointers, shapes as constants.
  const std::string N = upper(r.name);
  std::ostringstream h;
  h << "// " << r.name << ".h: generated by hjit::export_library from " << r.source << "\n"
    << "// Target: " << target.str() << ". Link with lib" << r.name << ".a -lpthread -ldl -lm.\n"
    << (target.is_cuda() ? "// Runs on a CUDA GPU (NVIDIA's driver, libcuda.so.1): pointers are host memory, copied to\n"
                           "// the device and back by each call.\n"
                         : "")
    << "#ifndef HJIT_EXPORT_" << N << "_H\n#define HJIT_EXPORT_" << N << "_H\n#include <stdint.h>\n\n"
    << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
    << "// Every pointer is a dense row-major array of the shape below, 64-byte aligned\n"
    << "// (aligned_alloc(64, bytes)); f16/bf16 values are their bits, bools one byte each.\n";
  size_t n_in = 0, n_out = 0;
  for (const CArg& a : cargs) {
    const std::string A = upper(a.name);
    h << "//   " << a.name << ": " << a.type.str() << (a.output ? " (written)" : "") << "\n";
    h << "#define " << N << "_" << A << "_RANK " << a.type.rank() << "\n";
    h << "static const int64_t " << r.name << "_" << a.name << "_shape[] = " << shape_text(a.type.shape) << ";\n";
    (a.output ? n_out : n_in)++;
  }
  h << "#define " << N << "_NUM_INPUTS " << n_in << "\n#define " << N << "_NUM_OUTPUTS " << n_out << "\n\n"
    << "// Returns 0, or a negative Halide error code (the runtime prints what went wrong), or -1\n"
    << "// when a pointer is not 64-byte aligned.\nint " << r.name << "(";
  for (size_t i = 0; i < cargs.size(); ++i)
    h << (i ? ", " : "") << (cargs[i].output ? "" : "const ") << c_type(cargs[i].type.dtype) << "* " << cargs[i].name;
  h << ");\n\n";
  if (target.is_gpu())
    h << "// The same on Halide buffers (HalideRuntime.h), one per argument above in that order, for callers\n"
    << "// that keep data on the device between calls: a buffer marked host-dirty is copied to the\n"
    << "// device, outputs are left there (device-dirty); nothing is freed. The library's runtime\n"
    << "// (halide_copy_to_host, halide_device_sync, halide_device_free) serves these buffers.\n"
      << "struct halide_buffer_t;\nint " << r.name << "_buffers(struct halide_buffer_t** args);\n\n";
  h << "#ifdef __cplusplus\n}\n#endif\n#endif\n";
  write_text(header, h.str());

  // The wrapper: buffers around the pointers, the constants from the library itself.
  std::ostringstream c;
  c << "#include <stdint.h>\n#include <stdio.h>\n#include <HalideRuntime.h>\n#include \"" << r.name << ".h\"\n\n";
  // Halide's default error handler aborts the process: the header promises an error code instead
  // (a missing GPU driver, say), with the message printed.
  c << "static void hjit_print_error(void* ctx, const char* msg) { (void)ctx; fprintf(stderr, \"%s\\n\", msg); }\n\n";
  for (size_t i = 0; i < const_files.size(); ++i) c << "extern const uint8_t hjit_" << r.name << "_const" << i << "[];\n";
  c << "int " << impl << "(";
  for (size_t i = 0; i < specs.size(); ++i) c << (i ? ", " : "") << "struct halide_buffer_t*";
  c << ");\n\nint " << r.name << "(";
  for (size_t i = 0; i < cargs.size(); ++i)
    c << (i ? ", " : "") << (cargs[i].output ? "" : "const ") << c_type(cargs[i].type.dtype) << "* " << cargs[i].name;
  c << ") {\n  halide_set_error_handler(hjit_print_error);\n";
  for (size_t i = 0; i < cargs.size(); ++i)
    if (cargs[i].type.numel() > 0) c << "  if ((uintptr_t)" << cargs[i].name << " % 64 != 0) return -1;\n";
  // Declares buffer `buf<i>` (and its dimensions) of argument i around `host`.
  auto declare_buffer = [&](size_t i, const std::string& host, int flags) {
    const ArgSpec& a = specs[i];
    c << "  halide_dimension_t dim" << i << "[" << std::max<size_t>(1, a.dims.size()) << "] = {";
    for (size_t d = 0; d < a.dims.size(); ++d)
      c << (d ? ", " : "") << "{" << a.dims[d].min << ", " << a.dims[d].extent << ", " << a.dims[d].stride << ", 0}";
    if (a.dims.empty()) c << "{0, 1, 1, 0}";
    c << "};\n  halide_buffer_t buf" << i << " = {0, 0, (uint8_t*)" << host << ", " << flags << ", {" << int(a.type.code) << ", "
      << int(a.type.bits) << ", " << a.type.lanes << "}, " << a.dims.size() << ", dim" << i << ", 0};\n";
  };
  const auto constant_name = [&](const ArgSpec& a) { return "hjit_" + r.name + "_const" + std::to_string(a.index); };
  for (size_t i = 0; i < specs.size(); ++i) {
    const ArgSpec& a = specs[i];
    std::string host;
    if (a.from == ArgSpec::From::Input) host = cargs[size_t(a.index)].name;
    else if (a.from == ArgSpec::From::Output) host = cargs[g.inputs.size() + size_t(a.index)].name;
    else host = constant_name(a);
    // Inputs are marked host-dirty: a GPU pipeline copies to the device only what is marked so.
    declare_buffer(i, host, a.from == ArgSpec::From::Output ? 0 : int(halide_buffer_flag_host_dirty));
  }
  c << "  int r = " << impl << "(";
  for (size_t i = 0; i < specs.size(); ++i) c << (i ? ", " : "") << "&buf" << i;
  c << ");\n";
  // GPU targets: outputs back to the caller's memory, device allocations released.
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].from == ArgSpec::From::Output) c << "  if (r == 0 && buf" << i << ".device) r = halide_copy_to_host(0, &buf" << i << ");\n";
  for (size_t i = 0; i < specs.size(); ++i) c << "  if (buf" << i << ".device) halide_device_free(0, &buf" << i << ");\n";
  c << "  return r;\n}\n\n";
  // GPU targets' buffers entry: the caller's buffers, the constants' from the library.
  if (target.is_gpu()) {
    c << "int " << r.name << "_buffers(struct halide_buffer_t** args) {\n  halide_set_error_handler(hjit_print_error);\n";
    for (size_t i = 0; i < specs.size(); ++i)
      if (specs[i].from == ArgSpec::From::Constant) declare_buffer(i, constant_name(specs[i]), int(halide_buffer_flag_host_dirty));
    c << "  int r = " << impl << "(";
    for (size_t i = 0; i < specs.size(); ++i) {
      const ArgSpec& a = specs[i];
      c << (i ? ", " : "");
      if (a.from == ArgSpec::From::Input) c << "args[" << a.index << "]";
      else if (a.from == ArgSpec::From::Output) c << "args[" << g.inputs.size() + size_t(a.index) << "]";
      else c << "&buf" << i;
    }
    c << ");\n";
    for (size_t i = 0; i < specs.size(); ++i)
      if (specs[i].from == ArgSpec::From::Constant) c << "  if (buf" << i << ".device) halide_device_free(0, &buf" << i << ");\n";
    c << "  return r;\n}\n";
  }
  write_text(scratch + "/wrapper.c", c.str());
  std::ostringstream s;
  s << "  .section .rodata\n";
  for (size_t i = 0; i < const_files.size(); ++i)
    s << "  .balign 64\n  .globl hjit_" << r.name << "_const" << i << "\n  .hidden hjit_" << r.name << "_const" << i
      << "\nhjit_" << r.name << "_const" << i << ":\n  .incbin \"" << const_files[i] << "\"\n";
  s << "  .section .note.GNU-stack,\"\",@progbits\n";
  write_text(scratch + "/constants.s", s.str());

  std::string output;
  auto tool = [&](const std::vector<std::string>& argv) {
    const std::string program = find_program(argv[0]);
    if (program.empty()) throw CompileError("hjit: export needs '" + argv[0] + "' on PATH (install gcc and binutils)");
    std::vector<std::string> cmd = argv;
    cmd[0] = program;
    if (run_program(cmd, &output) != 0) throw CompileError("hjit: export: " + argv[0] + " failed: " + output);
  };
  tool({"cc", "-c", "-O2", "-fPIC", "-I" HJIT_HALIDE_INCLUDE_DIR, "-I" + dir, scratch + "/wrapper.c", "-o", scratch + "/wrapper.o"});
  tool({"cc", "-c", scratch + "/constants.s", "-o", scratch + "/constants.o"});
  std::remove(library.c_str());
  tool({"ar", "rcs", library, scratch + "/pipeline.o", scratch + "/runtime.o", scratch + "/wrapper.o", scratch + "/constants.o"});
  std::filesystem::remove_all(scratch, ec);
  std::vector<std::string> written{library, header};
  if (!device_code.empty()) {
    written.push_back(dir + "/" + r.name + (target.is_cuda() ? ".ptx" : ".cl"));  // PTX, or OpenCL C
    write_text(written.back(), device_code);
  }
  log().debug("export: wrote {} files in {}", written.size(), dir);
  return written;
}

}  // namespace hjit::backend
