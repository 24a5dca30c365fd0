// Python's index expressions on tensors (numpy's rules): integers, slices with any step, ...,
// None and integer tensors (advanced indexing), read with slice, flip, reshape, transpose and take,
// written with one slice_update. Every index is checked against the shape when the expression is
// built (so eagerly and at trace time alike); index tensors are checked when their values exist.
#include <algorithm>
#include <numeric>

#include <hjit/ops.h>

#include "frontend/ops/op_support.h"
#include "frontend/tensor/tensor_impl.h"
#include "graph/shape_inference.h"

namespace hjit {

namespace {

// One input axis's part of an index expression.
struct AxisIndex {
  Index::Kind kind = Index::Kind::Range;  // Integer, Range or Tensor
  int64_t integer = 0;                     // Integer: in [0, extent)
  int64_t first = 0, count = 0, step = 1;  // Range: Python's slice.indices, as positions
  Tensor tensor;                           // Tensor: i64, non-negative, checked
};

// The expression resolved against a shape: what each input axis takes, and the order of the
// output's axes (an input axis's number, or -1 for a new axis of size 1).
struct Resolved {
  std::vector<AxisIndex> axes;
  std::vector<int> items;  // per index item after ... is expanded: input axis, or -1 (None)
  bool advanced = false;   // a tensor index: integers then index like tensors (numpy)
};

std::string where_in(const std::vector<Index>& at) { return "index: in an expression of " + std::to_string(at.size()) + " items, "; }

// Python's slice.indices(n) for a step of either sign: the first position and how many.
void python_slice(const Slice& s, int64_t n, AxisIndex& a) {
  if (s.step == 0) throw ValueError("index: a slice step cannot be 0");
  a.step = s.step;
  auto clip = [n](int64_t i, int64_t lo, int64_t hi) { return std::clamp(i < 0 ? i + n : i, lo, hi); };
  if (s.step > 0) {
    const int64_t b = s.start ? clip(*s.start, 0, n) : 0, e = s.stop ? clip(*s.stop, 0, n) : n;
    a.first = b;
    a.count = e > b ? (e - b + s.step - 1) / s.step : 0;
  } else {
    const int64_t b = s.start ? clip(*s.start, -1, n - 1) : n - 1, e = s.stop ? clip(*s.stop, -1, n - 1) : -1;
    a.first = b;
    a.count = b > e ? (b - e - s.step - 1) / -s.step : 0;
  }
}

Resolved resolve(const Shape& shape, const std::vector<Index>& at) {
  const int rank = int(shape.size());
  int consuming = 0, ellipses = 0;
  for (const Index& i : at) {
    if (i.kind() == Index::Kind::Ellipsis) ++ellipses;
    else if (i.kind() != Index::Kind::NewAxis) ++consuming;
  }
  if (ellipses > 1) throw ValueError(where_in(at) + "an index can only have a single ellipsis ('...')");
  if (consuming > rank)
    throw IndexError("index: too many indices for a tensor of shape " + shape_str(shape) + ": " + std::to_string(consuming) +
                     " were given");
  Resolved r;
  r.axes.resize(size_t(rank));
  for (int d = 0; d < rank; ++d) python_slice(Slice(), shape[size_t(d)], r.axes[size_t(d)]);
  int axis = 0;
  auto take_axis = [&]() { r.items.push_back(axis); return axis++; };
  for (const Index& i : at) {
    switch (i.kind()) {
      case Index::Kind::Ellipsis:
        for (int k = 0; k < rank - consuming; ++k) take_axis();
        break;
      case Index::Kind::NewAxis:
        r.items.push_back(-1);
        break;
      case Index::Kind::Range: {
        const int d = take_axis();
        python_slice(i.slice(), shape[size_t(d)], r.axes[size_t(d)]);
        break;
      }
      case Index::Kind::Integer: {
        const int d = take_axis();
        const int64_t n = shape[size_t(d)], k = i.integer() < 0 ? i.integer() + n : i.integer();
        if (k < 0 || k >= n)
          throw IndexError("index: " + std::to_string(i.integer()) + " is out of range for axis " + std::to_string(d) + " of " +
                           shape_str(shape) + " (valid: " + std::to_string(-n) + " to " + std::to_string(n - 1) + ")");
        r.axes[size_t(d)].kind = Index::Kind::Integer;
        r.axes[size_t(d)].integer = k;
        break;
      }
      case Index::Kind::Tensor: {
        const int d = take_axis();
        const Tensor& t = i.tensor();
        if (!t.defined()) throw ValueError("index: an undefined tensor as the index of axis " + std::to_string(d));
        if (t.dtype() == DType::Bool)
          throw DTypeError("index: a bool mask as the index of axis " + std::to_string(d) + " of " + shape_str(shape) +
                           " selects a number of elements that depends on its values, which a compiled function cannot "
                           "have; keep the shape with where(mask, x, 0), or index with the positions you want");
        if (is_floating(t.dtype()))
          throw DTypeError(std::string("index: an index tensor must hold integers, given ") + dtype_name(t.dtype()) + " for axis " + std::to_string(d));
        const int64_t n = shape[size_t(d)];
        const Tensor k = t.astype(DType::I64);
        r.axes[size_t(d)].kind = Index::Kind::Tensor;
        r.axes[size_t(d)].tensor = check_index(where(k < int64_t(0), k + n, k), 0, n, "index: position along axis " + std::to_string(d));
        r.advanced = true;
        break;
      }
    }
  }
  while (axis < rank) take_axis();  // trailing axes not named: whole
  return r;
}

// x with every axis's slice applied (positions in increasing order, flipped back for negative
// steps); the axes stay.
Tensor sliced(const Tensor& x, const Resolved& r) {
  Tensor y = x;
  for (int d = 0; d < x.ndim(); ++d) {
    const AxisIndex& a = r.axes[size_t(d)];
    if (a.kind != Index::Kind::Range) continue;
    const int64_t n = x.dim(d);
    if (a.step == 1 && a.first == 0 && a.count == n) continue;
    if (a.step > 0) {
      y = slice(y, d, a.first, a.first + (a.count - 1) * a.step + 1, a.step);
    } else if (a.count == 0) {
      y = slice(y, d, 0, 0);
    } else {
      const int64_t lowest = a.first + (a.count - 1) * a.step;
      y = flip(slice(y, d, lowest, a.first + 1, -a.step), {d});
    }
  }
  return y;
}

bool is_advanced(const Resolved& r, int d) {
  const Index::Kind k = r.axes[size_t(d)].kind;
  return k == Index::Kind::Tensor || (r.advanced && k == Index::Kind::Integer);
}

}  // namespace

Tensor index(const Tensor& x, const std::vector<Index>& at) {
  const Resolved r = resolve(x.shape(), at);
  Tensor y = sliced(x, r);
  if (!r.advanced) {
    // Integers drop their axes, None adds one.
    Shape out;
    for (int item : r.items)
      if (item < 0) out.push_back(1);
      else if (r.axes[size_t(item)].kind == Index::Kind::Range) out.push_back(y.dim(item));
    for (int d = 0; d < y.ndim(); ++d)
      if (r.axes[size_t(d)].kind == Index::Kind::Integer) y = slice(y, d, r.axes[size_t(d)].integer, r.axes[size_t(d)].integer + 1);
    return y.reshape(out);
  }
  // Advanced: the index tensors (and integers, as 0-d ones) broadcast to one shape B; their axes
  // become one axis of linear positions, which take reads. numpy puts B where the advanced indices
  // stood when they are adjacent, first otherwise.
  std::vector<int> adv, basic;
  for (int d = 0; d < y.ndim(); ++d) (is_advanced(r, d) ? adv : basic).push_back(d);
  Shape b;
  for (int d : adv) {
    const AxisIndex& a = r.axes[size_t(d)];
    const Shape s = a.kind == Index::Kind::Tensor ? a.tensor.shape() : Shape{};
    Shape merged;
    if (!broadcast_shapes(b, s, &merged))
      throw IndexError("index: index tensors of shapes " + shape_str(b) + " and " + shape_str(s) + " cannot be broadcast together");
    b = merged;
  }
  Tensor linear = Tensor::zeros({}, DType::I64);
  int64_t stride = 1;
  for (size_t k = adv.size(); k-- > 0;) {
    const AxisIndex& a = r.axes[size_t(adv[k])];
    const Tensor pos = a.kind == Index::Kind::Tensor ? a.tensor : Tensor::scalar(double(a.integer), DType::I64);
    linear = linear + pos * stride;
    stride *= y.dim(adv[k]);
  }
  linear = broadcast_to(linear, b);
  std::vector<int> perm(adv);
  perm.insert(perm.end(), basic.begin(), basic.end());
  Shape flat{stride};
  for (int d : basic) flat.push_back(y.dim(d));
  Tensor picked = take(y.transpose(perm).reshape(flat), linear, 0);  // B then the basic axes
  // The output's axes in item order: B's block (adjacent) or first, None as size 1.
  bool adjacent = true;
  int first_adv = -1, last_adv = -1;
  for (size_t k = 0; k < r.items.size(); ++k)
    if (r.items[k] >= 0 && is_advanced(r, r.items[k])) {
      if (first_adv < 0) first_adv = int(k);
      else if (last_adv != int(k) - 1) adjacent = false;
      last_adv = int(k);
    }
  std::vector<int> order;  // axes of picked: 0..|B|-1 are B's, then the basic axes
  Shape out;
  const int nb = int(b.size());
  auto put_b = [&]() {
    for (int k = 0; k < nb; ++k) order.push_back(k), out.push_back(b[size_t(k)]);
  };
  if (!adjacent) put_b();
  int basic_seen = 0;
  for (size_t k = 0; k < r.items.size(); ++k) {
    const int item = r.items[k];
    if (item < 0) out.push_back(1);
    else if (is_advanced(r, item)) {
      if (adjacent && int(k) == first_adv) put_b();
    } else {
      order.push_back(nb + basic_seen++);
      out.push_back(y.dim(item));
    }
  }
  bool identity = true;
  for (size_t k = 0; k < order.size(); ++k) identity &= order[k] == int(k);
  if (!identity) picked = picked.transpose(order);
  return picked.reshape(out);
}

namespace {

// What x[at] = value writes: one slice per axis (increasing positions) and the value converted to
// x's dtype in the region's shape.
struct Region {
  std::vector<int64_t> starts, stops, steps;
  Tensor value;
};

Region region_of(const Tensor& x, const std::vector<Index>& at, const Tensor& value) {
  const Resolved r = resolve(x.shape(), at);
  if (r.advanced)
    throw ValueError("index_update: index tensors in an assignment are not supported (two of them may name one element); "
                     "use scatter or scatter_add along the axis");
  Region out;
  Shape region, view;
  std::vector<int> reversed;
  for (int d = 0; d < x.ndim(); ++d) {
    const AxisIndex& a = r.axes[size_t(d)];
    if (a.kind == Index::Kind::Integer) {
      out.starts.push_back(a.integer), out.stops.push_back(a.integer + 1), out.steps.push_back(1);
      region.push_back(1);
      continue;
    }
    const int64_t step = a.step > 0 ? a.step : -a.step;
    const int64_t lowest = a.step > 0 ? a.first : a.first + (a.count - 1) * a.step;
    out.starts.push_back(a.count ? lowest : 0), out.stops.push_back(a.count ? lowest + (a.count - 1) * step + 1 : 0);
    out.steps.push_back(step);
    region.push_back(a.count);
    if (a.step < 0) reversed.push_back(d);
  }
  for (int item : r.items)
    if (item < 0) view.push_back(1);
    else if (r.axes[size_t(item)].kind == Index::Kind::Range) view.push_back(region[size_t(item)]);
  Shape fits;
  if (!broadcast_shapes(value.shape(), view, &fits) || fits != view)
    throw ShapeError("index_update: a value of shape " + shape_str(value.shape()) + " does not fit x[...] of shape " +
                     shape_str(view) + " (x is " + shape_str(x.shape()) + ")");
  if (x.ndim() == 0) {
    out.value = broadcast_to(detail::cast_to(value, x.dtype()), {});
    return out;
  }
  out.value = broadcast_to(detail::cast_to(value, x.dtype()), view).reshape(region);
  if (!reversed.empty()) out.value = flip(out.value, reversed);
  return out;
}

}  // namespace

Tensor index_update(const Tensor& x, const std::vector<Index>& at, const Tensor& value) {
  Region r = region_of(x, at, value);
  if (x.ndim() == 0) return r.value;
  return detail::apply(OpKind::SliceUpdate, {x, r.value}, Attrs{{"starts", r.starts}, {"stops", r.stops}, {"steps", r.steps}});
}

Tensor Tensor::operator[](const Index& at) const { return index(*this, {at}); }
Tensor Tensor::operator[](std::initializer_list<Index> at) const { return index(*this, std::vector<Index>(at)); }
// Eagerly, on the CPU, x[at] = value writes the region's bytes where they lie (a decoder's key/value
// cache takes a row per token without the whole cache being rewritten); in a trace, or on a GPU,
// it is assign(index_update(...)).
Tensor& detail::assign_at(Tensor& x, const std::vector<Index>& at, const Tensor& value) {
  if (!writes_in_place(x, value)) return x.assign(index_update(x, at, value));
  const Region r = region_of(x, at, value);
  write_region(x, r.value, r.starts, r.steps);
  return x;
}

Tensor& Tensor::assign(std::initializer_list<Index> at, const Tensor& value) { return detail::assign_at(*this, std::vector<Index>(at), value); }
Tensor& Tensor::assign(std::initializer_list<Index> at, double value) {
  return assign(at, Tensor::scalar(value, dtype()));
}

}  // namespace hjit
