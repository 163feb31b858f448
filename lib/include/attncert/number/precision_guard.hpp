// attncert/number/precision_guard.hpp — the one place that sets MPFR/MPFI precision.
//
// Boost.Multiprecision 1.74 keeps the default precision of variable-precision types as
// hidden state, expressed in *decimal digits*; a value created with d digits
// gets floor(1000 d / 301) + 1 or + 2 bits.  attncert speaks in bits: the guard picks the
// smallest digit count whose bit precision is >= the request, so the working precision is
// at least what was asked for (e.g. 256 requested -> 257 used; `bits()` reports the bits
// actually used, and reports print both).  The previous precision is restored on
// destruction (tested in tests/number/precision_guard.cpp).
//
// That state is ONE process-wide value in Boost 1.74 (a plain static in mpfr.hpp and mpfi.hpp,
// not thread-local), so two threads that each open a guard would change each other's working
// precision: values created afterwards get the other thread's bits, and a bound that counts
// on 2^-p rounding could be too small.  Every guard therefore holds a process-wide recursive
// lock for its lifetime: guards of different threads run one after the other (nested guards
// of one thread nest as before).  Inside parallel_for (number/parallel.hpp) the caller holds
// the lock for its workers, which share its precision: a guard on a worker must ask for that
// same precision (then it changes nothing) or it throws std::logic_error.  A thread that waits
// for the lock calls the wait hook if one is installed (the Python binding's releases the GIL
// while it waits, so that a thread holding the lock can run a Python callback).
#pragma once

#include <boost/multiprecision/detail/digits.hpp>
#include <atomic>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

#include "attncert/number/types.hpp"

namespace attncert {

/// Smallest Boost digits10 setting whose MPFR precision in bits is >= `bits`.
inline unsigned digits10_for_bits(unsigned bits) {
  unsigned d = 1;
  while (boost::multiprecision::detail::digits10_2_2(d) < bits) ++d;
  return d;
}

/// The MPFR precision in bits that a request of `bits` actually obtains.
inline unsigned working_bits_for(unsigned bits) {
  return static_cast<unsigned>(boost::multiprecision::detail::digits10_2_2(digits10_for_bits(bits)));
}

/// Smallest precision a run-time format may request; below it mpfr/mpfi formats are
/// rejected as "precision too low" (binary64 already has 53 bits).
inline constexpr unsigned min_precision_bits = 24;
/// Largest precision accepted (the escalation cap of later issues).
inline constexpr unsigned max_precision_bits = 1u << 20;

namespace detail {

/// The lock every precision_guard holds (a pointer, so that a forked child can start afresh).
inline std::recursive_mutex*& precision_mutex() {
  static std::recursive_mutex* m = new std::recursive_mutex;  // never destroyed: guards may outlive statics
  return m;
}

/// True on parallel_for's worker threads, whose caller holds the lock for them.
inline thread_local bool precision_inherited = false;

/// How a thread waits for the lock when another thread holds it (nullptr: a plain lock).
using precision_wait_fn = void (*)(std::recursive_mutex&);
inline std::atomic<precision_wait_fn>& precision_wait_hook() {
  static std::atomic<precision_wait_fn> hook{nullptr};
  return hook;
}

}  // namespace detail

/// Installs how a thread waits for another thread's precision guards to end (nullptr: a plain
/// lock).  The hook must end with the mutex locked by the calling thread.
inline void set_precision_wait_hook(detail::precision_wait_fn f) { detail::precision_wait_hook().store(f); }

/// In the child of fork(): a new, unlocked lock (a thread of the parent may have held the old
/// one; it does not exist in the child).  Call before the child opens any guard.
inline void reset_precision_lock_after_fork() { detail::precision_mutex() = new std::recursive_mutex; }

/// RAII: holds the process-wide precision lock (waiting through the hook), except on a
/// parallel_for worker, whose caller holds it.  precision_guard and parallel_for use it.
class precision_lock {
 public:
  precision_lock() {
    if (detail::precision_inherited) return;
    lock_ = detail::precision_mutex();
    if (lock_->try_lock()) return;
    if (const detail::precision_wait_fn wait = detail::precision_wait_hook().load()) wait(*lock_);
    else lock_->lock();
  }
  ~precision_lock() {
    if (lock_) lock_->unlock();
  }
  precision_lock(const precision_lock&) = delete;
  precision_lock& operator=(const precision_lock&) = delete;

 private:
  std::recursive_mutex* lock_ = nullptr;
};

/// RAII guard: sets the default precision of mpfr_float and mpfi_float to at least `bits`
/// bits for its lifetime, and restores both previous values when destroyed; holds the
/// process-wide precision lock meanwhile (see the top of this file).
/// Precondition: min_precision_bits <= bits <= max_precision_bits (else std::invalid_argument).
/// On a parallel_for worker, `bits` must give the caller's precision (else std::logic_error).
class precision_guard {
 public:
  explicit precision_guard(unsigned bits) {
    if (bits < min_precision_bits || bits > max_precision_bits)
      throw std::invalid_argument("precision " + std::to_string(bits) + " bits is outside [" +
                                  std::to_string(min_precision_bits) + ", " +
                                  std::to_string(max_precision_bits) + "]");
    const unsigned d = digits10_for_bits(bits);
    bits_ = working_bits_for(bits);
    if (detail::precision_inherited) {
      if (mpfr_float::default_precision() != d || mpfi_float::default_precision() != d)
        throw std::logic_error("precision_guard(" + std::to_string(bits) +
                               ") inside parallel_for: a worker cannot change the process-wide precision");
      return;  // nothing to set, nothing to restore
    }
    lock_.emplace();
    old_mpfr_ = mpfr_float::default_precision();
    old_mpfi_ = mpfi_float::default_precision();
    mpfr_float::default_precision(d);
    mpfi_float::default_precision(d);
  }
  ~precision_guard() {
    if (!lock_) return;
    mpfr_float::default_precision(old_mpfr_);
    mpfi_float::default_precision(old_mpfi_);
  }  // then lock_ releases the lock
  precision_guard(const precision_guard&) = delete;
  precision_guard& operator=(const precision_guard&) = delete;

  /// Precision in bits that new mpfr_float / mpfi_float values get while the guard lives.
  unsigned bits() const { return bits_; }

 private:
  unsigned old_mpfr_ = 0, old_mpfi_ = 0;
  unsigned bits_ = 0;
  std::optional<precision_lock> lock_;  // declared last: released after the precision is restored
};

/// Bits of the current default precision of mpfr_float (what a new value gets).
inline unsigned current_mpfr_bits() {
  return static_cast<unsigned>(
      boost::multiprecision::detail::digits10_2_2(mpfr_float::default_precision()));
}

}  // namespace attncert
