// hjit::nn::Module: a model's named, nested parameters and buffers, and its train/eval mode, as
// torch.nn.Module keeps them. A module is plain C++ code over hjit's ops, so jit, grad and
// value_and_grad take it like any code; its parameters are tensors like any other.
//
//   struct Net : hjit::nn::Module {
//     hjit::nn::Linear fc1{784, 128}, fc2{128, 10};
//     Net() { register_module("fc1", fc1); register_module("fc2", fc2); }
//     Tensor operator()(const Tensor& x) { return fc2(hjit::relu(fc1(x))); }
//   };
//   Net net;
//   hjit::optim::AdamW opt(net.parameters(), 1e-3);          // "fc1.weight", "fc1.bias", ...
//
// A module registers the tensors and modules it holds as members, by reference, so it is neither
// copied nor moved (hold it by value where it is made, or by std::shared_ptr). The handles that
// parameters() returns share storage with the members: an optimizer's assign updates the module.
//
// train()/eval() set the mode of a module and every module below it. A traced function that reads
// a module's mode (training(): dropout, batch norm) runs the version traced in the mode the module
// is in at each call: a switch traces the other mode once, then both are kept (hjit::traced_flag).
//   auto run = hjit::jit([&](const Tensor& x) { return net(x); });
//   run(x);  net.eval();  run(x);  // traced and compiled again, in eval mode; net.train() returns to the first
#pragma once
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <hjit/io.h>

namespace hjit::nn {

using hjit::NamedTensors;

class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  // This module's and its descendants' parameters, named by their path ("block.0.attn.weight"),
  // in registration order, depth first, each tensor once (a module shared by two parents lists
  // its parameters under the first path that reaches it).
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  // Buffers: state that is not trained (batch norm's running statistics).
  NamedTensors named_buffers() const;
  std::vector<Tensor> buffers() const;
  // Parameters, then buffers: torch's state_dict.
  NamedTensors state() const;
  // Random keys the module draws from as it runs (dropout's): not in state() (PyTorch keeps its
  // generator apart), but in a checkpoint, which a resumed run must continue exactly.
  NamedTensors named_keys() const;
  // Sets the keys by name (assign; strict: every name on both sides, as load_state).
  void load_keys(const NamedTensors& keys, bool strict = true);
  // Sets each named tensor from `state` (by assign: the handles that jitted functions and
  // optimizers hold see the values). strict: a name the module lacks or one the state lacks is a
  // ValueError naming them; a shape that differs is a ShapeError, a dtype a DTypeError, always
  // (hjit::assign_by_name). With hjit::load_npz, a PyTorch state dict saved by numpy loads by name.
  void load_state(const NamedTensors& state, bool strict = true);

  std::vector<std::pair<std::string, Module*>> named_children() const;
  // This module ("") and every one below it, depth first.
  std::vector<std::pair<std::string, const Module*>> named_modules() const;

  void train(bool on = true);
  void eval() { train(false); }
  // Read inside a traced function, the mode becomes part of the version traced (hjit::traced_flag).
  bool training() const;

 protected:
  // Names are unique within a module and have no '.' (ValueError otherwise). `slot` is a member
  // of the registering module; an undefined tensor (a bias turned off) is left out of the lists.
  void register_parameter(const std::string& name, Tensor& slot);
  void register_buffer(const std::string& name, Tensor& slot);
  void register_key(const std::string& name, Tensor& slot);
  Module& register_module(const std::string& name, Module& child);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
    register_module(name, static_cast<Module&>(*child));
    owned_.push_back(child);
    return child;
  }

 private:
  struct Slot {
    std::string name;
    Tensor* tensor;
  };
  void check_new_name(const std::string& name) const;
  NamedTensors named(std::vector<Slot> Module::*list) const;
  std::vector<std::pair<std::string, Tensor*>> slots(std::initializer_list<std::vector<Slot> Module::*> lists) const;
  template <class Visit>
  void walk(const std::string& prefix, std::vector<const Module*>& seen, Visit&& visit) const;

  std::vector<Slot> params_, buffers_, keys_;
  std::vector<std::pair<std::string, Module*>> children_;
  std::vector<std::shared_ptr<Module>> owned_;
  bool training_ = true;
};

// A module of one tensor in, one out: what Sequential chains.
class Layer : public Module {
 public:
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }
};

}  // namespace hjit::nn
