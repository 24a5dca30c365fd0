#include "halide_backend/device_pipeline.h"

#include <cstdint>
#include <cstring>

namespace hjit::backend {
namespace {

using namespace Halide;
using namespace Halide::Internal;

class ExactDoubleLiterals : public IRMutator {
  using IRMutator::visit;
  Expr visit(const FloatImm* op) override {
    if (op->type.bits() != 64 || double(float(op->value)) == op->value || op->value != op->value) return op;
    uint64_t bits;
    std::memcpy(&bits, &op->value, sizeof bits);
    return Call::make(op->type, Call::reinterpret, {wide(UInt(64, op->type.lanes()), bits)}, Call::PureIntrinsic);
  }
  Expr visit(const UIntImm* op) override { return op->type.bits() == 64 && op->value >> 31 ? wide(op->type, op->value) : op; }
  Expr visit(const IntImm* op) override {
    const bool fits = op->value >= INT32_MIN && op->value <= INT32_MAX;
    return op->type.bits() == 64 && !fits ? wide(op->type, uint64_t(op->value)) : op;
  }
  // A 64-bit integer from two 32-bit halves: the OpenCL kernels of Halide 14 get a 64-bit integer
  // immediate cut to its low 32 bits (f64's magnitude mask 0x7fff'ffff'ffff'ffff came out as
  // 0x7fff'ffff, so every f64 NaN test failed).
  static Expr wide(Type t, uint64_t v) {
    const Type u = UInt(64, t.lanes());
    Expr hi = Cast::make(u, UIntImm::make(UInt(32, t.lanes()), v >> 32));
    Expr lo = Cast::make(u, UIntImm::make(UInt(32, t.lanes()), v & 0xffffffffu));
    Expr shifted = Call::make(u, Call::shift_left, {hi, Cast::make(u, UIntImm::make(UInt(32, t.lanes()), 32))}, Call::PureIntrinsic);
    Expr bits = Call::make(u, Call::bitwise_or, {shifted, lo}, Call::PureIntrinsic);
    return t == u ? bits : Call::make(t, Call::reinterpret, {bits}, Call::PureIntrinsic);
  }
};

}  // namespace

Pipeline device_ready_pipeline(const std::vector<Func>& outputs, const Target& target) {
  Pipeline p(outputs);
  if (target.has_feature(Target::OpenCL)) p.add_custom_lowering_pass(new ExactDoubleLiterals);
  return p;
}

}  // namespace hjit::backend
