// Re-traces of a jitted function, counted and explained: each new version logs what changed
// since the last one built, and past JitOptions::warn_after_retraces a warning names what keeps
// changing (the jit-in-a-loop and shape-churn pitfalls).
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "frontend/tracing/signature.h"

namespace hjit::detail {

class Retraces {
 public:
  // dynamic_dims_set: JitOptions::dynamic_dims names some dimensions (the warning's advice differs).
  Retraces(std::string fn_name, int warn_after, bool dynamic_dims_set)
      : name_(std::move(fn_name)), warn_after_(warn_after), dynamic_dims_set_(dynamic_dims_set) {}
  // A new version is traced: for a new signature `key` (what changed is found against the last
  // version built), or for `reason` (a guard that failed).
  void on_trace(const Signature& key, const std::string& reason = "");
  // A version was built: later re-traces are described against its signature.
  void on_built(const Signature& key);
  // One pipeline was found unable to serve every size of the dynamic dimensions, for `why`.
  void on_sizes_fixed(const std::string& why);
  // The latest warning given ("" when none).
  std::string warning() const;

 private:
  std::string sizes_advice() const;  // (under mu_)
  const std::string name_;
  const int warn_after_;
  const bool dynamic_dims_set_;
  std::string sizes_fixed_;  // why each size compiles its own, though dynamic_dims are set
  mutable std::mutex mu_;
  std::optional<Signature> last_built_;
  int64_t retraces_ = 0;
  std::vector<std::string> changes_;  // the latest re-traces' differences
  std::string warning_;
};

}  // namespace hjit::detail
