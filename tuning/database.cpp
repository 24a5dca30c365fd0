#include "tuning/database.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <functional>
#include <map>
#include <mutex>

#include <hjit/error.h>

#include "support/log.h"

namespace hjit::tuning {
namespace {

constexpr int kApplicationId = 0x686a6974;  // 'hjit'

const char* const kSchema = R"sql(
CREATE TABLE IF NOT EXISTS pipelines(
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  graph_hash TEXT NOT NULL,
  signature TEXT NOT NULL,
  target TEXT NOT NULL,
  hjit_version TEXT NOT NULL,
  halide_version TEXT NOT NULL,
  name TEXT NOT NULL,
  graph TEXT NOT NULL,
  builtin_ms REAL NOT NULL DEFAULT 0,
  tuning_s REAL NOT NULL DEFAULT 0,
  created TEXT NOT NULL DEFAULT (datetime('now')));
CREATE TABLE IF NOT EXISTS candidates(
  id INTEGER PRIMARY KEY,
  pipeline INTEGER NOT NULL REFERENCES pipelines(id),
  origin TEXT NOT NULL,
  schedule TEXT NOT NULL,
  ms REAL NOT NULL,
  valid INTEGER NOT NULL,
  error TEXT NOT NULL,
  compile_ms REAL NOT NULL,
  at_s REAL NOT NULL,
  best INTEGER NOT NULL DEFAULT 0,
  created TEXT NOT NULL DEFAULT (datetime('now')),
  baseline_ms REAL NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS candidates_of_pipeline ON candidates(pipeline);
)sql";

// Version 1 to 2: the baseline timed beside each candidate (none for the records already there).
const char* const kUpgradeFrom1 = "ALTER TABLE candidates ADD COLUMN baseline_ms REAL NOT NULL DEFAULT 0; PRAGMA user_version=2;";

}  // namespace

struct Database::Impl {
  sqlite3* db = nullptr;
  std::mutex mu;  // one statement at a time on the connection

  [[noreturn]] void fail(const std::string& path, const std::string& doing, int rc) {
    const std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT)
      throw ValueError("tuning database '" + path + "' is corrupt or not an SQLite database (" + msg + ", while " + doing +
                       "); move it away and tune again");
    throw ValueError("tuning database '" + path + "': " + doing + " failed: " + msg);
  }
};

namespace {

// A prepared statement, bound and stepped, finalized on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& sql, std::function<void(int, const char*)> fail) : fail_(std::move(fail)) {
    const int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &s_, nullptr);
    if (rc != SQLITE_OK) fail_(rc, sql.c_str());
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt& bind(int i, const std::string& v) { return check(sqlite3_bind_text(s_, i, v.c_str(), int(v.size()), SQLITE_TRANSIENT)); }
  Stmt& bind(int i, double v) { return check(sqlite3_bind_double(s_, i, v)); }
  Stmt& bind(int i, int64_t v) { return check(sqlite3_bind_int64(s_, i, v)); }
  // True while there is a row.
  bool step() {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) fail_(rc, sqlite3_sql(s_));
    return false;
  }
  std::string text(int i) const {
    const unsigned char* p = sqlite3_column_text(s_, i);
    return p ? std::string(reinterpret_cast<const char*>(p), size_t(sqlite3_column_bytes(s_, i))) : std::string();
  }
  double real(int i) const { return sqlite3_column_double(s_, i); }
  bool null(int i) const { return sqlite3_column_type(s_, i) == SQLITE_NULL; }
  int64_t integer(int i) const { return sqlite3_column_int64(s_, i); }

 private:
  Stmt& check(int rc) {
    if (rc != SQLITE_OK) fail_(rc, "bind");
    return *this;
  }
  sqlite3_stmt* s_ = nullptr;
  std::function<void(int, const char*)> fail_;
};

const char* const kPipelineColumns =
    "id, key, graph_hash, signature, target, hjit_version, halide_version, name, graph, builtin_ms, tuning_s";
const char* const kCandidateColumns = "id, pipeline, origin, schedule, ms, valid, error, compile_ms, at_s, best, baseline_ms";

PipelineRecord read_pipeline(const Stmt& s) {
  PipelineRecord p;
  p.id = s.integer(0), p.key = s.text(1), p.graph_hash = s.text(2), p.signature = s.text(3), p.target = s.text(4);
  p.hjit_version = s.text(5), p.halide_version = s.text(6), p.name = s.text(7), p.graph = s.text(8);
  p.builtin_ms = s.real(9), p.tuning_s = s.real(10);
  return p;
}

CandidateRecord read_candidate(const Stmt& s) {
  CandidateRecord c;
  c.id = s.integer(0), c.pipeline = s.integer(1), c.origin = s.text(2), c.schedule = s.text(3), c.ms = s.real(4);
  c.valid = s.integer(5) != 0, c.error = s.text(6), c.compile_ms = s.real(7), c.at_s = s.real(8), c.best = s.integer(9) != 0;
  c.baseline_ms = s.real(10);
  return c;
}

}  // namespace

double times_faster(const CandidateRecord& a, const CandidateRecord& b) {
  if (a.baseline_ms > 0 && b.baseline_ms > 0) return (b.ms / b.baseline_ms) / (a.ms / a.baseline_ms);
  return b.ms / a.ms;
}

double speedup(const CandidateRecord& c, double builtin_ms) {
  if (!(c.ms > 0)) return 0;
  if (c.baseline_ms > 0) return c.baseline_ms / c.ms;
  return builtin_ms > 0 ? builtin_ms / c.ms : 0;
}

#define HJIT_STMT(sql) Stmt(impl_->db, sql, [this](int rc, const char* what) { impl_->fail(path_, what, rc); })

Database::Database(std::string path) : path_(std::move(path)), impl_(std::make_unique<Impl>()) {}

Database::~Database() {
  if (impl_->db) sqlite3_close_v2(impl_->db);
}

std::shared_ptr<Database> Database::open(const std::string& path, bool create) {
  struct stat st {};
  const bool exists = stat(path.c_str(), &st) == 0;
  if (!exists && !create) throw ValueError("tuning database '" + path + "' does not exist; hjit-tune creates it");
  if (exists && !S_ISREG(st.st_mode)) throw ValueError("tuning database '" + path + "' is not a file");
  std::shared_ptr<Database> d(new Database(path));
  Impl& im = *d->impl_;
  const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_FULLMUTEX;
  int rc = sqlite3_open_v2(path.c_str(), &im.db, flags, nullptr);
  if (rc != SQLITE_OK) im.fail(path, "opening", rc);
  sqlite3_busy_timeout(im.db, 30000);
  auto fail = [&](int code, const char* what) { im.fail(path, what, code); };
  auto pragma = [&](const std::string& sql) {
    Stmt s(im.db, sql, fail);
    return s.step() ? s.integer(0) : int64_t(0);
  };
  const int64_t app = pragma("PRAGMA application_id");  // the first read: a non-database fails here
  const int64_t version = pragma("PRAGMA user_version");
  int64_t tables = 0;
  {
    Stmt s(im.db, "SELECT count(*) FROM sqlite_master", fail);
    if (s.step()) tables = s.integer(0);
  }
  if (tables > 0 && app != kApplicationId)
    throw ValueError("tuning database '" + path + "' is an SQLite database of another application (application_id " +
                     std::to_string(app) + "), not an hjit tuning database");
  if (version > kSchemaVersion)
    throw ValueError("tuning database '" + path + "' has schema version " + std::to_string(version) +
                     ", newer than this hjit's " + std::to_string(kSchemaVersion) + "; use a newer hjit or another file");
  if (tables > 0 && version != 1 && version < kSchemaVersion)
    throw ValueError("tuning database '" + path + "' has schema version " + std::to_string(version) + "; this hjit reads " +
                     std::to_string(kSchemaVersion));
  {
    Stmt wal(im.db, "PRAGMA journal_mode=WAL", fail);
    wal.step();
  }
  if (tables > 0 && version == 1) {
    // In one write transaction, checking the version again inside it: another process may have
    // upgraded the file since it was read above.
    char* err = nullptr;
    rc = sqlite3_exec(im.db, "BEGIN IMMEDIATE", nullptr, nullptr, &err);
    if (rc == SQLITE_OK && pragma("PRAGMA user_version") == 1) rc = sqlite3_exec(im.db, kUpgradeFrom1, nullptr, nullptr, &err);
    if (rc == SQLITE_OK) rc = sqlite3_exec(im.db, "COMMIT", nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
      const std::string msg = err ? err : sqlite3_errstr(rc);
      sqlite3_free(err);
      sqlite3_exec(im.db, "ROLLBACK", nullptr, nullptr, nullptr);
      throw ValueError("tuning database '" + path + "': upgrading it from schema version 1 failed: " + msg);
    }
    log().info("tuning database {}: upgraded from schema version 1 to {}", path, kSchemaVersion);
  }
  if (tables == 0) {
    char* err = nullptr;
    const std::string sql = "BEGIN IMMEDIATE;" + std::string(kSchema) + "PRAGMA application_id=" +
                            std::to_string(kApplicationId) + "; PRAGMA user_version=" + std::to_string(kSchemaVersion) +
                            "; COMMIT;";
    rc = sqlite3_exec(im.db, sql.c_str(), nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
      std::string msg = err ? err : "";
      sqlite3_free(err);
      sqlite3_exec(im.db, "ROLLBACK", nullptr, nullptr, nullptr);
      // Another process may have created it at the same moment: then it is there now.
      if (pragma("PRAGMA user_version") != kSchemaVersion) im.fail(path, "creating the schema (" + msg + ")", rc);
    }
  }
  log().debug("tuning: opened database {}", path);
  return d;
}

PipelineRecord Database::pipeline(const PipelineRecord& p) {
  std::lock_guard lock(impl_->mu);
  {
    Stmt s = HJIT_STMT("INSERT OR IGNORE INTO pipelines(key, graph_hash, signature, target, hjit_version, halide_version, "
                       "name, graph) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    s.bind(1, p.key).bind(2, p.graph_hash).bind(3, p.signature).bind(4, p.target).bind(5, p.hjit_version);
    s.bind(6, p.halide_version).bind(7, p.name).bind(8, p.graph);
    s.step();
  }
  Stmt s = HJIT_STMT(std::string("SELECT ") + kPipelineColumns + " FROM pipelines WHERE key = ?1");
  s.bind(1, p.key);
  if (!s.step()) throw ValueError("tuning database '" + path_ + "': the pipeline just written is not there");
  return read_pipeline(s);
}

std::optional<PipelineRecord> Database::find_pipeline(const std::string& key) {
  std::lock_guard lock(impl_->mu);
  Stmt s = HJIT_STMT(std::string("SELECT ") + kPipelineColumns + " FROM pipelines WHERE key = ?1");
  s.bind(1, key);
  if (!s.step()) return std::nullopt;
  return read_pipeline(s);
}

std::vector<PipelineRecord> Database::pipelines() {
  std::lock_guard lock(impl_->mu);
  Stmt s = HJIT_STMT(std::string("SELECT ") + kPipelineColumns + " FROM pipelines ORDER BY id");
  std::vector<PipelineRecord> out;
  while (s.step()) out.push_back(read_pipeline(s));
  return out;
}

void Database::set_builtin_ms(int64_t pipeline, double ms) {
  std::lock_guard lock(impl_->mu);
  Stmt s = HJIT_STMT("UPDATE pipelines SET builtin_ms = ?1 WHERE id = ?2");
  s.bind(1, ms).bind(2, pipeline);
  s.step();
}

void Database::add_tuning_time(int64_t pipeline, double seconds) {
  std::lock_guard lock(impl_->mu);
  Stmt s = HJIT_STMT("UPDATE pipelines SET tuning_s = tuning_s + ?1 WHERE id = ?2");
  s.bind(1, seconds).bind(2, pipeline);
  s.step();
}

// body() inside one write transaction (taken at once, so that concurrent writers wait their
// turn instead of failing halfway), rolled back when it throws.
#define HJIT_TRANSACTION(body)                                                \
  [&] {                                                                       \
    Stmt begin = HJIT_STMT("BEGIN IMMEDIATE");                                \
    begin.step();                                                             \
    try {                                                                     \
      auto result = (body)();                                                 \
      Stmt commit = HJIT_STMT("COMMIT");                                      \
      commit.step();                                                          \
      return result;                                                          \
    } catch (...) {                                                           \
      sqlite3_exec(impl_->db, "ROLLBACK", nullptr, nullptr, nullptr);         \
      throw;                                                                  \
    }                                                                         \
  }()

int64_t Database::add(CandidateRecord c, bool may_be_best) {
  std::lock_guard lock(impl_->mu);
  return HJIT_TRANSACTION([&] {
    bool best = false;
    if (c.valid && may_be_best) {
      Stmt s = HJIT_STMT(std::string("SELECT ") + kCandidateColumns + " FROM candidates WHERE pipeline = ?1 AND best = 1");
      s.bind(1, c.pipeline);
      best = true;
      while (best && s.step()) best = faster(c, read_candidate(s));
    }
    if (best) {
      Stmt clear = HJIT_STMT("UPDATE candidates SET best = 0 WHERE pipeline = ?1 AND best = 1");
      clear.bind(1, c.pipeline);
      clear.step();
    }
    Stmt ins = HJIT_STMT("INSERT INTO candidates(pipeline, origin, schedule, ms, valid, error, compile_ms, at_s, best, "
                         "baseline_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    ins.bind(1, c.pipeline).bind(2, c.origin).bind(3, c.schedule).bind(4, c.ms).bind(5, int64_t(c.valid));
    ins.bind(6, c.error).bind(7, c.compile_ms).bind(8, c.at_s).bind(9, int64_t(best)).bind(10, c.baseline_ms);
    ins.step();
    return int64_t(sqlite3_last_insert_rowid(impl_->db));
  });
}

std::vector<CandidateRecord> Database::candidates(int64_t pipeline) {
  std::lock_guard lock(impl_->mu);
  Stmt s = HJIT_STMT(std::string("SELECT ") + kCandidateColumns + " FROM candidates WHERE pipeline = ?1 ORDER BY id");
  s.bind(1, pipeline);
  std::vector<CandidateRecord> out;
  while (s.step()) out.push_back(read_candidate(s));
  return out;
}

std::optional<CandidateRecord> Database::best(int64_t pipeline) {
  std::lock_guard lock(impl_->mu);
  Stmt s = HJIT_STMT(std::string("SELECT ") + kCandidateColumns +
                     " FROM candidates WHERE pipeline = ?1 AND best = 1 AND valid = 1 ORDER BY ms LIMIT 1");
  s.bind(1, pipeline);
  if (!s.step()) return std::nullopt;
  return read_candidate(s);
}

void Database::mark_best(int64_t pipeline, int64_t candidate) {
  std::lock_guard lock(impl_->mu);
  HJIT_TRANSACTION([&] {
    Stmt clear = HJIT_STMT("UPDATE candidates SET best = 0 WHERE pipeline = ?1 AND best = 1");
    clear.bind(1, pipeline);
    clear.step();
    Stmt set = HJIT_STMT("UPDATE candidates SET best = 1 WHERE pipeline = ?1 AND id = ?2 AND valid = 1");
    set.bind(1, pipeline).bind(2, candidate);
    set.step();
    if (sqlite3_changes(impl_->db) != 1) throw ValueError("hjit: tuning database: no valid candidate " + std::to_string(candidate));
    return 0;
  });
}

std::optional<std::string> best_schedule(const std::string& path, const std::string& key) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<Database>> open;
  std::shared_ptr<Database> db;
  {
    std::lock_guard lock(mu);
    auto it = open.find(path);
    if (it == open.end()) it = open.emplace(path, Database::open(path, false)).first;
    db = it->second;
  }
  std::optional<PipelineRecord> p = db->find_pipeline(key);
  if (!p) return std::nullopt;
  std::optional<CandidateRecord> c = db->best(p->id);
  if (!c || c->schedule.empty()) return std::nullopt;  // the built-in baseline is best: nothing to apply
  return c->schedule;
}

}  // namespace hjit::tuning
