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

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace hjit
