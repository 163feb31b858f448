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
#include <limits>
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

/// The budget in force on this thread (to hand to worker threads: deadline_scope(state)).
inline detail::deadline_state current_budget() { return detail::current_deadline(); }

/// Sets a deadline `seconds` from now for this thread (seconds <= 0: none) and restores the
/// previous one when it ends.  Nested scopes keep the earlier of the two deadlines.  This is the
/// one budget of a command: every stage of it polls check_deadline() / deadline_passed(), and a
/// worker thread adopts its parent's budget with deadline_scope(current_budget()) taken on the
/// parent.
class deadline_scope {
 public:
  explicit deadline_scope(double seconds) : saved_(detail::current_deadline()) {
    if (seconds <= 0) return;
    auto& s = detail::current_deadline();
    const auto at = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    if (!s.active || at < s.at) s = {true, at, seconds};
  }
  explicit deadline_scope(const detail::deadline_state& parent) : saved_(detail::current_deadline()) {
    auto& s = detail::current_deadline();
    if (parent.active && (!s.active || parent.at < s.at)) s = parent;
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

/// Forgets an interruption (the Python bindings: one call's Ctrl-C must not stop the next call).
inline void clear_interrupt() noexcept { detail::interrupt_flag().store(false, std::memory_order_relaxed); }

/// True when this thread's deadline has passed (no exception: for loops that stop and report
/// what they did not compute).
inline bool deadline_passed() {
  const auto& s = detail::current_deadline();
  return s.active && std::chrono::steady_clock::now() > s.at;
}

/// Seconds of this thread's budget left (+inf without a deadline; 0 once passed).
inline double seconds_left() {
  const auto& s = detail::current_deadline();
  if (!s.active) return std::numeric_limits<double>::infinity();
  const double left = std::chrono::duration<double>(s.at - std::chrono::steady_clock::now()).count();
  return left > 0 ? left : 0.0;
}

/// Throws `interrupted` once request_interrupt() was called.
inline void check_interrupt() {
  if (interrupt_requested()) throw interrupted();
}

/// Throws `interrupted` after request_interrupt(), time_limit_reached when this thread's
/// deadline has passed.
inline void check_deadline() {
  check_interrupt();
  const auto& s = detail::current_deadline();
  if (s.active && std::chrono::steady_clock::now() > s.at) {
    std::string t = std::to_string(s.seconds);  // "0.500000" -> "0.5", "2.000000" -> "2"
    t.erase(t.find_last_not_of('0') + 1);
    if (!t.empty() && t.back() == '.') t.pop_back();
    throw time_limit_reached("the time limit of " + t + " s was reached");
  }
}

}  // namespace attncert
