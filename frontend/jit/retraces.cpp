#include "frontend/jit/retraces.h"

#include <unordered_map>

#include "support/log.h"

namespace hjit::detail {
namespace {

// jit() called inside a loop makes a new function, with an empty cache, every time: first traces
// are counted per function name across the process.
void note_first_trace(const std::string& name, int threshold) {
  static std::mutex m;
  static std::unordered_map<std::string, int64_t> first_traces;
  std::lock_guard g(m);
  const int64_t n = ++first_traces[name];
  if (threshold > 0 && n == threshold + 1)
    log().warn("jit '{}': {} separately jitted copies of this function have traced it; jit() inside a loop "
               "makes a new function with an empty cache each time. Make the jitted function once and call it "
               "in the loop.", name, n);
}

}  // namespace

void Retraces::on_trace(const Signature& key, const std::string& reason) {
  std::lock_guard lock(mu_);
  if (!last_built_ && reason.empty()) {
    log().debug("jit '{}': first call, tracing", name_);
    note_first_trace(name_, warn_after_);
    return;
  }
  const std::string change = reason.empty() ? last_built_->describe_change_to(key) : " " + reason;
  log().info("jit '{}': cache miss, retracing:{}", name_, change);
  ++retraces_;
  changes_.push_back(change);
  if (changes_.size() > 4) changes_.erase(changes_.begin());
  if (warn_after_ > 0 && retraces_ > warn_after_ && (retraces_ - warn_after_ - 1) % warn_after_ == 0) {
    std::string what;
    for (const std::string& c : changes_) what += "\n  " + c;
    warning_ = "jit '" + name_ + "' has been re-traced " + std::to_string(retraces_) +
               " times; each new signature or value read traces and compiles again. The latest changes:" + what + "\n" +
               sizes_advice() + " Values that change every call: pass them as Tensors rather than static arguments.";
    log().warn("{}", warning_);
  }
}

std::string Retraces::sizes_advice() const {
  if (!dynamic_dims_set_)
    return "Sizes that change every call (a sequence growing in generation, a last batch): name them in "
           "JitOptions::dynamic_dims, and one pipeline serves every size; or pad them to a few sizes.";
  if (!sizes_fixed_.empty())
    return "JitOptions::dynamic_dims are set, but one pipeline cannot serve every size of them here, so each size "
           "compiles its own: " + sizes_fixed_ + ". Pad the sizes to a few, or change what that names.";
  return "JitOptions::dynamic_dims are set: a size that changes outside them (another argument or axis, in the "
         "changes above) still traces again; name it there too, or pad it to a few sizes.";
}

void Retraces::on_sizes_fixed(const std::string& why) {
  std::lock_guard lock(mu_);
  sizes_fixed_ = why;
}

void Retraces::on_built(const Signature& key) {
  std::lock_guard lock(mu_);
  last_built_ = key;
}

std::string Retraces::warning() const {
  std::lock_guard lock(mu_);
  return warning_;
}

}  // namespace hjit::detail
