// A training checkpoint in one file: everything a training run's future depends on, so that a run
// resumed from it (in a new process) is bit-identical to the run that was not interrupted: a
// module's parameters and buffers, its random keys (dropout's) and train/eval modes, the
// process-wide key new layers draw from, and when given an optimizer's state and a learning-rate
// schedule's position (hjit's tensor file: versioned, checksummed, written atomically).
//
//   hjit::nn::save_checkpoint("step_1000.hjit", model, &opt, &schedule);
//   hjit::nn::load_checkpoint("step_1000.hjit", model, &opt, true, &schedule);   // resumes where it stopped
#pragma once
#include <string>

#include <hjit/nn/module.h>
#include <hjit/optim.h>
#include <hjit/optim_schedule.h>

namespace hjit::nn {

// Entries "model.<path>", "keys.<path>", "mode.<module path>" (bool; "mode." the root's),
// "rng.process", "optim.<name>" and "schedule.<name>".
void save_checkpoint(const std::string& path, const Module& model, const optim::Optimizer* optimizer = nullptr,
                     const optim::LRScheduler* schedule = nullptr);
// Loads the model's entries by name (strict: every name on both sides, as Module::load_state),
// checked against the model first (a ShapeError names the layer), then the optimizer's and the
// schedule's (always strict). A file without optimizer or schedule state given one is a
// ValueError; nothing is assigned unless everything checks. Keys, modes and the process key are
// restored where the file holds them (a checkpoint written before they were saved leaves them).
void load_checkpoint(const std::string& path, Module& model, optim::Optimizer* optimizer = nullptr, bool strict = true,
                     optim::LRScheduler* schedule = nullptr);

}  // namespace hjit::nn
