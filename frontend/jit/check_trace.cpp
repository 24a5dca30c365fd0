#include "frontend/jit/check_trace.h"

#include <cmath>

#include "frontend/tensor/device.h"
#include "frontend/jit/captured.h"
#include "support/log.h"

namespace hjit::detail {

std::string compare_with_eager(const Tensor& compiled, const Tensor& eager, double tol, const std::string& what) {
  if (compiled.shape() != eager.shape() || compiled.dtype() != eager.dtype())
    return what + ": compiled " + TensorType{compiled.dtype(), compiled.shape()}.str() + " but eager " +
           TensorType{eager.dtype(), eager.shape()}.str();
  std::vector<double> a = compiled.to_vector<double>(), b = eager.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    bool same = (a[i] == b[i]) || (std::isnan(a[i]) && std::isnan(b[i])) || std::fabs(a[i] - b[i]) <= tol * (1 + std::fabs(b[i]));
    if (!same)
      return what + ": element " + std::to_string(i) + " is " + std::to_string(a[i]) + " compiled, " +
             std::to_string(b[i]) + " eager (tolerance " + std::to_string(tol) + ")";
  }
  return "";
}

void check_against_eager(const std::string& fn, double tol, const Version& v, const CallArgs& args, Tracer trace,
                         const std::vector<Tensor>& outputs) {
  const std::vector<size_t>& updated = v.fn->update_inputs();
  std::vector<std::shared_ptr<Storage>> saved;
  for (size_t input : updated) saved.push_back(copy_of(*input_tensor(v, args, input).storage));
  std::vector<Tensor> eager_args;
  for (size_t i = 0; i < args.count; ++i) eager_args.push_back(args.tensor(i));
  std::vector<int> eager_tree;
  const std::vector<Tensor> expected = trace(eager_args, &eager_tree);
  std::string bad;
  for (size_t k = 0; k < expected.size() && bad.empty(); ++k)
    bad = compare_with_eager(outputs[k], expected[k], tol, "output " + std::to_string(k));
  for (size_t k = 0; k < updated.size(); ++k) {
    TensorImpl& t = input_tensor(v, args, updated[k]);
    if (bad.empty()) {
      const Tensor compiled = v.fn->updated_value(k, t.type), eager = alias_tensor(t.storage, t.type);
      bad = compare_with_eager(compiled, eager, tol, "update " + std::to_string(k));
    }
    copy_storage(*t.storage, *saved[k]);
  }
  if (!bad.empty())
    throw CompileError("jit '" + fn + "' (check_trace): the compiled function differs from eager execution: " + bad);
  log().debug("jit '{}': check_trace passed", fn);
}

}  // namespace hjit::detail
