// hjit::Tensor: a shared handle to an n-dimensional array (row-major, last dimension innermost),
// or, inside a function being traced by hjit::jit, a tracer standing for a value of the graph.
#pragma once
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <hjit/dtype.h>
#include <hjit/error.h>

namespace hjit {

namespace detail {
struct TensorImpl;
}
class Index;

class Tensor {
 public:
  Tensor() = default;  // an undefined handle; most uses throw ValueError
  explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) : impl_(std::move(impl)) {}
  Tensor(const Tensor&) = default;
  Tensor(Tensor&&) noexcept = default;
  // Rebinds the handle. Rebinding a tensor that a jitted function captured while other handles
  // (the jitted function's, an optimizer's) still hold it leaves them reading and updating the old
  // tensor: a warning says so, once per tensor. assign() changes a captured tensor's values.
  Tensor& operator=(const Tensor& other) {
    if (impl_ != other.impl_) rebind(other.impl_);
    return *this;
  }
  Tensor& operator=(Tensor&& other) noexcept {
    if (impl_ != other.impl_) rebind(std::move(other.impl_));
    return *this;
  }

  // ---- eager creation (inside a traced function, these make constants of the graph)
  template <class T>
  static Tensor from_vector(const std::vector<T>& data, Shape shape);
  template <class T>
  static Tensor from_vector(const std::vector<T>& data) { return from_vector(data, Shape{int64_t(data.size())}); }
  // Copies the nbytes bytes at data, which must be what shape and dtype hold (ValueError
  // otherwise: a buffer too short would be read past its end).
  static Tensor from_bytes(const void* data, size_t nbytes, Shape shape, DType dtype);
  [[deprecated("pass the buffer's size, from_bytes(data, nbytes, shape, dtype), which is checked")]] static Tensor from_bytes(
      const void* data, Shape shape, DType dtype);
  static Tensor empty(Shape shape, DType dtype = DType::F32);              // uninitialized
  static Tensor zeros(Shape shape, DType dtype = DType::F32);
  static Tensor ones(Shape shape, DType dtype = DType::F32);
  static Tensor full(Shape shape, double value, DType dtype = DType::F32);
  static Tensor scalar(double value, DType dtype = DType::F32);
  static Tensor arange(int64_t n, DType dtype = DType::F32);
  static Tensor randn(Shape shape, uint64_t seed, DType dtype = DType::F32);
  static Tensor uniform(Shape shape, uint64_t seed, double lo = 0, double hi = 1, DType dtype = DType::F32);

  // ---- metadata: also valid while tracing
  const Shape& shape() const;
  int64_t dim(int axis) const;  // negative axes count from the end
  int ndim() const { return int(shape().size()); }
  int64_t numel() const;
  DType dtype() const;
  bool defined() const { return impl_ != nullptr; }
  bool is_traced() const;
  Device device() const;  // where its bytes are (a tracer: the CPU; see to())

  // A tensor with the same values on `device`: this tensor itself when it is there already, else a
  // copy. Values of tensors on a GPU are read (to_vector, item, str) through a copy to the host;
  // data() is only for tensors on the CPU. Inside a traced function, to() is the identity: where
  // results live is the compiled function's device (JitOptions::device).
  Tensor to(Device device) const;

  // ---- values: eager only; on a traced tensor they throw ConcretizationError
  template <class T>
  std::vector<T> to_vector() const;  // converted to T as astype would
  template <class T>
  T item() const;  // the one element of a tensor with one element
  explicit operator bool() const;
  std::string str() const;  // like numpy's str(); a tracer prints as Traced<f32[2,3]>
  const void* data() const;  // the raw bytes (eager tensors on the CPU)
  template <class T>
  const T* data_ptr() const {
    check_dtype(dtype_of<T>, "data_ptr");
    return static_cast<const T*>(data());
  }

  // In-place write into the storage every handle shares: how parameters and optimizer state
  // change. value must have this tensor's shape (or broadcast to it); it is converted to its dtype.
  // Inside a traced function, assign on a captured tensor is recorded and done after every call:
  // its storage then holds the bytes the new value was computed into (no copy), so a data()
  // pointer taken before a jitted call that assigns the tensor is not its data after it.
  Tensor& assign(const Tensor& value);
  // x[start:stop:step] = value along one axis (Python's slicing rules, as hjit::slice), in place:
  // assign(hjit::slice_update(*this, value, axis, start, stop, step)).
  Tensor& assign_slice(int axis, std::optional<int64_t> start, std::optional<int64_t> stop, const Tensor& value,
                       int64_t step = 1);
  // A copy with storage of its own. (Ops never return storage an assign could write through to
  // their operands: y = x.reshape(x.shape()); y.assign(z) leaves x as it was.)
  Tensor clone() const;

  Tensor astype(DType dtype) const;
  Tensor reshape(Shape shape) const;                  // one -1 allowed
  Tensor transpose(std::vector<int> perm = {}) const;  // default: reverse the axes

  // Python's indexing (numpy's rules): x[{0, Slice(1, -1), ellipsis, none}] is x[0, 1:-1, ..., None],
  // x[i] is x[i], and integer tensors pick along their axes (several broadcast together, as numpy's
  // advanced indexing). A bool mask selects a data-dependent number of elements: use where().
  // Same as hjit::index(x, {...}).
  Tensor operator[](const Index& at) const;
  Tensor operator[](std::initializer_list<Index> at) const;
  // x[at] = value in place (value broadcast to x[at]): assign(hjit::index_update(*this, at, value)).
  Tensor& assign(std::initializer_list<Index> at, const Tensor& value);
  Tensor& assign(std::initializer_list<Index> at, double value);

  const std::shared_ptr<detail::TensorImpl>& impl() const { return impl_; }
  bool same_storage(const Tensor& other) const;  // both handles share one buffer

 private:
  static Tensor from_values(const void* data, size_t count, Shape shape, DType dtype);
  void rebind(std::shared_ptr<detail::TensorImpl> impl) noexcept;
  void copy_to(void* dst, DType as, const char* what) const;  // all elements, converted to `as`
  void check_dtype(DType want, const char* what) const;
  std::shared_ptr<detail::TensorImpl> impl_;
};

namespace detail {
// While one lives on this thread, rebinding a handle of a captured tensor is not reported: code of
// hjit's own that computes with local handles (an importer running a model's nodes eagerly, whose
// parameters a module also holds) rebinds them as ordinary dataflow. The report is for
// application code that rebinds a parameter where assign() was meant.
class QuietRebinds {
 public:
  QuietRebinds();
  ~QuietRebinds();
  QuietRebinds(const QuietRebinds&) = delete;
  QuietRebinds& operator=(const QuietRebinds&) = delete;
};
}  // namespace detail

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& data, Shape shape) {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(data.begin(), data.end());  // std::vector<bool> packs bits
    return from_values(bytes.data(), bytes.size(), std::move(shape), DType::Bool);
  } else {
    return from_values(data.data(), data.size(), std::move(shape), dtype_of<T>);
  }
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(static_cast<size_t>(numel()));
    copy_to(bytes.data(), DType::Bool, "to_vector");
    return std::vector<bool>(bytes.begin(), bytes.end());
  } else {
    std::vector<T> out(static_cast<size_t>(numel()));
    copy_to(out.data(), dtype_of<T>, "to_vector");
    return out;
  }
}

// The parts of an index expression (Tensor::operator[], hjit::index).
struct NoneIndex {
  constexpr operator std::optional<int64_t>() const { return std::nullopt; }  // a slice's default bound
};
inline constexpr NoneIndex none{};  // Python's None: a new axis of size 1; in a Slice, the default bound
struct EllipsisIndex {};
inline constexpr EllipsisIndex ellipsis{};  // Python's ...: every axis the other indices leave
// Python's start:stop:step (negative steps walk backwards; bounds clipped as Python clips them).
struct Slice {
  Slice(std::optional<int64_t> start_ = std::nullopt, std::optional<int64_t> stop_ = std::nullopt, int64_t step_ = 1)
      : start(start_), stop(stop_), step(step_) {}
  std::optional<int64_t> start, stop;
  int64_t step;
};
class Index {
 public:
  enum class Kind : uint8_t { Integer, Range, Ellipsis, NewAxis, Tensor };
  Index(int64_t i) : kind_(Kind::Integer), integer_(i) {}  // any integer: negative counts from the end
  Index(Slice s) : kind_(Kind::Range), slice_(s) {}
  Index(EllipsisIndex) : kind_(Kind::Ellipsis) {}
  Index(NoneIndex) : kind_(Kind::NewAxis) {}
  Index(Tensor t) : kind_(Kind::Tensor), tensor_(std::move(t)) {}
  Kind kind() const { return kind_; }
  int64_t integer() const { return integer_; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }
 private:
  Kind kind_;
  int64_t integer_ = 0;
  Slice slice_;
  Tensor tensor_;
};

template <class T>
T Tensor::item() const {
  if (numel() != 1)
    throw ValueError("item: a tensor of shape " + shape_str(shape()) + " has " + std::to_string(numel()) +
                     " elements; item() needs exactly one");
  T value;
  if constexpr (std::is_same_v<T, bool>) {
    uint8_t b;
    copy_to(&b, DType::Bool, "item");
    value = b != 0;
  } else {
    copy_to(&value, dtype_of<T>, "item");
  }
  return value;
}

}  // namespace hjit
