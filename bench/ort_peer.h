// ONNX Runtime's CPU engine as a peer of hjit-bench's model rows: ../shared/peers/ort_time.js (node
// with npm's onnxruntime-node, installed by ort_setup.sh) run on a model folder, where it is there.
// Never a dependency: without it the columns read "-".
#pragma once
#include <string>

namespace bench {

// The number after `key` in the last line of a command's standard output that has it; -1 where
// none does (a peer's script printing `steady_med_ms=` or `"median_ms":`).
double number_after(const std::string& command, const std::string& key);

// The median ms of a call of the folder's model.onnx on its test_data_set_0 inputs with ONNX
// Runtime on `threads` threads (its pools' spinning off, as this shared machine needs); -1 where
// the script, node or onnxruntime-node is missing, or the run fails.
double ort_ms(const std::string& folder, int threads);

}  // namespace bench
