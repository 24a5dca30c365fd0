// Tensors on a GPU (Device::CUDA, Device::OpenCL): their storage, the copies between devices, and
// eager ops on them, which run as single-op pipelines compiled for the device (and cached like
// every pipeline), so that everything eager works on the GPU too.
#pragma once
#include <memory>
#include <vector>

#include <hjit/graph.h>
#include <hjit/tensor.h>

#include "frontend/tensor/tensor_impl.h"

namespace hjit::detail {

// The device an op on these operands runs on: the CPU, unless an operand is on a GPU (CPU operands
// are then copied there, as JAX places host arrays); operands on two different GPUs: DeviceError.
Device device_for(const std::vector<Tensor>& operands, const char* what);

struct FunctionRequest;

// A graph of one node over parameters of the inputs' types, and what such a pipeline is compiled
// as (opt level 1, no tuning database): eager ops on a GPU and compiled eager ops on the CPU
// (frontend/tensor/eager_compiled.h).
Graph single_op_graph(OpKind op, const std::vector<Tensor>& inputs, const Attrs& attrs);
FunctionRequest single_op_request(const Graph& g, Device device);

// Runs one node on `device`, the result staying there.
Tensor run_on_device(OpKind op, const std::vector<Tensor>& inputs, const Attrs& attrs, Device device);

// The memory of t on `device`: its own, or a copy made into *keep (a CPU tensor copied up).
const backend::DeviceBuffer& device_memory(const TensorImpl& t, Device device,
                                           std::vector<std::unique_ptr<backend::DeviceBuffer>>& keep);
// The host bytes of t: its own, or a copy downloaded into *keep.
const void* host_memory(const TensorImpl& t, std::vector<Tensor>& keep);

// Storage with its own copy of s's bytes, on s's device.
std::shared_ptr<Storage> copy_of(const Storage& s);
// dst's bytes become src's (the same size; either may be on the CPU or a GPU).
void copy_storage(Storage& dst, const Storage& src);

}  // namespace hjit::detail
