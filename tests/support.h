// Helpers shared by the tests: random tensors of any dtype, and comparisons with per-dtype
// tolerances (the tolerances compiled code is held to against eager execution).
#pragma once
#include <cmath>
#include <cstdlib>
#include <utility>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <hjit/hjit.h>

#include "support/allocator.h"
#include "support/settings.h"

namespace test {

// Small tensors written out, and their values.
inline hjit::Tensor f32(std::vector<float> v, hjit::Shape s) { return hjit::Tensor::from_vector(v, std::move(s)); }
inline std::vector<float> vals(const hjit::Tensor& t) { return t.to_vector<float>(); }

// Normal floats; integers in [-5, 5] (unsigned [0, 10]); bools half true.
hjit::Tensor random(hjit::Shape shape, hjit::DType dtype, uint64_t seed);

// A tensor of special values, cycled from `offset`: floats NaN, +-inf, +-0, the smallest normal and
// a subnormal, values near the ends of exp's range, large and small values, and ordinary ones;
// integers their type's extremes, 0 and +-1.
hjit::Tensor specials(hjit::Shape shape, hjit::DType dtype, size_t offset);

// A whole file's bytes ("" when it cannot be read), and writing them.
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

// A fresh, empty directory for one test's files, under the system's temporary directory, named
// after the test program, this process and `name`.
std::string scratch_dir(const std::string& name);

// Allowed |got - want| / (1 + |want|): exact for integers and bool.
double tolerance(hjit::DType dtype);

// How many times `what` occurs in `text` (overlapping occurrences counted): steps of a plan.
inline int occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Sets an environment variable for the scope.
struct ScopedEnv {
  std::string name;
  ScopedEnv(std::string n, const char* value) : name(std::move(n)) { setenv(name.c_str(), value, 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

// Guard pages (hjit::set_guard_pages) for the scope: blocks allocated in it are guarded; off again
// however the scope ends.
struct ScopedGuardPages {
  explicit ScopedGuardPages(hjit::GuardPages mode) { hjit::set_guard_pages(mode); }
  ~ScopedGuardPages() { hjit::set_guard_pages(hjit::GuardPages::Off); }
};

// Empty string when equal within tolerance, else what differs (first bad element).
std::string compare(const hjit::Tensor& got, const hjit::Tensor& want, double tol);

// Runs `attempt` on mutations 0..count-1: counts those it accepts and those rejected with a typed
// hjit::Error, and fails the test for any other exception. HJIT_FUZZ_MUTATIONS lowers count (make
// sanitize-ci: the instrumented build runs a tenth of them; make sanitize all).
template <class Attempt>
std::pair<int64_t, int64_t> fuzz(int count, Attempt attempt) {
  if (const auto cap = hjit::setting::count(hjit::setting::Id::FuzzMutations)) count = int(std::min<int64_t>(count, *cap));
  int64_t accepted = 0, rejected = 0;
  for (int k = 0; k < count; ++k) {
    try {
      attempt(k);
      ++accepted;
    } catch (const hjit::Error&) {
      ++rejected;
    } catch (const std::exception& e) {
      FAIL_CHECK("an untyped error (" << std::string(e.what()) << ") for mutation " << k);
    }
  }
  return {accepted, rejected};
}

}  // namespace test

// CHECK that two tensors match within the dtype's tolerance, with the difference in the message.
#define CHECK_CLOSE(got, want)                                                                \
  do {                                                                                        \
    std::string hjit_diff_ = test::compare((got), (want), test::tolerance((want).dtype()));   \
    CHECK_MESSAGE(hjit_diff_.empty(), hjit_diff_);                                            \
  } while (0)
#define CHECK_CLOSE_TOL(got, want, tol)                       \
  do {                                                        \
    std::string hjit_diff_ = test::compare((got), (want), tol); \
    CHECK_MESSAGE(hjit_diff_.empty(), hjit_diff_);            \
  } while (0)
