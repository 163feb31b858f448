// attncert/deadline.hpp — a wall-clock budget for long exact computations (certify's
// --max-seconds).  One thread-local deadline, set by an RAII scope and polled by the exact
// kernels (polynomial sign evaluations, root refinement, minor enumeration); when it has
// passed, `check_deadline()` throws `time_limit_reached`, which the caller turns into an
// UNDECIDED verdict with the reason.  Without a scope there is no limit.
//
// The same polls honour an interruption: request_interrupt() (async-signal-safe, called by
// the CLI's SIGINT/SIGTERM handler) makes the next check_deadline() or check_interrupt() on
// any thread throw `interrupted` (error.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>

#include "attncert/error.hpp"

namespace attncert {

/// The computation ran past its wall-clock budget (not an error in the input).
class time_limit_reached : public std::runtime_error {
 public:
  explicit time_limit_reached(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
struct deadline_state {
  bool active = false;
  std::chrono::steady_clock::time_point at{};
  double seconds = 0;
};
inline deadline_state& current_deadline() {
  static thread_local deadline_state s;
  return s;
}
}  // namespace detail

/// Sets a deadline `seconds` from now for this thread (seconds <= 0: none) and restores the
/// previous one when it ends.  Nested scopes keep the earlier of the two deadlines.
class deadline_scope {
 public:
  explicit deadline_scope(double seconds) : saved_(detail::current_deadline()) {
    if (seconds <= 0) return;
    auto& s = detail::current_deadline();
    const auto at = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    if (!s.active || at < s.at) s = {true, at, seconds};
  }
  deadline_scope(const deadline_scope&) = delete;
  deadline_scope& operator=(const deadline_scope&) = delete;
  ~deadline_scope() { detail::current_deadline() = saved_; }

 private:
  detail::deadline_state saved_;
};

namespace detail {
inline std::atomic<bool>& interrupt_flag() {
  static std::atomic<bool> flag{false};
  static_assert(std::atomic<bool>::is_always_lock_free, "the flag is set from a signal handler");
  return flag;
}
}  // namespace detail

/// Asks every polling computation to stop.  Async-signal-safe (a lock-free atomic store).
inline void request_interrupt() noexcept { detail::interrupt_flag().store(true, std::memory_order_relaxed); }

/// True once request_interrupt() was called.
inline bool interrupt_requested() noexcept { return detail::interrupt_flag().load(std::memory_order_relaxed); }

/// Throws `interrupted` once request_interrupt() was called.
inline void check_interrupt() {
  if (interrupt_requested()) throw interrupted();
}

/// Throws `interrupted` after request_interrupt(), time_limit_reached when this thread's
/// deadline has passed.
inline void check_deadline() {
  check_interrupt();
  const auto& s = detail::current_deadline();
  if (s.active && std::chrono::steady_clock::now() > s.at)
    throw time_limit_reached("the time limit of " + std::to_string(static_cast<long long>(s.seconds)) + " s was reached");
}

}  // namespace attncert
