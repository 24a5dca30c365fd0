#include "graph/passes/dce.h"

#include "graph/op_def.h"
#include "graph/rewriter.h"

namespace hjit {

Graph dce(const Graph& g) {
  std::vector<bool> live(g.nodes.size(), false);
  for (int o : g.outputs) live[size_t(o)] = true;
  for (const Update& u : g.updates) live[size_t(u.value)] = true;
  // Every rank runs the same collectives in the same order, whether or not this one reads them.
  for (size_t id = 0; id < g.nodes.size(); ++id) live[id] = live[id] || has_trait(g.nodes[id].op, Collective);
  for (size_t id = g.nodes.size(); id-- > 0;)
    if (live[id])
      for (int in : g.nodes[id].inputs) live[size_t(in)] = true;
  Rewriter rw(g);
  for (size_t id = 0; id < g.nodes.size(); ++id)
    if (live[id]) rw.copy(int(id));
  Graph out = std::move(rw.out());
  for (int o : g.outputs) out.outputs.push_back(rw.mapped(o));
  for (const Update& u : g.updates) out.updates.push_back(Update{rw.mapped(u.target), rw.mapped(u.value)});
  return out;
}

}  // namespace hjit
