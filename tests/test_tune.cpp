// Tuning runs (hjit/tune.h): the database, the candidates, the worker's honesty (crashes, hangs and
// wrong results recorded as failed, never chosen), Ctrl-C, resuming, the report, and jit() /
// Module using what a run found.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <hjit/hjit.h>
#include <hjit/tune.h>

#include "halide_backend/backend.h"
#include "halide_backend/providers/extern_stages.h"
#include "halide_backend/builtin_params.h"
#include "tests/support.h"
#include "tuning/candidates.h"
#include "tuning/database.h"
#include "tuning/generation.h"
#include "tuning/pipeline_key.h"

using hjit::Tensor;
using namespace hjit::tuning;
using test::compare;
using test::read_file;
using test::write_file;
namespace fs = std::filesystem;

namespace {


CandidateRecord candidate(int64_t pipeline, const std::string& origin, double ms, bool valid) {
  CandidateRecord c;
  c.pipeline = pipeline, c.origin = origin, c.schedule = "hjit-schedule 1\nsource " + origin + "\n", c.ms = ms, c.valid = valid;
  c.error = valid ? "" : "wrong results", c.at_s = ms;
  return c;
}

PipelineRecord some_pipeline(const std::string& key) {
  PipelineRecord p;
  p.key = key, p.graph_hash = "g", p.signature = "f32[2] -> f32[2]", p.target = "host", p.hjit_version = "0";
  p.halide_version = "14", p.name = "p", p.graph = "{ lambda ; a:f32[2]. let in (a) }";
  return p;
}

Tensor layer(const Tensor& x, const Tensor& w, const Tensor& b) { return hjit::relu(hjit::matmul(x, w) + b); }

}  // namespace

TEST_CASE("tuning database: best marking, reopening, schema checks") {
  const std::string dir = test::scratch_dir("db"), path = dir + "/t.sqlite";
  {
    auto db = Database::open(path, true);
    PipelineRecord p = db->pipeline(some_pipeline("k1"));
    CHECK(p.id > 0);
    CHECK(db->pipeline(some_pipeline("k1")).id == p.id);  // the same key is the same row
    db->add(candidate(p.id, "built-in", 2.0, true));
    CHECK(db->best(p.id)->origin == "built-in");
    db->add(candidate(p.id, "wrong-but-fast", 0.5, false));  // invalid: never best
    CHECK(db->best(p.id)->origin == "built-in");
    db->add(candidate(p.id, "built-in cols=3", 1.5, true));
    db->add(candidate(p.id, "built-in cols=1", 1.8, true));
    CHECK(db->best(p.id)->origin == "built-in cols=3");
    int bests = 0;
    for (const CandidateRecord& c : db->candidates(p.id)) bests += c.best;
    CHECK(bests == 1);
    db->set_builtin_ms(p.id, 2.0);
    db->add_tuning_time(p.id, 12.5);
  }
  auto db = Database::open(path, false);  // a second run finds everything
  std::optional<PipelineRecord> p = db->find_pipeline("k1");
  REQUIRE(p);
  CHECK(p->builtin_ms == 2.0);
  CHECK(p->tuning_s == 12.5);
  CHECK(db->candidates(p->id).size() == 4);
  CHECK(best_schedule(path, "k1").value().find("built-in cols=3") != std::string::npos);
  CHECK_FALSE(best_schedule(path, "unknown key"));

  CHECK_THROWS_AS(Database::open(dir + "/missing.sqlite", false), hjit::ValueError);
  write_file(dir + "/garbage.sqlite", std::string(4096, 'x'));
  CHECK_THROWS_WITH_AS(Database::open(dir + "/garbage.sqlite", false), doctest::Contains("not an SQLite database"), hjit::ValueError);
  // A valid SQLite file of another application.
  REQUIRE(std::system(("sqlite3 '" + dir + "/other.sqlite' 'CREATE TABLE t(x); INSERT INTO t VALUES(1);'").c_str()) == 0);
  CHECK_THROWS_WITH_AS(Database::open(dir + "/other.sqlite", false), doctest::Contains("another application"), hjit::ValueError);
  // A newer schema.
  REQUIRE(std::system(("cp '" + path + "' '" + dir + "/newer.sqlite' && sqlite3 '" + dir + "/newer.sqlite' 'PRAGMA user_version=99'").c_str()) == 0);
  CHECK_THROWS_WITH_AS(Database::open(dir + "/newer.sqlite", false), doctest::Contains("schema version 99"), hjit::ValueError);
  // A truncated database.
  const std::string bytes = read_file(path);
  write_file(dir + "/truncated.sqlite", bytes.substr(0, bytes.size() / 3));
  CHECK_THROWS_AS([&] { Database::open(dir + "/truncated.sqlite", false)->candidates(1); }(), hjit::ValueError);
}

// Each search measurement times the built-in baseline in turn with the candidate: their ratio holds
// where the machine's speed drifts between measurements (5% over seconds on a shared VM).
TEST_CASE("tuning database: candidates timed beside a baseline compare by their time relative to it") {
  const std::string path = test::scratch_dir("relative") + "/t.sqlite";
  auto db = Database::open(path, true);
  const int64_t p = db->pipeline(some_pipeline("k")).id;
  CandidateRecord quick_machine = candidate(p, "built-in cols=1", 0.95, true), slow_machine = candidate(p, "built-in cols=2", 1.8, true);
  quick_machine.baseline_ms = 1.0;  // 0.95 of its baseline
  slow_machine.baseline_ms = 2.0;   // 0.90 of its baseline, measured while the machine ran at half speed
  db->add(quick_machine);
  CHECK(db->best(p)->origin == "built-in cols=1");
  db->add(slow_machine);
  CHECK(db->best(p)->origin == "built-in cols=2");
  CHECK(db->best(p)->baseline_ms == 2.0);  // read back
  CHECK(times_faster(slow_machine, quick_machine) == doctest::Approx(0.95 / 0.90));
  CHECK(faster(slow_machine, quick_machine));
  CHECK(speedup(slow_machine, 99.0) == doctest::Approx(2.0 / 1.8));  // against its own baseline
  // Records without a baseline (schema version 1) compare by their times, and against the pipeline's.
  const CandidateRecord old_a = candidate(p, "a", 1.0, true), old_b = candidate(p, "b", 1.2, true);
  CHECK(faster(old_a, old_b));
  CHECK(times_faster(old_a, old_b) == doctest::Approx(1.2));
  CHECK(speedup(old_a, 3.0) == doctest::Approx(3.0));
  CHECK(speedup(old_a, 0) == 0);  // nothing to compare with
  CHECK(faster(old_a, slow_machine));  // one without a baseline: by time
}

TEST_CASE("timing in turn: each run's median, every run warmed up and timed as often; losers stop after one turn") {
  int a = 0, b = 0;
  auto sleeper = [](int& count, int us) { return [&count, us] { ++count, usleep(useconds_t(us)); }; };
  std::vector<double> ms = medians_ms({sleeper(a, 4000), sleeper(b, 1000)});
  CHECK(a == b);
  CHECK(a >= 6);  // a warm-up and at least 5 turns
  CHECK(ms[0] > ms[1]);
  CHECK(ms[0] >= 4.0);
  // A candidate over twice the baseline's slowest run is known to lose after its first turn.
  a = b = 0;
  ms = medians_ms({sleeper(a, 30000), sleeper(b, 1000)}, true);
  CHECK(a == 2);  // the warm-up and one turn
  CHECK(b == 2);
  CHECK(ms[0] >= 30.0);
  // Close ones are timed in full. (Sleeps of 10 ms: a sleep of 1 ms woke over a millisecond late
  // while other tests ran beside this one, and its first turn passed twice the other's.)
  a = b = 0;
  medians_ms({sleeper(a, 11000), sleeper(b, 10000)}, true);
  CHECK(a >= 6);
}

TEST_CASE("tuning database: a schema version 1 file is upgraded in place, its records kept") {
  const std::string dir = test::scratch_dir("upgrade"), path = dir + "/v1.sqlite";
  // Version 1's schema, as hjit wrote it before the baselines.
  const std::string v1 =
      "PRAGMA application_id=1751804276; PRAGMA user_version=1; "
      "CREATE TABLE pipelines(id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, graph_hash TEXT NOT NULL, signature TEXT NOT "
      "NULL, target TEXT NOT NULL, hjit_version TEXT NOT NULL, halide_version TEXT NOT NULL, name TEXT NOT NULL, graph TEXT "
      "NOT NULL, builtin_ms REAL NOT NULL DEFAULT 0, tuning_s REAL NOT NULL DEFAULT 0, created TEXT NOT NULL DEFAULT "
      "(datetime('now'))); "
      "CREATE TABLE candidates(id INTEGER PRIMARY KEY, pipeline INTEGER NOT NULL REFERENCES pipelines(id), origin TEXT NOT "
      "NULL, schedule TEXT NOT NULL, ms REAL NOT NULL, valid INTEGER NOT NULL, error TEXT NOT NULL, compile_ms REAL NOT NULL, "
      "at_s REAL NOT NULL, best INTEGER NOT NULL DEFAULT 0, created TEXT NOT NULL DEFAULT (datetime('now'))); "
      "INSERT INTO pipelines(key, graph_hash, signature, target, hjit_version, halide_version, name, graph, builtin_ms) "
      "VALUES('k', 'g', 's', 't', '0', '14', 'old', 'graph', 2.0); "
      "INSERT INTO candidates(pipeline, origin, schedule, ms, valid, error, compile_ms, at_s, best) "
      "VALUES(1, 'built-in cols=2', 'hjit-schedule 1', 1.5, 1, '', 10, 3, 1);";
  REQUIRE(std::system(("sqlite3 '" + path + "' \"" + v1 + "\"").c_str()) == 0);
  {
    auto db = Database::open(path, false);
    const std::vector<CandidateRecord> kept = db->candidates(1);
    REQUIRE(kept.size() == 1);
    CHECK(kept[0].ms == 1.5);
    CHECK(kept[0].baseline_ms == 0);
    CHECK(kept[0].best);
    CandidateRecord timed = candidate(1, "built-in cols=3", 1.4, true);
    timed.baseline_ms = 2.0;
    db->add(timed);
    CHECK(db->best(1)->origin == "built-in cols=3");  // by time: the old record has no baseline
  }
  auto again = Database::open(path, false);  // upgraded once; opens as version 2 now
  CHECK(again->candidates(1).size() == 2);
  CHECK(again->candidates(1).at(1).baseline_ms == 2.0);
  CHECK(best_schedule(path, "k").value() == "hjit-schedule 1\nsource built-in cols=3\n");
  // A version before 1 with tables is not one hjit wrote.
  REQUIRE(std::system(("cp '" + path + "' '" + dir + "/v0.sqlite' && sqlite3 '" + dir + "/v0.sqlite' 'PRAGMA user_version=0'").c_str()) == 0);
  CHECK_THROWS_WITH_AS(Database::open(dir + "/v0.sqlite", false), doctest::Contains("schema version 0"), hjit::ValueError);
}

TEST_CASE("tuning database: processes writing one database at once lose nothing") {
  const std::string path = test::scratch_dir("concurrent") + "/t.sqlite";
  const int64_t id = Database::open(path, true)->pipeline(some_pipeline("shared")).id;
  std::vector<pid_t> children;
  for (int w = 0; w < 4; ++w) {
    const pid_t pid = fork();
    if (pid == 0) {  // SQLite only in the child: no OpenMP, which a fork would hang
      int rc = 0;
      try {
        auto db = Database::open(path, true);
        for (int i = 0; i < 50; ++i) {
          const std::string origin = std::string("w").append(std::to_string(w)).append("_").append(std::to_string(i));
          db->add(candidate(id, origin, 1 + (i * 7 + w) % 13, true));
        }
      } catch (...) {
        rc = 1;
      }
      _exit(rc);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  auto db = Database::open(path, false);
  const std::vector<CandidateRecord> all = db->candidates(id);
  CHECK(all.size() == 200);
  int bests = 0;
  double fastest = 1e9;
  for (const CandidateRecord& c : all) bests += c.best, fastest = std::min(fastest, c.ms);
  CHECK(bests == 1);
  CHECK(db->best(id)->ms == fastest);
}

TEST_CASE("built-in schedule parameters: text round trip and bad words") {
  using hjit::backend::BuiltinParams;
  CHECK(BuiltinParams{}.str().empty());
  BuiltinParams p = BuiltinParams::parse("cols=3 rows=6 vec=2 store_expensive=0 extern_gemm=1");
  CHECK(p.cols == 3);
  CHECK(p.rows == 6);
  CHECK_FALSE(p.store_expensive);
  CHECK(BuiltinParams::parse(p.str()) == p);
  CHECK(BuiltinParams::parse("cols=0") == BuiltinParams{});  // defaults are not written
  CHECK_THROWS_AS(BuiltinParams::parse("cols=99"), hjit::ValueError);
  CHECK_THROWS_AS(BuiltinParams::parse("colour=3"), hjit::ValueError);
  CHECK_THROWS_AS(BuiltinParams::parse("cols=x"), hjit::ValueError);
}

TEST_CASE("candidates: each scheduler's own choice first, no repeats, resumed runs skip what was measured") {
  Candidates c({}, {}, 1, true, false);
  std::vector<std::string> first;
  std::set<std::string> seen;
  for (int i = 0; i < 300; ++i) {
    const std::optional<hjit::backend::ScheduleRequest> next = c.next(i > 50 ? "built-in cols=3" : "built-in");
    REQUIRE(next);
    const std::string r = next->str();
    CHECK(hjit::backend::ScheduleRequest::parse(r) == *next);  // the text form reads back as the same request
    CHECK(seen.insert(r).second);
    c.tried(*next);
    if (i < 5) first.push_back(r);
  }
  CHECK(first == std::vector<std::string>{"built-in", "Li2018", "Mullapudi2016", "Adams2019 max_funcs=0", "built-in extern_gemm=1"});
  std::set<std::string> kinds;
  for (const std::string& r : seen) kinds.insert(scheduler_of(r));
  CHECK(kinds == std::set<std::string>{"built-in", "Li2018", "Mullapudi2016", "Adams2019"});
  // Every built-in request parses, and Adams2019 samples vary their seed.
  for (const std::string& r : seen)
    if (scheduler_of(r) == "built-in" && r.size() > 9) CHECK_NOTHROW(hjit::backend::BuiltinParams::parse(r.substr(9)));
  // Resumed: nothing measured before comes again; only the schedulers asked for.
  Candidates resumed({"built-in"}, seen, 2, false, false);
  for (int i = 0; i < 50; ++i) {
    const std::optional<hjit::backend::ScheduleRequest> next = resumed.next("built-in");
    REQUIRE(next);
    const std::string r = next->str();
    CHECK(scheduler_of(r) == "built-in");
    CHECK(seen.count(r) == 0);
    CHECK(r.find("extern_gemm") == std::string::npos);
    resumed.tried(*next);
  }
}

TEST_CASE("generations: handed out in the order given, one generation after another, none past the run's time") {
  // The path a seed takes is the same whatever the number of ranks up to the generation's size.
  for (int ranks = 1; ranks <= 8; ++ranks) CHECK(generation_size(ranks) == generation_size(1));
  CHECK(generation_size(64) == 64);

  std::vector<std::string> requests;
  for (int k = 0; k < 8; ++k) requests.push_back("built-in rows=" + std::to_string(k));
  std::vector<std::string> asked;
  std::vector<double> timeouts;
  auto measure = [&](const std::string& request, double timeout) {
    asked.push_back(request), timeouts.push_back(timeout);
    const int k = request.back() - '0';
    Measurement m;
    m.valid = k != 4, m.ms = 1.5 + double(k), m.error = k == 4 ? "wrong\nresults" : "";
    m.schedule = "f.split(x, xo, xi, " + std::to_string(k) + ");\ng.parallel(y);\n";
    return m;
  };
  // In a world of one, rank 0 measures every candidate itself, in the order given, and a
  // generation's finish() measures none of the next one's.
  const std::vector<size_t> order{7, 4, 1, 0, 2, 3, 5, 6};
  Dispatcher d(Dispatcher::Clock::now(), 1000, 0, [] { return false; });
  d.add(requests, order, 30);
  d.add({"built-in cols=9"}, {0}, 30);
  CHECK(d.generations() == 2);
  const std::vector<Measured> all = d.finish(0, measure);
  REQUIRE(asked.size() == 8);
  for (size_t i = 0; i < 8; ++i) CHECK(asked[i] == requests[order[i]]);
  CHECK(timeouts == std::vector<double>(8, 30));
  REQUIRE(all.size() == 8);
  for (size_t i = 0; i < all.size(); ++i) CHECK(all[i].index == i);  // returned by index
  for (const Measured& m : all) CHECK((m.generation == 0 && m.seconds >= 0 && m.seconds <= m.at_s));
  const std::vector<Measured> next = d.finish(1, measure);
  REQUIRE(next.size() == 1);
  CHECK(next[0].generation == 1);
  CHECK(asked.back() == "built-in cols=9");

  // What a rank reports reads back as measured, schedules and errors with their newlines.
  const std::vector<Measured> back = parse_measured(format_measured(all));
  REQUIRE(back.size() == all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    CHECK(back[i].generation == all[i].generation);
    CHECK(back[i].index == all[i].index);
    CHECK(back[i].at_s == doctest::Approx(all[i].at_s).epsilon(1e-5));
    CHECK(back[i].m.valid == all[i].m.valid);
    CHECK(back[i].m.ms == doctest::Approx(all[i].m.ms));
    CHECK(back[i].m.schedule == all[i].m.schedule);
  }
  CHECK(back[4].m.error == "wrong results");
  CHECK(parse_measured(format_measured({})).empty());
  CHECK(parse_measured("garbage").empty());

  // Near the end of the run a candidate gets what is left (at least 10 s), never the whole timeout;
  // once the time is over, or the run is stopped, none is started.
  timeouts.clear();
  Dispatcher late(Dispatcher::Clock::now() - std::chrono::seconds(998), 1000, 0, [] { return false; });
  late.add(requests, order, 30);
  CHECK(late.finish(0, measure).size() == 8);
  CHECK(timeouts == std::vector<double>(8, 10));
  Dispatcher over(Dispatcher::Clock::now() - std::chrono::seconds(1000), 1000, 0, [] { return false; });
  over.add(requests, order, 30);
  CHECK(over.finish(0, measure).empty());
  asked.clear();
  bool stop = false;
  Dispatcher stopped(Dispatcher::Clock::now(), 1000, 0, [&] { return stop; });
  stopped.add(requests, order, 30);
  CHECK(stopped.finish(0, [&](const std::string& request, double timeout) {
                  stop = true;  // Ctrl-C while the first is measured: it is not a measurement
                  return measure(request, timeout);
                }).empty());
  CHECK(asked.size() == 1);

  // A run of at most 11 candidates: the first generation whole, three of the second, then closed.
  asked.clear();
  Dispatcher counted(Dispatcher::Clock::now(), 1000, 11, [] { return false; });
  counted.add(requests, order, 30);
  counted.add(requests, order, 30);
  CHECK(counted.open());
  CHECK(counted.finish(0, measure).size() == 8);
  CHECK(counted.finish(1, measure).size() == 3);
  CHECK_FALSE(counted.open());
  counted.add({"built-in cols=9"}, {0}, 30);
  CHECK(counted.finish(2, measure).empty());
  CHECK(asked.size() == 11);
}

TEST_CASE("generations hand out the candidates that take longest first, as the run has seen them take") {
  const std::vector<std::string> first{"built-in", "Li2018", "Mullapudi2016", "Adams2019 max_funcs=0",
                                       "built-in rows=4", "built-in cols=2", "Adams2019 max_funcs=0 beam=1 dropout=1 seed=1",
                                       "built-in vec=8"};
  MeasuringTimes times;
  // Nothing seen: Adams2019's beam search weighs ten points and goes first; the rest in their order.
  CHECK(times.longest_first(first) == std::vector<size_t>{3, 0, 1, 2, 4, 5, 6, 7});
  // Learnt: Li2018's schedule runs for 4 s, Adams2019's search compiles for 7 s, a point takes 0.5 s.
  times.observe("Li2018", 4), times.observe("Adams2019 max_funcs=0", 7);
  for (const char* point : {"built-in", "built-in rows=2", "Mullapudi2016"}) times.observe(point, 0.5);
  times.observe("Adams2019 max_funcs=0 beam=1 dropout=50 seed=2", 0.5);
  CHECK(times.estimate("Li2018 parallelism=16") == doctest::Approx(4));
  CHECK(times.estimate("built-in cols=4") == doctest::Approx(0.5));
  CHECK(times.longest_first(first) == std::vector<size_t>{3, 1, 0, 2, 4, 5, 6, 7});
  CHECK(times.longest_first({}).empty());
}

TEST_CASE("tune: candidates that crash, hang or compute wrong results are recorded as failed and never chosen") {
  const std::string dir = test::scratch_dir("faults"), db = dir + "/t.sqlite";
  Tensor x = Tensor::randn({64, 48}, 1), w = Tensor::randn({48, 32}, 2), b = Tensor::randn({32}, 3);
  setenv("HJIT_TUNE_FAULT", "crash:cols=3;hang:rows=4;wrong:vec=2", 1);
  hjit::TuneOptions o;
  o.db = db, o.minutes = 0.25, o.schedulers = {"built-in"}, o.candidate_timeout_s = 3, o.progress = false;
  hjit::TuneResult r = hjit::tune(layer, o, x, w, b);
  unsetenv("HJIT_TUNE_FAULT");
  CHECK(r.tried >= 5);
  CHECK(r.builtin_ms > 0);
  CHECK(r.best_ms > 0);
  CHECK(r.best_ms <= r.builtin_ms);
  CHECK_FALSE(r.interrupted);
  auto d = Database::open(db, false);
  const PipelineRecord p = d->pipelines().at(0);
  CHECK(p.key == r.key);
  int crashed = 0, hung = 0, wrong = 0;
  for (const CandidateRecord& c : d->candidates(p.id)) {
    auto has = [&](const char* s) { return c.origin.find(s) != std::string::npos; };
    if (has("cols=3") || has("rows=4") || has("vec=2")) {
      CHECK_FALSE(c.valid);
      if (has("cols=3")) crashed += c.error.find("crashed") != std::string::npos;
      else if (has("rows=4")) hung += c.error.find("timed out") != std::string::npos;
      else wrong += c.error.find("wrong results") != std::string::npos;
    } else {
      CHECK(c.valid);
    }
    if (c.best) CHECK(c.valid);
    if (c.valid && c.origin != "built-in") CHECK(c.schedule.rfind("hjit-schedule 1", 0) == 0);
    if (c.origin == "built-in") CHECK(c.schedule.empty());  // the baseline: what jit() compiles anyway
    // Every valid measurement has the baseline timed beside it (the baseline's own is its time).
    if (c.valid) CHECK(c.baseline_ms > 0);
    if (c.valid && c.origin == "built-in") CHECK(c.baseline_ms == c.ms);
  }
  MESSAGE("crashed " << crashed << ", hung " << hung << ", wrong " << wrong << " of " << r.tried);
  CHECK(crashed + hung + wrong == r.failed);
  CHECK(r.failed > 0);
}

TEST_CASE("a candidate that only measured faster once is not kept: the confirmation times it against the baseline") {
  if (!*hjit::backend::extern_gemm_library()) {
    MESSAGE("skipped: no extern sgemm candidate to make lucky");
    return;
  }
  const std::string db = test::scratch_dir("confirm") + "/t.sqlite";
  Tensor x = Tensor::randn({48, 32}, 4), w = Tensor::randn({32, 40}, 5), b = Tensor::randn({40}, 6);
  // The extern sgemm candidate reports a thousandth of its time (it wins the search whatever else
  // the machine runs: a search measurement here read 2.4 ms for 2 us beside another tuning run),
  // and is in truth 20 ms slower a run. One generation, from a seed that measures it.
  setenv("HJIT_TUNE_FAULT", "lucky:extern_gemm=1;slow:extern sgemm", 1);
  hjit::TuneOptions o;
  o.db = db, o.minutes = 0.5, o.max_candidates = 8, o.seed = 3, o.schedulers = {"built-in"}, o.progress = false;
  hjit::TuneResult r = hjit::tune(layer, o, x, w, b);
  unsetenv("HJIT_TUNE_FAULT");
  auto d = Database::open(db, false);
  const int64_t pipeline = d->pipelines().at(0).id;
  int lucky = 0, confirmed = 0;
  // (A confirmation's run sleeps 20 ms; a search measurement of a few microseconds never does.)
  for (const CandidateRecord& c : d->candidates(pipeline))
    if (c.origin.find("extern_gemm=1") != std::string::npos) (c.ms >= 15.0 ? confirmed : lucky)++;
  CHECK(lucky >= 1);      // it looked best (this layer runs in microseconds)...
  CHECK(confirmed == 1);  // ...so it was confirmed, at 20 ms more a run
  std::optional<CandidateRecord> best = d->best(pipeline);
  REQUIRE(best);
  CHECK(best->origin == "built-in");
  CHECK(best->schedule.empty());
  CHECK(r.best_origin == "built-in");
  CHECK(r.best_ms == doctest::Approx(best->ms));
}

TEST_CASE("tune then jit: the best schedule is used with no search, from the disk cache, and computes what eager does") {
  const std::string dir = test::scratch_dir("use"), db = dir + "/t.sqlite";
  Tensor x = Tensor::randn({96, 64}, 4), w = Tensor::randn({64, 80}, 5), b = Tensor::randn({80}, 6);
  hjit::TuneOptions o;
  o.db = db, o.minutes = 0.15, o.schedulers = {"built-in"}, o.progress = false;
  hjit::TuneResult r = hjit::tune(layer, o, x, w, b);
  REQUIRE(r.best_ms > 0);
  // A second run resumes: it measures only what the first did not.
  hjit::TuneResult again = hjit::tune(layer, o, x, w, b);
  auto d = Database::open(db, false);
  std::map<std::string, int> origins;
  size_t rows = 0, baselines = 0;
  for (const CandidateRecord& c : d->candidates(d->pipelines().at(0).id)) {
    ++rows;
    if (c.origin == "built-in") ++baselines;  // measured at the start, and in each run's confirmation
    else CHECK(++origins[c.origin] <= 3);      // measured once, and perhaps confirmed in each run
  }
  // Each run ends with at most one confirmation, which records two rows.
  const size_t confirmation_rows = rows - size_t(r.tried + again.tried);
  CHECK(confirmation_rows % 2 == 0);
  CHECK(confirmation_rows <= 4);
  CHECK(baselines == 1 + confirmation_rows / 2);
  CHECK(d->pipelines().at(0).tuning_s >= r.seconds + again.seconds - 1);

  const hjit::CacheStats before = hjit::cache_stats();
  hjit::JitOptions jo;
  jo.tuning_db = db;
  auto f = hjit::jit(layer, jo);
  Tensor got = f(x, w, b);
  CHECK(compare(got, layer(x, w, b), 1e-4).empty());
  // The built-in baseline may win a short run: then jit() compiles as without the database.
  const std::string expected = again.best_origin == "built-in" ? "built-in" : "tuned (";
  CHECK(f.stats().schedule.rfind(expected, 0) == 0);
  const hjit::CacheStats after = hjit::cache_stats();
  // A tuned schedule the run left compiled: nothing is compiled here. (A built-in winner is not
  // compiled by the run, and compiles here as it would without the database.)
  if (expected != "built-in") CHECK(after.misses == before.misses);
  // The same function with another shape is not in the database: compiled as without it.
  Tensor x2 = Tensor::randn({8, 64}, 7);
  CHECK(compare(f(x2, w, b), layer(x2, w, b), 1e-4).empty());
  CHECK(f.stats().schedule == "built-in");
  // HJIT_TUNING_DB does the same as the option.
  setenv("HJIT_TUNING_DB", db.c_str(), 1);
  auto g = hjit::jit(layer);
  CHECK(compare(g(x, w, b), layer(x, w, b), 1e-4).empty());
  CHECK(g.stats().schedule.rfind(expected, 0) == 0);
  unsetenv("HJIT_TUNING_DB");

  // The report: a table naming the pipeline, and two SVG plots.
  const std::string report = hjit::tuning_report(db, dir + "/plots");
  CHECK(report.find(r.name.substr(0, 22)) != std::string::npos);
  CHECK(report.find("speed-up") != std::string::npos);
  for (const char* plot : {"/plots_speedup.svg", "/plots_progress.svg"}) {
    const std::string svg = read_file(dir + plot);
    CHECK(svg.rfind("<svg", 0) == 0);
    CHECK(svg.find("</svg>") != std::string::npos);
  }
}

TEST_CASE("tuning for a GPU measures on the device, and jit for that device uses what it found") {
  const std::string dir = test::scratch_dir("gpu"), db = dir + "/t.sqlite";
  Tensor x = Tensor::randn({64, 32}, 4), w = Tensor::randn({32, 64}, 5), b = Tensor::randn({64}, 6);
  hjit::TuneOptions o;
  o.db = db, o.minutes = 0.1, o.progress = false, o.device = hjit::Device::OpenCL;
  std::string why;
  if (!hjit::device_available(hjit::Device::OpenCL, &why)) {
    CHECK_THROWS_AS(hjit::tune(layer, o, x, w, b), hjit::DeviceError);
    MESSAGE("no OpenCL device (" << why << "): only the error is checked");
    return;
  }
  o.schedulers = {"Adams2019"};
  CHECK_THROWS_WITH_AS(hjit::tune(layer, o, x, w, b), doctest::Contains("CPUs only"), hjit::ValueError);
  o.schedulers = {};
  hjit::TuneResult r = hjit::tune(layer, o, x, w, b);
  CHECK(r.builtin_ms > 0);
  CHECK(r.best_ms > 0);
  CHECK(r.tried >= 1);
  auto d = Database::open(db, false);
  std::set<std::string> schedulers;
  for (const CandidateRecord& c : d->candidates(d->pipelines().at(0).id)) schedulers.insert(c.origin.substr(0, c.origin.find(' ')));
  for (const std::string& s : schedulers) CHECK((s == "built-in" || s == "Li2018"));
  hjit::JitOptions jo;
  jo.device = hjit::Device::OpenCL, jo.tuning_db = db;
  auto f = hjit::jit(layer, jo);
  Tensor got = f(x.to(hjit::Device::OpenCL), w.to(hjit::Device::OpenCL), b.to(hjit::Device::OpenCL));
  CHECK(got.device() == hjit::Device::OpenCL);
  CHECK(compare(got, layer(x, w, b), 1e-4).empty());
  const std::string expected = r.best_origin == "built-in" ? "built-in" : "tuned (";
  CHECK(f.stats().schedule.rfind(expected, 0) == 0);
}

TEST_CASE("tune a saved module; Module::load with the database runs the tuned schedule") {
  const std::string dir = test::scratch_dir("module"), db = dir + "/t.sqlite", file = dir + "/layer.hjit";
  Tensor x = Tensor::randn({32, 16}, 8), w = Tensor::randn({16, 24}, 9), b = Tensor::randn({24}, 10);
  hjit::save(file, hjit::SaveOptions{}, [&](const Tensor& v) { return layer(v, w, b); }, x);
  hjit::Module m = hjit::Module::load(file);
  std::vector<Tensor> inputs{x};
  for (const Tensor& p : m.parameters()) inputs.push_back(p);
  hjit::TuneOptions o;
  o.db = db, o.minutes = 0.1, o.schedulers = {"built-in"}, o.progress = false;
  hjit::TuneResult r = hjit::tune_graph(m.graph(), inputs, o);
  CHECK(r.best_ms > 0);
  hjit::Module tuned = hjit::Module::load(file, hjit::ModuleOptions{2, "", db});
  CHECK(compare(tuned(x), layer(x, w, b), 1e-4).empty());
}

// What a database holding the `request` schedule for fn's pipeline makes jit() compute.
template <class Fn, class... T>
void check_through_database(const std::string& name, const std::string& request, const char* symbol, Fn fn, const T&... args) {
  hjit::Graph g = canonical_graph(hjit::jit(fn).graph(args...));
  std::string why;
  std::optional<std::string> s =
      hjit::backend::decide_schedule(g, hjit::Device::CPU, hjit::backend::ScheduleRequest::parse(request).choice, &why);
  REQUIRE_MESSAGE(s, why);
  CHECK(s->find(" extern ") != std::string::npos);
  const std::string db = test::scratch_dir(name) + "/t.sqlite";
  auto d = Database::open(db, true);
  const PipelineRecord p = d->pipeline(describe_pipeline(g, hjit::Device::CPU, name));
  CandidateRecord c = candidate(p.id, request, 1, true);
  c.schedule = *s;
  d->add(c);
  hjit::JitOptions jo;
  jo.tuning_db = db;
  auto f = hjit::jit(fn, jo);
  CHECK(compare(f(args...), fn(args...), 1e-4).empty());
  CHECK(f.stats().schedule.find(request.substr(9)) != std::string::npos);
  CHECK(f.explain(args...).find(symbol) != std::string::npos);
}

TEST_CASE("extern sgemm and convolution stages compute what eager does, with the work around them fused") {
  if (!*hjit::backend::extern_gemm_library()) {
    MESSAGE("skipped: hjit was built without oneDNN or OpenBLAS");
    return;
  }
  Tensor x = Tensor::randn({70, 33}, 11), w = Tensor::randn({33, 45}, 12), b = Tensor::randn({45}, 13);
  check_through_database("gemm", "built-in extern_gemm=1", "hjit_extern_sgemm", layer, x, w, b);
  // A matmul of computed operands (stored at root for the library), and a transposed one.
  auto two = [](const Tensor& a, const Tensor& v) { return hjit::matmul(hjit::exp(a) * 0.5, hjit::transpose(v, {1, 0})) + 1.0; };
  check_through_database("gemm2", "built-in extern_gemm=1", "hjit_extern_sgemm", two, x, Tensor::randn({45, 33}, 14));
  if (!hjit::backend::extern_conv_available()) {
    MESSAGE("convolutions skipped: hjit was built without oneDNN");
    return;
  }
  // Padding, stride 2 on an odd size (oneDNN's right padding differs from the left), dilation.
  Tensor img = Tensor::randn({2, 5, 13, 11}, 15), k = Tensor::randn({6, 5, 3, 3}, 16), shift = Tensor::randn({6, 1, 1}, 17);
  auto conv = [](const Tensor& v, const Tensor& k, const Tensor& s) {
    Tensor a = hjit::relu(hjit::conv2d(v, k, std::nullopt, {2, 2}, {1, 1}) + s);
    return a + hjit::conv2d(v, k, std::nullopt, {2, 2}, {1, 1});
  };
  check_through_database("conv", "built-in extern_conv=1", "hjit_extern_conv2d", conv, img, k, shift);
  auto dilated = [](const Tensor& v, const Tensor& k) { return hjit::conv2d(hjit::sigmoid(v), k, std::nullopt, {1, 1}, {2, 1}, {2, 2}); };
  check_through_database("conv2", "built-in extern_conv=1", "hjit_extern_conv2d", dilated, img, k);
  // Batch norm (inference), a bias and relu after a convolution are its post-ops: the extern stage
  // computes the relu's value, and a later reader of that value is Halide's again.
  Tensor mean = Tensor::randn({6}, 19), var = Tensor::uniform({6}, 20, 0.5, 1.5), scale = Tensor::randn({6, 1, 1}, 21);
  auto block = [](const Tensor& v, const Tensor& k, const Tensor& mean, const Tensor& var, const Tensor& scale) {
    Tensor y = hjit::batch_norm(hjit::conv2d(v, k, std::nullopt, {1, 1}, {1, 1}), mean, var, scale.reshape({6}), mean * 0.5);
    return hjit::relu(y / (scale + 3.0)) * 2.0 - 1.0;
  };
  check_through_database("conv_post_ops", "built-in extern_conv=1", "hjit_extern_conv2d", block, img, k, mean, var, scale);
  // Again, after Funcs of the stages' names were made many times (as a tuning run makes them):
  // Halide uniquifies the new ones ("n4_add$12"), and the Funcs the extern stage adds must still
  // have the names the schedule gives them (they were "n4_add_12_per_channel$2").
  hjit::Graph gb = canonical_graph(hjit::jit(block).graph(img, k, mean, var, scale));
  std::string why;
  for (int i = 0; i < 12; ++i)
    CHECK(hjit::backend::decide_schedule(gb, hjit::Device::CPU, hjit::backend::ScheduleRequest::parse("built-in").choice, &why));
  check_through_database("conv_post_ops_again", "built-in extern_conv=1", "hjit_extern_conv2d", block, img, k, mean, var, scale);
  const std::set<int> ends = hjit::backend::extern_conv_nodes(gb);
  REQUIRE(ends.size() == 1);
  auto chain = hjit::backend::conv_chain_ending_at(gb, *ends.begin());
  REQUIRE(chain);
  // conv, - mean, * rsqrt(var + eps), * weight, + bias, / (scale + 3), relu, * 2, - 1 (a scalar is per channel too)
  CHECK(chain->post_ops.size() == 8);
  CHECK(gb.node(chain->end()).op == hjit::OpKind::Sub);
  CHECK(chain->post_ops[5].kind == hjit::backend::PostOp::Relu);
  // A residual connection (a sum post-op), of an input or of a computed value, then relu; and the
  // first block's value handed to the second convolution in oneDNN's blocked layout (16 channels).
  Tensor img2 = Tensor::randn({2, 16, 9, 7}, 22), k2 = Tensor::randn({16, 16, 3, 3}, 23), k3 = Tensor::randn({16, 16, 3, 3}, 24);
  auto residual = [](const Tensor& v, const Tensor& k, const Tensor& k3) {
    Tensor y = hjit::relu(hjit::conv2d(v, k, std::nullopt, {1, 1}, {1, 1}) * 0.5 + v);
    return hjit::relu(hjit::tanh(v) + hjit::conv2d(y, k3, std::nullopt, {1, 1}, {1, 1}));
  };
  check_through_database("conv_residual", "built-in extern_conv=1", "hjit_extern_conv2d", residual, img2, k2, k3);
  hjit::Graph gr = canonical_graph(hjit::jit(residual).graph(img2, k2, k3));
  int sums = 0;
  for (int end : hjit::backend::extern_conv_nodes(gr)) {
    const auto chain = hjit::backend::conv_chain_ending_at(gr, end);
    REQUIRE(chain);
    for (const auto& op : chain->post_ops) sums += op.kind == hjit::backend::PostOp::Sum;
  }
  CHECK(sums == 2);
  // Where the chain's value is the right operand of a subtraction, or is read twice, it ends.
  auto reversed = [](const Tensor& v, const Tensor& k) { return 1.0 - hjit::relu(hjit::conv2d(v, k, std::nullopt, {1, 1}, {1, 1})); };
  check_through_database("conv_reversed", "built-in extern_conv=1", "hjit_extern_conv2d", reversed, img, k);
  auto twice = [](const Tensor& v, const Tensor& k) {
    Tensor y = hjit::conv2d(v, k, std::nullopt, {1, 1}, {1, 1}) + 0.5;
    return hjit::relu(y) + y;
  };
  check_through_database("conv_twice", "built-in extern_conv=1", "hjit_extern_conv2d", twice, img, k);
  hjit::Graph gt = canonical_graph(hjit::jit(twice).graph(img, k));
  CHECK(gt.node(*hjit::backend::extern_conv_nodes(gt).begin()).op == hjit::OpKind::Add);
  // The gradient of the weights (oneDNN's backward-weights primitive), strided and dilated, with a
  // 2x3 kernel: oneDNN's right padding and the kernel's axes both matter.
  auto weight_grad = [](const Tensor& v, const Tensor& k) {
    auto loss = [](const Tensor& v, const Tensor& k) {
      return hjit::sum(hjit::tanh(hjit::conv2d(v, k, std::nullopt, {2, 1}, {1, 2}, {2, 1})));
    };
    return hjit::grad(loss, 1)(v, k);
  };
  check_through_database("conv3", "built-in extern_conv=1", "hjit_extern_conv2d_weight_grad", weight_grad, img,
                         Tensor::randn({6, 5, 2, 3}, 18));
}

TEST_CASE("Ctrl-C stops a tuning run and keeps what it measured") {
  const std::string db = test::scratch_dir("interrupt") + "/t.sqlite";
  Tensor x = Tensor::randn({64, 64}, 14), w = Tensor::randn({64, 64}, 15), b = Tensor::randn({64}, 16);
  std::thread interrupter([] {
    std::this_thread::sleep_for(std::chrono::seconds(4));
    kill(getpid(), SIGINT);
  });
  hjit::TuneOptions o;
  o.db = db, o.minutes = 2, o.schedulers = {"built-in"}, o.progress = false;
  hjit::TuneResult r = hjit::tune(layer, o, x, w, b);
  interrupter.join();
  CHECK(r.interrupted);
  CHECK(r.seconds < 60);
  CHECK(r.tried >= 1);
  auto d = Database::open(db, false);
  CHECK(d->candidates(d->pipelines().at(0).id).size() == size_t(r.tried));
}

TEST_CASE("bad tuning options and databases are typed errors") {
  const std::string dir = test::scratch_dir("bad");
  Tensor x = Tensor::randn({4, 4}, 1), w = Tensor::randn({4, 4}, 2), b = Tensor::randn({4}, 3);
  hjit::TuneOptions o;
  CHECK_THROWS_WITH_AS(hjit::tune(layer, o, x, w, b), doctest::Contains("db"), hjit::ValueError);
  o.db = dir + "/t.sqlite";
  o.minutes = 0;
  CHECK_THROWS_AS(hjit::tune(layer, o, x, w, b), hjit::ValueError);
  o.minutes = 0.1, o.max_candidates = -1;
  CHECK_THROWS_WITH_AS(hjit::tune(layer, o, x, w, b), doctest::Contains("max_candidates"), hjit::ValueError);
  o.max_candidates = 0, o.schedulers = {"Adams2020"};
  CHECK_THROWS_WITH_AS(hjit::tune(layer, o, x, w, b), doctest::Contains("Adams2020"), hjit::ValueError);
  o.schedulers = {};
  hjit::Graph g = hjit::jit(layer).graph(x, w, b);
  CHECK_THROWS_AS(hjit::tune_graph(g, {x, w}, o), hjit::ValueError);
  CHECK_THROWS_AS(hjit::tune_graph(g, {x, w, Tensor::randn({5}, 1)}, o), hjit::ShapeError);
  write_file(dir + "/garbage.sqlite", std::string(8192, 'z'));
  o.db = dir + "/garbage.sqlite";
  CHECK_THROWS_AS(hjit::tune(layer, o, x, w, b), hjit::ValueError);
  hjit::JitOptions jo;
  jo.tuning_db = dir + "/garbage.sqlite";
  CHECK_THROWS_AS(hjit::jit(layer, jo)(x, w, b), hjit::ValueError);
  jo.tuning_db = dir + "/missing.sqlite";
  CHECK_THROWS_WITH_AS(hjit::jit(layer, jo)(x, w, b), doctest::Contains("does not exist"), hjit::ValueError);
  jo.opt_level = 0;
  CHECK_THROWS_WITH_AS(hjit::jit(layer, jo), doctest::Contains("opt_level 0 is the unfused baseline"), hjit::ValueError);
  CHECK_THROWS_AS(hjit::tuning_report(dir + "/missing.sqlite"), hjit::ValueError);
}

// A database whose one measured schedule for layer's graph g is `schedule`: jit() with it computes
// what eager does, with the built-in schedule.
void check_database_schedule_unused(const hjit::Graph& g, const std::string& name, const std::string& schedule,
                                    const Tensor& x, const Tensor& w, const Tensor& b) {
  const std::string db = test::scratch_dir(name) + "/t.sqlite";
  auto d = Database::open(db, true);
  const PipelineRecord p = d->pipeline(describe_pipeline(g, hjit::Device::CPU, name));
  CandidateRecord c = candidate(p.id, "built-in " + name, 1, true);
  c.schedule = schedule;
  d->add(c);
  hjit::JitOptions jo;
  jo.tuning_db = db;
  auto f = hjit::jit(layer, jo);
  CHECK(compare(f(x, w, b), layer(x, w, b), 1e-4).empty());
  CHECK(f.stats().schedule == "built-in");
}

// A database's schedule reaches Halide's compiler, which crashes on some (a record changed on disk,
// or written by another version): jit() lowers it in a child process first, and compiles as
// without the database when the child does not come back.
TEST_CASE("a tuned schedule that crashes Halide's compiler is not used: jit compiles as without it") {
  Tensor x = Tensor::randn({4, 8}, 1), w = Tensor::randn({8, 16}, 2), b = Tensor::randn({16}, 3);
  hjit::Graph g = canonical_graph(hjit::jit(layer).graph(x, w, b));
  std::string why;
  std::optional<std::string> s = hjit::backend::decide_schedule(g, hjit::Device::CPU, hjit::backend::BuiltIn{}, &why);
  REQUIRE_MESSAGE(s, why);
  // The output's columns (16) split by 65536, shifted inwards: the matmul computed in each tile
  // covers 65536 columns, vectorized across all of them, and Halide 14 divides by zero lowering a
  // vector of 65536 lanes (whatever the compiler's stack).
  REQUIRE_MESSAGE(s->find("\nn5_relu split d0 ") != std::string::npos, *s);
  REQUIRE_MESSAGE(s->find("\nn3_matmul_acc compute_at n5_relu ") != std::string::npos, *s);
  const std::string crashing = "hjit-schedule 1\nsource built-in\nn5_relu split d0 d0_t d0_i 65536 Auto\n"
                               "n3_matmul_acc compute_at n5_relu d0_t\nn3_matmul_acc vectorize d0\n";
  CHECK_THROWS_WITH_AS(hjit::backend::check_schedule(g, hjit::Device::CPU, crashing), doctest::Contains("crashed"), hjit::CompileError);
  check_database_schedule_unused(g, "crashing", crashing, x, w, b);
}

// Halide proves some schedules cannot compute their pipeline (a Func bounded to fewer points than
// its consumers read, a storage fold smaller than what is live) and leaves an assertion that always
// fails; lowered without assertions, as hjit lowers CPU code, that code wrote outside its
// allocations (an Adams2019 schedule of tril's mask, vectorized by 8 under a bound of 4, overwrote
// its neighbouring rows). Such a schedule is refused before it runs, wherever it comes from.
TEST_CASE("a schedule whose bounds are smaller than what it computes is refused, and a database holding one is not used") {
  Tensor x = Tensor::randn({4, 8}, 1), w = Tensor::randn({8, 16}, 2), b = Tensor::randn({16}, 3);
  hjit::Graph g = canonical_graph(hjit::jit(layer).graph(x, w, b));
  const std::string bounded = "hjit-schedule 1\nsource built-in\nn3_matmul_acc compute_root\nn3_matmul_acc bound d0 0 8\n";
  CHECK_THROWS_WITH_AS(hjit::backend::check_schedule(g, hjit::Device::CPU, bounded),
                       doctest::Contains("explicit_bounds_too_small"), hjit::CompileError);
  check_database_schedule_unused(g, "bounded", bounded, x, w, b);
}

// hjit-tune --merge: runs made apart (machines, ranks) become one database. Every measurement is
// copied once, tuning times add up, and a pipeline's best is the fastest of the bests the runs kept:
// never a candidate that only looked fastest (its run's confirmation made the baseline best).
TEST_CASE("tuning databases of separate runs merge: each measurement once, the fastest confirmed best") {
  const std::string dir = test::scratch_dir("merge");
  const std::string a_path = dir + "/a.sqlite", b_path = dir + "/b.sqlite", c_path = dir + "/c.sqlite";
  auto pipeline = [](Database& db, const std::string& key, double tuning_s) {
    PipelineRecord p;
    p.key = key, p.graph_hash = "h" + key, p.signature = "f32[8] -> f32[8]", p.target = "x86-64-linux";
    p.hjit_version = "test", p.halide_version = "14", p.name = key, p.graph = "graph " + key, p.tuning_s = tuning_s;
    p = db.pipeline(p);
    db.add_tuning_time(p.id, tuning_s);
    return p.id;
  };
  auto candidate = [](Database& db, int64_t pipeline, const std::string& origin, double ms) {
    CandidateRecord c;
    c.pipeline = pipeline, c.origin = origin, c.schedule = origin == "built-in" ? "" : "hjit-schedule 1\n# " + origin + "\n";
    c.ms = ms, c.valid = true, c.at_s = ms;
    return db.add(c);
  };
  {
    auto a = Database::open(a_path, true);
    const int64_t p = pipeline(*a, "shared", 10);
    candidate(*a, p, "built-in", 2.0);
    candidate(*a, p, "built-in rows=4", 1.8);  // a's best
  }
  {
    auto b = Database::open(b_path, true);
    const int64_t p = pipeline(*b, "shared", 20);
    const int64_t base = candidate(*b, p, "built-in", 2.1);
    candidate(*b, p, "Adams2019 seed=1", 1.2);  // looked fastest, then lost its confirmation:
    b->mark_best(p, base);                       // the baseline is b's best
    const int64_t q = pipeline(*b, "only_b", 5);
    candidate(*b, q, "built-in cols=2", 0.7);
  }
  {
    auto c = Database::open(c_path, true);
    const int64_t p = pipeline(*c, "shared", 1);
    candidate(*c, p, "Mullapudi2016", 1.6);  // c's best, the fastest confirmed one
  }
  const std::string account = hjit::merge_tuning_databases(a_path, {b_path, c_path});
  CHECK(account.find("b.sqlite into " + a_path + ": 2 pipelines (1 new), 3 candidates copied") != std::string::npos);
  auto a = Database::open(a_path, false);
  REQUIRE(a->pipelines().size() == 2);
  const PipelineRecord shared = *a->find_pipeline("shared"), only_b = *a->find_pipeline("only_b");
  CHECK(shared.tuning_s == doctest::Approx(31));
  CHECK(a->candidates(shared.id).size() == 2 + 2 + 1);
  REQUIRE(a->best(shared.id));
  CHECK(a->best(shared.id)->origin == "Mullapudi2016");  // 1.6 ms: a kept 1.8, b its baseline (2.1)
  REQUIRE(a->best(only_b.id));
  CHECK(a->best(only_b.id)->origin == "built-in cols=2");
  CHECK(a->best(only_b.id)->ms == doctest::Approx(0.7));
  // Again: nothing more.
  CHECK(hjit::merge_tuning_databases(a_path, {b_path}).find("0 candidates copied") != std::string::npos);
  CHECK(a->candidates(shared.id).size() == 5);
  CHECK(hjit::tuning::best_schedule(a_path, "shared") == std::optional<std::string>("hjit-schedule 1\n# Mullapudi2016\n"));
  CHECK_THROWS_WITH_AS(hjit::merge_tuning_databases(a_path, {a_path}), doctest::Contains("given twice"), hjit::ValueError);
  CHECK_THROWS_WITH_AS(hjit::merge_tuning_databases(a_path, {b_path, b_path}), doctest::Contains("given twice"), hjit::ValueError);
  CHECK_THROWS_AS(hjit::merge_tuning_databases(a_path, {dir + "/missing.sqlite"}), hjit::ValueError);
  std::filesystem::remove_all(dir);
}
