#include "graph/passes/in_place.h"

#include <set>

#include "graph/op_def.h"

namespace hjit {

std::vector<std::pair<int, int>> in_place_outputs(const Graph& g, const std::vector<int>& donated) {
  std::vector<int> slots(g.outputs);  // output slot -> node
  for (const Update& u : g.updates) slots.push_back(u.value);
  std::vector<std::vector<int>> consumers(g.nodes.size());
  for (size_t id = 0; id < g.nodes.size(); ++id)
    for (int in : g.nodes[id].inputs) consumers[size_t(in)].push_back(int(id));
  std::vector<std::pair<int, int>> pairs;
  std::set<int> taken;  // output slots given an input
  for (int input : donated) {
    if (input < 0 || size_t(input) >= g.inputs.size()) continue;
    const int source = g.inputs[size_t(input)];
    const TensorType& type = g.type(source);
    bool updated = false;  // its storage takes an update's new value after the call
    for (const Update& u : g.updates) updated |= u.target == source;
    if (updated) continue;
    // Everything computed from the input: element-wise at its shape, or no pair.
    std::set<int> reached;
    std::vector<int> todo(consumers[size_t(source)]);
    bool pointwise = true;
    while (!todo.empty() && pointwise) {
      const int at = todo.back();
      todo.pop_back();
      if (!reached.insert(at).second) continue;
      const Node& n = g.node(at);
      pointwise = has_trait(n.op, Elementwise) && !has_trait(n.op, ControlFlow) && n.type.shape == type.shape;
      todo.insert(todo.end(), consumers[size_t(at)].begin(), consumers[size_t(at)].end());
    }
    if (!pointwise) continue;
    // The results among them: exactly one, of the input's type, and not the input itself.
    int slot = -1, results = 0;
    for (size_t s = 0; s < slots.size(); ++s) {
      if (slots[s] == source) results = 2;  // the input is itself a result: its old value is read to the end
      if (reached.count(slots[s])) slot = int(s), ++results;
    }
    // (Two slots of one node count as two results.)
    if (results != 1 || taken.count(slot) || g.type(slots[size_t(slot)]) != type) continue;
    taken.insert(slot);
    pairs.emplace_back(input, slot);
  }
  return pairs;
}

}  // namespace hjit
