// hjit-bench --busy: each workload (and with --models DIR, each model) on a machine another
// process shares: its steady time quiet, then while a spinning process holds one core, on the
// process's threads and on one thread, taken alternately under the same load. docs/threads.md
// says what a loop does when a thread is late; ONNX Runtime and PyTorch under the same load are
// measured by hand (../shared/peers) in the same sitting.
#pragma once
#include <string>

namespace bench {

// The table: workloads (comma-separated ids; "" for all of W1-W11) and the models of models_dir
// ("" for none), each in a child process of its own.
int busy_rows(const std::string& self, const std::string& workloads, const std::string& models_dir, const std::string& only,
              bool quick);
// One workload id or model folder: prints "BUSY quiet_ms busy_ms busy_one_thread_ms".
int busy_child(const std::string& what, bool quick);

}  // namespace bench
