// The tuning database: every schedule a tuning run measured for a pipeline, kept in SQLite, so that
// later processes use the best one without searching (hjit-tune writes it, jit() reads it).
//
// Schema version 2 (PRAGMA user_version), application id 'hjit' (PRAGMA application_id):
//   pipelines:  one row per pipeline key (normalized graph hash, shapes and dtypes, target, hjit and
//               Halide versions), with the graph's text, the built-in schedule's time and the
//               seconds spent tuning it;
//   candidates: every schedule tried on it: origin ("built-in cols=3", "Adams2019 seed=7", ...),
//               schedule text, median ms and the built-in baseline's timed in turn with it
//               (version 2), valid or why not, when in the tuning run it was measured; the
//               fastest valid one is marked best.
// WAL mode, so that several tuning processes share one file. A file that is not an SQLite
// database, a database of another application, or a newer schema is a ValueError naming it; a
// version 1 file gains version 2's column when opened (its records have no baseline times).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hjit::tuning {

inline constexpr int kSchemaVersion = 2;

struct PipelineRecord {
  int64_t id = 0;
  std::string key;         // hash of everything below: what a lookup matches
  std::string graph_hash;  // of the normalized graph text and its constants
  std::string signature;   // input and output types: "f32[1024,1024], f32[1024,1024] -> f32[1024,1024]"
  std::string target, hjit_version, halide_version;
  std::string name;        // a name for people (the first one seen)
  std::string graph;       // the graph's text (for people, and for re-tuning from the database)
  double builtin_ms = 0;   // the built-in schedule's time (0: not yet measured)
  double tuning_s = 0;     // seconds of tuning spent on it, over every run
};

struct CandidateRecord {
  int64_t id = 0, pipeline = 0;
  std::string origin;    // the request that produced it ("built-in rows=4", "Mullapudi2016 cache=...")
  std::string schedule;  // its text form; empty for the built-in baseline (what jit() compiles
                         // without a database, perhaps as two partitioned pipelines) and when
                         // the scheduler produced none
  double ms = 0;         // median time of a run (valid ones)
  double baseline_ms = 0;  // the built-in baseline's median, timed in turn with it (0: not timed)
  bool valid = false;    // compiled, ran, and matched eager
  std::string error;     // why not, when not valid
  double compile_ms = 0;
  double at_s = 0;       // the pipeline's tuning time when it was measured
  bool best = false;
};

// How many times faster a ran than b: by their times relative to the baseline timed in turn with
// each where both have one (a machine whose speed drifts by 5% over seconds moves a candidate and
// its baseline alike), else by their times (records of version 1 files).
double times_faster(const CandidateRecord& a, const CandidateRecord& b);
inline bool faster(const CandidateRecord& a, const CandidateRecord& b) { return times_faster(a, b) > 1; }
// How many times faster than the built-in baseline c ran: against the baseline timed in turn with
// it, else against builtin_ms (the pipeline's); 0 when neither is known.
double speedup(const CandidateRecord& c, double builtin_ms);

class Database {
 public:
  // Opens (creating when `create`, else ValueError if missing) and checks the file.
  static std::shared_ptr<Database> open(const std::string& path, bool create);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  const std::string& path() const { return path_; }
  // The pipeline's row, inserted when new (its id filled in).
  PipelineRecord pipeline(const PipelineRecord& p);
  std::optional<PipelineRecord> find_pipeline(const std::string& key);
  std::vector<PipelineRecord> pipelines();
  void set_builtin_ms(int64_t pipeline, double ms);
  void add_tuning_time(int64_t pipeline, double seconds);
  // Records a candidate; marks it best when it is valid and faster() than the best so far (unless
  // `may_be_best` is false: a candidate merged from another database). Returns its id.
  int64_t add(CandidateRecord c, bool may_be_best = true);
  std::vector<CandidateRecord> candidates(int64_t pipeline);
  std::optional<CandidateRecord> best(int64_t pipeline);
  // Makes a valid candidate the pipeline's best (a confirmation found the faster-looking one no faster).
  void mark_best(int64_t pipeline, int64_t candidate);

 private:
  struct Impl;
  explicit Database(std::string path);
  std::string path_;
  std::unique_ptr<Impl> impl_;
};

// The best known schedule's text for a pipeline key in the database at path, from a process-wide
// cache of open databases (jit() asks at every trace). nullopt when none is known, or when the
// best is the built-in baseline (recorded with an empty schedule: what jit() compiles anyway).
std::optional<std::string> best_schedule(const std::string& path, const std::string& key);

}  // namespace hjit::tuning
