#include "frontend/jit/guards.h"

#include <cstring>

#include "frontend/jit/build_version.h"

namespace hjit::detail {

std::optional<size_t> failed_guard(const Version& v, const std::vector<Tensor>& outputs) {
  for (size_t k = 0; k < v.guards.size(); ++k) {
    const Tensor host = outputs.at(v.num_outputs() + k).to(Device::CPU);  // itself on the CPU
    const std::vector<uint8_t>& want = v.guards[k];
    if (want.size() != host.impl()->storage->nbytes || (!want.empty() && std::memcmp(want.data(), host.impl()->data(), want.size()) != 0))
      return k;
  }
  return std::nullopt;
}

GuardedRun run_until_guards_hold(JitCore::State& s, std::shared_ptr<Version> v, const CallArgs& args, Tracer trace,
                                 bool reuse_donated, std::vector<Tensor>& outputs) {
  for (;;) {
    std::unique_lock<std::mutex> call_lock = v->fn->lock_for_call();
    outputs.clear();
    // (Not where a guard may fail: the arguments are traced again then.)
    RunOptions run;
    run.into = args.into;
    run.reuse_donated = reuse_donated && v->guards.empty();
    const int64_t reused = v->fn->run(v->inputs(args).view(), outputs, run);
    const std::optional<size_t> failed = v->guards.empty() ? std::nullopt : failed_guard(*v, outputs);
    if (!failed) return {v, reused, false, std::move(call_lock)};
    call_lock = {};
    ++s.guard_failures;
    // Where no version read these values, this call traces one (running itself eagerly).
    ChainedVersion next = chained_version(s, *v, &Version::next,
                                          "value read " + std::to_string(*failed + 1) + " of " + std::to_string(v->guards.size()) +
                                              " while tracing differs from every version's",
                                          args, trace);
    if (next.built_here) {
      outputs = std::move(next.version->first_outputs);
      return {next.version, 0, true, {}};
    }
    v = std::move(next.version);
  }
}

}  // namespace hjit::detail
