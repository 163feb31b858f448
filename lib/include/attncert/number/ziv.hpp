// attncert/number/ziv.hpp — the one escalation primitive of the library (MPFR's Ziv loop,
// CGAL's filter-then-exact): try a step at a precision; if it cannot decide, try again at the
// next precision of a schedule, up to a cap.  Every precision escalation in lib/ and checks/
// goes through `ziv_escalate`.  (The independent checker, lib/src/verify/, has its own loop on
// purpose: it includes nothing else of ours.)
//
// Tier: whatever the step's is.  The primitive adds no claim of its own: it returns the last
// step's value, whether that step decided, the precision it ran at, and how many steps ran.
// A result that is not decided at the cap is returned as such (`decided == false`), never as
// decided — the caller reports it UNDECIDED or escalates by other means.  Every step is preceded
// by check_deadline(): past the command's budget it throws time_limit_reached, after an
// interruption `interrupted`.
#pragma once

#include <algorithm>
#include <utility>

#include "attncert/deadline.hpp"

namespace attncert {

/// The precisions a Ziv loop tries: `start`, then doubling, clamped so that the last step
/// runs at exactly `cap` (start = 100, cap = 300: 100, 200, 300).  start > cap runs `start`
/// only (nothing is skipped silently: the caller's precondition is start <= cap).
struct precision_schedule {
  unsigned start = 64;
  unsigned cap = 4096;
  unsigned next(unsigned bits) const { return bits > cap / 2 ? cap : 2 * bits; }
  /// start, 2·start, 4·start, ... up to the largest of them <= cap (the cap itself is not
  /// tried unless it is start·2^k).  The provers of certify use this schedule because the
  /// independent checker (verify/) escalates over the same precisions: whatever the prover
  /// decided at some precision, the checker reaches too.
  static precision_schedule doubling_within(unsigned start, unsigned cap) {
    unsigned last = start;
    while (last <= cap / 2) last *= 2;
    return {start, last};
  }
};

/// What one step returns: a value and whether it decides the question.
template <class Value>
struct ziv_step {
  Value value;
  bool decided = false;
};
template <class Value>
ziv_step<Value> ziv_decided(Value v) {
  return {std::move(v), true};
}
template <class Value>
ziv_step<Value> ziv_more(Value v) {
  return {std::move(v), false};
}

/// What the loop returns: the last step's value, whether it decided, the precision of that
/// step (the deciding one when decided), and the counters.
template <class Value>
struct ziv_outcome {
  Value value{};
  bool decided = false;
  unsigned bits = 0;   ///< precision of the last step run
  unsigned steps = 0;  ///< steps run (1 = the first precision decided)
};

/// Runs `step(bits)` for bits = schedule.start, schedule.next(start), ... until a step
/// decides or the cap has been tried.  `step` is any callable unsigned -> ziv_step<V>; it
/// sets its own working precision (e.g. with a precision_guard) from `bits`.
template <class Step>
auto ziv_escalate(const precision_schedule& schedule, Step&& step) {
  using Value = decltype(step(0u).value);
  ziv_outcome<Value> out;
  for (unsigned bits = schedule.start;; bits = schedule.next(bits)) {
    check_deadline();  // before every step: the command's budget and interruption (deadline.hpp)
    ziv_step<Value> s = step(bits);
    ++out.steps;
    out.bits = bits;
    out.value = std::move(s.value);
    out.decided = s.decided;
    if (s.decided || bits >= schedule.cap) return out;
  }
}

}  // namespace attncert
