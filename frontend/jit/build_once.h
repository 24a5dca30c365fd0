// Something built once by the first caller that needs it while later callers wait for it: a
// version of a jitted function is traced and compiled by one thread, and every other thread that
// calls with the same signature meanwhile waits for that build instead of starting its own.
#pragma once
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>

namespace hjit::detail {

class BuildOnce {
 public:
  // Waits for the builder; rethrows the error it failed with. Once built, no lock is taken (a
  // cached call's hot path).
  void wait() const {
    if (!ready_.load(std::memory_order_acquire)) {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return ready_.load(std::memory_order_relaxed); });
    }
    if (error_) std::rethrow_exception(error_);
  }
  // Waits for the builder; whether it succeeded.
  bool succeeded() const {
    try {
      wait();
      return true;
    } catch (...) {
      return false;
    }
  }
  // Built without error, by now (does not wait).
  bool built() const { return ready_.load(std::memory_order_acquire) && !error_; }
  // The builder: done, or failed with `error` (rethrown to every waiter). Called once.
  void done() { publish(nullptr); }
  void failed(std::exception_ptr error) { publish(std::move(error)); }

 private:
  void publish(std::exception_ptr error) {
    {
      std::lock_guard lock(mu_);
      error_ = std::move(error);
      ready_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
  }
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::atomic<bool> ready_{false};
  std::exception_ptr error_;  // written before ready_ is set, read after it is seen set
};

}  // namespace hjit::detail
