#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstddef>
#include <cstring>
#include <new>

#include <hjit/ops.h>
#include <hjit/tensor.h>

#include "frontend/tensor/device.h"
#include "frontend/tensor/dispatch.h"
#include "frontend/ops/op_support.h"
#include "frontend/eager/kernel.h"
#include "frontend/tracing/trace.h"
#include "support/allocator.h"
#include "support/log.h"
#include "graph/rewriter.h"
#include "graph/shape_inference.h"
#include "graph/text_format.h"
#include "halide_backend/devices.h"

namespace hjit {
namespace detail {

namespace {
std::atomic<int64_t> g_storage_allocations{0};
}
int64_t storage_allocations() { return g_storage_allocations.load(); }

Storage::Storage(size_t n, Device device) : data(nullptr), nbytes(n) {
  if (device != Device::CPU) {
    on_device = backend::device_kind(device).allocate(n);
  } else {
    try {
      data = cached_alloc(n);
    } catch (const LimitExceeded& e) {
      throw ResourceError("a tensor of " + std::to_string(n) + " bytes would take hjit past its memory limit of " + std::to_string(e.limit) +
                          " bytes (" + std::to_string(e.in_use) + " in use; hjit::set_memory_limit, HJIT_MEMORY_LIMIT_MB)");
    } catch (const std::bad_alloc&) {
      throw OutOfMemoryError("cannot allocate " + std::to_string(n) + " bytes for a tensor");
    }
  }
  ++g_storage_allocations;
}
Storage::~Storage() { cached_free(data); }

Tensor make_tensor(TensorType type, Device device) {
  for (int64_t d : type.shape)
    if (d < 0) throw ShapeError("cannot make a tensor of shape " + shape_str(type.shape) + ": negative dimension");
  auto impl = std::make_shared<TensorImpl>();
  const int64_t numel = type.numel();  // ShapeError if it overflows
  if (uint64_t(numel) > uint64_t(INT64_MAX) / uint64_t(dtype_size(type.dtype)))
    throw ShapeError("cannot make a tensor of " + type.str() + ": its size in bytes overflows");
  size_t bytes = size_t(numel) * size_t(dtype_size(type.dtype));
  impl->type = std::move(type);
  impl->storage = std::make_shared<Storage>(bytes, device);
  impl->born_in_trace = current_trace_id();
  return Tensor(std::move(impl));
}

Tensor alias_tensor(const std::shared_ptr<Storage>& storage, TensorType type) {
  auto impl = std::make_shared<TensorImpl>();
  impl->type = std::move(type);
  impl->storage = storage;
  impl->born_in_trace = current_trace_id();
  return Tensor(std::move(impl));
}

const TensorImpl& impl_of(const Tensor& t, const char* what) {
  if (!t.impl()) throw ValueError(std::string(what) + ": the tensor is undefined (a default-constructed hjit::Tensor)");
  return *t.impl();
}

void check_not_donated(const TensorImpl& t, const char* what) {
  if (!t.donated_to.empty())
    throw ValueError(std::string(what) + ": the tensor " + t.type.str() + " was donated to a call of jit '" + t.donated_to +
                     "' (JitOptions::donate) and holds no value since: use that call's result, or assign() it a new value");
}

}  // namespace detail

using detail::impl_of;

namespace {

// Reading values: eager tensors, and concrete tracers.
const detail::TensorImpl& readable(const Tensor& t, const char* what) {
  const detail::TensorImpl& im = impl_of(t, what);
  detail::check_not_donated(im, what);
  if (im.traced() && !im.storage) {
    if (detail::TraceState* owner = detail::trace_of(im); owner && owner->on_read) {
      owner->on_read(*t.impl(), what);  // a graph break: the value is computed now
      return im;
    }
    const detail::TraceState* ts = detail::current_trace();
    std::string fn = ts ? "'" + ts->fn_name + "'" : "a traced function";
    throw ConcretizationError(
        std::string(what) + ": cannot read the value of a traced tensor " + im.type.str() + " while tracing " + fn +
        ": its value is only known when the compiled function runs. If C++ control flow depends on it (if, "
        "for, item()), either pass that value as a static argument (an int, double or bool instead of a "
        "Tensor; each value compiles its own version), or compute both branches and select with "
        "hjit::where(cond, a, b).");
  }
  if (im.traced()) detail::record_read(im);
  return im;
}

// PyTorch's check of a fill value: integers must fit the type (negative values may wrap into an
// unsigned one: full(-1, u8) is 255), floats must not overflow to infinity (inf and NaN may be
// asked for); bool takes anything.
void check_fill_value(double v, DType t, const char* what) {
  bool ok = true;
  if (is_integral(t)) {
    const int bits = dtype_size(t) * 8;
    const bool is_unsigned = dtype_info(t).kind == DTypeKind::UnsignedInt;
    const double max = std::ldexp(1.0, is_unsigned ? bits : bits - 1) - 1;
    ok = !std::isnan(v) && v <= max && (is_unsigned ? -v <= max : v >= -max - 1);
  } else if (is_floating(t) && std::isfinite(v)) {
    const double max = t == DType::F16 ? 65504.0 : t == DType::BF16 ? 3.3895313892515355e38 : t == DType::F32 ? 3.4028234663852886e38 : HUGE_VAL;
    ok = std::fabs(v) <= max;
  }
  if (!ok)
    throw ValueError(std::string(what) + ": the value " + format_number(v, DType::F64) + " cannot be converted to " +
                     dtype_name(t) + " without overflow");
}

}  // namespace

namespace detail {

Tensor make_full(Shape shape, double value, DType dtype) {
  Attrs attrs{{"value", value}};
  TensorType type{dtype, std::move(shape)};
  Tensor t = make_tensor(type);
  eager::Full(eager::KernelArgs{OpKind::Full, attrs, {}, eager::Out{t.impl()->data(), &t.impl()->type}});
  // Traced as a full of the value as stored (1.67 in f16 is 1.669921875), so that compiled code
  // computes with what eager code does.
  t.impl()->uniform = t.numel() > 0 ? read_scalar(dtype, t.impl()->data()) : value;
  return t;
}

}  // namespace detail

Tensor Tensor::from_values(const void* data, size_t count, Shape shape, DType dtype) {
  if (int64_t(count) != shape_numel(shape))
    throw ShapeError("from_vector: " + std::to_string(count) + " values do not fill a tensor of shape " +
                     shape_str(shape) + " (" + std::to_string(shape_numel(shape)) + " elements)");
  return from_bytes(data, count * size_t(dtype_size(dtype)), std::move(shape), dtype);
}

Tensor Tensor::from_bytes(const void* data, size_t nbytes, Shape shape, DType dtype) {
  Tensor t = detail::make_tensor(TensorType{dtype, std::move(shape)});
  const size_t want = t.impl()->storage->nbytes;
  if (nbytes != want)
    throw ValueError("from_bytes: " + std::to_string(nbytes) + " bytes for a tensor " + TensorType{dtype, t.shape()}.str() + " of " +
                     std::to_string(want) + " bytes");
  if (want > 0) std::memcpy(t.impl()->data(), data, want);
  return t;
}

Tensor Tensor::from_bytes(const void* data, Shape shape, DType dtype) {
  const size_t nbytes = size_t(shape_numel(shape)) * size_t(dtype_size(dtype));
  return from_bytes(data, nbytes, std::move(shape), dtype);
}

Tensor Tensor::empty(Shape shape, DType dtype) { return detail::make_tensor(TensorType{dtype, std::move(shape)}); }
Tensor Tensor::zeros(Shape shape, DType dtype) { return detail::make_full(std::move(shape), 0.0, dtype); }
Tensor Tensor::ones(Shape shape, DType dtype) { return detail::make_full(std::move(shape), 1.0, dtype); }
Tensor Tensor::full(Shape shape, double value, DType dtype) {
  check_fill_value(value, dtype, "full");
  return detail::make_full(std::move(shape), value, dtype);
}
Tensor Tensor::scalar(double value, DType dtype) {
  check_fill_value(value, dtype, "scalar");
  return detail::make_full({}, value, dtype);
}

Tensor Tensor::arange(int64_t n, DType dtype) {
  if (n < 0) throw ValueError("arange: n must be >= 0, got " + std::to_string(n));
  if (dtype == DType::Bool) throw DTypeError("arange: cannot count in bool");
  return hjit::iota({n}, 0, dtype);
}

const Shape& Tensor::shape() const { return impl_of(*this, "shape").type.shape; }
int64_t Tensor::numel() const { return impl_of(*this, "numel").type.numel(); }
DType Tensor::dtype() const { return impl_of(*this, "dtype").type.dtype; }
bool Tensor::is_traced() const { return impl_ && impl_->traced(); }

int64_t Tensor::dim(int axis) const {
  int r = ndim();
  if (axis < -r || axis >= r)
    throw ShapeError("dim: axis " + std::to_string(axis) + " is out of range for shape " + shape_str(shape()));
  return shape()[size_t(axis < 0 ? axis + r : axis)];
}

namespace {
thread_local int quiet_rebinds = 0;
}  // namespace

detail::QuietRebinds::QuietRebinds() { ++quiet_rebinds; }
detail::QuietRebinds::~QuietRebinds() { --quiet_rebinds; }

void Tensor::rebind(std::shared_ptr<detail::TensorImpl> impl) noexcept {
  // The old tensor's other holders: a jitted function's captured inputs, an optimizer's list.
  // Inside a trace, rebinding a local handle (h = layer(h)) is ordinary dataflow.
  if (impl_ && impl_.use_count() > 1 && quiet_rebinds == 0 && impl_->captured_by_trace.value.load(std::memory_order_relaxed) && !detail::current_trace() &&
      !impl_->rebinding_reported.value.exchange(true)) {
    try {
      log().warn("a tensor {} that a jitted function captured (it reads it at every call) had a handle rebound to another "
                 "tensor while other handles (the jitted function's, an optimizer's) still hold it: they go on reading and "
                 "updating the old tensor. To change a captured tensor, assign() to it: t.assign(new_value).",
                 impl_->type.str());
    } catch (...) {  // a log that fails must not fail an assignment
    }
  }
  impl_ = std::move(impl);
}

const void* Tensor::data() const {
  const detail::TensorImpl& im = readable(*this, "data");
  if (im.device() != Device::CPU)
    throw DeviceError(std::string("data: the tensor ") + im.type.str() + " is on " + device_name(im.device()) +
                      ", in the device's memory; read it with .to(Device::CPU).data() (or to_vector, item)");
  return im.data();
}

void Tensor::check_dtype(DType want, const char* what) const {
  if (dtype() != want)
    throw DTypeError(std::string(what) + ": the tensor is " + dtype_name(dtype()) + ", not " + dtype_name(want));
}

bool Tensor::same_storage(const Tensor& other) const {
  return impl_ && other.impl_ && impl_->storage && impl_->storage == other.impl_->storage;
}

void Tensor::copy_to(void* dst, DType as, const char* what) const {
  const detail::TensorImpl& im = readable(*this, what);
  if (im.device() != Device::CPU) return to(Device::CPU).copy_to(dst, as, what);
  if (im.type.dtype == as) {
    if (im.storage->nbytes > 0) std::memcpy(dst, im.data(), im.storage->nbytes);
    return;
  }
  Tensor eager = detail::alias_tensor(im.storage, im.type);
  Tensor converted = detail::run_eager(OpKind::Cast, {eager}, Attrs{{"dtype", as}});
  if (converted.impl()->storage->nbytes > 0) std::memcpy(dst, converted.impl()->data(), converted.impl()->storage->nbytes);
}

Tensor::operator bool() const {
  if (numel() != 1)
    throw ValueError("the truth value of a tensor of shape " + shape_str(shape()) +
                     " is ambiguous; reduce it first (e.g. hjit::max(x) > 0)");
  uint8_t b;
  copy_to(&b, DType::Bool, "operator bool");
  return b != 0;
}

namespace detail {
void make_writable(TensorImpl& t) {
  // A donated tensor (JitOptions::donate) takes a value again, in storage of its own.
  if (!t.donated_to.empty()) {
    t.storage = std::make_shared<Storage>(size_t(t.type.numel()) * size_t(dtype_size(t.type.dtype)));
    t.donated_to.clear();
  }
  // Storage borrowed from an op's operand (same_value) becomes this tensor's own first, so that
  // writing here never writes into the operand.
  if (t.borrowed && t.storage && !t.traced()) {
    t.storage = copy_of(*t.storage);
    t.borrowed = false;
  }
}
}  // namespace detail

Tensor& Tensor::assign(const Tensor& value) {
  const detail::TensorImpl& self = impl_of(*this, "assign");
  impl_of(value, "assign");
  detail::make_writable(*impl_);
  // The value, converted to this tensor's dtype and broadcast to its shape (recorded if tracing).
  Tensor v = value.dtype() == self.type.dtype ? value : hjit::astype(value, self.type.dtype);
  if (v.shape() != self.type.shape) {
    Shape b;
    if (!broadcast_shapes(v.shape(), self.type.shape, &b) || b != self.type.shape)
      throw ShapeError("assign: a value of shape " + shape_str(value.shape()) + " does not fit a tensor of shape " +
                       shape_str(self.type.shape));
    v = broadcast_to(v, self.type.shape);
  }
  detail::TraceState* ts = detail::current_trace();
  bool record = v.is_traced() || self.traced() || (ts && self.born_in_trace != ts->id);
  if (ts && record) {
    detail::record_assign(*ts, *this, v);
    return *this;
  }
  if (v.is_traced()) throw ValueError("assign: a traced value cannot be assigned outside of its trace");
  // (Between devices: a tensor on the CPU takes a GPU value through a copy down, and the other way.)
  if (self.type.numel() > 0) detail::copy_storage(*impl_->storage, *readable(v, "assign").storage);
  return *this;
}

Tensor& Tensor::assign_slice(int axis, std::optional<int64_t> start, std::optional<int64_t> stop, const Tensor& value,
                             int64_t step) {
  if (!detail::writes_in_place(*this, value) || step <= 0) return assign(hjit::slice_update(*this, value, axis, start, stop, step));
  std::vector<Index> at(size_t(ndim()), Index{Slice{}});
  at.at(size_t(detail::norm_axis(axis, ndim(), "assign_slice"))) = Index(Slice(start, stop, step));
  return detail::assign_at(*this, at, value);
}

namespace detail {

bool writes_in_place(const Tensor& x, const Tensor& value) {
  const TensorImpl& self = impl_of(x, "assign");
  const TensorImpl& v = impl_of(value, "assign");
  return !current_trace() && !self.traced() && !v.traced() && self.donated_to.empty() && self.storage &&
         self.device() == Device::CPU && x.ndim() > 0;
}

void write_region(Tensor& x, const Tensor& region, const std::vector<int64_t>& starts, const std::vector<int64_t>& steps) {
  if (region.numel() == 0) return;
  TensorImpl& self = *x.impl();
  make_writable(self);
  self.uniform.reset();  // (a full's bytes now differ in places)
  const Tensor dense = region.device() == Device::CPU ? region : region.to(Device::CPU);
  const auto* src = static_cast<const char*>(dense.data());
  auto* dst = static_cast<char*>(self.data());
  const int r = x.ndim();
  const size_t elem = dtype_size(x.dtype());
  // The region's axes of more than one element, with x's element stride along each (its size-1
  // axes only move the start): a cache's column written into keys stored transposed ([B, H, D, T],
  // one column [B, H, D, 1]) is then D elements T apart a head, not B * H * D runs of one element.
  std::vector<int64_t> extent, step;
  int64_t base = 0, stride = 1;
  for (int d = r - 1; d >= 0; --d) {
    base += starts[size_t(d)] * stride;
    if (region.dim(d) != 1) extent.insert(extent.begin(), region.dim(d)), step.insert(step.begin(), steps[size_t(d)] * stride);
    stride *= x.dim(d);
  }
  if (extent.empty()) extent.push_back(1), step.push_back(1);
  const int64_t inner = extent.back(), inner_step = step.back();
  // One row of the innermost axis: a memcpy where it is contiguous in x, elements a step apart
  // otherwise, each a move of a constant size where the switch gives one (not a memcpy call).
  auto strided = [&](char* to, const char* from, size_t n) {
    for (int64_t k = 0; k < inner; ++k) std::memcpy(to + std::ptrdiff_t(k * inner_step) * std::ptrdiff_t(n), from + size_t(k) * n, n);
  };
  auto copy_row = [&](char* to, const char* from) {
    if (inner_step == 1) return void(std::memcpy(to, from, size_t(inner) * elem));
    switch (elem) {
      case 1: return strided(to, from, 1);
      case 2: return strided(to, from, 2);
      case 4: return strided(to, from, 4);
      case 8: return strided(to, from, 8);
      default: return strided(to, from, elem);
    }
  };
  std::vector<int64_t> i(extent.size(), 0);
  for (int64_t copied = 0; copied < region.numel(); copied += inner) {
    int64_t at = base;
    for (size_t d = 0; d + 1 < extent.size(); ++d) at += i[d] * step[d];
    copy_row(dst + size_t(at) * elem, src + size_t(copied) * elem);
    for (size_t d = extent.size() - 1; d-- > 0;) {  // the next row's position in the region
      if (++i[d] < extent[d]) break;
      i[d] = 0;
    }
  }
}

}  // namespace detail

Tensor Tensor::clone() const {
  const detail::TensorImpl& im = impl_of(*this, "clone");
  if (im.traced() || detail::current_trace()) return detail::same_value(*this);  // values are values in a trace
  Tensor t = detail::make_tensor(im.type, im.device());
  if (im.type.numel() > 0) detail::copy_storage(*t.impl()->storage, *im.storage);
  t.impl()->uniform = im.uniform;
  return t;
}

Tensor Tensor::astype(DType dtype) const { return hjit::astype(*this, dtype); }
Tensor Tensor::reshape(Shape shape) const { return hjit::reshape(*this, std::move(shape)); }
Tensor Tensor::transpose(std::vector<int> perm) const { return hjit::transpose(*this, std::move(perm)); }

}  // namespace hjit
