// The one way hjit runs other processes: a function in a forked child (work that may end the
// process from inside a library, or work shared with a second process), or a program (the linker,
// the compiler driver, a tuning worker). Either is waited for with a time limit and a stop
// condition, and killed (with its process group where it has one) when either comes first or the
// handle goes out of scope: no child outlives its caller's interest in it.
#pragma once
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace hjit {

// How a child ended.
struct ChildEnd {
  enum How { Exited, Crashed, TimedOut, Stopped, NotStarted } how = NotStarted;
  int code = 0;  // Exited: the exit status; Crashed: the signal; NotStarted: errno
  bool ok() const { return how == Exited && code == 0; }
  std::string str() const;  // "exit status 3", "crashed (signal 11)", "did not finish in 12 s", ...
  double limit_s = 0;       // TimedOut: the limit it ran past
  long max_rss_kb = 0;      // its peak resident memory (a forked child's counts what it shares with its parent)
};

class ChildProcess {
 public:
  struct Program {
    std::vector<std::string> argv;                   // argv[0]: the program's path
    std::optional<std::vector<std::string>> env;     // NAME=value each; nullopt: this process's environment
    bool own_group = false;                          // its own process group, killed whole
    bool capture_output = false;                     // stdout and stderr into output()
  };
  // Starts a program; a handle whose wait() says NotStarted when it could not be.
  static ChildProcess spawn(Program program);
  // Runs body in a forked child, which then exits with status 0 (1 when body throws). The child
  // has only the calling thread: fork where no other thread holds a lock the body needs. A crash
  // in it is reported by wait() only (the application's crash handlers are reset there, and no
  // core file is written).
  static ChildProcess fork(const std::function<void()>& body);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ~ChildProcess();  // kills and reaps a child still running

  // Waits until the child ends, time_limit_s passes (0: no limit) or stop() returns true; in the
  // last two cases it is killed. Polls every few milliseconds while stop is given.
  ChildEnd wait(double time_limit_s = 0, const std::function<bool()>& stop = {});
  // Kills its process group (a program started with own_group): whatever the child left behind.
  void kill_group();
  // What a program with capture_output printed, once it has ended.
  const std::string& output() const { return output_; }
  bool started() const { return pid_ > 0; }

 private:
  ChildProcess() = default;
  pid_t pid_ = -1;    // while it runs
  pid_t group_ = -1;  // its process group, when it has its own (kept after it ended)
  int start_errno_ = 0;
  std::string output_path_, output_;
};

// Runs f in a forked child process and returns what f returned there. Throws ValueError saying
// what stopped the child instead: a signal (a crash), an exit, an exception (with its message), or
// time_limit_s passing (0: no limit; the child is then killed). Halide 14's compiler and its
// Adams2019 plugin crash or call std::terminate on some inputs, which no catch stops. Where no
// process can be made, f runs here.
std::string run_in_child(const std::function<std::string()>& f, double time_limit_s = 0);

// Runs a program to its end: its exit status (-1 when it could not be started, 128 when it died of
// a signal), with what it printed (stdout and stderr) in *output.
int run_program(const std::vector<std::string>& argv, std::string* output);

// Where the program `name` is on PATH ("" if nowhere).
std::string find_program(const std::string& name);

}  // namespace hjit
