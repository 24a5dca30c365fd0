// Build step: writes Halide's runtime for this machine's architecture and OS as an object file,
// which is linked into libhjit. Pipelines hjit compiles ahead of time (the disk cache's shared
// objects) leave the runtime out and use this one: one runtime for the process, whose hooks hjit
// sets (halide_backend/executable.cpp), compiled once at build time instead of in every process.
#include <Halide.h>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " <output.o>\n";
    return 2;
  }
  const Halide::Target host = Halide::get_host_target();
  // Features do not change the runtime's interface: the OS, the architecture and the bits do.
  Halide::compile_standalone_runtime(argv[1], Halide::Target(host.os, host.arch, host.bits));
  return 0;
}
