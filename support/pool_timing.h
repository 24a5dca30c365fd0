// The thread pools' timings: hjit's (support/thread_pool.cpp) and the one an exported CPU library
// carries in C (halide_backend/export/c_thread_pool.cpp), which reads these values.
#pragma once
#include <chrono>

namespace hjit::pool_timing {

// How long an idle worker spins for the next loop before it sleeps, and a loop's caller for the
// iterations other threads are still inside of: a pipeline's loops follow each other, and a
// loop's threads finish, within microseconds on a quiet machine, but a thread that slept wakes
// late, and on a virtual machine whose idle cores halt (no polling), tens to hundreds of
// microseconds late: a GPT-2 decode step (about 80 loops, and host work between its parts) ran
// 10-23% faster with both spins at 1 ms than at 50 and 20 us (alternated in one process on a
// 2-vCPU Zen 4 guest), a BERT-like int8 encoder 3-6%. Past the spin, the core is left to whoever
// else needs it; a caller whose worker another process holds off its core loses at most this
// spin per late loop before the pause below takes over.
constexpr auto kIdleSpin = std::chrono::milliseconds(1);
constexpr auto kStragglerSpin = std::chrono::milliseconds(1);
// A worker that another process holds off its core while it is inside an iteration keeps the
// loop's caller waiting until the scheduler hands the core back: a time slice, milliseconds, at
// every loop that happens in. Where the caller waited that long after its own part (longer than
// kLateWait plus two of its own iterations: one running iteration takes about as long on another
// core), the machine has fewer free cores than the pool has threads, and the loops that follow
// run on their callers alone for a pause; then a loop runs on every thread again to see whether
// the cores came back. Lateness seen again within kRecent of the last doubles the pause, up to
// kLongestPause (a probe that waits out a slice every third of a second costs about 1%); lateness
// after a while of none starts again from kFirstPause.
// A late loop pauses only when the lateness persists: a second late loop within kDense of the
// one before, or a wait of kLongLate. A virtual machine's host takes a core from it for 1-4 ms a
// few times a second (1% of the time): each such loop was late once, and the pauses, doubling
// while they recurred within a second, ran a quiet 2-core Zen 4 guest on one thread for up to 320
// ms at a time. Another process holding a core keeps every loop late, one after the other.
constexpr auto kLateWait = std::chrono::microseconds(200);
constexpr auto kDense = std::chrono::milliseconds(20);
constexpr auto kLongLate = std::chrono::milliseconds(10);
constexpr auto kFirstPause = std::chrono::milliseconds(5);
constexpr auto kLongestPause = std::chrono::milliseconds(320);
constexpr auto kRecent = std::chrono::seconds(1);

}  // namespace hjit::pool_timing
