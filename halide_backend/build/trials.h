// Builds decided by trial runs on made-up inputs (scheduling/trial.h): an autoscheduler's schedule
// against the built-in one, the fitted model's parameters against the rules.
#pragma once
#include "halide_backend/build/choice.h"

namespace hjit::backend {

// An autoscheduler's schedule (`how`, its handler `choice`) is used only when it compiles, runs,
// computes what the built-in schedule computes, and is not much slower on this very pipeline;
// otherwise the built-in schedule stands in, with a warning. (Halide 14's autoschedulers fail on
// some pipelines, emit schedules that do not compile, that read outside the buffers, or that
// compute wrong results (Adams2019's storage folding of a padded pooling input), and are
// sometimes an order of magnitude slower.)
Built build_guarded(const Graph& g, const Options& o, const Target& target, const Auto& how, const ChoiceHandler& choice);

// The fitted model's parameters for g, kept where a trial on made-up inputs does not find them
// slower than the rules': the model generalizes from pipelines near this one, not this one (the
// parameters that won on a matmul of 8 rows by 512 ran 1.6-2.4x slower on 12 rows). Where the trial
// inputs do not run, the fitted parameters stand.
Built build_fitted(const Graph& g, const Options& o, const Target& target, const BuiltinParams& fitted);

}  // namespace hjit::backend
