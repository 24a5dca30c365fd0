// Element types. One table (HJIT_DTYPES) drives the enum, the names, the sizes and the C++ storage
// types; everything else asks the table.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <hjit/half.h>

namespace hjit {

using Shape = std::vector<int64_t>;
// Where a tensor's bytes live and where compiled code runs. OpenCL is Halide's OpenCL backend: any
// OpenCL 1.2 driver (a GPU's, or pocl on the CPU, which is how the suite runs GPU code without a GPU).
enum class Device { CPU, CUDA, OpenCL };
inline const char* device_name(Device d) { return d == Device::CUDA ? "cuda" : d == Device::OpenCL ? "opencl" : "cpu"; }

enum class DTypeKind : uint8_t { Bool, SignedInt, UnsignedInt, Float };

// X(enumerator, printed name, C++ storage type, kind)
#define HJIT_DTYPES(X)                            \
  X(Bool, "bool", bool, DTypeKind::Bool)          \
  X(I8, "i8", int8_t, DTypeKind::SignedInt)       \
  X(I16, "i16", int16_t, DTypeKind::SignedInt)    \
  X(I32, "i32", int32_t, DTypeKind::SignedInt)    \
  X(I64, "i64", int64_t, DTypeKind::SignedInt)    \
  X(U8, "u8", uint8_t, DTypeKind::UnsignedInt)    \
  X(U16, "u16", uint16_t, DTypeKind::UnsignedInt) \
  X(U32, "u32", uint32_t, DTypeKind::UnsignedInt) \
  X(U64, "u64", uint64_t, DTypeKind::UnsignedInt) \
  X(F16, "f16", ::hjit::f16, DTypeKind::Float)    \
  X(BF16, "bf16", ::hjit::bf16, DTypeKind::Float) \
  X(F32, "f32", float, DTypeKind::Float)          \
  X(F64, "f64", double, DTypeKind::Float)

enum class DType : uint8_t {
#define HJIT_DTYPE_ENUM(e, name, T, kind) e,
  HJIT_DTYPES(HJIT_DTYPE_ENUM)
#undef HJIT_DTYPE_ENUM
};

#define HJIT_DTYPE_COUNT(e, name, T, kind) +1
inline constexpr int kNumDTypes = 0 HJIT_DTYPES(HJIT_DTYPE_COUNT);
#undef HJIT_DTYPE_COUNT

struct DTypeInfo {
  const char* name;
  int bytes;
  DTypeKind kind;
};

inline const DTypeInfo& dtype_info(DType t) {
  static constexpr DTypeInfo table[] = {
#define HJIT_DTYPE_INFO(e, name, T, kind) {name, int(sizeof(T)), kind},
      HJIT_DTYPES(HJIT_DTYPE_INFO)
#undef HJIT_DTYPE_INFO
  };
  static_assert(sizeof(table) / sizeof(table[0]) == kNumDTypes);
  return table[static_cast<int>(t)];
}

inline const char* dtype_name(DType t) { return dtype_info(t).name; }
inline int dtype_size(DType t) { return dtype_info(t).bytes; }
inline bool is_floating(DType t) { return dtype_info(t).kind == DTypeKind::Float; }
inline bool is_integral(DType t) {
  return dtype_info(t).kind == DTypeKind::SignedInt || dtype_info(t).kind == DTypeKind::UnsignedInt;
}
inline bool is_bool(DType t) { return t == DType::Bool; }

// Parses a printed name ("f32"); throws DTypeError for an unknown one.
DType dtype_from_name(const std::string& name);

// PyTorch's promotion of two tensor dtypes: bool < integers < floats; within integers the smallest
// type holding both (u8 with i8 gives i16; u64 with a signed type gives f32, where PyTorch errors
// we pick the float); f16 with bf16 gives f32.
DType promote_types(DType a, DType b);

// PyTorch's result_type: operands fall in three categories, and a lower category only widens
// the result when its kind (bool < integer < float) is higher. Tensors with dimensions come
// first, then 0-d tensors, then C++ numbers ("weak" scalars, of dtype f32 for floating point,
// i64 for integers, bool for bool). So f16[4] + f32[] is f16, i32[4] + i64[] is i32, i32[4] + 2.5
// is f32, and bool[4] + 1 is i64.
enum class OperandCategory : uint8_t { Dimensioned, ZeroDim, Weak };
struct Operand {
  DType dtype;
  OperandCategory category;
};
DType result_type(const std::vector<Operand>& operands);  // DTypeError as promote_types

// The C++ storage type of each dtype and back.
template <class T> struct dtype_of_t;
#define HJIT_DTYPE_OF(e, name, T, kind) \
  template <> struct dtype_of_t<T> { static constexpr DType value = DType::e; };
HJIT_DTYPES(HJIT_DTYPE_OF)
#undef HJIT_DTYPE_OF
template <class T> inline constexpr DType dtype_of = dtype_of_t<std::remove_cv_t<T>>::value;

std::string shape_str(const Shape& shape);  // "[2,3]"
int64_t shape_numel(const Shape& shape);

}  // namespace hjit
