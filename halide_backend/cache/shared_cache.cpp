#include "halide_backend/cache/shared_cache.h"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdarg>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "support/log.h"
#include "support/settings.h"

#ifdef HJIT_HAVE_REDIS
#include <hiredis/hiredis.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#endif

namespace hjit::backend {
namespace {

constexpr char kMagic[] = "hjit-shared-1";  // then the 32-byte tag, then the entry
constexpr size_t kMagicBytes = sizeof kMagic - 1, kTagBytes = 32;
constexpr size_t kMinKeyBytes = 16;
// The largest entry a reader takes (a compiled pipeline is a few megabytes): a larger value is
// refused from its STRLEN, and read with GETRANGE up to one byte past it (a value that grew
// meanwhile), so a planted value of any size costs a reader this much at most.
constexpr int64_t kMaxEntryBytes = int64_t(64) << 20;
// hiredis's timeout bounds each read, so a server that trickles its reply a byte at a time would
// hold a call for ever: a whole reply must come within this.
constexpr int64_t kReplyDeadlineMs = 10000;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The fleet's key: HJIT_CACHE_KEY_FILE (a file only its user can read), else HJIT_CACHE_KEY; "" and
// a warning when neither is usable.
std::string key_from_environment() {
  const std::string file_name = setting::raw(setting::Id::CacheKeyFile).value_or("");
  if (!file_name.empty()) {
    const char* file = file_name.c_str();
    struct stat st {};
    if (stat(file, &st) != 0) {
      log().warn("hjit: HJIT_CACHE_KEY_FILE {} cannot be read ({}); the shared compile cache is off", file, std::strerror(errno));
      return "";
    }
    if (st.st_uid != geteuid() || (st.st_mode & (S_IRWXG | S_IRWXO))) {
      log().warn("hjit: HJIT_CACHE_KEY_FILE {} is {}; whoever reads the key can plant code in every process of the fleet: "
                 "the shared compile cache is off (chmod 600 it)", file,
                 st.st_uid != geteuid() ? "owned by another user" : "readable or writable by other users");
      return "";
    }
    std::ifstream in(file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string key = ss.str();
    while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
    return key;
  }
  if (std::string key = setting::raw(setting::Id::CacheKey).value_or(""); !key.empty()) return key;
  log().warn("hjit: HJIT_CACHE_REDIS is set but no key is (HJIT_CACHE_KEY_FILE or HJIT_CACHE_KEY): entries of a shared "
             "cache are code every reader runs, so they must carry a tag made with the fleet's key; the shared "
             "compile cache is off");
  return "";
}

bool equal_in_constant_time(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

}  // namespace

#ifdef HJIT_HAVE_REDIS

struct SharedCache::Connection {
  redisContext* ctx = nullptr;
  ~Connection() {
    if (ctx) redisFree(ctx);
  }
};

namespace {
struct Reply {
  redisReply* r;
  explicit Reply(void* p) : r(static_cast<redisReply*>(p)) {}
  ~Reply() {
    if (r) freeReplyObject(r);
  }
};
}  // namespace

namespace {

// A command and its whole reply within kReplyDeadlineMs; null with *why set when it fails or the
// deadline passes (the connection is then of no further use).
redisReply* command_within_deadline(redisContext* c, std::string* why, const char* format, ...) {
  const int64_t deadline = now_ms() + kReplyDeadlineMs;
  va_list ap;
  va_start(ap, format);
  const int appended = redisvAppendCommand(c, format, ap);
  va_end(ap);
  if (appended != REDIS_OK) return *why = c->errstr, nullptr;
  for (int written = 0; !written;)
    if (redisBufferWrite(c, &written) != REDIS_OK) return *why = c->errstr, nullptr;
  for (;;) {
    void* reply = nullptr;
    if (redisGetReplyFromReader(c, &reply) != REDIS_OK) return *why = c->errstr, nullptr;
    if (reply) return static_cast<redisReply*>(reply);
    const int64_t left = deadline - now_ms();
    if (left <= 0) return *why = "no whole reply in " + std::to_string(kReplyDeadlineMs / 1000) + " s", nullptr;
    pollfd p{c->fd, POLLIN, 0};
    if (poll(&p, 1, int(left)) <= 0) continue;  // the deadline, or a signal: looked at again above
    if (redisBufferRead(c) != REDIS_OK) return *why = c->errstr, nullptr;
  }
}

std::string tag(const std::string& key, const std::string& name, const std::string& bytes) {
  std::string message = name;
  message.push_back('\0');
  message += bytes;
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), int(key.size()), reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}
}  // namespace

std::string SharedCache::frame(const std::string& key, const std::string& name, const std::string& bytes) {
  return std::string(kMagic, kMagicBytes) + tag(key, name, bytes) + bytes;
}

std::optional<std::string> SharedCache::unframe(const std::string& key, const std::string& name, const std::string& value) {
  if (value.size() < kMagicBytes + kTagBytes || value.compare(0, kMagicBytes, kMagic) != 0) return std::nullopt;
  std::string bytes = value.substr(kMagicBytes + kTagBytes);
  if (!equal_in_constant_time(value.substr(kMagicBytes, kTagBytes), tag(key, name, bytes))) return std::nullopt;
  return bytes;
}

SharedCache::Connection* SharedCache::connection() {
  if (conn_) return conn_.get();
  if (now_ms() < retry_at_ms_) return nullptr;
  const timeval timeout{1, 0};  // a fleet's cache answers in milliseconds; a second means it is down
  auto c = std::make_unique<Connection>();
  c->ctx = redisConnectWithTimeout(host_.c_str(), port_, timeout);
  if (!c->ctx || c->ctx->err) {
    down(c->ctx ? c->ctx->errstr : "cannot allocate a connection");
    return nullptr;
  }
  redisSetTimeout(c->ctx, timeout);
  conn_ = std::move(c);
  log().debug("cache: connected to the shared compile cache at {}:{}", host_, port_);
  return conn_.get();
}

void SharedCache::down(const std::string& why) {
  log().warn("hjit: the shared compile cache at {}:{} is not answering ({}); using the local tiers, trying again in a minute",
             host_, port_, why);
  conn_.reset();
  retry_at_ms_ = now_ms() + 60000;
}

std::optional<std::string> SharedCache::get(const std::string& name) {
  std::lock_guard lock(mu_);
  Connection* c = connection();
  if (!c) return std::nullopt;
  const std::string k = redis_key(name);
  std::string why;
  // The size first: a value larger than any entry is refused without reading any of it.
  Reply size(command_within_deadline(c->ctx, &why, "STRLEN %b", k.data(), k.size()));
  if (!size.r) {
    down(why);
    return std::nullopt;
  }
  if (size.r->type != REDIS_REPLY_INTEGER || size.r->integer == 0) {  // missing (0), or not a string
    ++counts_.misses;
    return std::nullopt;
  }
  auto too_large = [&] {
    ++counts_.rejected;
    log().warn("hjit: not loading the shared compile cache entry {} from {}:{}: it holds more than {} bytes, more than any entry "
               "hjit writes; compiling it here", k, host_, port_, kMaxEntryBytes);
    return std::nullopt;
  };
  if (size.r->integer > kMaxEntryBytes) return too_large();
  // Then no more than that, whatever the value became meanwhile. GETRANGE answers an empty string
  // for a missing key, which no entry is.
  Reply reply(command_within_deadline(c->ctx, &why, "GETRANGE %b 0 %lld", k.data(), k.size(), (long long)kMaxEntryBytes));
  if (!reply.r) {
    down(why);
    return std::nullopt;
  }
  if (reply.r->type != REDIS_REPLY_STRING || reply.r->len == 0) {
    ++counts_.misses;
    return std::nullopt;
  }
  if (int64_t(reply.r->len) > kMaxEntryBytes) return too_large();
  std::optional<std::string> bytes = unframe(key_, name, std::string(reply.r->str, reply.r->len));
  if (!bytes) {
    ++counts_.rejected;
    log().warn("hjit: not loading the shared compile cache entry {} from {}:{}: it has no valid tag (written without "
               "the fleet's key, or changed since); compiling it here", k, host_, port_);
    return std::nullopt;
  }
  ++counts_.hits;
  return bytes;
}

bool SharedCache::has(const std::string& name) {
  std::lock_guard lock(mu_);
  Connection* c = connection();
  if (!c) return false;
  const std::string k = redis_key(name);
  std::string why;
  Reply reply(command_within_deadline(c->ctx, &why, "EXISTS %b", k.data(), k.size()));
  if (!reply.r) {
    down(why);
    return false;
  }
  return reply.r->type == REDIS_REPLY_INTEGER && reply.r->integer == 1;
}

void SharedCache::put(const std::string& name, const std::string& bytes) {
  std::lock_guard lock(mu_);
  Connection* c = connection();
  if (!c) return;
  const std::string k = redis_key(name);
  const std::string value = frame(key_, name, bytes);
  if (int64_t(value.size()) > kMaxEntryBytes) {  // no reader would take it
    log().debug("cache: not sharing {} ({} bytes, more than the {} a reader takes)", k, value.size(), kMaxEntryBytes);
    return;
  }
  std::string why;
  Reply reply(command_within_deadline(c->ctx, &why, "SET %b %b", k.data(), k.size(), value.data(), value.size()));
  if (!reply.r) {
    down(why);
    return;
  }
  if (reply.r->type == REDIS_REPLY_ERROR) {
    log().warn("hjit: the shared compile cache at {}:{} refused an entry: {}", host_, port_, std::string(reply.r->str, reply.r->len));
    return;
  }
  ++counts_.writes;
}

#else  // built without hiredis and libcrypto: the tier stays off

struct SharedCache::Connection {};
std::string SharedCache::frame(const std::string&, const std::string&, const std::string&) { return ""; }
std::optional<std::string> SharedCache::unframe(const std::string&, const std::string&, const std::string&) { return std::nullopt; }
SharedCache::Connection* SharedCache::connection() { return nullptr; }
void SharedCache::down(const std::string&) {}
std::optional<std::string> SharedCache::get(const std::string&) { return std::nullopt; }
bool SharedCache::has(const std::string&) { return false; }
void SharedCache::put(const std::string&, const std::string&) {}

#endif

SharedCache::SharedCache(std::string host, int port, std::string key) : host_(std::move(host)), port_(port), key_(std::move(key)) {
  counts_.address = host_ + ":" + std::to_string(port_);
}
SharedCache::~SharedCache() = default;

std::unique_ptr<SharedCache> SharedCache::make(const std::string& address, const std::string& key) {
  const size_t colon = address.rfind(':');
  char* end = nullptr;
  const long port = colon == std::string::npos ? 0 : std::strtol(address.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || colon == 0 || !end || *end || port <= 0 || port > 65535) {
    log().warn("hjit: HJIT_CACHE_REDIS='{}' is not host:port; the shared compile cache is off", address);
    return nullptr;
  }
  if (key.size() < kMinKeyBytes) {
    log().warn("hjit: the shared compile cache's key has {} bytes, fewer than {}; the shared compile cache is off",
               key.size(), kMinKeyBytes);
    return nullptr;
  }
#ifndef HJIT_HAVE_REDIS
  log().warn("hjit: HJIT_CACHE_REDIS is set, but hjit was built without hiredis and libssl; the shared compile cache is off");
  return nullptr;
#else
  return std::unique_ptr<SharedCache>(new SharedCache(address.substr(0, colon), int(port), key));
#endif
}

std::unique_ptr<SharedCache> SharedCache::from_environment() {
  const std::string address = setting::raw(setting::Id::CacheRedis).value_or("");
  if (address.empty()) return nullptr;
  const std::string key = key_from_environment();
  return key.empty() ? nullptr : make(address, key);
}

SharedCacheStats SharedCache::stats() const {
  std::lock_guard lock(mu_);
  return counts_;
}

}  // namespace hjit::backend
