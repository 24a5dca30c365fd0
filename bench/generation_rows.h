// hjit-bench --generate: token generation from a GPT-2 (nn::GPT2, 124M parameters, Hugging Face's
// initialization) through nn::Generator, at batch 1 and 4: prefill and decode tokens a second, and
// the bytes each decode step reads (parameters, and the key/value cache) a second as a fraction of
// this machine's memory bandwidth (MachineLimits: a triad), measured in the same process.
#pragma once

namespace bench {

int generation_rows(bool quick);

}  // namespace bench
