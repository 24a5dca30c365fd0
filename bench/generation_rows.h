// hjit-bench --generate: token generation from a GPT-2 (nn::GPT2, 124M parameters, Hugging Face's
// initialization) through nn::Generator, with f32, i8 and i4 weights (nn::quantize_weights), at
// batch 1 and 4 after a 32-token prompt and at batch 1 with a 512-token context: prefill and decode
// tokens a second, the bytes each decode step reads (weights, and the key/value cache) a second,
// and the weights' bytes a step over the step's time, as fractions of this machine's memory
// bandwidth (MachineLimits: a triad), measured in the same process.
#pragma once

namespace bench {

int generation_rows(bool quick);

}  // namespace bench
