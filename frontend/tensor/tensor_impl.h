// What a Tensor handle points at. Eager tensors own (a share of) a Storage; tracers name a value of
// the graph being traced. A tensor made while a trace is active remembers that trace, so that the
// tracer can tell tensors made inside the traced function (constants) from captured ones (inputs).
#pragma once
#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <hjit/graph.h>
#include <hjit/tensor.h>

#include "halide_backend/backend.h"

namespace hjit::detail {

// A tensor's bytes: in host memory, 64-byte aligned (what Halide's vector loads and the eager
// kernels like best), or in a GPU's memory.
struct Storage {
  explicit Storage(size_t nbytes, Device device = Device::CPU);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data;  // host bytes; null on a GPU
  size_t nbytes;
  std::unique_ptr<backend::DeviceBuffer> on_device;  // the bytes on a GPU
  Device device() const { return on_device ? on_device->device() : Device::CPU; }
};

struct TensorImpl {
  TensorType type;
  std::shared_ptr<Storage> storage;  // eager, and concrete tracers
  uint64_t trace_id = 0;             // tracers: the trace they belong to
  int value = -1;                    // tracers: their value in that trace's graph
  uint64_t born_in_trace = 0;        // the trace active on this thread when the tensor was made
  std::optional<double> uniform;     // set by full/zeros/ones/scalar: traced as a full, not bytes
  bool borrowed = false;             // storage borrowed from an op's operand (same_value): the
                                     // first assign() gives this tensor storage of its own
  std::string donated_to;            // JitOptions::donate: the function a call gave its storage to
                                     // (no storage then; using it throws until assign())
  // A traced function read it as a captured input (it reads it at every call): rebinding a handle
  // of it while others still hold it is a stale rebinding (Tensor::operator=).
  struct Flag {  // read and set from any thread; a copy of the tensor (another tensor) starts clear
    std::atomic<bool> value{false};
    Flag() = default;
    Flag(const Flag&) {}
    Flag& operator=(const Flag&) { return *this; }
  };
  Flag captured_by_trace, rebinding_reported;

  bool traced() const { return trace_id != 0; }
  void* data() const { return storage ? storage->data : nullptr; }
  Device device() const { return storage ? storage->device() : Device::CPU; }
};

// How many Storage buffers were ever allocated (for tests that count allocations).
int64_t storage_allocations();

// A fresh eager tensor of `type` (uninitialized), on `device`.
Tensor make_tensor(TensorType type, Device device = Device::CPU);
// A tensor of `shape` filled with `value` converted to dtype (integers wrap, as PyTorch converts a
// scalar operand): traced as a full of the value as stored. Tensor::full checks the value first.
Tensor make_full(Shape shape, double value, DType dtype);
// A tensor sharing `storage` with a new type (same number of bytes).
Tensor alias_tensor(const std::shared_ptr<Storage>& storage, TensorType type);
const TensorImpl& impl_of(const Tensor& t, const char* what);  // ValueError for an undefined handle
// Before writing into t's storage in place (assign, Jitted::into): a donated tensor gets storage
// again, and one borrowing an operand's storage gets its own.
void make_writable(TensorImpl& t);
// Whether x[...] = value can write x's bytes where they lie: eagerly (no trace on this thread,
// neither tensor traced), both in host memory. assign_at then writes only the region.
bool writes_in_place(const Tensor& x, const Tensor& value);
// region (x's dtype, in the region's shape) written at starts, steps of x's storage, in place.
void write_region(Tensor& x, const Tensor& region, const std::vector<int64_t>& starts, const std::vector<int64_t>& steps);
// x[at] = value (Tensor::assign with indices, assign_slice): in place where writes_in_place, else
// assign(index_update(x, at, value)).
Tensor& assign_at(Tensor& x, const std::vector<Index>& at, const Tensor& value);
// ValueError when t was donated to a jitted function's call (JitOptions::donate), naming `what`.
void check_not_donated(const TensorImpl& t, const char* what);

}  // namespace hjit::detail
