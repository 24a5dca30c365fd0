#include "tests/support.h"

#include <sstream>

namespace test {

using hjit::DType;
using hjit::Tensor;

Tensor random(hjit::Shape shape, DType dtype, uint64_t seed) {
  if (hjit::is_floating(dtype)) return Tensor::randn(shape, seed, DType::F64).astype(dtype);
  if (dtype == DType::Bool) return Tensor::uniform(shape, seed, 0, 1, DType::F64) > 0.5;
  bool is_unsigned = hjit::dtype_info(dtype).kind == hjit::DTypeKind::UnsignedInt;
  Tensor u = hjit::floor(Tensor::uniform(shape, seed, is_unsigned ? 0 : -5, is_unsigned ? 10.999 : 5.999, DType::F64));
  return u.astype(dtype);
}

double tolerance(DType dtype) {
  switch (dtype) {
    case DType::F64: return 1e-9;
    case DType::F32: return 2e-5;
    case DType::F16: return 4e-3;
    case DType::BF16: return 3e-2;
    default: return 0;
  }
}

std::string compare(const Tensor& got, const Tensor& want, double tol) {
  std::ostringstream os;
  if (!got.defined() || !want.defined()) return "undefined tensor";
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    os << "got " << hjit::dtype_name(got.dtype()) << hjit::shape_str(got.shape()) << ", want "
       << hjit::dtype_name(want.dtype()) << hjit::shape_str(want.shape());
    return os.str();
  }
  std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    bool same = a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])) ||
                (std::isfinite(b[i]) && std::fabs(a[i] - b[i]) <= tol * (1 + std::fabs(b[i])));
    if (!same) {
      os.precision(17);
      os << "element " << i << " of " << hjit::dtype_name(want.dtype()) << hjit::shape_str(want.shape()) << ": got " << a[i]
         << ", want " << b[i] << " (tolerance " << tol << ")";
      return os.str();
    }
  }
  return "";
}

}  // namespace test
