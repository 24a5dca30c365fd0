#include "halide_backend/runtime/partitioned.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "support/allocator.h"

namespace hjit::backend {

Boundaries plan_boundaries(const std::vector<Part>& parts) {
  Boundaries b;
  b.frees_after.resize(parts.size());
  for (const Part& p : parts)
    for (size_t k = 0; k < p.output_slot.size(); ++k)
      if (p.output_slot[k] < 0) {
        const size_t id = size_t(-1 - p.output_slot[k]);
        if (b.bytes.size() <= id) b.bytes.resize(id + 1);
        const TensorType& t = p.graph.type(p.graph.outputs[k]);
        b.bytes[id] = std::max<size_t>(size_t(t.numel()) * size_t(dtype_size(t.dtype)), 64);
      }
  // A value lives from the part that computes it to the last part that reads it.
  std::vector<size_t> last(b.bytes.size(), 0);
  for (size_t k = 0; k < parts.size(); ++k)
    for (int id : parts[k].boundary_inputs) last[size_t(id)] = k;
  for (size_t id = 0; id < last.size(); ++id) b.frees_after[last[id]].push_back(int(id));
  std::vector<int64_t> live(parts.size(), 0);  // bytes held while part k runs
  for (size_t k = 0; k < parts.size(); ++k)
    for (int slot : parts[k].output_slot)
      if (slot < 0)
        for (size_t j = k; j <= std::max(k, last[size_t(-1 - slot)]); ++j) live[j] += int64_t(b.bytes[size_t(-1 - slot)]);
  for (size_t k = 0; k < parts.size(); ++k) b.most_held = std::max(b.most_held, live[k]);
  return b;
}

PartitionedExecutable::PartitionedExecutable(std::vector<Part> parts, std::vector<std::shared_ptr<const Executable>> exes)
    : parts_(std::move(parts)), exes_(std::move(exes)), boundaries_(plan_boundaries(parts_)) {}

void PartitionedExecutable::run(const void* const* inputs, void* const* outputs) const {
  const std::vector<size_t>& bytes = boundaries_.bytes;
  CachedBlocks held(bytes.size());
  std::vector<void*>& boundary = held.slots;
  for (size_t k = 0; k < parts_.size(); ++k) {
    const Part& p = parts_[k];
    std::vector<const void*> in;
    for (int i : p.caller_inputs) in.push_back(inputs[i]);
    for (int b : p.boundary_inputs) in.push_back(boundary[size_t(b)]);
    std::vector<void*> out;
    for (int slot : p.output_slot) {
      if (slot >= 0) {
        out.push_back(outputs[slot]);
        continue;
      }
      void*& b = boundary[size_t(-1 - slot)];
      b = cached_alloc(bytes[size_t(-1 - slot)]);
      out.push_back(b);
    }
    exes_[k]->run(in.data(), out.data());
    for (int b : boundaries_.frees_after[k]) cached_free(boundary[size_t(b)]), boundary[size_t(b)] = nullptr;
  }
}

std::string PartitionedExecutable::device_code() const {
  std::string code;
  for (const auto& e : exes_) code += e->device_code();
  return code;
}

int64_t PartitionedExecutable::temporary_bytes() const {
  int64_t inner = 0;
  for (const auto& e : exes_) inner = std::max(inner, e->temporary_bytes());
  return boundaries_.most_held + inner;
}

std::string PartitionedExecutable::explain() const {
  std::ostringstream os;
  for (size_t k = 0; k < exes_.size(); ++k) os << "part " << k + 1 << " of " << exes_.size() << ":\n" << exes_[k]->explain();
  return os.str();
}

std::string PartitionedExecutable::summary() const {
  std::set<const Executable*> distinct;
  for (const auto& e : exes_) distinct.insert(e.get());
  std::string s = exes_.front()->summary() + ", in " + std::to_string(exes_.size()) + " parts";
  if (distinct.size() < exes_.size()) s += " (" + std::to_string(distinct.size()) + " distinct)";
  return s;
}

}  // namespace hjit::backend
