// A training checkpoint in one file: a module's parameters and buffers and, when given, an
// optimizer's state (hjit's tensor file: versioned, checksummed, written atomically).
//
//   hjit::nn::save_checkpoint("step_1000.hjit", model, &opt);
//   hjit::nn::load_checkpoint("step_1000.hjit", model, &opt);   // resumes where it stopped
#pragma once
#include <string>

#include <hjit/nn/module.h>
#include <hjit/optim.h>

namespace hjit::nn {

// Entries "model.<path>" and "optim.<name>".
void save_checkpoint(const std::string& path, const Module& model, const optim::Optimizer* optimizer = nullptr);
// Loads the model's entries by name (strict: every name on both sides, as Module::load_state) and
// the optimizer's (always strict). A file without optimizer state given an optimizer is a
// ValueError; nothing is assigned unless everything checks.
void load_checkpoint(const std::string& path, Module& model, optim::Optimizer* optimizer = nullptr, bool strict = true);

}  // namespace hjit::nn
