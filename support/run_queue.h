// How long this process's threads waited for a CPU another process held: a timing taken while they
// waited measures the machine's load, not the code (a parallel pipeline's workers then wait a time
// slice at every parallel loop: 0.13 ms of work read 4 ms with both cores busy elsewhere).
#pragma once
#include <cstdint>

namespace hjit {

// Nanoseconds spent runnable but not running, summed over the process's threads (Linux's
// /proc/self/task/*/schedstat, second field); 0 where the kernel does not say.
int64_t run_queue_wait_ns();

}  // namespace hjit
