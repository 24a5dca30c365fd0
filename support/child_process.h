// Work that may end the process from inside a library, run where its end is only an error.
#pragma once
#include <functional>
#include <string>

namespace hjit {

// Runs f in a forked child process and returns what f returned there. Throws ValueError saying
// what stopped the child instead: a signal (a crash), an exit, an exception (with its message), or
// time_limit_s passing (0: no limit; the child is then killed). Halide 14's compiler and its
// Adams2019 plugin crash or call std::terminate on some inputs, which no catch stops.
// The child's crash is reported here only: the application's crash handlers are reset in it.
// The child has only the calling thread: call this where no other thread holds a lock the child
// needs (hjit does, under the compile lock). Where no process can be made, f runs here.
std::string run_in_child(const std::function<std::string()>& f, double time_limit_s = 0);

}  // namespace hjit
