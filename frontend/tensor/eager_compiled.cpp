#include "frontend/tensor/eager_compiled.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>

#include <hjit/eager.h>

#include "frontend/tensor/device.h"
#include "frontend/tensor/tensor_impl.h"
#include "graph/op_def.h"
#include "frontend/compiled/function.h"
#include "support/log.h"
#include "support/settings.h"

namespace hjit {

namespace {

EagerKernels from_environment() {
  return setting::choice(setting::Id::Eager) == "plain" ? EagerKernels::Plain : EagerKernels::Compiled;
}

std::atomic<int>& chosen() {
  static std::atomic<int> k{int(from_environment())};
  return k;
}

}  // namespace

void set_eager_kernels(EagerKernels kernels) { chosen().store(int(kernels)); }
EagerKernels eager_kernels() { return EagerKernels(chosen().load()); }

namespace detail {

namespace {

// Multiply-adds (or window reads) of one call, for the classes a compiled pipeline runs several
// times faster than the plain kernel (register tiles, vectors and threads); 0 for the others,
// whose plain kernels are loops at memory speed already.
int64_t work_of(OpKind op, const std::vector<Tensor>& inputs, const Tensor& out) {
  const int64_t n = out.numel();
  switch (schedule_class(op)) {
    case ScheduleClass::Matmul: return n * inputs[0].shape().back();
    case ScheduleClass::Convolution: {
      const Shape& w = inputs[1].shape();
      return n * w[1] * w[2] * w[3];
    }
    case ScheduleClass::ConvolutionWeightGrad: return n * (inputs[1].numel() / std::max<int64_t>(1, inputs[1].dim(1)));
    case ScheduleClass::Attention: return 2 * inputs[0].numel() * inputs[1].dim(-2);
    default: return 0;
  }
}

// Below this a compiled call saves less than about 50 microseconds: not worth a compile.
constexpr int64_t kMinWork = int64_t(1) << 18;

struct Entry {
  int sightings = 0;
  std::shared_ptr<CompiledFunction> code;  // null until compiled; null for good after a failure
  bool failed = false;
};

std::mutex mu;
std::unordered_map<std::string, Entry>& entries() {
  static auto* m = new std::unordered_map<std::string, Entry>;  // never destroyed: used until exit
  return *m;
}


}  // namespace

bool run_compiled_eager(OpKind op, const std::vector<Tensor>& inputs, const Attrs& attrs, const Tensor& out) {
  if (eager_kernels() == EagerKernels::Plain || work_of(op, inputs, out) < kMinWork) return false;
  Graph g = single_op_graph(op, inputs, attrs);
  const std::string key = g.str();
  std::shared_ptr<CompiledFunction> code;
  {
    std::lock_guard<std::mutex> lock(mu);
    Entry& e = entries()[key];
    if (e.failed) return false;
    if (!e.code && ++e.sightings < 2) return false;
    code = e.code;
  }
  if (!code) {
    try {
      FunctionRequest request = single_op_request(g, Device::CPU);
      code = CompiledFunction::compile(std::move(g), std::move(request));
    } catch (const Error& e) {
      log().warn("eager {}: the compiled pipeline failed ({}); the plain kernel runs it", op_name(op), e.what());
      std::lock_guard<std::mutex> lock(mu);
      entries()[key].failed = true;
      return false;
    }
    std::lock_guard<std::mutex> lock(mu);
    entries()[key].code = code;
  }
  // (One function serves every call of these shapes, from any thread: it updates nothing.)
  CallInputs in;
  for (const Tensor& t : inputs) in.push(t.impl().get());
  std::vector<Tensor> result;
  code->run(in.view(), result, {.into = &out});
  if (!result.at(0).same_storage(out)) throw InternalError("hjit: eager " + std::string(op_name(op)) + " was not computed into its result");
  return true;
}

}  // namespace detail

}  // namespace hjit
