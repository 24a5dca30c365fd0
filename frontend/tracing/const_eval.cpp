#include "frontend/tracing/const_eval.h"

#include "frontend/eager/kernel.h"
#include "frontend/tensor/tensor_impl.h"

namespace hjit::detail {

ConstData evaluate_node(const Node& node, const std::vector<TensorType>& in_types, const std::vector<ConstData>& in_data) {
  size_t bytes = size_t(node.type.numel()) * size_t(dtype_size(node.type.dtype));
  auto storage = std::make_shared<Storage>(bytes);
  std::vector<eager::In> in;
  for (size_t i = 0; i < in_types.size(); ++i) in.push_back(eager::In{in_data[i].data, &in_types[i]});
  if (node.type.numel() > 0)
    eager::kernel_for(node.op)(eager::KernelArgs{node.op, node.attrs, std::move(in), eager::Out{storage->data, &node.type}});
  void* data = storage->data;
  return ConstData{std::move(storage), data, bytes};
}

}  // namespace hjit::detail
