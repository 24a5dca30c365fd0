#include "halide_backend/scheduling/trial.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "support/log.h"
#include "support/run_queue.h"

namespace hjit::backend {
namespace {

void* alloc(std::vector<std::shared_ptr<void>>& owned, const TensorType& t) {
  size_t bytes = (size_t(t.numel()) * size_t(dtype_size(t.dtype)) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes ? bytes : 64);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes ? bytes : 64);
  owned.emplace_back(p, std::free);
  return p;
}

void write(DType t, void* p, int64_t i, double v) {
  switch (t) {
#define HJIT_TRIAL_WRITE(e, name, T, kind) \
  case DType::e: static_cast<T*>(p)[i] = static_cast<T>(v); break;
    HJIT_DTYPES(HJIT_TRIAL_WRITE)
#undef HJIT_TRIAL_WRITE
  }
}

double read(DType t, const void* p, int64_t i) {
  switch (t) {
#define HJIT_TRIAL_READ(e, name, T, kind) \
  case DType::e: return double(static_cast<const T*>(p)[i]);
    HJIT_DTYPES(HJIT_TRIAL_READ)
#undef HJIT_TRIAL_READ
  }
  return 0;
}

}  // namespace

TrialBuffers::TrialBuffers(const Graph& g, TrialInts ints) {
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int id : g.inputs) {
    const TensorType& t = g.type(id);
    void* p = alloc(owned, t);
    for (int64_t i = 0; i < t.numel(); ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      double u = double(state >> 11) / 9007199254740992.0;
      const double v = is_floating(t.dtype)        ? 2 * u - 1
                       : ints == TrialInts::Zeros    ? 0
                       : t.dtype == DType::Bool      ? double(u < 0.5)
                                                     : double(1 + int(u * 4));
      write(t.dtype, p, i, v);
    }
    in.push_back(p);
  }
  for (int id : g.outputs) out.push_back(alloc(owned, g.type(id))), out_types.push_back(g.type(id));
  for (const Update& u : g.updates) out.push_back(alloc(owned, g.type(u.value))), out_types.push_back(g.type(u.value));
}

// Runs during which the process's threads waited for a CPU held by another process (more than a
// tenth of the run) time the machine's load: the fastest run among the others counts, with more
// runs tried (within the same 300 ms) while too few were quiet; if none was, the fastest of all.
double trial_ms(const Executable& exe, TrialBuffers& b) {
  exe.run(b.in.data(), b.out.data());  // warm-up, and the check that it runs at all
  double best = HUGE_VAL, best_quiet = HUGE_VAL, total = 0;
  int quiet = 0;
  for (int i = 0; i < 25 && quiet < 5 && total < 300; ++i) {
    const int64_t waited_before = run_queue_wait_ns();
    Timer t;
    exe.run(b.in.data(), b.out.data());
    const double ms = t.ms(), waited_ms = double(run_queue_wait_ns() - waited_before) / 1e6;
    best = std::min(best, ms);
    total += ms;
    if (waited_ms <= 0.1 * ms) best_quiet = std::min(best_quiet, ms), ++quiet;
  }
  return quiet > 0 ? best_quiet : best;
}

std::string first_difference(const TrialBuffers& a, const TrialBuffers& b) {
  for (size_t k = 0; k < a.out.size(); ++k) {
    const TensorType& t = a.out_types[k];
    const double tol = t.dtype == DType::F64 ? 1e-9 : is_floating(t.dtype) ? 1e-3 : 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      double x = read(t.dtype, a.out[k], i), y = read(t.dtype, b.out[k], i);
      if (x == y || (std::isnan(x) && std::isnan(y)) || std::fabs(x - y) <= tol * (1 + std::fabs(y))) continue;
      return "output " + std::to_string(k) + " element " + std::to_string(i) + " is " + std::to_string(x) +
             " where the built-in schedule computes " + std::to_string(y);
    }
  }
  return "";
}

}  // namespace hjit::backend
