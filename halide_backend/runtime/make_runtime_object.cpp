// Build step: writes Halide's runtime for this machine's architecture and OS as an object file,
// which is linked into libhjit. Pipelines hjit compiles ahead of time (the disk cache's shared
// objects) leave the runtime out and use this one: one runtime for the process, whose hooks hjit
// sets (halide_backend/runtime/executable.cpp), compiled once at build time instead of in every process.
#include <Halide.h>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: " << argv[0] << " <cpu-runtime.o> <cuda-runtime.o> <opencl-runtime.o>\n";
    return 2;
  }
  const Halide::Target host = Halide::get_host_target();
  // Features do not change the runtime's interface: the OS, the architecture and the bits do;
  // the device API does (a device runtime adds the driver calls and the device interface).
  const Halide::Target cpu(host.os, host.arch, host.bits);
  Halide::compile_standalone_runtime(argv[1], cpu);
  Halide::compile_standalone_runtime(argv[2], cpu.with_feature(Halide::Target::CUDA));
  Halide::compile_standalone_runtime(argv[3], cpu.with_feature(Halide::Target::OpenCL));
  return 0;
}
