#include "onnx_import/tensor_proto.h"

#include <bit>
#include <cstring>
#include <vector>

#include <hjit/error.h>

namespace hjit::onnx_import {

namespace {

using ::onnx::TensorProto;

static_assert(std::endian::native == std::endian::little, "ONNX's raw_data is little-endian, as this machine");

struct TypeRow {
  int onnx;
  DType dtype;
};
constexpr TypeRow kTypes[] = {
    {TensorProto::FLOAT, DType::F32},   {TensorProto::UINT8, DType::U8},     {TensorProto::INT8, DType::I8},
    {TensorProto::UINT16, DType::U16},  {TensorProto::INT16, DType::I16},    {TensorProto::INT32, DType::I32},
    {TensorProto::INT64, DType::I64},   {TensorProto::BOOL, DType::Bool},    {TensorProto::FLOAT16, DType::F16},
    {TensorProto::DOUBLE, DType::F64},  {TensorProto::UINT32, DType::U32},   {TensorProto::UINT64, DType::U64},
    {TensorProto::BFLOAT16, DType::BF16},
};

// Elements of a shape, or ValueError when a dimension is negative or the count overflows.
int64_t element_count(const Shape& shape, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw ValueError(what + " has a negative dimension " + std::to_string(d));
    if (__builtin_mul_overflow(n, d, &n)) throw ValueError(what + " declares more elements than can be addressed");
  }
  return n;
}

// Typed fields hold narrow types widened: int32_data carries bool, 8/16-bit integers and the bits
// of f16/bf16; uint64_data carries u32 and u64.
template <class Field, class T>
void narrow_into(const Field& field, std::vector<uint8_t>& bytes) {
  for (int i = 0; i < field.size(); ++i) {
    const T v = T(field.Get(i));
    std::memcpy(bytes.data() + size_t(i) * sizeof(T), &v, sizeof(T));
  }
}

// How many values the typed field that carries `dtype` holds, and its name.
std::pair<int64_t, const char*> typed_values(const TensorProto& p, DType dtype) {
  switch (dtype) {
    case DType::F32: return {p.float_data_size(), "float_data"};
    case DType::F64: return {p.double_data_size(), "double_data"};
    case DType::I64: return {p.int64_data_size(), "int64_data"};
    case DType::U32:
    case DType::U64: return {p.uint64_data_size(), "uint64_data"};
    default: return {p.int32_data_size(), "int32_data"};
  }
}

}  // namespace

DType dtype_from_onnx(int onnx_type, const std::string& what) {
  for (const TypeRow& r : kTypes)
    if (r.onnx == onnx_type) return r.dtype;
  const std::string name = TensorProto::DataType_IsValid(onnx_type)
                               ? TensorProto::DataType_Name(TensorProto::DataType(onnx_type))
                               : "code " + std::to_string(onnx_type);
  throw ValueError(what + " has element type " + name + ", which hjit does not compute with (numbers and bool only)");
}

int onnx_type_of(DType dtype) {
  for (const TypeRow& r : kTypes)
    if (r.dtype == dtype) return r.onnx;
  throw InternalError("hjit::onnx: no ONNX element type for " + std::string(dtype_name(dtype)));
}

Tensor to_tensor(const TensorProto& proto, const std::string& what) {
  if (proto.data_location() == TensorProto::EXTERNAL)
    throw ValueError(what + " keeps its data in an external file, which only a model file can name");
  const DType dtype = dtype_from_onnx(proto.data_type(), what);
  Shape shape(proto.dims().begin(), proto.dims().end());
  const int64_t n = element_count(shape, what);
  const size_t size = size_t(dtype_size(dtype));
  const auto need = [&](int64_t have, const char* field) {
    if (have != n)
      throw ValueError(what + " declares " + std::to_string(n) + " elements (shape " + shape_str(shape) + ") but its " + field +
                       " holds " + std::to_string(have));
  };
  if (proto.has_raw_data()) {
    const std::string& raw = proto.raw_data();
    if (raw.size() % size != 0 || int64_t(raw.size() / size) != n)
      need(int64_t(raw.size() / size), "raw_data");
    if (dtype == DType::Bool)
      for (char c : raw)
        if (c != 0 && c != 1) throw ValueError(what + " holds a bool that is neither 0 nor 1");
    return Tensor::from_bytes(raw.data(), raw.size(), shape, dtype);
  }
  // The values present are counted before anything is allocated: a 100-byte file may declare 2^31
  // elements.
  const auto [present, field] = typed_values(proto, dtype);
  need(present, field);
  std::vector<uint8_t> bytes(size_t(n) * size);
  switch (dtype) {
    case DType::F32:
      need(proto.float_data_size(), "float_data");
      if (n) std::memcpy(bytes.data(), proto.float_data().data(), bytes.size());
      break;
    case DType::F64:
      need(proto.double_data_size(), "double_data");
      if (n) std::memcpy(bytes.data(), proto.double_data().data(), bytes.size());
      break;
    case DType::I64:
      need(proto.int64_data_size(), "int64_data");
      if (n) std::memcpy(bytes.data(), proto.int64_data().data(), bytes.size());
      break;
    case DType::U32:
      need(proto.uint64_data_size(), "uint64_data");
      narrow_into<decltype(proto.uint64_data()), uint32_t>(proto.uint64_data(), bytes);
      break;
    case DType::U64:
      need(proto.uint64_data_size(), "uint64_data");
      if (n) std::memcpy(bytes.data(), proto.uint64_data().data(), bytes.size());
      break;
    case DType::I32:
      need(proto.int32_data_size(), "int32_data");
      if (n) std::memcpy(bytes.data(), proto.int32_data().data(), bytes.size());
      break;
    case DType::Bool:
    case DType::I8:
    case DType::U8:
      need(proto.int32_data_size(), "int32_data");
      if (dtype == DType::Bool)
        for (int32_t v : proto.int32_data())
          if (v != 0 && v != 1) throw ValueError(what + " holds a bool that is neither 0 nor 1");
      narrow_into<decltype(proto.int32_data()), uint8_t>(proto.int32_data(), bytes);
      break;
    case DType::I16:
    case DType::U16:
    case DType::F16:
    case DType::BF16:
      need(proto.int32_data_size(), "int32_data");
      narrow_into<decltype(proto.int32_data()), uint16_t>(proto.int32_data(), bytes);
      break;
  }
  return Tensor::from_bytes(bytes.data(), bytes.size(), shape, dtype);
}

namespace {

template <class T>
void append_bytes(const Tensor& t, std::string& out) {
  const std::vector<T> v = t.to_vector<T>();
  if constexpr (std::is_same_v<T, bool>) {
    for (bool b : v) out.push_back(char(b));
  } else {
    out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
}

}  // namespace

TensorProto to_proto(const Tensor& tensor, const std::string& name) {
  TensorProto p;
  p.set_name(name);
  p.set_data_type(onnx_type_of(tensor.dtype()));
  for (int64_t d : tensor.shape()) p.add_dims(d);
  std::string raw;
  switch (tensor.dtype()) {
#define HJIT_ONNX_APPEND(e, name_, T, kind) \
  case DType::e:                            \
    append_bytes<T>(tensor, raw);           \
    break;
    HJIT_DTYPES(HJIT_ONNX_APPEND)
#undef HJIT_ONNX_APPEND
  }
  p.set_raw_data(std::move(raw));
  return p;
}

}  // namespace hjit::onnx_import
