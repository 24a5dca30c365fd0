#include "halide_backend/cache/disk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <vector>

#include <hjit/error.h>

#include "support/log.h"
#include "support/settings.h"

namespace hjit::backend {
namespace fs = std::filesystem;

namespace {

std::mutex& stats_mutex() {
  static std::mutex mu;
  return mu;
}

std::string default_directory() {
  if (std::optional<std::string> dir = setting::raw(setting::Id::CacheDir)) return *dir;  // set and empty: off
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/hjit";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/hjit";
  return "";
}

int64_t default_max_bytes() {
  const int64_t mb = *setting::count(setting::Id::CacheMaxMb);
  if (mb > (int64_t(1) << 40)) throw ValueError("HJIT_CACHE_MAX_MB is " + std::to_string(mb) + "; it takes at most 2^40 megabytes");
  return mb << 20;
}

// An entry is native code this process loads and runs: whoever can write one can run code here.
// A directory or an entry is trusted when the running user owns it and nobody else can write to
// it (group or others); why not, else "".
std::string untrusted(const struct stat& st) {
  if (st.st_uid != geteuid()) return "owned by user " + std::to_string(st.st_uid) + ", not by this process's user";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return "writable by other users";
  return "";
}

}  // namespace

DiskCache& DiskCache::instance() {
  static DiskCache cache;
  return cache;
}

DiskCache::DiskCache() : shared_(SharedCache::from_environment()) { configure(default_directory(), default_max_bytes()); }

void DiskCache::forked() {
  if (!shared_) return;
  std::unique_ptr<SharedCache> own = shared_->reopened();
  (void)shared_.release();
  shared_ = std::move(own);
}


void DiskCache::configure(const std::string& dir, int64_t max_bytes) {
  std::lock_guard lock(stats_mutex());
  max_bytes_ = max_bytes;
  dir_.clear();
  if (dir.empty()) return;
  // Created private: its parents as usual, the directory itself 0700.
  std::error_code ec;
  const fs::path parent = fs::path(dir).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) ec = std::error_code(errno, std::generic_category());
  if (ec || access(dir.c_str(), W_OK) != 0) {
    log().warn("hjit: the compile cache directory {} cannot be written ({}); compiled code is not kept on disk", dir,
               ec ? ec.message() : std::strerror(errno));
    return;
  }
  struct stat st {};
  const std::string why = stat(dir.c_str(), &st) != 0 ? std::string(std::strerror(errno)) : untrusted(st);
  if (!why.empty()) {
    log().warn("hjit: not using the compile cache directory {}: it is {}, and an entry there is code hjit would run; "
               "compiled code is not kept on disk (chmod go-w it, or set HJIT_CACHE_DIR to a directory of your own)",
               dir, why);
    return;
  }
  dir_ = dir;
  log().debug("cache: compiled code is kept in {} (at most {} MiB)", dir_, max_bytes_ >> 20);
}

bool DiskCache::has(const std::string& name) const {
  return enabled() && (access(path(name).c_str(), F_OK) == 0 || (shared_ && shared_->has(name)));
}

std::optional<std::string> DiskCache::read(const std::string& name) {
  if (!enabled()) return std::nullopt;
  const std::string p = path(name);
  // Not through a link: the entry itself is checked, on the file opened.
  const int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP) refuse(name, "a symbolic link");
    if (errno != ENOENT || !shared_) return std::nullopt;
    // Not here: another machine of the fleet may have compiled it. Kept on disk as this user's.
    std::optional<std::string> shared = shared_->get(name);
    if (!shared) return std::nullopt;
    write_file(name, *shared);
    std::lock_guard lock(stats_mutex());
    ++counts_.hits;
    return shared;
  }
  struct stat st {};
  const std::string why = fstat(fd, &st) != 0 ? std::string(std::strerror(errno))
                          : !S_ISREG(st.st_mode) ? "not a regular file"
                                                 : untrusted(st);
  if (!why.empty()) {
    close(fd);
    refuse(name, why);
    return std::nullopt;
  }
  std::string bytes(size_t(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += size_t(n);
  }
  close(fd);
  bytes.resize(done);  // shorter if the file shrank meanwhile: the entry's checks reject it
  utimensat(AT_FDCWD, p.c_str(), nullptr, 0);  // last use, for eviction
  std::lock_guard lock(stats_mutex());
  ++counts_.hits;
  return bytes;
}

void DiskCache::reject(const std::string& name, const std::string& why) {
  log().info("cache: ignoring entry {}: {}; compiling it again", path(name), why);
  std::lock_guard lock(stats_mutex());
  --counts_.hits;
  ++counts_.rejected;
}

void DiskCache::refuse(const std::string& name, const std::string& why) {
  log().warn("hjit: not loading the compile cache entry {}: it is {}, and an entry is code hjit would run; compiling it "
             "again", path(name), why);
  std::lock_guard lock(stats_mutex());
  ++counts_.rejected;
}

void DiskCache::count_miss() {
  std::lock_guard lock(stats_mutex());
  ++counts_.misses;
}

void DiskCache::write(const std::string& name, const std::string& bytes) {
  if (!enabled()) return;
  if (shared_) shared_->put(name, bytes);
  if (write_file(name, bytes)) evict();
}

bool DiskCache::write_file(const std::string& name, const std::string& bytes) {
  static std::atomic<uint64_t> counter{0};
  const std::string final_path = path(name);
  const std::string tmp = final_path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);  // (private, as the directory)
  bool ok = fd >= 0;
  for (size_t done = 0; ok && done < bytes.size();) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += size_t(n);
  }
  if (fd >= 0 && close(fd) != 0) ok = false;
  // rename() replaces atomically: a reader sees the old entry or the new one, never a mix. Two
  // processes writing the same entry leave one of their two (equal) entries.
  if (ok && std::rename(tmp.c_str(), final_path.c_str()) != 0) ok = false;
  if (!ok) {
    log().warn("hjit: could not write the cache entry {}: {}", final_path, std::strerror(errno));
    std::remove(tmp.c_str());
    return false;
  }
  std::lock_guard lock(stats_mutex());
  ++counts_.writes;
  return true;
}

void DiskCache::evict() {
  struct File {
    fs::path path;
    int64_t bytes;
    fs::file_time_type used;
  };
  std::vector<File> files;
  int64_t total = 0;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string file = e.path().filename().string();
    std::error_code ec2;
    const auto used = e.last_write_time(ec2);
    const int64_t bytes = int64_t(e.file_size(ec2));
    if (ec2) continue;
    // Temporaries of writers that died mid-write.
    if (file.find(".hjit.tmp.") != std::string::npos) {
      if (now - used > std::chrono::hours(1)) fs::remove(e.path(), ec2);
      continue;
    }
    if (e.path().extension() != ".hjit") continue;
    files.push_back({e.path(), bytes, used});
    total += bytes;
  }
  if (total <= max_bytes_) return;
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) { return a.used < b.used; });
  int64_t evicted = 0;
  for (const File& f : files) {
    if (total <= max_bytes_ * 9 / 10) break;
    std::error_code ec2;
    if (fs::remove(f.path, ec2)) total -= f.bytes, ++evicted;
  }
  log().debug("cache: evicted {} least recently used entries ({} MiB left)", evicted, total >> 20);
  std::lock_guard lock(stats_mutex());
  counts_.evictions += evicted;
}

DiskCacheStats DiskCache::stats() const {
  DiskCacheStats s;
  {
    std::lock_guard lock(stats_mutex());
    s = counts_;
  }
  s.directory = dir_;
  if (shared_) s.shared = shared_->stats();
  if (!enabled()) return s;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (e.path().extension() != ".hjit") continue;
    std::error_code ec2;
    const auto bytes = e.file_size(ec2);
    if (!ec2) ++s.entries, s.bytes += int64_t(bytes);
  }
  return s;
}

}  // namespace hjit::backend
