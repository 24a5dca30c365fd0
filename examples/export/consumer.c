/* A C program built from hjit's exported files alone (resnet_block.h, libresnet_block.a):
 * no hjit, Halide or LLVM. Reads the input the exporter wrote, runs the block, compares with the
 * exporter's eager result.   consumer <dir>   (x.bin and y_eager.bin in dir) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "resnet_block.h"

static size_t numel(const int64_t* shape, int rank) {
  size_t n = 1;
  for (int i = 0; i < rank; ++i) n *= (size_t)shape[i];
  return n;
}

static float* read_floats(const char* dir, const char* name, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  float* p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
  FILE* f = fopen(path, "rb");
  if (!p || !f || fread(p, sizeof(float), n, f) != n) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(2);
  }
  fclose(f);
  return p;
}

int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : ".";
  const size_t n_in = numel(resnet_block_in0_shape, RESNET_BLOCK_IN0_RANK);
  const size_t n_out = numel(resnet_block_out0_shape, RESNET_BLOCK_OUT0_RANK);
  float* x = read_floats(dir, "x.bin", n_in);
  float* want = read_floats(dir, "y_eager.bin", n_out);
  float* y = aligned_alloc(64, (n_out * sizeof(float) + 63) / 64 * 64);
  int status = resnet_block(x, y);
  if (status != 0) {
    fprintf(stderr, "resnet_block failed: %d\n", status);
    return 1;
  }
  double worst = 0;
  for (size_t i = 0; i < n_out; ++i) {
    double e = fabs((double)y[i] - want[i]) / (1 + fabs((double)want[i]));
    if (e > worst) worst = e;
  }
  printf("consumer: resnet_block on %zu inputs, max error vs hjit eager %.2e\n", n_in, worst);
  return worst < 1e-3 ? 0 : 1;
}
