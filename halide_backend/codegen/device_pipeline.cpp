#include "halide_backend/codegen/device_pipeline.h"

#include <cstdint>
#include <cstring>
#include <set>
#include <sstream>
#include <string>

#include <hjit/error.h>

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

// The checks of the arguments hjit makes (see Buffers). What stays: require() (an IndexError),
// a library call's status, and the checks of allocations (their size, and failures). (An
// assertion without a message is a constraint on an argument's dimensions that lowering without
// assertions keeps, as Halide does to exploit the constraint.)
class DropArgumentChecks : public IRMutator {
  using IRMutator::visit;
  Stmt visit(const AssertStmt* op) override {
    const Call* error = op->message.as<Call>();
    const bool argument_check = error ? argument_checks().count(error->name) > 0 : is_const(op->message);
    return argument_check ? Evaluate::make(0) : Stmt(op);
  }
  static const std::set<std::string>& argument_checks() {
    static const std::set<std::string> names = {
        "halide_error_buffer_argument_is_null",  "halide_error_bad_type",
        "halide_error_bad_dimensions",           "halide_error_buffer_extents_negative",
        "halide_error_buffer_extents_too_large", "halide_error_access_out_of_bounds",
        "halide_error_constraint_violated",      "halide_error_host_is_null",
        "halide_error_unaligned_host_ptr",       "halide_error_device_dirty_with_no_device_support"};
    return names;
  }
};

// Without assertions, a heap allocation that failed would be written through a null pointer: the
// statements inside it run only when it was made. (The allocator has noted the failure: the call
// throws OutOfMemoryError after it returns, whatever was skipped.) An allocation whose condition
// is false is not made, and its statements must run all the same.
class GuardAllocations : public IRMutator {
  using IRMutator::visit;
  Stmt visit(const Allocate* op) override {
    Stmt body = mutate(op->body);
    if (op->new_expr.defined()) return Allocate::make(op->name, op->type, op->memory_type, op->extents, op->condition, body,
                                                      op->new_expr, op->free_function);
    Expr made = reinterpret(UInt(64), Variable::make(Handle(), op->name)) != make_zero(UInt(64));
    body = IfThenElse::make(made || !op->condition, body);
    return Allocate::make(op->name, op->type, op->memory_type, op->extents, op->condition, body);
  }
};

// A schedule that cannot compute what it must: Halide proves it while lowering and leaves an
// assertion that always fails (explicit bounds smaller than the region computed, a storage fold
// smaller than the region live at once). Lowered without assertions, such code wrote outside its
// allocations (an Adams2019 schedule of four tril's vectorized an [3, 4] mask by 8 under bounds of
// 4: each row's vector overwrote the next row's start), so it is refused here, for every target.
class RejectImpossibleSchedules : public IRMutator {
  using IRMutator::visit;
  Stmt visit(const AssertStmt* op) override {
    const Call* error = op->message.as<Call>();
    if (!is_const_zero(op->condition) || !error || !schedule_errors().count(error->name)) return op;
    std::string args;
    for (const Expr& a : error->args) {
      std::ostringstream s;
      s << a;
      args += (args.empty() ? "" : ", ") + s.str();
    }
    throw CompileError("hjit: the schedule cannot compute this pipeline (" + error->name.substr(std::strlen("halide_error_")) +
                       ": " + args + ")");
  }
  static const std::set<std::string>& schedule_errors() {
    static const std::set<std::string> names = {
        "halide_error_explicit_bounds_too_small", "halide_error_fold_factor_too_small", "halide_error_bad_fold",
        "halide_error_bad_extern_fold", "halide_error_storage_bound_too_small",
        "halide_error_constraints_make_required_region_smaller"};
    return names;
  }
};

}  // namespace

Pipeline device_ready_pipeline(const std::vector<Func>& outputs, const Target& target, Buffers buffers) {
  Pipeline p(outputs);
  p.add_custom_lowering_pass(new RejectImpossibleSchedules);
  if (target.has_feature(Target::OpenCL)) p.add_custom_lowering_pass(new ExactDoubleLiterals);
  // (On the CPU only: a GPU pipeline's buffers may hold device memory alone, which the host-pointer
  // checks are there to catch.)
  if (buffers == Buffers::ByHjit && !target.has_gpu_feature()) {
    p.add_custom_lowering_pass(new DropArgumentChecks);
    if (target.has_feature(Target::NoAsserts)) p.add_custom_lowering_pass(new GuardAllocations);
  }
  return p;
}

}  // namespace hjit::backend
