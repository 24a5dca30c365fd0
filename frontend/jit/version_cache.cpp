#include "frontend/jit/version_cache.h"

#include <mutex>

#include "support/log.h"

namespace hjit::detail {

std::shared_ptr<Version> VersionCache::find_locked(uint64_t hash, const CallArgs& args) const {
  auto [lo, hi] = entries_.equal_range(hash);
  for (auto it = lo; it != hi; ++it)
    if (it->second->key.matches(args)) return it->second;
  return nullptr;
}

std::shared_ptr<Version> VersionCache::find(uint64_t hash, const CallArgs& args) {
  std::shared_ptr<Version> v;
  {
    std::shared_lock lock(mu_);
    v = find_locked(hash, args);
  }
  if (v) v->last_used.store(clock_.fetch_add(1, std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return v;
}

std::pair<std::shared_ptr<Version>, bool> VersionCache::find_or_insert(std::span<const uint64_t> hashes, const CallArgs& args,
                                                                        const std::function<std::shared_ptr<Version>()>& make) {
  std::unique_lock lock(mu_);
  for (uint64_t h : hashes)
    if (std::shared_ptr<Version> v = find_locked(h, args)) return {v, false};
  std::shared_ptr<Version> v = make();
  v->last_used = ++clock_;
  entries_.emplace(v->key.hash, v);
  evict_locked();
  return {v, true};
}

bool VersionCache::erase_locked(const std::shared_ptr<Version>& v) {
  auto [lo, hi] = entries_.equal_range(v->key.hash);
  for (auto it = lo; it != hi; ++it)
    if (it->second == v) {
      entries_.erase(it);
      return true;
    }
  return false;
}

void VersionCache::evict_locked() {
  if (max_entries_ == 0) return;
  while (entries_.size() > max_entries_) {
    auto oldest = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->second->built.built() && (oldest == entries_.end() || it->second->last_used < oldest->second->last_used))
        oldest = it;
    if (oldest == entries_.end()) return;  // all still being built
    log().debug("jit: {} versions cached, dropping the least recently used", entries_.size());
    entries_.erase(oldest);
    ++evictions_;
  }
}

void VersionCache::forget(const std::shared_ptr<Version>& v) {
  std::unique_lock lock(mu_);
  erase_locked(v);
}

void VersionCache::rekey(const std::shared_ptr<Version>& v, Signature key) {
  std::unique_lock lock(mu_);
  const bool held = erase_locked(v);
  v->key = std::move(key);
  if (held) entries_.emplace(v->key.hash, v);  // (not when evicted meanwhile)
}

size_t VersionCache::size() const {
  std::shared_lock lock(mu_);
  return entries_.size();
}

int64_t VersionCache::evictions() const {
  std::shared_lock lock(mu_);
  return evictions_;
}

std::vector<std::shared_ptr<Version>> VersionCache::all() const {
  std::vector<std::shared_ptr<Version>> out;
  {
    std::shared_lock lock(mu_);
    for (const auto& [hash, v] : entries_) out.push_back(v);
  }
  for (size_t i = 0; i < out.size(); ++i) {  // the chains, each link under its own lock
    std::lock_guard lock(out[i]->next_mu);
    if (out[i]->next) out.push_back(out[i]->next);
  }
  return out;
}

}  // namespace hjit::detail
