#include <algorithm>

#include <hjit/error.h>
#include <hjit/io.h>
#include <hjit/nn/checkpoint.h>

namespace hjit::nn {

namespace {
const std::string kModel = "model.", kOptim = "optim.";

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

void save_checkpoint(const std::string& path, const Module& model, const optim::Optimizer* optimizer) {
  NamedTensors all;
  for (auto& [name, t] : model.state()) all.push_back({kModel + name, t});
  if (optimizer)
    for (auto& [name, t] : optimizer->state_dict()) all.push_back({kOptim + name, t});
  save_tensors(path, all);
}

void load_checkpoint(const std::string& path, Module& model, optim::Optimizer* optimizer, bool strict) {
  NamedTensors for_model, for_optim;
  std::vector<std::string> foreign;
  for (auto& [name, t] : load_tensors(path)) {
    if (name.rfind(kModel, 0) == 0) for_model.push_back({name.substr(kModel.size()), t});
    else if (name.rfind(kOptim, 0) == 0) for_optim.push_back({name.substr(kOptim.size()), t});
    else foreign.push_back(name);
  }
  if (!foreign.empty()) throw ValueError("nn::load_checkpoint: '" + path + "' holds '" + foreign[0] + "', which is not a checkpoint's entry");
  if (optimizer && for_optim.empty())
    throw ValueError("nn::load_checkpoint: '" + path + "' holds no optimizer state (it was saved without an optimizer)");
  check_model_entries(path, model, for_model, strict);
  // The optimizer's state is checked before the model is touched: a load that fails leaves both.
  if (optimizer) {
    const NamedTensors before = optimizer->state_dict();
    NamedTensors saved;
    for (auto& [name, t] : before) saved.push_back({name, t.clone()});
    optimizer->load_state_dict(for_optim);
    try {
      model.load_state(for_model, strict);
    } catch (...) {
      optimizer->load_state_dict(saved);
      throw;
    }
    return;
  }
  model.load_state(for_model, strict);
}

}  // namespace hjit::nn
