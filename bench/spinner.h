// Another process holding a core: a loop that never sleeps, as a neighbour's job does
// (hjit-bench --busy, and --exported's busy columns).
#pragma once
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace bench {

class Spinner {
 public:
  Spinner() {
    pid_ = fork();
    if (pid_ == 0) {
      volatile uint64_t x = 0;
      for (;;) x = x + 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the scheduler has placed it
  }
  ~Spinner() {
    if (pid_ > 0) kill(pid_, SIGKILL), waitpid(pid_, nullptr, 0);
  }
  Spinner(const Spinner&) = delete;
  Spinner& operator=(const Spinner&) = delete;

 private:
  pid_t pid_ = -1;
};

}  // namespace bench
