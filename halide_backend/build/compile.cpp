// compile(): the compile cache. A memory tier (this process's compiled pipelines) and a disk tier
// (shared objects any later process loads instead of compiling), both keyed by everything that
// determines the code: the graph's text and constants, the target, the schedule request's
// identity, and the versions of hjit and Halide (tinygrad's normalized key: two functions that
// trace to the same graph share one compiled pipeline).
#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

#include "graph/passes/constant_indices.h"
#include "halide_backend/backend.h"
#include "halide_backend/build/build.h"
#include "halide_backend/build/choice.h"
#include "halide_backend/devices.h"
#include "halide_backend/cache/cache_entry.h"
#include "halide_backend/codegen/codegen.h"
#include "halide_backend/build/control_flow.h"
#include "halide_backend/runtime/executable.h"
#include "halide_backend/cache/disk_cache.h"
#include "halide_backend/lowering/lower.h"
#include "halide_backend/build/partition.h"
#include "halide_backend/scheduling/scheduler.h"
#include "halide_backend/scheduling/tuned_store.h"
#include "support/binary_io.h"
#include "support/build_id.h"
#include "support/child_process.h"
#include "support/log.h"

namespace hjit::backend {
namespace {

std::string cache_key(const Graph& g, const Options& o, const Target& target) {
  std::string constants;
  for (const ConstData& c : g.constants) constants += hash_hex(std::string_view(static_cast<const char*>(c.data), c.nbytes));
  const std::string schedule = handler_for(o.schedule.choice)->identity();
  std::string in_place;
  for (const auto& [input, slot] : o.in_place) in_place += " " + std::to_string(input) + ">" + std::to_string(slot);
  // The text lists captured inputs before the others, whatever their positions: the positions
  // are the compiled code's argument order, so they are part of the key. (Two alike parts of a
  // partitioned graph, the first reading the caller's argument before its weights and the next
  // its weights before the value handed in, printed alike and shared code: the second part ran
  // with its arguments swapped and read past a buffer.)
  std::string positions;
  for (int in : g.inputs) positions += g.is_captured(in) ? 'c' : 'a';
  return "hjit " + library_build_id() + " halide " HJIT_HALIDE_VERSION "\ntarget " + target.str() + "\nschedule " +
         schedule + "\nconstants " + hash_hex(constants) + "\n" + (o.dynamic ? o.dynamic->str() + "\n" : "") +
         (in_place.empty() ? "" : "in place" + in_place + "\n") + "inputs " + positions + "\n" + g.str();
}

// An entry's description must fit the graph it is loaded for: the arguments' kinds, indices,
// types and shapes, and the constants' sizes (a loaded function reads exactly these buffers).
void check_fits(const PipelineInfo& info, const Graph& g) {
  auto fail = [](const std::string& why) { throw ValueError("its arguments do not fit the graph (" + why + ")"); };
  for (const ArgSpec& a : info.args) {
    TensorType t;
    if (a.from == ArgSpec::From::Input) {
      if (size_t(a.index) >= g.inputs.size()) fail("input index");
      t = g.type(g.inputs[size_t(a.index)]);
    } else if (a.from == ArgSpec::From::Output) {
      const size_t n_out = g.outputs.size() + g.updates.size();
      if (size_t(a.index) >= n_out) fail("output index");
      t = size_t(a.index) < g.outputs.size() ? g.type(g.outputs[size_t(a.index)])
                                             : g.type(g.updates[size_t(a.index) - g.outputs.size()].value);
    } else {
      if (size_t(a.index) >= info.constants.size()) fail("constant index");
      size_t bytes = size_t(a.type.bits / 8) * a.type.lanes;
      for (const halide_dimension_t& d : a.dims) bytes *= size_t(d.extent);
      if (info.constants[size_t(a.index)]->size() < bytes) fail("constant size");
      continue;
    }
    const halide_type_t want = storage_type(t.dtype);
    if (!(a.type == want) || a.dims.size() != size_t(t.rank())) fail("type or rank");
    const Shape shape = to_halide_order(t.shape);
    int64_t stride = 1;
    for (size_t d = 0; d < a.dims.size(); ++d) {
      if (a.dims[d].min != 0 || a.dims[d].extent != shape[d] || a.dims[d].stride != stride) fail("shape");
      stride *= shape[d];
    }
  }
}

// The entry for `key` from the disk, when there is a good one.
std::shared_ptr<HalideExecutable> load_from_disk(const std::string& name, const std::string& key, const Graph& g) {
  DiskCache& disk = DiskCache::instance();
  std::optional<std::string> bytes = disk.read(name);
  if (!bytes) return nullptr;
  try {
    Timer t;
    DecodedEntry e = decode_cache_entry(*bytes, key);
    const double decoded = t.ms();
    check_fits(e.info, g);
    auto exe = load_shared_object(e.shared_object, std::move(e.info));
    log().debug("cache: {} KiB decoded in {:.2f} ms, loaded in {:.2f} ms", bytes->size() / 1024, decoded, t.ms() - decoded);
    return exe;
  } catch (const Error& err) {
    disk.reject(name, err.what());
    return nullptr;
  }
}

// The pipelines alive in this process, by key: held by their users (jit entries, modules), not
// here, so that a version a jit cache evicts gives its code and memory back.
struct MemoryTier {
  std::mutex mu;
  std::unordered_map<std::string, std::weak_ptr<const Executable>> entries;
  int64_t hits = 0;
  void prune() {
    for (auto it = entries.begin(); it != entries.end();) it = it->second.expired() ? entries.erase(it) : std::next(it);
  }
};
MemoryTier& memory() {
  static MemoryTier m;
  return m;
}

}  // namespace

std::string target_name(Device device) { return Target::host(device).str(); }

std::optional<std::string> decide_schedule(const Graph& g, Device device, const ScheduleChoice& how, std::string* why) {
  std::lock_guard lock(compile_mutex());
  try {
    return decide(g, Target::host(device), how, why);
  } catch (const Halide::Error& e) {
    *why = std::string("Halide: ") + e.what();
    return std::nullopt;
  }
}

void check_schedule(const Graph& g, Device device, const std::string& schedule_text) {
  std::lock_guard lock(compile_mutex());
  check_schedule_in_child(g, Target::host(device), schedule_text);
}

namespace {

// One graph through the two tiers: memory, disk, else built here (and written to disk).
// *loaded: whether it came from the disk.
std::shared_ptr<const Executable> compile_one(const Graph& g, const Options& o, const Target& target, const std::string& key,
                                              bool* loaded = nullptr) {
  const std::string name = hash_hex(key);
  std::shared_ptr<HalideExecutable> exe = load_from_disk(name, key, g);
  if (loaded) *loaded = exe != nullptr;
  if (exe) {
    log().debug("cache: '{}' loaded from the disk cache", g.name);
  } else {
    DiskCache::instance().count_miss();
    Built b;
    {
      std::lock_guard lock(compile_mutex());
      b = build(g, o, target);
    }
    if (b.shared_object) DiskCache::instance().write(name, encode_cache_entry(key, b.executable->info(), *b.shared_object));
    exe = b.executable;
  }
  exe->set_in_place(o.in_place);
  exe->set_source(std::make_shared<PipelineSource>(PipelineSource{g, target.str(), o.dynamic}),
                  [schedule = exe->info().schedule](const PipelineSource& s) {
                    return lowered_statement(s.graph, Target::parse(s.target), schedule, s.dynamic.get());
                  });
  return exe;
}

// The parts of a partitioned graph, each distinct part compiled once (a model's repeated layers cut
// alike are one pipeline). With a disk cache, a child process builds about half of them (by
// compile cost) into it while this process builds the rest; then the child's come from the cache
// like any pipeline. *loaded: whether every part was on the disk.
std::shared_ptr<const Executable> compile_parts(const Graph& g, std::vector<Part> parts, const Options& o,
                                                const Target& target, bool* loaded) {
  std::vector<std::string> keys;
  for (const Part& p : parts) keys.push_back(cache_key(p.graph, o, target));
  DiskCache& disk = DiskCache::instance();
  std::vector<size_t> todo;  // first parts of distinct keys, not on disk
  {
    std::set<std::string> seen;
    for (size_t k = 0; k < parts.size(); ++k)
      if (seen.insert(keys[k]).second && !disk.has(hash_hex(keys[k]))) todo.push_back(k);
  }
  *loaded = todo.empty();
  // The distinct parts shared between this process and a child by their compile cost, largest
  // first, each to whichever has less so far (a part of two transformer blocks took 7 s, the
  // others 1-4: dealt alternately, one process waited 8 s for the other).
  std::vector<int64_t> cost(parts.size());
  for (size_t k : todo) cost[k] = compile_cost(parts[k].graph) + 8;  // (+ what every pipeline costs: runtime, link)
  std::sort(todo.begin(), todo.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  std::vector<size_t> here, there;
  int64_t load_here = 0, load_there = 0;
  for (size_t k : todo) {
    const bool mine = load_here <= load_there;
    (mine ? here : there).push_back(k);
    (mine ? load_here : load_there) += cost[k];
  }
  std::optional<ChildProcess> child;
  if (todo.size() >= 2 && disk.enabled() && can_link()) {
    // Forked while holding the compile lock: no other thread is inside Halide, and the child, the
    // only thread it has, builds without taking it.
    std::lock_guard lock(compile_mutex());
    child.emplace(ChildProcess::fork([&] {
      disk.forked();
      for (size_t k : there) {
        try {
          Built b = build(parts[k].graph, o, target);
          if (b.shared_object) disk.write(hash_hex(keys[k]), encode_cache_entry(keys[k], b.executable->info(), *b.shared_object));
        } catch (...) {
        }
      }
    }));
    if (!child->started()) child.reset();
  }
  std::map<std::string, std::shared_ptr<const Executable>> built;
  Timer t;
  for (size_t k : child ? here : todo) built[keys[k]] = compile_one(parts[k].graph, o, target, keys[k]);
  if (child) {
    // The two shares are about the same work: a child still busy long after this process's share
    // was done is stuck (a lock another thread held when it was forked) and is stopped; this
    // process then compiles what the child left.
    const double limit_s = std::max(30.0, 3 * t.ms() / 1000) - t.ms() / 1000;
    const ChildEnd end = child->wait(std::max(limit_s, 0.001));
    if (end.how == ChildEnd::TimedOut)
      log().warn("hjit: the process compiling parts of '{}' did not finish; compiling them here", g.name);
    else if (!end.ok())
      log().warn("hjit: the process compiling parts of '{}' died ({}); compiling them here", g.name, end.str());
  }
  std::vector<std::shared_ptr<const Executable>> exes;
  for (size_t k = 0; k < parts.size(); ++k) {
    auto it = built.find(keys[k]);
    if (it == built.end()) it = built.emplace(keys[k], compile_one(parts[k].graph, o, target, keys[k])).first;
    exes.push_back(it->second);
  }
  log().debug("backend: '{}' compiled in {} parts ({} distinct, {} compiled here{})", g.name, parts.size(), built.size(),
              child ? here.size() : todo.size(), child ? ", the others in a child process" : "");
  return std::make_shared<PartitionedExecutable>(std::move(parts), std::move(exes));
}

}  // namespace

std::vector<Part> parts_to_compile(const Graph& g, const Options& o) {
  using Partitioning = ChoiceHandler::Partitioning;
  const Partitioning rule = handler_for(o.schedule.choice)->partitioning();
  if (rule == Partitioning::None || !device_kind(o.device).partitions() || o.dynamic) return {};
  return partition(g, rule == Partitioning::Halves && DiskCache::instance().enabled() && can_link());
}

namespace {

// compile() without a tuning database.
Compiled compile_as_requested(const Graph& g, const Options& options) {
  Timer t;
  // One buffer for an input and an output is for a single pipeline on the CPU (parts and host
  // steps hand values between pipelines; GPU buffers are the device's).
  Options o = options;
  if (!o.in_place.empty() && (has_host_steps(g) || !device_kind(o.device).computes_in_place() || o.dynamic)) o.in_place.clear();
  if (o.dynamic && o.schedule != o.schedule.at_every_size())
    throw InternalError("hjit: '" + g.name + "' has dynamic sizes and the schedule request " + o.schedule.str());
  // Not cached as a whole: its parts and its ops' graphs are, each under its own key.
  if (has_host_steps(g)) return compile_control_flow(g, o);
  MemoryTier& mem = memory();
  const Target target = Target::host(o.device, o.cuda_capability);
  const std::string key = cache_key(g, o, target);
  log().debug("cache: key of '{}' in {:.2f} ms", g.name, t.ms());
  {
    std::lock_guard lock(mem.mu);
    auto it = mem.entries.find(key);
    if (it != mem.entries.end())
      if (std::shared_ptr<const Executable> alive = it->second.lock()) {
        ++mem.hits;
        log().debug("cache: '{}' found in memory", g.name);
        return Compiled{alive, true, t.ms()};
      }
  }
  std::shared_ptr<const Executable> exe;
  bool loaded = false;
  std::vector<Part> parts = parts_to_compile(g, o);
  if (!parts.empty()) {
    Options per_part = o;
    per_part.in_place.clear();
    exe = compile_parts(g, std::move(parts), per_part, target, &loaded);
  } else {
    exe = compile_one(g, o, target, key, &loaded);
  }
  log().debug("backend: '{}' ready ({}) in {:.1f} ms", g.name, o.schedule.str(), t.ms());
  std::lock_guard lock(mem.mu);
  mem.prune();
  std::weak_ptr<const Executable>& slot = mem.entries[key];
  if (std::shared_ptr<const Executable> other = slot.lock()) return Compiled{other, true, t.ms()};  // another thread's
  slot = exe;
  return Compiled{exe, false, t.ms(), loaded};
}

// compile() with a tuning database: the store tuning/ registered says whether it knows g.
Compiled compile_tuned(const Graph& g, const Options& o) {
  Options untuned = o;
  untuned.schedule.tuning_db.clear();
  const std::string& db = o.schedule.tuning_db;
  const TunedStore* store = tuned_store();
  if (!store) {
    log().warn("hjit: no store of tuned schedules is registered (tuning/ was not linked in); '{}' ignores {}", g.name, db);
    return compile_as_requested(g, untuned);
  }
  Timer t;
  const std::optional<TunedPipeline> tuned = store->find(g, o.device, o.name, db);
  if (!tuned) {
    log().debug("tuning: '{}' is not in {} ({:.2f} ms to look); compiling as without it", g.name, db, t.ms());
    return compile_as_requested(g, untuned);
  }
  log().debug("tuning: '{}' has a tuned schedule in {} ({:.2f} ms to look)", g.name, db, t.ms());
  Options with_tuned = untuned;
  with_tuned.schedule.choice = Given{tuned->schedule, ScheduleOrigin::File};
  try {
    return compile_as_requested(tuned->graph, with_tuned);
  } catch (const Error& e) {
    log().warn("tuning: the tuned schedule of '{}' in {} does not apply ({}); compiling as without it", g.name, db, e.what());
    return compile_as_requested(g, untuned);
  }
}

}  // namespace

Compiled compile(const Graph& g, const Options& o) {
  check_constant_indices(g, o.dynamic.get());
  // A schedule given as it is, or dynamic sizes, leave no choice to a database.
  if (o.schedule.tuning_db.empty() || !handler_for(o.schedule.choice)->tunable() || o.dynamic) return compile_as_requested(g, o);
  return compile_tuned(g, o);
}

std::vector<std::shared_ptr<const Executable>> live_executables() {
  std::vector<std::shared_ptr<const Executable>> out;
  std::lock_guard lock(memory().mu);
  for (auto& [key, weak] : memory().entries)
    if (auto e = weak.lock()) out.push_back(std::move(e));
  return out;
}

CacheCounts cache_counts() {
  CacheCounts c;
  {
    std::lock_guard lock(memory().mu);
    c.memory_hits = memory().hits;
    memory().prune();
    c.memory_entries = int64_t(memory().entries.size());
  }
  const DiskCacheStats d = DiskCache::instance().stats();
  c.disk_hits = d.hits, c.misses = d.misses, c.disk_rejected = d.rejected, c.disk_writes = d.writes;
  c.disk_evictions = d.evictions, c.disk_entries = d.entries, c.disk_bytes = d.bytes, c.directory = d.directory;
  c.shared_hits = d.shared.hits, c.shared_rejected = d.shared.rejected, c.shared_writes = d.shared.writes, c.shared = d.shared.address;
  return c;
}

const Scheduler* registered_scheduler = nullptr;

void register_scheduler(const Scheduler& s) { registered_scheduler = &s; }

const Scheduler& scheduler() {
  if (!registered_scheduler) throw InternalError("hjit: no scheduler registered (schedules/ was not linked in)");
  return *registered_scheduler;
}

const TunedStore* registered_tuned_store = nullptr;

void register_tuned_store(const TunedStore& s) { registered_tuned_store = &s; }

const TunedStore* tuned_store() { return registered_tuned_store; }

}  // namespace hjit::backend
