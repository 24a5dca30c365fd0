// hjit::tune_graph: the tuning loop. Candidates come from tuning/candidates.h, are measured in
// worker processes (tuning/worker.h) against eager results computed here once, and every
// measurement goes into the database as it is made, so that an interrupted run loses nothing.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <tuple>

#include <hjit/distributed.h>
#include <hjit/jit.h>
#include <hjit/tune.h>

#include "halide_backend/backend.h"
#include "halide_backend/devices.h"
#include "halide_backend/providers/extern_stages.h"
#include "support/log.h"
#include "tuning/candidates.h"
#include "tuning/database.h"
#include "tuning/generation.h"
#include "tuning/pipeline_key.h"
#include "tuning/retrain.h"
#include "tuning/worker.h"

namespace hjit {
namespace {

using namespace tuning;

volatile sig_atomic_t g_interrupted = 0;
void on_sigint(int) { g_interrupted = 1; }

// Ctrl-C while tuning stops the run (keeping what was measured) instead of the process.
class InterruptScope {
 public:
  InterruptScope() {
    g_interrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_);
  }
  ~InterruptScope() { sigaction(SIGINT, &old_, nullptr); }
  bool interrupted() const { return g_interrupted != 0; }

 private:
  struct sigaction old_ {};
};

std::string tensor_bytes(const Tensor& t) {
  std::string s(size_t(t.numel()) * size_t(dtype_size(t.dtype())), '\0');
  if (!s.empty()) std::memcpy(s.data(), t.data(), s.size());
  return s;
}

// The request every candidate is measured on: the inputs, and eager's results on copies of them.
Request make_request(const Graph& g, const std::vector<Tensor>& inputs, Device device) {
  Request r;
  r.graph = g;
  r.device = device;
  std::vector<Tensor> copies;
  for (const Tensor& t : inputs) copies.push_back(t.clone()), r.inputs.push_back(tensor_bytes(t));
  std::vector<Tensor> outs = eval_graph(g, copies);  // applies the graph's updates to the copies
  for (const Tensor& o : outs) r.expected.push_back(tensor_bytes(o));
  for (const Update& u : g.updates) r.expected.push_back(tensor_bytes(copies[size_t(g.node(u.target).attrs.i("index"))]));
  return r;
}

void check_inputs(const Graph& g, const std::vector<Tensor>& inputs) {
  if (inputs.size() != g.inputs.size())
    throw ValueError("hjit::tune: the graph '" + g.name + "' takes " + std::to_string(g.inputs.size()) + " inputs, got " +
                     std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& t = g.type(g.inputs[i]);
    if (inputs[i].is_traced()) throw ValueError("hjit::tune: input " + std::to_string(i) + " is a traced tensor");
    if (inputs[i].dtype() != t.dtype)
      throw DTypeError("hjit::tune: input " + std::to_string(i) + " is " + dtype_name(inputs[i].dtype()) + ", the graph takes " +
                       t.str());
    if (inputs[i].shape() != t.shape)
      throw ShapeError("hjit::tune: input " + std::to_string(i) + " has shape " + shape_str(inputs[i].shape()) +
                       ", the graph takes " + t.str());
  }
}

void check_options(const TuneOptions& o) {
  if (o.db.empty()) throw ValueError("hjit::tune: TuneOptions::db must name the tuning database file");
  if (!(o.minutes > 0) || !std::isfinite(o.minutes)) throw ValueError("hjit::tune: minutes must be > 0");
  if (o.max_candidates < 0) throw ValueError("hjit::tune: max_candidates must be >= 0 (0: no limit)");
  if (!(o.candidate_timeout_s > 0)) throw ValueError("hjit::tune: candidate_timeout_s must be > 0");
  std::string why;
  if (!backend::device_kind(o.device).usable(&why))
    throw DeviceError(std::string("hjit::tune: tuning for ") + device_name(o.device) + " measures on the device, and this " +
                      "process cannot use it: " + why);
  for (const std::string& s : o.schedulers) {
    if (s != "built-in" && !backend::autoscheduler_from_name(s))
      throw ValueError("hjit::tune: unknown scheduler '" + s + "'; choose built-in, Adams2019, Li2018 or Mullapudi2016");
    const char* only = backend::device_kind(o.device).only_autoscheduler();
    if (only && s != "built-in" && s != only)
      throw ValueError("hjit::tune: " + s + " schedules CPUs only (Halide 14's autoscheduler for " + device_name(o.device) +
                       " is " + only + "); choose built-in or " + only);
  }
}

std::string clock(double seconds) {
  char buf[32];
  const int s = int(std::max(0.0, seconds));
  std::snprintf(buf, sizeof buf, "%d:%02d", s / 60, s % 60);
  return buf;
}

// One line, rewritten in place on a terminal.
void show_progress(const TuneResult& r, double elapsed_s, double budget_s, const std::string& now) {
  const int width = 20, done = int(std::min(1.0, elapsed_s / budget_s) * width);
  std::string bar(size_t(done), '#');
  bar.resize(size_t(width), '.');
  char speed[64] = "best -";
  if (r.best_ms > 0 && r.builtin_ms > 0) std::snprintf(speed, sizeof speed, "best %.2fx (%.3g ms)", r.speedup(), r.best_ms);
  std::string line = "\r[" + bar + "] " + clock(budget_s - elapsed_s) + " left  " + std::to_string(r.tried) + " tried, " +
                     std::to_string(r.failed) + " failed  " + speed + "  " + now;
  if (line.size() > 118) line.resize(118);
  std::fprintf(stderr, "%s\033[K", line.c_str());
  std::fflush(stderr);
}

// A candidate is kept only when it is faster than the baseline by this factor in the confirmation:
// a schedule no faster than what jit() compiles anyway is not worth a different compile, and one
// measurement of each, minutes apart, differs by a few percent on a busy machine.
constexpr double kConfirmMargin = 0.98;

// The best candidate and the built-in baseline timed once more, in one worker, in turn, so
// that both see the same machine (a single slow measurement of the baseline, or a lucky one of a
// candidate, must not make a candidate best). The baseline's time is recorded; when the
// candidate is not kConfirmMargin faster, the baseline becomes the best.
void confirm_best(Database& db, const PipelineRecord& p, const WorkerFiles& files, double timeout, double at_s,
                  const std::function<bool()>& stop, TuneResult& r) {
  std::optional<CandidateRecord> best = db.best(p.id);
  if (!best || best->schedule.empty()) return;  // no best, or the baseline already
  char path[] = "/tmp/hjit_tune_schedule_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) throw ValueError("hjit::tune: no temporary file for a schedule");
  const bool written = write(fd, best->schedule.data(), best->schedule.size()) == ssize_t(best->schedule.size());
  close(fd);
  Measurement m;
  if (written) m = measure_in_worker(files, confirm_request(path), timeout, stop);
  std::remove(path);
  if (stop()) return;
  if (!m.valid) {
    log().warn("tuning '{}': the best candidate ({}) failed its confirmation: {}", p.name, best->origin, m.error);
    return;
  }
  // Both times are recorded, and the winner of this comparison is marked best whatever the
  // earlier measurements said.
  CandidateRecord base, cand = *best;
  base.pipeline = p.id, base.origin = "built-in", base.ms = base.baseline_ms = m.baseline_ms, base.valid = true, base.at_s = at_s;
  cand.ms = m.ms, cand.baseline_ms = m.baseline_ms, cand.compile_ms = m.compile_ms, cand.at_s = at_s;
  const int64_t base_id = db.add(base), cand_id = db.add(cand);
  // Speed-ups are quoted against the baseline measured beside the candidate.
  r.builtin_ms = m.baseline_ms;
  db.set_builtin_ms(p.id, m.baseline_ms);
  const bool kept = m.ms <= m.baseline_ms * kConfirmMargin;
  log().info("tuning '{}': confirmation: {} {:.4f} ms, built-in {:.4f} ms: {}", p.name, best->origin, m.ms, m.baseline_ms,
             kept ? "kept" : "the built-in schedule stays");
  db.mark_best(p.id, kept ? cand_id : base_id);
  r.best_ms = kept ? m.ms : m.baseline_ms, r.best_origin = kept ? best->origin : "built-in";
}

// A rank other than 0 of a distributed run: measures the candidates of each generation rank 0 hands
// it, until rank 0 says stop (an empty generation); rank 0 records them in its database.
TuneResult measure_for_rank0(const Graph& graph, const std::vector<Tensor>& inputs, const TuneOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const WorkerFiles files(make_request(graph, inputs, o.device));
  TuneResult r;
  r.name = o.name;
  std::tie(r.tried, r.failed) = measure_for_dispatcher(
      [&](const std::string& request, double timeout) { return measure_in_worker(files, request, timeout, [] { return false; }); });
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace

TuneResult tune_graph(const Graph& traced, const std::vector<Tensor>& inputs, const TuneOptions& o) {
  check_options(o);
  check_inputs(traced, inputs);
  const Graph graph = canonical_graph(traced);
  if (dist::rank() != 0) return measure_for_rank0(graph, inputs, o);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const double budget = o.minutes * 60;
  std::shared_ptr<Database> db = Database::open(o.db, true);
  PipelineRecord p = db->pipeline(describe_pipeline(graph, o.device, o.name));
  const double earlier_s = p.tuning_s;

  TuneResult r;
  r.name = p.name, r.key = p.key, r.builtin_ms = p.builtin_ms;
  std::set<std::string> tried;
  for (const CandidateRecord& c : db->candidates(p.id)) tried.insert(c.origin);
  // The fastest so far (faster(): by time relative to the baseline timed beside each), around
  // which the next generations are proposed.
  std::optional<CandidateRecord> best = db->best(p.id);
  // r's times are the best's and the baseline's timed beside it: r.speedup() is its speed-up.
  auto take_best = [&](const CandidateRecord& c) {
    best = c, r.best_ms = c.ms, r.best_origin = c.origin;
    if (c.baseline_ms > 0) r.builtin_ms = c.baseline_ms;
  };
  if (best) take_best(*best);

  const WorkerFiles files(make_request(graph, inputs, o.device));

  CostModelFiles model(o.db);
  // A GPU: its own schedules and Li2018's (the CPU autoschedulers and library stages do not apply).
  const bool gpu = o.device != Device::CPU;
  std::vector<std::string> schedulers = o.schedulers;
  if (gpu && schedulers.empty()) schedulers = {"built-in", "Li2018"};
  Candidates candidates(schedulers, tried, o.seed != 0 ? o.seed : std::random_device{}(), !gpu && !backend::extern_gemm_nodes(graph).empty(),
                        !gpu && !backend::extern_conv_nodes(graph).empty(), !gpu && !backend::extern_int_conv_nodes(graph).empty());
  candidates.set_weights(model.weights());
  const bool progress = o.progress && isatty(2);
  log().info("tuning '{}' for {:.1f} min ({} candidates measured before)", p.name, o.minutes, tried.size());
  InterruptScope interrupt;
  double recorded_s = 0;  // of this run's time, what the database has been told
  int new_samples = 0;    // Adams2019 samples this run added for retraining
  // Adams2019 featurizations of the candidates this rank measured, by request, for the cost
  // model's retraining.
  std::map<std::string, std::string> features;
  // Measures one request (a backend::ScheduleRequest's text form) in a worker.
  auto measure = [&](const std::string& request, double timeout) {
    backend::ScheduleRequest how = backend::ScheduleRequest::parse(request);
    const backend::Auto* adams = how.as<backend::Auto>();
    if (o.retrain && adams && adams->scheduler == backend::Autoscheduler::Adams2019) {  // named apart from other processes' samples
      features[request] = model.featurization(p.id, int64_t(getpid()) * 1000000 + r.tried);
      std::get<backend::Auto>(how.choice).params.features = features[request];
    }
    return measure_in_worker(files, how.str(), timeout, [&] { return interrupt.interrupted(); });
  };
  // Records a measurement of a request (its origin in the database).
  const std::string builtin_request = backend::ScheduleRequest{backend::BuiltIn{}}.str();
  auto record = [&](const std::string& request, const Measurement& m, const std::string& featurization, double at_s) {
    CandidateRecord c;
    c.pipeline = p.id, c.origin = request, c.schedule = m.schedule, c.ms = m.ms, c.baseline_ms = m.baseline_ms;
    c.valid = m.valid, c.error = m.error, c.compile_ms = m.compile_ms, c.at_s = earlier_s + at_s;
    const int64_t id = db->add(c);
    db->add_tuning_time(p.id, elapsed() - recorded_s);
    recorded_s = elapsed();
    ++r.tried;
    if (!m.valid) {
      ++r.failed;
      log().debug("tuning '{}': {} failed: {}", p.name, request, m.error);
    } else {
      log().debug("tuning '{}': {} runs in {:.4f} ms (compiled in {:.0f} ms)", p.name, request, m.ms, m.compile_ms);
      if (request == builtin_request) db->set_builtin_ms(p.id, m.ms);
      if (!best || faster(c, *best)) take_best(c);
      if (!featurization.empty()) new_samples += add_sample(model, featurization, m.ms, p.id, id);
    }
    if (!featurization.empty()) std::remove(featurization.c_str());
  };
  // Generation by generation (tuning/generation.h): generation g+2 is proposed once generation g
  // is measured. In a distributed run (mpirun -np N hjit-tune) every rank measures candidates at
  // the same time, on its own cores, and this rank records them all.
  const int ranks = dist::world_size();
  MeasuringTimes measuring_times;
  // No candidate may take more than a sixth of the run (an Adams2019 beam search on a large
  // pipeline can take ten minutes).
  const double timeout_s = std::min(o.candidate_timeout_s, std::max(30.0, budget / 6));
  std::vector<std::vector<std::string>> proposed;  // requests, by generation
  Dispatcher dispatcher(start, budget, o.max_candidates, [&] { return interrupt.interrupted(); });
  bool every_one = false;  // every candidate has been proposed
  auto propose = [&] {
    std::vector<std::string> next;
    while (int(next.size()) < generation_size(ranks)) {
      const std::optional<backend::ScheduleRequest> request = candidates.next(best ? best->origin : "");
      if (!request) break;
      candidates.tried(*request);
      next.push_back(request->str());
    }
    every_one = next.empty();
    if (every_one) return;
    dispatcher.add(next, measuring_times.longest_first(next), timeout_s);
    proposed.push_back(std::move(next));
  };
  propose(), propose();
  for (size_t g = 0; g < proposed.size(); ++g) {
    if (progress) show_progress(r, elapsed(), budget, proposed[g][0]);
    for (const Measured& d : dispatcher.finish(int(g), measure)) {
      const std::string& request = proposed[g][d.index];
      auto featurization = features.extract(request);  // Adams2019's only
      record(request, d.m, featurization ? featurization.mapped() : "", d.at_s);
      measuring_times.observe(request, d.seconds);
    }
    // (Once the run's time is over, what later generations measured is still recorded.)
    if (dispatcher.open() && !every_one) propose();
  }
  if (every_one) log().info("tuning '{}': every candidate has been measured", p.name);
  dispatcher.close();  // the other ranks' signal to stop
  if (r.tried > 0 && !interrupt.interrupted()) {
    if (progress) show_progress(r, elapsed(), budget, "confirming the best");
    confirm_best(*db, p, files, std::max(60.0, o.candidate_timeout_s), earlier_s + elapsed(), [&] { return interrupt.interrupted(); }, r);
  }
  r.interrupted = interrupt.interrupted();
  if (progress) {
    show_progress(r, elapsed(), budget, r.interrupted ? "interrupted" : "done");
    std::fprintf(stderr, "\n");
  }
  if (o.retrain && !r.interrupted && new_samples > 0) {
    r.cost_model = retrain(model, 100, 120);
    log().info("tuning '{}': {}", p.name, r.cost_model);
  }
  // The best schedule compiled here once, so that the disk cache has it for jit() in any process.
  // (Where the built-in schedule stays the best, its record has no schedule text: nothing to do.)
  if (std::optional<CandidateRecord> b = db->best(p.id); b && !b->schedule.empty() && !r.interrupted) {
    backend::Options options;
    options.name = p.name, options.device = o.device;
    options.schedule = {backend::Given{b->schedule, backend::ScheduleOrigin::File}};
    try {
      backend::compile(graph, options);
    } catch (const Error& e) {
      log().warn("tuning '{}': the best schedule did not compile here: {}", p.name, e.what());
    }
  }
  // The run's time, the retraining and the compile above included, as r.seconds says.
  r.seconds = elapsed();
  db->add_tuning_time(p.id, r.seconds - recorded_s);
  return r;
}

namespace detail {

TuneResult tune_traced(const std::string& fn_name, const CallArgs& args, Tracer trace, const TuneOptions& options) {
  const std::string name = options.name.empty() ? fn_name : options.name;
  const TracedFunction f = trace_function(name, args, trace);
  TuneOptions o = options;
  o.name = name;
  return tune_graph(f.graph, f.inputs, o);
}

}  // namespace detail
}  // namespace hjit
