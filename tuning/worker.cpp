#include "tuning/worker.h"

#include <dlfcn.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <tuple>

#include <hjit/tensor.h>

#include "halide_backend/backend.h"
#include "halide_backend/devices.h"
#include "support/binary_io.h"
#include "support/child_process.h"
#include "support/log.h"
#include "support/settings.h"

extern char** environ;

#ifndef HJIT_TUNE_WORKER_BUILD
#define HJIT_TUNE_WORKER_BUILD ""
#endif
#ifndef HJIT_TUNE_WORKER_INSTALLED
#define HJIT_TUNE_WORKER_INSTALLED ""
#endif
#ifndef HJIT_LIB_TO_BIN
#define HJIT_LIB_TO_BIN "../bin"
#endif

namespace hjit::tuning {
namespace {

constexpr char kMagic[9] = "HJITTREQ";
constexpr uint32_t kVersion = 1;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ValueError("cannot read '" + path + "'");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) throw ValueError("cannot write '" + path + "'");
}

size_t nbytes(const TensorType& t) { return size_t(t.numel()) * size_t(dtype_size(t.dtype)); }

std::vector<TensorType> result_types(const Graph& g) {
  std::vector<TensorType> out;
  for (int o : g.outputs) out.push_back(g.type(o));
  for (const Update& u : g.updates) out.push_back(g.type(u.value));
  return out;
}

// Where a candidate's results differ from eager beyond what reassociating float sums explains.
std::string difference(const std::vector<Tensor>& got, const std::vector<std::string>& want, const std::vector<TensorType>& types) {
  for (size_t k = 0; k < types.size(); ++k) {
    const TensorType& t = types[k];
    if (t.numel() == 0) continue;
    const std::vector<double> a = got[k].to_vector<double>();
    const std::vector<double> b = Tensor::from_bytes(want[k].data(), want[k].size(), t.shape, t.dtype).to_vector<double>();
    const double tol = t.dtype == DType::F64 ? 1e-9 : t.dtype == DType::F32 ? 1e-3 : is_floating(t.dtype) ? 2e-2 : 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const double x = a[i], y = b[i];
      if (x == y || (std::isnan(x) && std::isnan(y)) || std::fabs(x - y) <= tol * (1 + std::fabs(y))) continue;
      return "result " + std::to_string(k) + " element " + std::to_string(i) + " is " + std::to_string(x) + ", eager computes " +
             std::to_string(y);
    }
  }
  return "";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool executable_file(const std::string& path) { return !path.empty() && access(path.c_str(), X_OK) == 0; }

// Faults a test asks the worker to commit, to show that a tuning run survives them:
// HJIT_TUNE_FAULT="crash:cols=3;hang:rows=4;wrong:vec=2" crashes, hangs or perturbs the first
// result for every request containing that text; "lucky:X" reports a thousandth of the time
// measured (a lucky measurement, so lucky that no noise of a loaded machine makes another
// candidate look faster), "slow:X" sleeps in every run of a confirmation whose schedule text
// contains X. Only the test suite sets it.
bool fault(const std::string& kind, const std::string& text) {
  const std::optional<std::string> env = setting::raw(setting::Id::TuneFault);
  if (!env) return false;
  std::stringstream ss(*env);
  for (std::string item; std::getline(ss, item, ';');) {
    const size_t colon = item.find(':');
    if (colon != std::string::npos && item.substr(0, colon) == kind && text.find(item.substr(colon + 1)) != std::string::npos)
      return true;
  }
  return false;
}

}  // namespace

std::vector<double> medians_ms(const std::vector<std::function<void()>>& runs, bool losers_stop) {
  for (const auto& run : runs) run();
  std::vector<std::vector<double>> times(runs.size());
  double total = 0;
  auto lost = [&] {
    double others = 0;
    for (size_t k = 1; k < times.size(); ++k) others = std::max(others, *std::max_element(times[k].begin(), times[k].end()));
    return losers_stop && times.size() > 1 && *std::min_element(times[0].begin(), times[0].end()) > 2 * others;
  };
  for (int turn = 1; turn <= 50; ++turn) {
    for (size_t k = 0; k < runs.size(); ++k) {
      Timer t;
      runs[k]();
      times[k].push_back(t.ms());
      total += times[k].back();
    }
    if ((turn >= 5 && total >= 300) || (turn >= 3 && total >= 3000) || lost()) break;
  }
  std::vector<double> medians;
  for (std::vector<double>& v : times) medians.push_back(median(std::move(v)));
  return medians;
}

std::string format_result(const Measurement& m) {
  char head[128];
  std::snprintf(head, sizeof head, "%s %.6f %.3f %.6f\n", m.valid ? "ok" : "failed", m.ms, m.compile_ms, m.baseline_ms);
  std::string error = m.error;
  std::replace(error.begin(), error.end(), '\n', ' ');
  return head + error + "\n" + m.schedule;
}

Measurement parse_result(const std::string& text) {
  Measurement m;
  std::istringstream in(text);
  std::string status, error;
  if (!(in >> status >> m.ms >> m.compile_ms >> m.baseline_ms) || (status != "ok" && status != "failed")) {
    m.error = "the worker wrote no result";
    return m;
  }
  m.valid = status == "ok";
  in.ignore(1);
  std::getline(in, m.error);
  m.schedule.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return m;
}

void write_request(const std::string& path, const Request& r) {
  BinaryWriter w;
  w.str(r.graph.to_text());
  w.str(r.graph.name);
  w.u32(uint32_t(r.device));
  w.u64(r.inputs.size());
  for (const std::string& s : r.inputs) w.str(s);
  w.u64(r.expected.size());
  for (const std::string& s : r.expected) w.str(s);
  write_file(path, wrap_payload(kMagic, kVersion, w.out()));
}

Request read_request(const std::string& path) {
  const std::string file = read_file(path);
  BinaryReader in(unwrap_payload(file, kMagic, kVersion, "a tuning request"));
  Request r;
  r.graph = Graph::parse(in.str());
  r.graph.name = in.str();
  r.device = Device(in.u32());
  const size_t n_in = in.count(r.graph.inputs.size());
  for (size_t i = 0; i < n_in; ++i) r.inputs.push_back(in.str());
  const size_t n_out = in.count(r.graph.outputs.size() + r.graph.updates.size());
  for (size_t i = 0; i < n_out; ++i) r.expected.push_back(in.str());
  const std::vector<TensorType> types = result_types(r.graph);
  if (n_in != r.graph.inputs.size() || n_out != types.size()) throw ValueError("a tuning request does not fit its graph");
  for (size_t i = 0; i < n_in; ++i)
    if (r.inputs[i].size() != nbytes(r.graph.type(r.graph.inputs[i]))) throw ValueError("a tuning request's input size");
  for (size_t i = 0; i < n_out; ++i)
    if (r.expected[i].size() != nbytes(types[i])) throw ValueError("a tuning request's result size");
  return r;
}

namespace {

constexpr char kConfirm[] = "confirm ";

// A pipeline compiled for a measurement, with inputs and outputs to run it on. On a GPU, inputs
// and outputs live on the device (a run is its kernels, waited for); the results come down after.
struct Trial {
  std::shared_ptr<const backend::Executable> exe;
  std::vector<Tensor> inputs, got;
  std::vector<const void*> in;
  std::vector<void*> out;
  std::vector<std::unique_ptr<backend::DeviceBuffer>> on_device;  // inputs, then outputs (null when empty)
  std::vector<const backend::DeviceBuffer*> device_in;
  std::vector<backend::DeviceBuffer*> device_out;
  // A test's fault: sleeps 20 ms in every run (more than a time slice the baseline's parallel
  // loops may wait while another test busies the cores: with 2 ms the baseline read slower).
  bool slow = false;
  void run() const {
    if (slow) usleep(20000);
    if (device_out.empty() && device_in.empty()) return exe->run(in.data(), out.data());
    exe->run_on_device(device_in.data(), device_out.data());
    for (backend::DeviceBuffer* b : device_out)
      if (b) b->sync();
  }
  // The results, where difference() reads them.
  void fetch() {
    for (size_t k = 0; k < device_out.size(); ++k)
      if (device_out[k]) device_out[k]->download(out[k]);
  }
  double median_ms() const { return medians_ms({[this] { run(); }})[0]; }
};

// A candidate's median time and the baseline's, timed in turn (medians_ms).
std::pair<double, double> in_turn_ms(const Trial& candidate, const Trial& baseline, bool losers_stop) {
  const std::vector<double> ms = medians_ms({[&] { candidate.run(); }, [&] { baseline.run(); }}, losers_stop);
  return {ms[0], ms[1]};
}

// Device memory holding `bytes` bytes of `host` (or none, for an empty tensor).
std::unique_ptr<backend::DeviceBuffer> device_copy(Device device, const void* host, size_t bytes) {
  if (bytes == 0) return nullptr;
  std::unique_ptr<backend::DeviceBuffer> b = backend::device_kind(device).allocate(bytes);
  if (host) b->upload(host);
  return b;
}

// The baseline, an empty schedule text, is what jit() compiles without a database: a big graph in
// two partitioned halves, which needs a disk cache (the run's, see WorkerFiles).
Trial compile_trial(const Request& r, const std::string& schedule_text) {
  backend::Options options;
  options.name = r.graph.name;
  options.device = r.device;
  options.schedule = schedule_text.empty()
                         ? backend::schedule_request("hjit-tune --worker", {.opt_level = 1, .tuning_db_from_environment = false, .device = r.device})
                         : backend::ScheduleRequest{backend::Given{schedule_text}};
  Trial t;
  // (Timed on buffers bound once: the candidate's code alone, as a compiled function runs it.)
  t.exe = backend::compile(r.graph, options).executable;
  // Tensors for their storage: aligned as compiled code requires.
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const TensorType& ty = r.graph.type(r.graph.inputs[i]);
    t.inputs.push_back(Tensor::from_bytes(r.inputs[i].data(), r.inputs[i].size(), ty.shape, ty.dtype));
    t.in.push_back(t.inputs.back().data());
  }
  for (const TensorType& ty : result_types(r.graph)) {
    t.got.push_back(Tensor::empty(ty.shape, ty.dtype));
    t.out.push_back(ty.numel() == 0 ? nullptr : const_cast<void*>(t.got.back().data()));
  }
  if (r.device != Device::CPU) {
    for (size_t i = 0; i < t.inputs.size(); ++i) {
      t.on_device.push_back(device_copy(r.device, t.in[i], r.inputs[i].size()));
      t.device_in.push_back(t.on_device.back().get());
    }
    for (const Tensor& y : t.got) {
      t.on_device.push_back(device_copy(r.device, nullptr, size_t(y.numel()) * size_t(dtype_size(y.dtype()))));
      t.device_out.push_back(t.on_device.back().get());
    }
  }
  return t;
}

// The machine to itself while timing: workers compile at the same time (the ranks of a distributed
// run sharing a machine, or two runs of one user) but time one at a time, so that one's timing
// never shares the memory system with another's. A lock per user and machine (ranks on other
// machines never wait) in the temporary directory ($TMPDIR, else /tmp: processes given directories
// of their own time as machines of their own do); released when the worker ends, however it ends.
class TimingTurn {
 public:
  TimingTurn() {
    std::error_code no_tmpdir;  // temp_directory_path reads $TMPDIR, else /tmp
    const std::filesystem::path tmp = std::filesystem::temp_directory_path(no_tmpdir);
    const std::string path = (no_tmpdir ? std::filesystem::path("/tmp") : tmp).string() + "/hjit-tune-timing-" +
                             std::to_string(geteuid()) + ".lock";
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd_ >= 0) while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {}
  }
  ~TimingTurn() {
    if (fd_ >= 0) close(fd_);
  }
  TimingTurn(const TimingTurn&) = delete;
  TimingTurn& operator=(const TimingTurn&) = delete;

 private:
  int fd_ = -1;
};

// A confirmation: the candidate and the baseline timed in turn (in_turn_ms), five times over; each
// one's time is the median of its five medians.
void confirm(const Request& r, const std::string& schedule_path, Measurement& m) {
  m.schedule = read_file(schedule_path);
  Timer t;
  Trial candidate = compile_trial(r, m.schedule), baseline = compile_trial(r, "");
  m.compile_ms = t.ms();
  candidate.slow = fault("slow", m.schedule);
  for (Trial* trial : {&candidate, &baseline}) {
    trial->run();
    trial->fetch();
    m.error = difference(trial->got, r.expected, result_types(r.graph));
    if (!m.error.empty()) {
      m.error = std::string(trial == &baseline ? "the baseline's" : "its") + " results are wrong: " + m.error;
      return;
    }
  }
  std::vector<double> cand, base;
  const TimingTurn turn;
  for (int round = 0; round < 5; ++round) {
    const auto [c, b] = in_turn_ms(candidate, baseline, false);
    cand.push_back(c), base.push_back(b);
  }
  m.ms = median(std::move(cand)), m.baseline_ms = median(std::move(base)), m.valid = true;
}

}  // namespace

std::string confirm_request(const std::string& schedule_path) { return kConfirm + schedule_path; }

int worker_main(const std::string& request, const std::string& how, const std::string& result) {
  Measurement m;
  try {
    Request r = read_request(request);
    Timer t;
    std::string why;
    const std::optional<backend::ScheduleRequest> request =
        how.rfind(kConfirm, 0) == 0 ? std::nullopt : std::optional(backend::ScheduleRequest::parse(how));
    if (!request) {
      confirm(r, how.substr(std::strlen(kConfirm)), m);
    } else if (std::optional<std::string> text = *request == backend::ScheduleRequest{backend::BuiltIn{}}
                                                     ? std::optional<std::string>("")
                                                     : backend::decide_schedule(r.graph, r.device, request->choice, &why)) {
      // The baseline's schedule text stays empty: as the best, it means "compile as without the database".
      m.schedule = *text;
      Trial trial = compile_trial(r, *text);
      m.compile_ms = t.ms();
      // Timed beside the baseline (compiled once for the run's workers: their disk cache is shared),
      // so that the search compares candidates by their time relative to it, which a machine
      // whose speed drifts leaves alone; the baseline itself is its own.
      std::optional<Trial> baseline;
      if (!text->empty()) baseline = compile_trial(r, "");
      if (fault("crash", how)) raise(SIGSEGV);
      if (fault("hang", how)) for (;;) pause();
      trial.run();
      trial.fetch();
      if (fault("wrong", how) && !trial.got.empty() && trial.got[0].numel() > 0 && trial.got[0].dtype() == DType::F32)
        const_cast<float*>(trial.got[0].data_ptr<float>())[0] += 1.0f;
      m.error = difference(trial.got, r.expected, result_types(r.graph));
      if (m.error.empty()) {
        const TimingTurn turn;
        if (baseline) std::tie(m.ms, m.baseline_ms) = in_turn_ms(trial, *baseline, true);
        else m.ms = m.baseline_ms = trial.median_ms();
        m.ms /= fault("lucky", how) ? 1000 : 1;
        m.valid = true;
      } else {
        m.error = "wrong results: " + m.error;
      }
    } else {
      m.error = "no schedule: " + why;
    }
  } catch (const std::exception& e) {
    m.error = e.what();
  }
  try {
    write_file(result, format_result(m));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hjit-tune worker: %s\n", e.what());
    return 1;
  }
  return 0;
}

namespace {

// hjit-tune beside this library as installed (<prefix>/bin beside <prefix>/lib), wherever the
// prefix was installed or moved to; "" when this library is not in such a place.
std::string worker_beside_library() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<const void*>(&worker_program), &info) || !info.dli_fname) return "";
  std::error_code ec;
  const std::filesystem::path lib = std::filesystem::canonical(info.dli_fname, ec);
  if (ec) return "";
  return (lib.parent_path() / HJIT_LIB_TO_BIN / "hjit-tune").lexically_normal().string();
}

// This process, when it is hjit-tune itself.
std::string this_program_if_hjit_tune() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return !ec && self.filename() == "hjit-tune" ? self.string() : "";
}

}  // namespace

std::string worker_program() {
  if (const std::optional<std::string> env = setting::raw(setting::Id::TuneWorker)) {
    if (executable_file(*env)) return *env;
    throw ValueError("HJIT_TUNE_WORKER='" + *env + "' is not an executable file");
  }
  // The same build as this library first: the running hjit-tune, the one installed beside it, the
  // build tree's; the configured install path last.
  for (const std::string& p : {this_program_if_hjit_tune(), worker_beside_library(), std::string(HJIT_TUNE_WORKER_BUILD),
                               std::string(HJIT_TUNE_WORKER_INSTALLED)})
    if (executable_file(p)) {
      log().debug("tuning: candidates are measured by {}", p);
      return p;
    }
  throw ValueError("hjit: tuning needs the hjit-tune program (it measures candidates in a process of their own); build "
                   "it, or set HJIT_TUNE_WORKER to its path");
}

WorkerFiles::WorkerFiles(const Request& r) {
  char request[] = "/tmp/hjit_tune_request_XXXXXX", cache[] = "/tmp/hjit_tune_cache_XXXXXX";
  const int fd = mkstemp(request);
  if (fd < 0) throw ValueError("hjit::tune: no temporary file for the tuning request");
  close(fd);
  request_ = request;
  if (mkdtemp(cache)) cache_ = cache;
  try {
    write_request(request_, r);
  } catch (...) {
    remove();
    throw;
  }
}

WorkerFiles::~WorkerFiles() { remove(); }

void WorkerFiles::remove() const {
  std::error_code ec;
  std::filesystem::remove(request_, ec);
  if (!cache_.empty()) std::filesystem::remove_all(cache_, ec);
}

Measurement measure_in_worker(const WorkerFiles& files, const std::string& how, double timeout_s,
                              const std::function<bool()>& stop) {
  const std::string program = worker_program();
  char result[] = "/tmp/hjit_tune_result_XXXXXX";
  const int fd = mkstemp(result);
  if (fd < 0) throw ValueError("hjit: no temporary file for a tuning result");
  close(fd);
  // The worker's environment: the run's disk cache (the cache reads HJIT_CACHE_DIR once per
  // process, so the worker cannot switch it per compile), and its own process group, so that
  // Ctrl-C reaches the tuning run, which then stops the worker. It measures the built-in rules
  // without a parameter model (HJIT_PARAM_MODEL=off): "built-in" is then the rules alone, which is
  // what a model fitted to the database is to improve on. The cache is held to 512 MB: an
  // hours-long run compiles thousands of candidates into it.
  std::vector<std::string> env_strings{"HJIT_CACHE_DIR=" + files.cache(), "HJIT_CACHE_MAX_MB=512", "HJIT_PARAM_MODEL=off"};
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "HJIT_CACHE_DIR=", 15) != 0 && std::strncmp(*e, "HJIT_CACHE_MAX_MB=", 18) != 0 &&
        std::strncmp(*e, "HJIT_PARAM_MODEL=", 17) != 0)
      env_strings.emplace_back(*e);
  // Its own process group: an Adams2019 search runs in a child of the worker, which would
  // otherwise search on for minutes, on the cores the next candidates are timed on.
  Timer t;
  ChildProcess worker = ChildProcess::spawn({{program, "--worker", files.request(), how, result}, env_strings, true, false});
  const ChildEnd end = worker.wait(timeout_s, stop);
  worker.kill_group();  // anything the worker left behind
  Measurement m;
  if (end.how == ChildEnd::NotStarted) {
    std::remove(result);
    throw ValueError("hjit: could not start the tuning worker '" + program + "': " + std::strerror(end.code));
  }
  if (!end.ok()) {
    std::remove(result);
    m.error = end.how == ChildEnd::Stopped    ? "interrupted"
              : end.how == ChildEnd::TimedOut ? "timed out after " + std::to_string(int(timeout_s)) + " s"
              : end.how == ChildEnd::Crashed  ? "the worker crashed (signal " + std::to_string(end.code) + ")"
                                              : "the worker failed";
    m.compile_ms = t.ms();
    return m;
  }
  m = parse_result(read_file(result));
  std::remove(result);
  return m;
}

}  // namespace hjit::tuning
