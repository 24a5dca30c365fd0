// The versions of a jitted function, by signature: a bounded cache whose least recently used
// versions are dropped first. Lookups share its lock (the hot path of a cached call); inserting,
// forgetting and re-keying take it alone.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "frontend/jit/version.h"

namespace hjit::detail {

class VersionCache {
 public:
  // max_entries 0: no bound.
  explicit VersionCache(size_t max_entries) : max_entries_(max_entries) {}

  // The version held under `hash` whose signature the call matches, or null; marks it used.
  std::shared_ptr<Version> find(uint64_t hash, const CallArgs& args);
  // Under the lock held alone: the version under the first of `hashes` that has one, or else
  // make() inserted under its key (then least recently used ready versions are dropped past the
  // bound). .second: whether it was made here (the caller builds it, then publishes it or
  // forgets it).
  std::pair<std::shared_ptr<Version>, bool> find_or_insert(std::span<const uint64_t> hashes, const CallArgs& args,
                                                           const std::function<std::shared_ptr<Version>()>& make);
  // Drops v (its build or its check failed): the next call builds it again.
  void forget(const std::shared_ptr<Version>& v);
  // Moves v to the key `key` (when it is still held).
  void rekey(const std::shared_ptr<Version>& v, Signature key);

  size_t size() const;
  int64_t evictions() const;
  // Every version held, each with the versions chained after it (guards).
  std::vector<std::shared_ptr<Version>> all() const;

 private:
  std::shared_ptr<Version> find_locked(uint64_t hash, const CallArgs& args) const;
  bool erase_locked(const std::shared_ptr<Version>& v);  // whether it was held
  void evict_locked();

  const size_t max_entries_;
  mutable std::shared_mutex mu_;
  std::unordered_multimap<uint64_t, std::shared_ptr<Version>> entries_;
  std::atomic<uint64_t> clock_{0};
  int64_t evictions_ = 0;  // guarded by mu_
};

}  // namespace hjit::detail
