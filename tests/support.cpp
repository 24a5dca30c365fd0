#include "tests/support.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <cmath>
#include <limits>
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

Tensor specials(hjit::Shape shape, DType dtype, size_t offset) {
  std::vector<double> values;
  if (hjit::is_floating(dtype)) {
    const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
    const double big = dtype == DType::F16 ? 3e4 : dtype == DType::F64 ? 1e300 : 1e30;
    const double tiny = dtype == DType::F16 ? 6.2e-5 : dtype == DType::BF16 || dtype == DType::F32 ? 1.2e-38 : 2.3e-308;
    // One large value of each sign would make sums depend on the order of the additions: only +big.
    values = {nan, inf, -inf, 0.0, -0.0, tiny, tiny / 8, -tiny / 8, 1.5, -2.5, big, -1e-30, 88.5, -88.5, 89.5, -104.0, 0.5, 3.0, -1.0, 1e-7};
  } else if (dtype == DType::Bool) {
    values = {1, 0, 1, 1, 0};
  } else {
    const bool is_unsigned = hjit::dtype_info(dtype).kind == hjit::DTypeKind::UnsignedInt;
    const int bits = hjit::dtype_size(dtype) * 8;
    const double max = std::ldexp(1.0, is_unsigned ? bits : bits - 1) - 1, min = is_unsigned ? 0 : -max - 1;
    values = {0, 1, max, min, 2, is_unsigned ? 3.0 : -1.0, max - 1, min + 1, 7};
  }
  std::vector<double> data(size_t(hjit::shape_numel(shape)));
  for (size_t i = 0; i < data.size(); ++i) data[i] = values[(i + offset) % values.size()];
  if (dtype == DType::I64 || dtype == DType::U64) {  // beyond a double's 53 bits: built in the type
    std::vector<int64_t> ints(data.size());
    for (size_t i = 0; i < data.size(); ++i) ints[i] = data[i] >= 9.2e18 ? INT64_MAX : data[i] <= -9.2e18 ? INT64_MIN : int64_t(data[i]);
    Tensor t = Tensor::from_vector(ints, shape);
    return dtype == DType::I64 ? t : t.astype(dtype);
  }
  return Tensor::from_vector(data, shape).astype(dtype);
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

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::string scratch_dir(const std::string& name) {
  namespace fs = std::filesystem;
  std::string program = "test";
  if (std::ifstream comm("/proc/self/comm"); comm) std::getline(comm, program);
  const fs::path dir = fs::temp_directory_path() / ("hjit_" + program + "_" + std::to_string(getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

}  // namespace test
