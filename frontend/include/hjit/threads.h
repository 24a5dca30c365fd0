// How many threads hjit's parallel loops use: compiled pipelines' and eager kernels' alike, on one
// pool per process (torch.set_num_threads). A loop's iterations go to its threads as contiguous
// runs; a thread that finishes takes iterations from the far end of a late one's, and a loop ends
// when its iterations do, so a machine whose cores other processes hold slows a call down by the
// cores it lost, not by their time slices (docs/threads.md).
//
//   hjit::set_num_threads(1);            // every later call on one thread
//   JitOptions{.threads = 2}             // one function's calls on at most two
#pragma once

namespace hjit {

// The process's default for later calls: at most the CPUs it may run on; 0 restores the default
// (HJIT_THREADS, else those CPUs). ValueError for a negative count. The compiled code is the same
// whatever it is, and so are results, bit for bit.
void set_num_threads(int threads);
int num_threads();

}  // namespace hjit
