#include "frontend/transforms/control_flow_eval.h"

#include <hjit/ops.h>

#include "frontend/tracing/replay.h"

namespace hjit::detail {

std::vector<Tensor> run_control_flow(OpKind op, const std::vector<Tensor>& operands, const Attrs& attrs) {
  switch (op) {
    case OpKind::Cond: {
      const std::vector<Tensor> rest(operands.begin() + 1, operands.end());
      return replay(attrs.graph(operands[0].item<bool>() ? "then" : "else"), rest);
    }
    case OpKind::While: {
      const Graph &cond = attrs.graph("cond"), &body = attrs.graph("body");
      std::vector<Tensor> args = operands;
      const size_t n = body.outputs.size();
      while (replay(cond, args)[0].item<bool>()) {
        std::vector<Tensor> next = replay(body, args);
        for (size_t i = 0; i < n; ++i) args[i] = next[i];
      }
      return std::vector<Tensor>(args.begin(), args.begin() + long(n));
    }
    case OpKind::Scan: {
      const Graph& body = attrs.graph("body");
      const size_t n = size_t(attrs.i("carries")), k = size_t(attrs.i("xs")), j = body.outputs.size() - n;
      const int64_t length = attrs.i("length");
      std::vector<Tensor> args = operands;
      std::vector<std::vector<Tensor>> ys(j, std::vector<Tensor>(size_t(length)));
      for (int64_t step = 0; step < length; ++step) {
        const int64_t t = attrs.i("reverse") ? length - 1 - step : step;
        for (size_t i = 0; i < k; ++i) args[n + i] = squeeze(slice(operands[n + i], 0, t, t + 1), {0});
        std::vector<Tensor> out = replay(body, args);
        for (size_t i = 0; i < n; ++i) args[i] = out[i];
        for (size_t i = 0; i < j; ++i) ys[i][size_t(t)] = out[n + i];
      }
      std::vector<Tensor> results(args.begin(), args.begin() + long(n));
      for (size_t i = 0; i < j; ++i) {
        if (length > 0) {
          results.push_back(stack(ys[i], 0));
        } else {
          TensorType t = body.type(body.outputs[n + i]);
          t.shape.insert(t.shape.begin(), 0);
          results.push_back(Tensor::zeros(t.shape, t.dtype));
        }
      }
      return results;
    }
    case OpKind::Checkpoint: return replay(attrs.graph("body"), operands);
    default: throw InternalError(std::string(op_name(op)) + " is not a control flow op");
  }
}

}  // namespace hjit::detail
