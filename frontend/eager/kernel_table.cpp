#include "frontend/eager/kernel.h"

namespace hjit::eager {

Kernel kernel_for(OpKind op) {
  static constexpr Kernel table[] = {
#define HJIT_KERNEL_ENTRY(kind, name, arity, traits, attrs, infer) &kind,
      HJIT_OPS(HJIT_KERNEL_ENTRY)
#undef HJIT_KERNEL_ENTRY
  };
  static_assert(sizeof(table) / sizeof(table[0]) == kNumOps);
  return table[int(op)];
}

}  // namespace hjit::eager
