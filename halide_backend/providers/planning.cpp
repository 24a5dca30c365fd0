#include "halide_backend/providers/planning.h"

#include "halide_backend/providers/kernel_abi.h"

namespace hjit::backend {

size_t affine_prefix(const ConvChain& c) {
  size_t n = 0;
  while (n < c.post_ops.size() && c.post_ops[n].kind != PostOp::Relu && c.post_ops[n].kind != PostOp::Sum) ++n;
  return n;
}

int32_t post_op_code(const ConvChain& c, size_t first) {
  int32_t code = 0;
  for (size_t i = first; i < c.post_ops.size(); ++i) code |= int32_t(c.post_ops[i].kind) << (kernel_abi::kPostOpBits * (i - first));
  return code;
}

std::map<int, int> conv_layouts(const Graph& g, const std::vector<ConvChain>& chains) {
  auto blocked = [&](int conv) {
    const Node& n = g.node(conv);
    return kernel_abi::blocked_activations(g.type(n.inputs[0]).shape[1], n.type.shape[1]);
  };
  const std::vector<int> n_uses = value_uses(g);
  std::map<int, int> layout;
  for (const ConvChain& reader : chains)
    for (const ConvChain& writer : chains) {
      const int value = writer.end();
      if (g.node(reader.conv).inputs[0] == value && g.node(reader.conv).inputs[1] != value && n_uses[size_t(value)] == 1 &&
          blocked(reader.conv) && blocked(writer.conv)) {
        layout[reader.end()] |= kernel_abi::kBlockedInput;
        layout[value] |= kernel_abi::kBlockedOutput;
      }
    }
  return layout;
}

}  // namespace hjit::backend
