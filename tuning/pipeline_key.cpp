#include "tuning/pipeline_key.h"

#include "halide_backend/backend.h"
#include "support/binary_io.h"

namespace hjit::tuning {

Graph canonical_graph(const Graph& g) {
  Graph c = Graph::parse(g.to_text());
  c.name = g.name;
  return c;
}

PipelineRecord describe_pipeline(const Graph& g, Device device, const std::string& name) {
  PipelineRecord p;
  std::string constants;
  for (const ConstData& c : g.constants) constants += hash_hex(std::string_view(static_cast<const char*>(c.data), c.nbytes));
  p.graph = g.str();
  p.graph_hash = hash_hex(p.graph + "\nconstants " + constants);
  for (size_t i = 0; i < g.inputs.size(); ++i) p.signature.append(i ? ", " : "").append(g.type(g.inputs[i]).str());
  p.signature += " ->";
  for (size_t i = 0; i < g.outputs.size(); ++i) p.signature.append(i ? ", " : " ").append(g.type(g.outputs[i]).str());
  for (const Update& u : g.updates) p.signature.append(" ").append(g.type(u.target).str()).append("<-");
  p.target = backend::target_name(device);
  p.hjit_version = HJIT_VERSION;
  p.halide_version = HJIT_HALIDE_VERSION;
  p.key = hash_hex(p.graph_hash + "\n" + p.signature + "\n" + p.target + "\nhjit " + p.hjit_version + "\nhalide " +
                   p.halide_version);
  p.name = name.empty() ? g.name : name;
  return p;
}

}  // namespace hjit::tuning
