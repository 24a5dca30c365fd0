// The disk cache across processes: a second process compiles nothing; two processes on an empty
// cache agree and leave good entries; corrupted, truncated, swapped and foreign entries are misses
// that are rebuilt, never a crash or a wrong result. And the entry format on its own.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>
#include <csignal>
#include <sys/stat.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <atomic>

#include <hjit/hjit.h>

#include "halide_backend/cache/cache_entry.h"
#include "tests/support.h"

using hjit::Tensor;
#include "support/binary_io.h"

extern char** environ;
namespace fs = std::filesystem;

namespace {

using Report = std::map<std::string, std::string>;


// Starts the worker with HJIT_CACHE_DIR=dir (and `extra` variables), its output into `out`.
pid_t start_worker(const std::string& dir, const std::string& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> env_strings{"HJIT_CACHE_DIR=" + dir};
  env_strings.insert(env_strings.end(), extra.begin(), extra.end());
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "HJIT_CACHE_DIR=", 15) != 0) env_strings.push_back(*e);
  std::vector<char*> env;
  for (std::string& s : env_strings) env.push_back(s.data());
  env.push_back(nullptr);
  std::string program = HJIT_CACHE_WORKER;
  char* argv[] = {program.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, program.c_str(), &actions, nullptr, argv, env.data()) == 0);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

Report finish_worker(pid_t pid, const std::string& out) {
  int status = 0;
  waitpid(pid, &status, 0);
  Report r;
  std::ifstream in(out);
  for (std::string k, v; in >> k && std::getline(in, v);) r[k] = v.substr(1);
  r["exit"] = WIFEXITED(status) ? std::to_string(WEXITSTATUS(status)) : "signal " + std::to_string(WTERMSIG(status));
  return r;
}

Report run_worker(const std::string& dir) {
  const std::string out = dir + ".out";
  return finish_worker(start_worker(dir, out), out);
}

// The results, without the counters.
Report results(Report r) {
  for (const char* k : {"disk_hits", "misses", "rejected", "writes", "entries", "bytes", "evictions", "shared_hits",
                        "shared_rejected", "shared_writes", "shared", "lstm_step_compiles"})
    r.erase(k);
  return r;
}

std::vector<fs::path> entries(const std::string& dir) {
  std::vector<fs::path> v;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".hjit") v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}


// One random corruption of an entry's bytes (`other`: another entry's bytes).
std::string corrupt(std::string bytes, const std::string& other, std::mt19937_64& rng) {
  switch (rng() % 6) {
    case 0:  // truncated
      bytes.resize(rng() % bytes.size());
      break;
    case 1:  // flipped bytes
      for (int k = 0, n = 1 + int(rng() % 8); k < n; ++k) bytes[rng() % bytes.size()] ^= char(1 + rng() % 255);
      break;
    case 2:  // another key's entry under this name
      bytes = other;
      break;
    case 3:  // another format version
      bytes[8] = char(bytes[8] + 1);
      break;
    case 4:  // garbage appended
      bytes += std::string(1 + rng() % 64, char(rng()));
      break;
    default:  // empty
      bytes.clear();
  }
  return bytes;
}

}  // namespace

TEST_CASE("a second process loads every pipeline from the disk cache and computes the same") {
  const std::string dir = test::scratch_dir("second");
  Report first = run_worker(dir);
  REQUIRE(first["exit"] == "0");
  CHECK(first["index_error"] == "raised");
  CHECK(std::stoi(first["misses"]) >= 4);
  CHECK(first["disk_hits"] == "0");
  CHECK(first["writes"] == first["misses"]);
  Report second = run_worker(dir);
  REQUIRE(second["exit"] == "0");
  CHECK(second["misses"] == "0");  // nothing compiled
  CHECK(first["batch_norm_step_pipelines"] == "1");  // one pipeline for every batch size, in both
  CHECK(second["batch_norm_step_pipelines"] == "1");
  CHECK(first["lstm_step_pipelines"] == "1");  // the LSTM's step, with its scans, too
  CHECK(second["lstm_step_pipelines"] == "1");
  CHECK(second["lstm_step_compiles"] == "0");
  CHECK(second["disk_hits"] == first["misses"]);
  CHECK(results(second) == results(first));
  fs::remove_all(dir);
}

TEST_CASE("two processes on an empty cache agree and leave good entries") {
  const std::string dir = test::scratch_dir("concurrent"), reference = test::scratch_dir("reference");
  Report want = run_worker(reference);
  for (int round = 0; round < 3; ++round) {
    fs::remove_all(dir);
    const pid_t a = start_worker(dir, dir + ".a"), b = start_worker(dir, dir + ".b");
    Report ra = finish_worker(a, dir + ".a"), rb = finish_worker(b, dir + ".b");
    REQUIRE(ra["exit"] == "0");
    REQUIRE(rb["exit"] == "0");
    CHECK(results(ra) == results(want));
    CHECK(results(rb) == results(want));
    Report after = run_worker(dir);  // every entry they left is whole: all hits
    CHECK(after["misses"] == "0");
    CHECK(after["rejected"] == "0");
    CHECK(results(after) == results(want));
    for (const auto& e : fs::directory_iterator(dir)) CHECK(e.path().extension() == ".hjit");  // no temporaries left
  }
  fs::remove_all(dir);
  fs::remove_all(reference);
}

TEST_CASE("1000 corrupted entries: each is rejected by its checks or is the entry itself") {
  const std::string dir = test::scratch_dir("decode");
  REQUIRE(run_worker(dir)["exit"] == "0");
  std::vector<fs::path> files = entries(dir);
  REQUIRE(files.size() >= 4);
  // The key of each entry, from a clean decode: the entry's name is the hash of its key.
  std::mt19937_64 rng(7);
  int rejected = 0;
  for (int i = 0; i < 1000; ++i) {
    const fs::path& f = files[size_t(i) % files.size()];
    const std::string good = test::read_file(f), other = test::read_file(files[(size_t(i) + 1) % files.size()]);
    const std::string bad = corrupt(good, other, rng);
    // The key is not stored outside the entry: decoding with the right key must accept only the
    // intact entry. Find the key by decoding the payload's first string.
    const std::string payload = good.substr(52);
    hjit::BinaryReader r(payload);
    const std::string key = r.str();
    try {
      hjit::backend::DecodedEntry e = hjit::backend::decode_cache_entry(bad, key);
      CHECK(bad == good);  // accepted: then it must be the entry itself
    } catch (const hjit::ValueError&) {
      ++rejected;
    }
  }
  CHECK(rejected > 990);
  fs::remove_all(dir);
}

TEST_CASE("corrupted entries in a cache are misses that are rebuilt, with the right results") {
  const std::string dir = test::scratch_dir("rebuild");
  Report want = run_worker(dir);
  REQUIRE(want["exit"] == "0");
  std::mt19937_64 rng(11);
  for (int round = 0; round < 12; ++round) {
    std::vector<fs::path> files = entries(dir);
    for (size_t k = 0; k < files.size(); ++k)
      if (rng() % 2) test::write_file(files[k], corrupt(test::read_file(files[k]), test::read_file(files[(k + 1) % files.size()]), rng));
    Report r = run_worker(dir);
    REQUIRE(r["exit"] == "0");
    CHECK(results(r) == results(want));
    Report again = run_worker(dir);  // the rebuilt entries are good
    CHECK(again["misses"] == "0");
    CHECK(results(again) == results(want));
  }
  fs::remove_all(dir);
}

TEST_CASE("without a linker, pipelines compile in process (the JIT), compute the same, and nothing is kept") {
  const std::string dir = test::scratch_dir("nolinker"), reference = test::scratch_dir("nolinker_ref");
  Report want = run_worker(reference);
  Report r = finish_worker(start_worker(dir, dir + ".out", {"HJIT_LINKER=/nonexistent/ld"}), dir + ".out");
  REQUIRE(r["exit"] == "0");
  CHECK(results(r) == results(want));
  CHECK(r["writes"] == "0");
  CHECK(entries(dir).empty());
  fs::remove_all(dir);
  fs::remove_all(reference);
}

TEST_CASE("above HJIT_CACHE_MAX_MB, the least recently used entries go") {
  const std::string dir = test::scratch_dir("lru");
  Report full = run_worker(dir);
  REQUIRE(full["exit"] == "0");
  REQUIRE(std::stoll(full["bytes"]) < (2 << 20));  // the worker's entries fit in two megabytes
  fs::remove_all(dir);
  const std::string out = dir + ".out";
  Report r = finish_worker(start_worker(dir, out, {"HJIT_CACHE_MAX_MB=0"}), out);
  REQUIRE(r["exit"] == "0");
  CHECK(r["entries"] == "0");  // 0: nothing is kept
  CHECK(std::stoll(r["evictions"]) == std::stoll(r["writes"]));
  CHECK(results(r) == results(full));
  // The least recently used go first: a big entry nobody used for a day goes before the ones this
  // run uses, when a write (one entry removed, so compiled again) takes the cache over its limit.
  fs::remove_all(dir);
  REQUIRE(run_worker(dir)["exit"] == "0");
  std::vector<fs::path> files = entries(dir);
  const fs::path stale = dir + "/00000000000000000000000000000000.hjit";
  test::write_file(stale.string(), std::string(size_t(4) << 20, 'x'));
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(24));
  fs::remove(files[0]);
  Report lru = finish_worker(start_worker(dir, out, {"HJIT_CACHE_MAX_MB=3"}), out);
  REQUIRE(lru["exit"] == "0");
  CHECK(lru["writes"] == "1");
  CHECK(lru["evictions"] == "1");
  CHECK(!fs::exists(stale));
  CHECK(entries(dir) == files);
  fs::remove_all(dir);
}

TEST_CASE("a big graph compiles in two parts at once and computes what eager computes") {
  // A training step of a small MLP, cut in two (HJIT_PARTITION_WORK lowered so that it is).
  Tensor w1 = Tensor::randn({32, 64}, 1), w2 = Tensor::randn({64, 8}, 2);
  Tensor x = Tensor::randn({16, 32}, 3), y = Tensor::randn({16, 8}, 4);
  auto step = [](Tensor& w1, Tensor& w2) {
    return [&w1, &w2](const Tensor& x, const Tensor& y) {
      auto loss = [&](const Tensor& x) {
        Tensor d = hjit::matmul(hjit::relu(hjit::matmul(x, w1)), w2) - y;
        return hjit::mean(d * d);
      };
      auto [l, g] = hjit::value_and_grad(loss, std::vector<Tensor>{w1, w2})(x);
      w1.assign(w1 - 0.1 * g[0]);
      w2.assign(w2 - 0.1 * g[1]);
      return std::vector<Tensor>{l, g[0], g[1]};
    };
  };
  Tensor a1 = w1.clone(), a2 = w2.clone(), b1 = w1.clone(), b2 = w2.clone();
  auto eager = step(a1, a2);
  setenv("HJIT_PARTITION_WORK", "4", 1);
  hjit::JitOptions o;
  o.opt_level = 1;
  auto jitted = hjit::jit(step(b1, b2), o);
  for (int i = 0; i < 3; ++i) {
    std::vector<Tensor> want = eager(x, y), got = jitted(x, y);
    REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < got.size(); ++k) CHECK_CLOSE_TOL(got[k], want[k], 1e-4);  // parameters drift apart by rounding
  }
  unsetenv("HJIT_PARTITION_WORK");
  CHECK_CLOSE_TOL(b1, a1, 1e-4);  // three steps of rounding in another order
  CHECK_CLOSE_TOL(b2, a2, 1e-4);
  CHECK(jitted.stats().schedule.find("in 2 parts") != std::string::npos);
  const std::string e = jitted.explain(x, y);
  CHECK(e.find("part 1 of 2") != std::string::npos);
  CHECK(e.find("part 2 of 2") != std::string::npos);
}

TEST_CASE("HJIT_CACHE_DIR= (empty) keeps nothing on disk") {
  const std::string out = test::scratch_dir("off") + ".out";
  Report r = finish_worker(start_worker("", out), out);
  REQUIRE(r["exit"] == "0");
  CHECK(r["writes"] == "0");
  CHECK(r["entries"] == "0");
}

// An entry is native code that hjit loads and runs: whoever can write one can run code in every
// process that reads it. The directory hjit creates is private (0700, entries 0600), and an entry
// or a directory that another user owns or can write, or an entry behind a symbolic link, is not
// used: a miss (and a warning), the entry rebuilt by this process in its place.
TEST_CASE("entries another user could have written are never loaded; the cache hjit creates is private") {
  const std::string dir = test::scratch_dir("trust") + "/cache";  // (created by the worker)
  Report want = run_worker(dir);
  REQUIRE(want["exit"] == "0");
  auto mode = [](const fs::path& p) { return fs::status(p).permissions() & fs::perms::mask; };
  CHECK(mode(dir) == fs::perms::owner_all);
  const std::vector<fs::path> files = entries(dir);
  REQUIRE(files.size() >= 4);
  for (const fs::path& f : files) CHECK(mode(f) == (fs::perms::owner_read | fs::perms::owner_write));
  const std::string misses = want["misses"];

  auto all_rebuilt = [&](const char* what) {
    CAPTURE(what);
    Report r = run_worker(dir);
    REQUIRE(r["exit"] == "0");
    CHECK(results(r) == results(want));
    CHECK(r["disk_hits"] == "0");
    CHECK(r["misses"] == misses);
    CHECK(r["rejected"] == std::to_string(files.size()));
    Report again = run_worker(dir);  // each replaced by an entry of this user's, private
    CHECK(again["misses"] == "0");
    for (const fs::path& f : entries(dir)) CHECK(mode(f) == (fs::perms::owner_read | fs::perms::owner_write));
  };
  // Writable by the group or by others (an entry left so by an older hjit or a careless copy).
  for (const fs::path& f : files) fs::permissions(f, fs::perms::group_write | fs::perms::others_write, fs::perm_options::add);
  all_rebuilt("writable entries");
  // A symbolic link to an intact entry.
  for (const fs::path& f : files) {
    fs::rename(f, f.string() + ".target");
    fs::create_symlink(f.string() + ".target", f);
  }
  all_rebuilt("linked entries");
  for (const fs::path& f : files) fs::remove(f.string() + ".target");
  if (geteuid() == 0) {  // another user's entries (only root can make them here)
    for (const fs::path& f : files) REQUIRE(chown(f.c_str(), 65534, 65534) == 0);
    all_rebuilt("another user's entries");
  }

  // A directory others can write, or another user's: not used at all (nothing read or written).
  auto unused = [&](const char* what) {
    CAPTURE(what);
    Report r = run_worker(dir);
    REQUIRE(r["exit"] == "0");
    CHECK(results(r) == results(want));
    CHECK(r["disk_hits"] == "0");
    CHECK(r["writes"] == "0");
  };
  fs::permissions(dir, fs::perms::others_write | fs::perms::others_exec, fs::perm_options::add);
  unused("a directory others can write");
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace);
  if (geteuid() == 0) {
    REQUIRE(chown(dir.c_str(), 65534, 65534) == 0);
    unused("another user's directory");
  }
  fs::remove_all(fs::path(dir).parent_path());
}

namespace {

// A redis-server of this test's own on 127.0.0.1, in a scratch directory, stopped at the end.
struct RedisServer {
  pid_t pid = -1;
  int port = 0;
  std::string dir;
  RedisServer() {
    dir = test::scratch_dir("redis");
    std::mt19937 rng{uint32_t(getpid())};
    for (int attempt = 0; attempt < 20 && pid < 0; ++attempt) {
      port = 20000 + int(rng() % 40000);
      const std::string p = std::to_string(port);
      std::vector<std::string> args = {"redis-server", "--port", p, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                       "--dir", dir, "--logfile", dir + "/redis.log"};
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      pid_t child = 0;
      if (posix_spawnp(&child, "redis-server", nullptr, nullptr, argv.data(), environ) != 0) return;
      for (int wait = 0; wait < 100; ++wait) {  // up to 5 s for it to answer
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (cli("PING") == "PONG") {
          pid = child;
          break;
        }
        int status = 0;
        if (waitpid(child, &status, WNOHANG) == child) break;  // the port was taken: another one
      }
      if (pid < 0) kill(child, SIGKILL), waitpid(child, nullptr, 0);
    }
  }
  ~RedisServer() {
    if (pid > 0) kill(pid, SIGTERM), waitpid(pid, nullptr, 0);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  // One redis-cli command's output, trimmed.
  std::string cli(const std::string& command) const {
    const std::string line = "redis-cli -h 127.0.0.1 -p " + std::to_string(port) + " " + command + " 2>/dev/null";
    std::string out;
    if (FILE* f = popen(line.c_str(), "r")) {
      char buf[4096];
      for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
      pclose(f);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
  }
  std::vector<std::string> keys() const {
    std::vector<std::string> v;
    std::istringstream in(cli("--scan --pattern 'hjit:cache:*'"));
    for (std::string k; std::getline(in, k);)
      if (!k.empty()) v.push_back(k);
    return v;
  }
};

Report run_worker_with(const std::string& dir, std::vector<std::string> env) {
  const std::string out = dir + ".out";
  return finish_worker(start_worker(dir, out, std::move(env)), out);
}

// A server that answers every command with the start of a long reply and then a byte every 200 ms:
// each read is quick, the reply never whole.
struct TricklingServer {
  int listener = -1, port = 0;
  std::atomic<bool> stop{false};
  std::thread thread;
  TricklingServer() {
    listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(listener, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(listener, 8) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    port = ntohs(a.sin_port);
    thread = std::thread([this] {
      std::vector<int> clients;
      while (!stop) {
        pollfd p{listener, POLLIN, 0};
        if (poll(&p, 1, 200) > 0) clients.push_back(accept(listener, nullptr, nullptr));
        for (int c : clients) {
          char buf[4096];
          while (recv(c, buf, sizeof buf, MSG_DONTWAIT) > 0) {
          }
          static const char start[] = "$1000000\r\n";
          send(c, start, sizeof start - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
          send(c, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
      }
      for (int c : clients) close(c);
    });
  }
  ~TricklingServer() {
    stop = true;
    if (thread.joinable()) thread.join();
    if (listener >= 0) close(listener);
  }
};

}  // namespace

TEST_CASE("the shared tier: a machine with an empty disk compiles nothing; entries without a valid tag are never loaded") {
  RedisServer redis;
  if (redis.pid < 0) {
    MESSAGE("redis-server could not be started (make deps installs Debian's redis-server): skipped");
    return;
  }
  const std::string fleet_key = "HJIT_CACHE_KEY=this fleet's shared secret, 32+ bytes";
  const std::vector<std::string> fleet = {"HJIT_CACHE_REDIS=" + redis.address(), fleet_key};
  const std::string root = test::scratch_dir("shared");

  // The first machine compiles and shares every pipeline it compiles.
  Report first = run_worker_with(root + "/a", fleet);
  REQUIRE(first["exit"] == "0");
  CHECK(first["shared"] == redis.address());
  CHECK(std::stoi(first["misses"]) > 0);
  CHECK(first["shared_writes"] == first["misses"]);
  const size_t shared = redis.keys().size();
  CHECK(shared == size_t(std::stoi(first["misses"])));

  // A second one, its disk empty, compiles nothing and computes the same.
  Report second = run_worker_with(root + "/b", fleet);
  REQUIRE(second["exit"] == "0");
  CHECK(second["misses"] == "0");
  CHECK(second["shared_hits"] == first["misses"]);
  CHECK(results(second) == results(first));
  CHECK(entries(root + "/b").size() == shared);  // kept on its disk
  // A third with that disk: the disk tier answers.
  Report third = run_worker_with(root + "/b", fleet);
  CHECK(third["misses"] == "0");
  CHECK(third["shared_hits"] == "0");

  // Entries planted without the fleet's key: garbage, then entries tagged with another key (another
  // fleet's writer, or someone who guessed at the format). Each is refused, compiled here, and the
  // results are right.
  for (const std::string& k : redis.keys()) redis.cli("SET " + k + " planted-native-code");
  Report garbage = run_worker_with(root + "/c", fleet);
  REQUIRE(garbage["exit"] == "0");
  CHECK(garbage["shared_hits"] == "0");
  CHECK(garbage["shared_rejected"] == std::to_string(shared));
  CHECK(results(garbage) == results(first));
  Report other_key = run_worker_with(root + "/d", {"HJIT_CACHE_REDIS=" + redis.address(), "HJIT_CACHE_KEY=another fleet's key, also long"});
  CHECK(other_key["shared_rejected"] == std::to_string(shared));  // ours, rewritten by the garbage run: not theirs
  Report after_other = run_worker_with(root + "/e", fleet);
  CHECK(after_other["shared_hits"] == "0");
  CHECK(after_other["shared_rejected"] == std::to_string(shared));
  CHECK(results(after_other) == results(first));

  // A value larger than any entry, planted under one of the keys: refused after reading no more
  // than an entry's limit of it.
  const std::string big = root + "/big";
  test::write_file(big, std::string(size_t(100) << 20, 'x'));
  const std::string planted_key = redis.keys().at(0);
  REQUIRE(std::system(("redis-cli -h 127.0.0.1 -p " + std::to_string(redis.port) + " -x SET " + planted_key + " < " + big + " > /dev/null").c_str()) == 0);
  fs::remove(big);
  Report oversized = run_worker_with(root + "/k", fleet);
  REQUIRE(oversized["exit"] == "0");
  CHECK(std::stoi(oversized["shared_rejected"]) >= 1);
  CHECK(results(oversized) == results(first));

  // Without a key, or with too short a key, the tier is off; an unreachable Redis is a warning and the
  // local tiers.
  Report no_key = run_worker_with(root + "/f", {"HJIT_CACHE_REDIS=" + redis.address()});
  CHECK(no_key["exit"] == "0");
  CHECK(no_key["shared"] == "off");
  Report short_key = run_worker_with(root + "/g", {"HJIT_CACHE_REDIS=" + redis.address(), "HJIT_CACHE_KEY=short"});
  CHECK(short_key["shared"] == "off");
  redis.cli("SHUTDOWN NOSAVE");
  Report down = run_worker_with(root + "/h", fleet);
  CHECK(down["exit"] == "0");
  CHECK(results(down) == results(first));
  CHECK(down["shared_hits"] == "0");

  // A key file others can read is refused; a private one is used.
  const std::string key_file = root + "/key";
  test::write_file(key_file, "a key read from a file of one's own\n");
  chmod(key_file.c_str(), 0644);
  RedisServer again;
  REQUIRE(again.pid > 0);
  Report readable = run_worker_with(root + "/i", {"HJIT_CACHE_REDIS=" + again.address(), "HJIT_CACHE_KEY_FILE=" + key_file});
  CHECK(readable["shared"] == "off");
  chmod(key_file.c_str(), 0600);
  Report from_file = run_worker_with(root + "/j", {"HJIT_CACHE_REDIS=" + again.address(), "HJIT_CACHE_KEY_FILE=" + key_file});
  CHECK(from_file["shared"] == again.address());
  CHECK(from_file["shared_writes"] == from_file["misses"]);

  // A server that trickles its replies: the first command gives up at its deadline and the tier
  // is down for a minute; the worker compiles here and ends.
  TricklingServer trickle;
  REQUIRE(trickle.port > 0);
  const auto start = std::chrono::steady_clock::now();
  Report trickled = run_worker_with(root + "/l", {"HJIT_CACHE_REDIS=127.0.0.1:" + std::to_string(trickle.port), fleet_key});
  CHECK(trickled["exit"] == "0");
  CHECK(trickled["shared_hits"] == "0");
  CHECK(results(trickled) == results(first));
  MESSAGE("a worker beside a trickling server ended in " << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s");
}
