// ONNX Runtime's CPU engine as a peer of hjit-bench's model rows: ../shared/peers/ort_time.js (node
// with npm's onnxruntime-node, installed by ort_setup.sh) run on a model folder, where it is there.
// Never a dependency: without it the columns read "-".
#pragma once
#include <string>
#include <vector>

namespace bench {

// The number after `key` in the last line of a command's standard output that has it; -1 where
// none does (a peer's script printing `steady_med_ms=` or `"median_ms":`).
double number_after(const std::string& command, const std::string& key);

// The numbers after each of `keys` in the last line of a command's output that has the key.
std::vector<double> numbers_after(const std::string& command, const std::vector<std::string>& keys);

// ONNX Runtime on the folder's model.onnx and its test_data_set_0 inputs, `threads` threads (its
// pools' spinning off, as this shared machine needs): session creation (parse, graph optimization,
// weight prepacking), the first run alone, and the median run; -1 each where the script, node or
// onnxruntime-node is missing, or the run fails.
struct OrtTimes {
  double load_ms = -1, first_ms = -1, median_ms = -1;
  double first_call_ms() const { return load_ms > 0 && first_ms > 0 ? load_ms + first_ms : -1; }  // its cold and warm start alike
};
OrtTimes ort_times(const std::string& folder, int threads);
double ort_ms(const std::string& folder, int threads);  // ort_times(...).median_ms

}  // namespace bench
