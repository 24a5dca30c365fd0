#include "support/child_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>

#include <hjit/error.h>

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

}  // namespace

std::string run_in_child(const std::function<std::string()>& f, double time_limit_s) {
  int fds[2];
  if (pipe(fds) != 0) return f();
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]), close(fds[1]);
    return f();
  }
  if (pid == 0) {
    close(fds[0]);
    // A crash here is the caller's to report: not to the application's crash handlers (inherited
    // with the process), and with no core file.
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP}) signal(sig, SIG_DFL);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
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
    _exit(0);
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
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) throw ValueError("it did not finish in " + std::to_string(int(time_limit_s)) + " s");
  if (WIFSIGNALED(status)) throw ValueError("it crashed (signal " + std::to_string(WTERMSIG(status)) + ")");
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    throw ValueError("it ended the process (exit status " + std::to_string(WEXITSTATUS(status)) + ")");
  if (text.empty()) throw ValueError("it ended without a result");
  if (text[0] != 0) throw ValueError("it failed: " + text.substr(1));
  return text.substr(1);
}

}  // namespace hjit
