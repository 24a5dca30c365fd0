// How ops run outside jit (eagerly, op by op).
#pragma once

namespace hjit {

enum class EagerKernels {
  // The default: a contraction, convolution or pool big enough to be worth it runs as a compiled
  // single-op pipeline (from the pipeline cache, the disk's included) from the second time its
  // shapes and attributes come back; everything else, and a first sighting, runs the plain kernel.
  Compiled,
  // The plain C++ kernels always: the reference every compiled result is tested against (the test
  // suite runs so). HJIT_EAGER=plain in the environment chooses it too.
  Plain,
};

void set_eager_kernels(EagerKernels kernels);
EagerKernels eager_kernels();

}  // namespace hjit
