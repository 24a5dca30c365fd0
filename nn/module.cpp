// Module's registry: names to member slots, walked depth first for the named lists.
#include <algorithm>
#include <map>
#include <set>

#include <hjit/error.h>
#include <hjit/io.h>
#include <hjit/jit.h>
#include <hjit/nn/module.h>

namespace hjit::nn {


void Module::check_new_name(const std::string& name) const {
  if (name.empty() || name.find('.') != std::string::npos)
    throw ValueError("nn::Module: '" + name + "' is not a name for a parameter, buffer or module (it must be non-empty, without '.')");
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& e) {
      if constexpr (requires { e.name; }) return e.name == name;
      else return e.first == name;
    });
  };
  if (taken(params_) || taken(buffers_) || taken(keys_) || taken(children_))
    throw ValueError("nn::Module: '" + name + "' is registered already in this module");
}

void Module::register_parameter(const std::string& name, Tensor& slot) {
  check_new_name(name);
  params_.push_back({name, &slot});
}

void Module::register_buffer(const std::string& name, Tensor& slot) {
  check_new_name(name);
  buffers_.push_back({name, &slot});
}

void Module::register_key(const std::string& name, Tensor& slot) {
  check_new_name(name);
  keys_.push_back({name, &slot});
}

Module& Module::register_module(const std::string& name, Module& child) {
  check_new_name(name);
  if (&child == this) throw ValueError("nn::Module: a module cannot hold itself ('" + name + "')");
  children_.push_back({name, &child});
  return child;
}

template <class Visit>
void Module::walk(const std::string& prefix, std::vector<const Module*>& seen, Visit&& visit) const {
  if (std::find(seen.begin(), seen.end(), this) != seen.end()) return;
  seen.push_back(this);
  visit(prefix, *this);
  for (const auto& [name, child] : children_) child->walk(prefix + name + ".", seen, visit);
}

NamedTensors Module::named(std::vector<Slot> Module::*list) const {
  NamedTensors out;
  std::vector<const Module*> seen;
  walk("", seen, [&](const std::string& prefix, const Module& m) {
    for (const Slot& s : m.*list)
      if (s.tensor->defined()) out.push_back({prefix + s.name, *s.tensor});
  });
  return out;
}

NamedTensors Module::named_parameters() const { return named(&Module::params_); }
NamedTensors Module::named_buffers() const { return named(&Module::buffers_); }
NamedTensors Module::named_keys() const { return named(&Module::keys_); }

void Module::load_keys(const NamedTensors& keys, bool strict) {
  assign_by_name(slots({&Module::keys_}), keys, strict, "nn::Module::load_keys");
}

// The slots themselves, so that assign reaches the members.
std::vector<std::pair<std::string, Tensor*>> Module::slots(std::initializer_list<std::vector<Slot> Module::*> lists) const {
  std::vector<std::pair<std::string, Tensor*>> out;
  std::vector<const Module*> seen;
  walk("", seen, [&](const std::string& prefix, const Module& m) {
    for (auto list : lists)
      for (const Slot& s : m.*list)
        if (s.tensor->defined()) out.push_back({prefix + s.name, s.tensor});
  });
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<Tensor> Module::buffers() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers()) out.push_back(t);
  return out;
}

NamedTensors Module::state() const {
  NamedTensors out = named_parameters();
  for (auto& b : named_buffers()) out.push_back(b);
  return out;
}

void Module::load_state(const NamedTensors& state, bool strict) {
  assign_by_name(slots({&Module::params_, &Module::buffers_}), state, strict, "nn::Module::load_state");
}

std::vector<std::pair<std::string, Module*>> Module::named_children() const { return children_; }

std::vector<std::pair<std::string, const Module*>> Module::named_modules() const {
  std::vector<std::pair<std::string, const Module*>> out;
  std::vector<const Module*> seen;
  walk("", seen, [&](const std::string& prefix, const Module& m) {
    out.push_back({prefix.empty() ? prefix : prefix.substr(0, prefix.size() - 1), &m});
  });
  return out;
}

void Module::train(bool on) {
  std::vector<const Module*> seen;
  walk("", seen, [&](const std::string&, const Module& m) { set_traced_flag(const_cast<Module&>(m).training_, on); });
}

bool Module::training() const { return traced_flag(training_); }

}  // namespace hjit::nn
