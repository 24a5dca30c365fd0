// The shared tier of the compile cache: one Redis (HJIT_CACHE_REDIS=host:port; Debian's
// redis-server, read through hiredis) behind every machine's disk cache, so that a fleet compiles
// each pipeline once. An entry is native code that every reader runs, so each carries an
// authentication tag, HMAC-SHA256 (OpenSSL's libcrypto) over its name and bytes with a key the fleet
// shares (HJIT_CACHE_KEY_FILE, a file only its user can read, or HJIT_CACHE_KEY): an entry without
// a valid tag is a miss, and without a key the tier is off. A Redis that cannot be reached is a
// warning and the local tiers, never a failed call; it is tried again a minute later.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace hjit::backend {

struct SharedCacheStats {
  int64_t hits = 0, misses = 0, rejected = 0, writes = 0;
  std::string address;  // "" when the tier is off
};

class SharedCache {
 public:
  // Configured from HJIT_CACHE_REDIS and the key's variables (off when unset: no warning).
  static std::unique_ptr<SharedCache> from_environment();
  // host:port and the key itself; DistributedError-free: a bad address is a warning and an off tier.
  static std::unique_ptr<SharedCache> make(const std::string& address, const std::string& key);
  ~SharedCache();

  // The entry's bytes when Redis holds one with a valid tag; nullopt otherwise (a bad tag: counted
  // as rejected, with a warning).
  std::optional<std::string> get(const std::string& name);
  bool has(const std::string& name);
  void put(const std::string& name, const std::string& bytes);
  SharedCacheStats stats() const;

  // What Redis holds for an entry: a magic string, the tag, the entry's bytes; and the entry back
  // from it, nullopt unless the tag is the one `key` makes for this name and bytes.
  static std::string frame(const std::string& key, const std::string& name, const std::string& bytes);
  static std::optional<std::string> unframe(const std::string& key, const std::string& name, const std::string& value);
  static std::string redis_key(const std::string& name) { return "hjit:cache:" + name; }
  // The same tier with a connection of its own (for a forked child: the parent's socket and
  // lock are the parent's).
  std::unique_ptr<SharedCache> reopened() const { return make(host_ + ":" + std::to_string(port_), key_); }

 private:
  SharedCache(std::string host, int port, std::string key);
  struct Connection;
  // The connection, made (again) when needed; null while Redis is down (retried after a minute).
  Connection* connection();
  void down(const std::string& why);

  std::string host_;
  int port_ = 0;
  std::string key_;
  std::unique_ptr<Connection> conn_;
  int64_t retry_at_ms_ = 0;
  mutable std::mutex mu_;
  SharedCacheStats counts_;
};

}  // namespace hjit::backend
