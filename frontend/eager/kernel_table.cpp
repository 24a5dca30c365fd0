#include "frontend/eager/kernel.h"

namespace hjit::eager {

Kernel kernel_for(OpKind op) { return HJIT_PER_OP_LOOKUP(Kernel, op); }

}  // namespace hjit::eager
