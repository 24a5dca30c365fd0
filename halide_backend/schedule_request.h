// How a pipeline is to be scheduled, as a value: made and checked once where an option enters hjit
// (schedule_request below: every API door calls it), then carried unchanged into the cache key, the
// partitioning and the build. Halide-free: the frontend and tuning hold it too.
//
//   Unfused                    opt_level 0: one stage per op (the baseline fused schedules are measured against)
//   BuiltIn{params}            opt_level 1 (and 2 without an autoscheduler): hjit's own schedule
//   Auto{scheduler, params}    opt_level 2 with an autoscheduler: Halide's, guarded by the built-in one
//   Given{text, origin}        a schedule's text form decided elsewhere (a tuning run): used as it is
//
// Beside the choice, a tuning database (ScheduleRequest::tuning_db): a graph it knows is compiled with
// its best measured schedule (a Given) instead of the choice; the store that answers is registered by
// tuning/ (halide_backend/scheduling/tuned_store.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include <hjit/graph.h>

#include "halide_backend/builtin_params.h"

namespace hjit::backend {

// Halide 14's autoschedulers, loaded from Debian's plugins.
enum class Autoscheduler : uint8_t { Adams2019, Li2018, Mullapudi2016 };
const char* autoscheduler_name(Autoscheduler a);
std::optional<Autoscheduler> autoscheduler_from_name(const std::string& name);

// What a tuning run varies in an autoscheduler: Halide's machine parameters (unset: this machine's)
// for each, and Adams2019's search (Halide reads those from its environment: HL_SEED, ...).
// Written and read as "key=value" words: "parallelism=16 cache=1048576", "beam=1 dropout=50 seed=3".
struct AutoParams {
  std::optional<int64_t> parallelism, cache, balance;
  std::optional<int64_t> max_funcs;           // Adams2019: the largest pipeline it is tried on (0: any)
  std::optional<int64_t> beam, dropout, seed;  // Adams2019: HL_BEAM_SIZE, HL_RANDOM_DROPOUT, HL_SEED
  std::string weights{};   // Adams2019: HL_WEIGHTS_DIR, a cost model's weights
  std::string features{};  // Adams2019: a file its featurization of the chosen schedule is written to
  std::string str() const;  // only what is set, in the order above
  // Throws ValueError naming a bad word (Adams2019's keys are Adams2019's only).
  static AutoParams parse(Autoscheduler a, const std::string& words);
  bool operator==(const AutoParams&) const = default;
};

struct Unfused {
  bool operator==(const Unfused&) const = default;
};
struct BuiltIn {
  BuiltinParams params{};
  bool operator==(const BuiltIn&) const = default;
};
struct Auto {
  Autoscheduler scheduler = Autoscheduler::Adams2019;
  AutoParams params{};
  bool operator==(const Auto&) const = default;
};
// Where a given schedule's text comes from. A file's (a tuning database's record) may have been
// changed on disk or written by another version: Halide lowers it in a child process first, so that
// a schedule that crashes Halide's compiler is a CompileError and not the end of this process.
enum class ScheduleOrigin : uint8_t { Caller, File };
struct Given {
  std::string text{};  // halide_backend/scheduling/schedule_value.h's text form
  ScheduleOrigin origin = ScheduleOrigin::Caller;
  bool operator==(const Given&) const = default;
};

using ScheduleChoice = std::variant<Unfused, BuiltIn, Auto, Given>;

struct ScheduleRequest {
  ScheduleChoice choice = BuiltIn{};
  std::string tuning_db{};  // "" when none

  template <class T>
  const T* as() const {
    return std::get_if<T>(&choice);
  }
  // The choice's text form: "unfused", "built-in", "built-in cols=3", "Adams2019",
  // "Mullapudi2016 parallelism=16": what tuning runs record as a candidate's origin and hand their
  // worker. A Given is "given" (its text is not part of it).
  std::string str() const;
  // The text form read back (ValueError naming what is wrong); no tuning database.
  static ScheduleRequest parse(const std::string& text);
  // The request for a pipeline serving every size of its dynamic dimensions: autoschedulers and
  // tuned schedules are searched at one size, so such a pipeline takes the built-in schedule (the
  // unfused one at opt_level 0), decided at the traced size and valid at every size.
  ScheduleRequest at_every_size() const;
  bool operator==(const ScheduleRequest&) const = default;
};

// The schedule options of hjit's API as the caller gave them.
struct ScheduleOptions {
  int opt_level = 2;          // 0, 1 or 2
  std::string autoscheduler{};  // "" or an Autoscheduler's name (opt_level 2 only)
  std::string tuning_db{};      // "" or a tuning database's path (opt_level 1 or 2)
  bool tuning_db_from_environment = true;  // "" means $HJIT_TUNING_DB when set (opt_level 1 or 2)
  Device device = Device::CPU;
};

// The one door every option of hjit's API that chooses a schedule goes through (JitOptions,
// ModuleOptions, ExportOptions, eager ops on a device, gradients' memory planning, tuning): the
// options checked, as a request. ValueError, starting with `who` ("jit 'f'"), for an opt_level other
// than 0-2, an unknown autoscheduler, an autoscheduler below opt_level 2 or one that does not
// schedule the device (Halide 14's GPU autoscheduler is Li2018), or a tuning database at opt_level 0
// (the unfused baseline is what tuned schedules are measured against).
ScheduleRequest schedule_request(const std::string& who, const ScheduleOptions& options);

}  // namespace hjit::backend
