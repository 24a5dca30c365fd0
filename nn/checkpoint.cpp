#include <hjit/io.h>
#include <hjit/nn/checkpoint.h>

namespace hjit::nn {

namespace {
const std::string kModel = "model.", kOptim = "optim.";
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
