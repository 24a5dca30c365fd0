// hjit-bench --low-precision: the contractions of low precision against the peaks of this machine's
// dot-product instructions (VNNI's vpdpbusd for int8, AVX512_BF16's vdpbf16ps for bf16), measured
// in the same process, with f32 beside them.
#pragma once

namespace bench {

int low_precision_rows(bool quick);

}  // namespace bench
