#include "graph/passes/optimize.h"

#include "graph/passes/cse.h"
#include "graph/passes/dce.h"
#include "graph/passes/simplify.h"
#include "graph/passes/sink_transposes.h"
#include "graph/passes/verify.h"
#include "support/log.h"

namespace hjit {

Graph optimize(const Graph& input, const ConstEvaluator* eval) {
  Timer total;
  verify(input, "tracing");
  Graph g = input;
  auto run = [&](const char* name, auto&& pass) {
    Timer t;
    size_t before = g.nodes.size();
    g = pass(g);
    verify(g, name);
    log().trace("pass {:<15} {:>4} -> {:>4} nodes, {:.3f} ms", name, before, g.nodes.size(), t.ms());
  };
  run("dce", dce);
  run("simplify", simplify);
  if (eval) run("fold_constants", [&](const Graph& x) { return fold_constants(x, *eval); });
  run("cse", cse);
  run("sink_transposes", sink_transposes);
  run("simplify", simplify);
  run("dce", dce);
  log().debug("optimized '{}': {} -> {} nodes in {:.2f} ms", g.name, input.nodes.size(), g.nodes.size(), total.ms());
  return g;
}

}  // namespace hjit
