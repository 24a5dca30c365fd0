// The disk tier of the compile cache: one file per entry in HJIT_CACHE_DIR (default
// $XDG_CACHE_HOME/hjit, else ~/.cache/hjit; set and empty: off), written to a temporary file and
// renamed into place (a reader sees a whole entry or none), least recently used entries evicted
// above HJIT_CACHE_MAX_MB (default 2048). What an entry holds is cache_entry.h's business.
// An entry is code this process runs: the directory is created 0700 and entries 0600, and a
// directory or an entry that another user owns or can write is not used (one warning each).
// Behind it, when configured, the shared tier (shared_cache.h): an entry the disk lacks is looked
// for there (and kept on disk when found), and every entry written is shared.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "halide_backend/cache/shared_cache.h"

namespace hjit::backend {

struct DiskCacheStats {
  int64_t hits = 0, misses = 0, rejected = 0, writes = 0, evictions = 0;
  int64_t entries = 0, bytes = 0;  // on disk now
  std::string directory;           // "" when the disk cache is off
  SharedCacheStats shared;
};

class DiskCache {
 public:
  static DiskCache& instance();  // configured from the environment on first use

  bool enabled() const { return !dir_.empty(); }
  const std::string& directory() const { return dir_; }
  // Whether an entry of that name exists (unchecked).
  bool has(const std::string& name) const;
  // The entry's bytes, marking it used; nullopt when there is none.
  std::optional<std::string> read(const std::string& name);
  // Writes the entry atomically, then evicts least recently used entries above the size limit.
  // Failures (a full disk, a read-only directory) are logged, never thrown: the cache is an
  // optimization.
  void write(const std::string& name, const std::string& bytes);
  // An entry that failed its checks: counted and logged; the rebuilt entry replaces it.
  void reject(const std::string& name, const std::string& why);
  void count_miss();
  DiskCacheStats stats() const;

  // For tests: point the cache somewhere else ("" turns it off), with a size limit.
  void configure(const std::string& dir, int64_t max_bytes);
  // In a child process fork() made: its own connection to the shared tier (the parent's tier is
  // left alone, never freed here: its lock may have been held when the child was made).
  void forked();

 private:
  DiskCache();
  // An entry read() does not load because someone else could have written it: counted as
  // rejected, with a warning; the rebuilt entry replaces it.
  void refuse(const std::string& name, const std::string& why);
  void evict();
  bool write_file(const std::string& name, const std::string& bytes);
  std::string path(const std::string& name) const { return dir_ + "/" + name + ".hjit"; }

  std::string dir_;
  int64_t max_bytes_ = 0;
  std::unique_ptr<SharedCache> shared_;
  mutable DiskCacheStats counts_;
};

}  // namespace hjit::backend
