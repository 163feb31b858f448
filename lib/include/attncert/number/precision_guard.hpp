// attncert/number/precision_guard.hpp — the one place that sets MPFR/MPFI precision.
//
// Boost.Multiprecision 1.74 keeps the default precision of variable-precision types as
// thread-local hidden state, expressed in *decimal digits*; a value created with d digits
// gets floor(1000 d / 301) + 1 or + 2 bits.  attncert speaks in bits: the guard picks the
// smallest digit count whose bit precision is >= the request, so the working precision is
// at least what was asked for (e.g. 256 requested -> 257 used; `bits()` reports the bits
// actually used, and reports print both).  The previous precision is restored on
// destruction (tested in tests/number/precision_guard.cpp).
#pragma once

#include <boost/multiprecision/detail/digits.hpp>
#include <stdexcept>

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

/// RAII guard: sets the default precision of mpfr_float and mpfi_float to at least `bits`
/// bits for its lifetime, and restores both previous values when destroyed.
/// Precondition: min_precision_bits <= bits <= max_precision_bits (else std::invalid_argument).
class precision_guard {
 public:
  explicit precision_guard(unsigned bits)
      : old_mpfr_(mpfr_float::default_precision()), old_mpfi_(mpfi_float::default_precision()) {
    if (bits < min_precision_bits || bits > max_precision_bits)
      throw std::invalid_argument("precision " + std::to_string(bits) + " bits is outside [" +
                                  std::to_string(min_precision_bits) + ", " +
                                  std::to_string(max_precision_bits) + "]");
    const unsigned d = digits10_for_bits(bits);
    mpfr_float::default_precision(d);
    mpfi_float::default_precision(d);
    bits_ = working_bits_for(bits);
  }
  ~precision_guard() {
    mpfr_float::default_precision(old_mpfr_);
    mpfi_float::default_precision(old_mpfi_);
  }
  precision_guard(const precision_guard&) = delete;
  precision_guard& operator=(const precision_guard&) = delete;

  /// Precision in bits that new mpfr_float / mpfi_float values get while the guard lives.
  unsigned bits() const { return bits_; }

 private:
  unsigned old_mpfr_, old_mpfi_;
  unsigned bits_ = 0;
};

/// Bits of the current default precision of mpfr_float (what a new value gets).
inline unsigned current_mpfr_bits() {
  return static_cast<unsigned>(
      boost::multiprecision::detail::digits10_2_2(mpfr_float::default_precision()));
}

}  // namespace attncert
