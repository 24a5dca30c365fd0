#include <hjit/dtype.h>
#include <hjit/error.h>

namespace hjit {

DType dtype_from_name(const std::string& name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (name == dtype_name(DType(i))) return DType(i);
  throw DTypeError("unknown dtype '" + name + "'");
}

namespace {

DType int_of_size(int bytes, bool is_signed) {
  switch (bytes) {
    case 1: return is_signed ? DType::I8 : DType::U8;
    case 2: return is_signed ? DType::I16 : DType::U16;
    case 4: return is_signed ? DType::I32 : DType::U32;
    default: return is_signed ? DType::I64 : DType::U64;
  }
}

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa && fb) {
    if (dtype_size(a) == dtype_size(b)) return DType::F32;  // f16 with bf16
    return dtype_size(a) > dtype_size(b) ? a : b;
  }
  if (fa) return a;
  if (fb) return b;
  bool sa = dtype_info(a).kind == DTypeKind::SignedInt, sb = dtype_info(b).kind == DTypeKind::SignedInt;
  int za = dtype_size(a), zb = dtype_size(b);
  if (sa == sb) return za >= zb ? a : b;
  int unsigned_size = sa ? zb : za, signed_size = sa ? za : zb;
  if (signed_size > unsigned_size) return sa ? a : b;
  if (unsigned_size == 8)
    throw DTypeError(std::string("no integer type holds both ") + dtype_name(a) + " and " + dtype_name(b) +
                     "; convert one of them with astype");
  return int_of_size(unsigned_size * 2, true);
}

namespace {

constexpr int kNoDType = -1;

int kind_rank(DType t) { return t == DType::Bool ? 0 : is_floating(t) ? 2 : 1; }

// c10's combine_categories: `higher` wins unless it is bool, or `lower` is of a higher kind.
int combine(int higher, int lower) {
  if (higher == kNoDType) return lower;
  if (lower == kNoDType) return higher;
  const DType h = DType(higher), l = DType(lower);
  if (is_floating(h)) return higher;
  if (h == DType::Bool || kind_rank(l) > kind_rank(h)) return int(promote_types(h, l));
  return higher;
}

}  // namespace

DType result_type(const std::vector<Operand>& operands) {
  int by_category[3] = {kNoDType, kNoDType, kNoDType};
  for (const Operand& o : operands) {
    int& r = by_category[int(o.category)];
    r = r == kNoDType ? int(o.dtype) : int(promote_types(DType(r), o.dtype));
  }
  const int t = combine(by_category[0], combine(by_category[1], by_category[2]));
  if (t == kNoDType) throw InternalError("result_type: no operands");
  return DType(t);
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      throw ShapeError("the shape " + shape_str(shape) + " has more elements than an int64 counts");
  return n;
}

}  // namespace hjit
