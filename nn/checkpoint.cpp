#include <algorithm>
#include <functional>
#include <optional>

#include <hjit/error.h>
#include <hjit/io.h>
#include <hjit/nn/checkpoint.h>
#include <hjit/nn/init.h>

namespace hjit::nn {

namespace {
const std::string kModel = "model.", kOptim = "optim.", kSchedule = "schedule.", kKeys = "keys.", kMode = "mode.",
                  kProcessKey = "rng.process";

// The model's entries of a checkpoint against the model, before anything is loaded: a checkpoint
// of another architecture or size is blamed on the model's layer, not on the optimizer's state
// of the same parameter (which is named by index: "exp_avg.0").
void check_model_entries(const std::string& path, const Module& model, const NamedTensors& saved, bool strict) {
  const std::string who = "nn::load_checkpoint: '" + path + "'";
  const NamedTensors mine = model.state();
  for (const auto& [name, t] : saved) {
    auto it = std::find_if(mine.begin(), mine.end(), [&](const auto& m) { return m.first == name; });
    if (it == mine.end()) {
      if (strict) throw ValueError(who + " holds '" + name + "', which the model has not (another architecture? strict = false skips it)");
      continue;
    }
    if (t.shape() != it->second.shape())
      throw ShapeError(who + ": the model's '" + name + "' is " + shape_str(it->second.shape()) + " but " + shape_str(t.shape()) +
                       " in the checkpoint (a checkpoint of another model size?)");
    if (t.dtype() != it->second.dtype())
      throw DTypeError(who + ": the model's '" + name + "' is " + dtype_name(it->second.dtype()) + " but " + dtype_name(t.dtype()) +
                       " in the checkpoint");
  }
  if (strict)
    for (const auto& [name, t] : mine)
      if (std::none_of(saved.begin(), saved.end(), [&](const auto& s) { return s.first == name; }))
        throw ValueError(who + " holds nothing for the model's '" + name + "' (another architecture? strict = false leaves it)");
}
}  // namespace

void save_checkpoint(const std::string& path, const Module& model, const optim::Optimizer* optimizer,
                     const optim::LRScheduler* schedule) {
  NamedTensors all;
  for (auto& [name, t] : model.state()) all.push_back({kModel + name, t});
  for (auto& [name, t] : model.named_keys()) all.push_back({kKeys + name, t});
  for (auto& [name, m] : model.named_modules()) all.push_back({kMode + name, Tensor::scalar(m->training() ? 1 : 0, DType::Bool)});
  all.push_back({kProcessKey, process_key_now()});
  if (optimizer)
    for (auto& [name, t] : optimizer->state_dict()) all.push_back({kOptim + name, t});
  if (schedule)
    for (auto& [name, t] : schedule->state_dict()) all.push_back({kSchedule + name, t});
  save_tensors(path, all);
}

void load_checkpoint(const std::string& path, Module& model, optim::Optimizer* optimizer, bool strict, optim::LRScheduler* schedule) {
  NamedTensors for_model, for_optim, for_schedule, keys, modes;
  std::optional<Tensor> process;
  std::vector<std::string> foreign;
  for (auto& [name, t] : load_tensors(path)) {
    auto under = [&](const std::string& prefix, NamedTensors& into) {
      if (name.rfind(prefix, 0) != 0) return false;
      into.push_back({name.substr(prefix.size()), t});
      return true;
    };
    if (name == kProcessKey) process = t;
    else if (!under(kModel, for_model) && !under(kOptim, for_optim) && !under(kSchedule, for_schedule) && !under(kKeys, keys) &&
             !under(kMode, modes))
      foreign.push_back(name);
  }
  const std::string who = "nn::load_checkpoint: '" + path + "'";
  if (!foreign.empty()) throw ValueError(who + " holds '" + foreign[0] + "', which is not a checkpoint's entry");
  if (optimizer && for_optim.empty()) throw ValueError(who + " holds no optimizer state (it was saved without an optimizer)");
  if (schedule && for_schedule.empty()) throw ValueError(who + " holds no schedule state (it was saved without a schedule)");
  check_model_entries(path, model, for_model, strict);
  const std::vector<std::pair<std::string, const Module*>> modules = model.named_modules();
  std::vector<std::pair<Module*, bool>> mode_of;
  for (const auto& [name, t] : modes) {
    auto it = std::find_if(modules.begin(), modules.end(), [&](const auto& m) { return m.first == name; });
    if (it == modules.end()) {
      if (strict) throw ValueError(who + " holds the mode of a module '" + name + "' the model has not");
      continue;
    }
    if (t.dtype() != DType::Bool || t.numel() != 1) throw DTypeError(who + ": the mode of '" + name + "' is not one bool");
    mode_of.push_back({const_cast<Module*>(it->second), t.item<bool>()});
  }
  // The optimizer's and the schedule's states are checked before the model is touched: a load
  // that fails leaves them all.
  std::vector<std::function<void()>> undo;
  try {
    if (process) {
      const Tensor before = process_key_now();
      set_process_key(*process);
      undo.push_back([before] { set_process_key(before); });
    }
    if (optimizer) {
      NamedTensors saved;
      for (auto& [name, t] : optimizer->state_dict()) saved.push_back({name, t.clone()});
      optimizer->load_state_dict(for_optim);
      undo.push_back([optimizer, saved] { optimizer->load_state_dict(saved); });
    }
    if (schedule) {
      const NamedTensors saved = schedule->state_dict();
      schedule->load_state_dict(for_schedule);
      undo.push_back([schedule, saved] { schedule->load_state_dict(saved); });
    }
    if (!keys.empty()) {
      NamedTensors saved;
      for (auto& [name, t] : model.named_keys()) saved.push_back({name, t.clone()});
      model.load_keys(keys, strict);
      undo.push_back([&model, saved] { model.load_keys(saved); });
    }
    model.load_state(for_model, strict);
  } catch (...) {
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) (*it)();
    throw;
  }
  // Depth first, each module before those below it: train() sets a subtree, its children then
  // their own.
  for (const auto& [m, training] : mode_of) m->train(training);
}

}  // namespace hjit::nn
