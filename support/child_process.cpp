#include "support/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include <hjit/error.h>

extern char** environ;

namespace hjit {
namespace {

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w, n -= size_t(w);
  }
}

// In a forked child: a crash is the parent's to report, not the application's crash handlers'
// (inherited with the process), and with no core file.
void quiet_crashes() {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP}) signal(sig, SIG_DFL);
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
}

std::string temp_directory() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

}  // namespace

std::string ChildEnd::str() const {
  switch (how) {
    case Exited: return "exit status " + std::to_string(code);
    case Crashed: return "crashed (signal " + std::to_string(code) + ")";
    case TimedOut: return "did not finish in " + std::to_string(int(limit_s)) + " s";
    case Stopped: return "was stopped";
    case NotStarted: return std::string("could not be started: ") + std::strerror(code);
  }
  return "?";
}

ChildProcess ChildProcess::spawn(Program program) {
  ChildProcess c;
  std::vector<char*> argv;
  for (std::string& a : program.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  if (program.env) {
    for (std::string& e : *program.env) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  int log_fd = -1;
  if (program.capture_output) {
    c.output_path_ = temp_directory() + "/hjit_child_XXXXXX";
    log_fd = mkstemp(c.output_path_.data());
    if (log_fd >= 0) {
      posix_spawn_file_actions_adddup2(&actions, log_fd, 1);
      posix_spawn_file_actions_adddup2(&actions, log_fd, 2);
    } else {
      c.output_path_.clear();
    }
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (program.own_group) {
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
  }
  pid_t pid = -1;
  const int rc = argv[0] ? posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), program.env ? envp.data() : environ) : ENOENT;
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (log_fd >= 0) close(log_fd);
  if (rc == 0) c.pid_ = pid, c.group_ = program.own_group ? pid : -1;
  else c.start_errno_ = rc;
  return c;
}

ChildProcess ChildProcess::fork(const std::function<void()>& body) {
  ChildProcess c;
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    c.start_errno_ = errno;
    return c;
  }
  if (pid == 0) {
    quiet_crashes();
    int status = 0;
    try {
      body();
    } catch (...) {
      status = 1;
    }
    _exit(status);
  }
  c.pid_ = pid;
  return c;
}

ChildProcess::ChildProcess(ChildProcess&& o) noexcept
    : pid_(o.pid_), group_(o.group_), start_errno_(o.start_errno_), output_path_(std::move(o.output_path_)),
      output_(std::move(o.output_)) {
  o.pid_ = -1, o.group_ = -1;
  o.output_path_.clear();
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    kill(group_ > 0 ? -group_ : pid_, SIGKILL);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  if (!output_path_.empty()) std::remove(output_path_.c_str());
}

ChildEnd ChildProcess::wait(double time_limit_s, const std::function<bool()>& stop) {
  ChildEnd end;
  if (pid_ <= 0) {
    end.code = start_errno_;
    return end;
  }
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  struct rusage usage {};
  bool killed = false;
  if (time_limit_s <= 0 && !stop) {
    while (wait4(pid_, &status, 0, &usage) < 0 && errno == EINTR) {
    }
  } else {
    // Sleeps that grow to 5 ms: a child that ends at once (a linker) is seen within microseconds.
    useconds_t pause = 50;
    for (pid_t done; (done = wait4(pid_, &status, WNOHANG, &usage)) == 0 || (done < 0 && errno == EINTR);) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const bool stopped = stop && stop();
      if (stopped || (time_limit_s > 0 && s > time_limit_s)) {
        kill(group_ > 0 ? -group_ : pid_, SIGKILL);
        while (wait4(pid_, &status, 0, &usage) < 0 && errno == EINTR) {
        }
        end.how = stopped ? ChildEnd::Stopped : ChildEnd::TimedOut;
        end.limit_s = time_limit_s;
        killed = true;
        break;
      }
      usleep(pause);
      pause = std::min<useconds_t>(pause * 2, 5000);
    }
  }
  pid_ = -1;
  end.max_rss_kb = usage.ru_maxrss;
  if (!killed) {
    if (WIFSIGNALED(status)) end.how = ChildEnd::Crashed, end.code = WTERMSIG(status);
    else end.how = ChildEnd::Exited, end.code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  }
  if (!output_path_.empty()) {
    std::ifstream in(output_path_, std::ios::binary);
    output_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    std::remove(output_path_.c_str());
    output_path_.clear();
  }
  return end;
}

void ChildProcess::kill_group() {
  if (group_ > 0) kill(-group_, SIGKILL);
}

std::string run_in_child(const std::function<std::string()>& f, double time_limit_s) {
  int fds[2];
  if (pipe(fds) != 0) return f();
  ChildProcess child = ChildProcess::fork([&] {
    close(fds[0]);
    std::string out;
    char status = 0;
    try {
      out = f();
    } catch (const std::exception& e) {
      out = e.what(), status = 1;
    } catch (...) {
      out = "an unknown exception", status = 1;
    }
    write_all(fds[1], &status, 1);
    write_all(fds[1], out.data(), out.size());
  });
  if (!child.started()) {
    close(fds[0]), close(fds[1]);
    return f();
  }
  close(fds[1]);
  // The child's answer, read until it closes the pipe (it ended) or the time is up.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(time_limit_s);
  std::string text;
  bool timed_out = false;
  char buf[65536];
  for (;;) {
    int wait_ms = -1;
    if (time_limit_s > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        timed_out = true;
        break;
      }
      wait_ms = int(left.count());
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;  // the deadline is checked above
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, size_t(n));
  }
  close(fds[0]);
  if (timed_out) throw ValueError("it did not finish in " + std::to_string(int(time_limit_s)) + " s");  // ~ChildProcess kills it
  const ChildEnd end = child.wait();
  if (end.how == ChildEnd::Crashed) throw ValueError("it crashed (signal " + std::to_string(end.code) + ")");
  if (end.how == ChildEnd::Exited && end.code != 0)
    throw ValueError("it ended the process (exit status " + std::to_string(end.code) + ")");
  if (text.empty()) throw ValueError("it ended without a result");
  if (text[0] != 0) throw ValueError("it failed: " + text.substr(1));
  return text.substr(1);
}

int run_program(const std::vector<std::string>& argv, std::string* output) {
  ChildProcess child = ChildProcess::spawn({argv, std::nullopt, false, true});
  const ChildEnd end = child.wait();
  if (output) *output = child.output();
  if (end.how == ChildEnd::NotStarted) return -1;
  return end.how == ChildEnd::Exited ? end.code : 128;
}

std::string find_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t from = 0; from <= dirs.size();) {
    size_t colon = dirs.find(':', from);
    if (colon == std::string::npos) colon = dirs.size();
    std::string candidate = dirs.substr(from, colon - from) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    from = colon + 1;
  }
  return "";
}

}  // namespace hjit
