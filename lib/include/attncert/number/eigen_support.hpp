// attncert/number/eigen_support.hpp — Eigen::NumTraits for attncert's number types.
//
// Boost 1.74's boost/multiprecision/eigen.hpp lacks NumTraits::infinity/quiet_NaN (which
// Eigen 3.4's SVD needs) and returns numeric_limits::min() from lowest(); we do not include
// it and give complete full specialisations here instead.  Intervals (mpfi_float) may be
// stored in Eigen matrices and multiplied, but never passed to Eigen code that pivots or
// sorts (LU, QR, SVD): their comparisons terminate on overlap.
#pragma once

#include <Eigen/Core>
#include <limits>

#include "attncert/number/emulated.hpp"
#include "attncert/number/types.hpp"

namespace attncert::detail {
template <class T, bool Integer = false>
struct mp_num_traits_base {
  using Real = T;
  using NonInteger = T;
  using Literal = T;
  using Nested = T;
  enum {
    IsComplex = 0,
    IsInteger = 0,
    IsSigned = 1,
    RequireInitialization = 1,
    ReadCost = 1,
    AddCost = 4,
    MulCost = 8
  };
};
// The members Eigen 3.4 needs from a variable-precision MPFR/MPFI type (epsilon and friends
// follow the current default precision, set by precision_guard).
template <class T>
struct variable_precision_num_traits : mp_num_traits_base<T> {
  static T epsilon() { return std::numeric_limits<T>::epsilon(); }
  static T dummy_precision() { return 1000 * epsilon(); }
  static T highest() { return (std::numeric_limits<T>::max)(); }
  static T lowest() { return std::numeric_limits<T>::lowest(); }
  static T infinity() { return std::numeric_limits<T>::infinity(); }
  static T quiet_NaN() { return std::numeric_limits<T>::quiet_NaN(); }
  static int digits10() { return static_cast<int>(T::default_precision()); }
  static int digits() { return std::numeric_limits<T>::digits; }
};
}  // namespace attncert::detail

namespace Eigen {

template <>
struct NumTraits<attncert::mpfr_float> : attncert::detail::variable_precision_num_traits<attncert::mpfr_float> {};

template <>
struct NumTraits<attncert::mpfi_float> : attncert::detail::variable_precision_num_traits<attncert::mpfi_float> {};

template <>
struct NumTraits<attncert::mpq_rational> : attncert::detail::mp_num_traits_base<attncert::mpq_rational> {
  using T = attncert::mpq_rational;
  // Exact arithmetic: there is no rounding, so epsilon is 0 (never rely on Eigen defaults
  // that multiply it: every attncert threshold is explicit).
  static T epsilon() { return T(0); }
  static T dummy_precision() { return T(0); }
  static T highest() { return T(0); }
  static T lowest() { return T(0); }
  static int digits10() { return 0; }
  static int digits() { return 0; }
};

template <int P, int EMIN, int EMAX>
struct NumTraits<attncert::emulated_float<P, EMIN, EMAX>>
    : GenericNumTraits<attncert::emulated_float<P, EMIN, EMAX>> {
  using T = attncert::emulated_float<P, EMIN, EMAX>;
  using Real = T;
  using NonInteger = T;
  using Literal = T;
  using Nested = T;
  enum { IsComplex = 0, IsInteger = 0, IsSigned = 1, RequireInitialization = 0, ReadCost = 1, AddCost = 2, MulCost = 2 };
  static T epsilon() { return std::numeric_limits<T>::epsilon(); }
  static T dummy_precision() { return T(100) * epsilon(); }
  static T highest() { return (std::numeric_limits<T>::max)(); }
  static T lowest() { return std::numeric_limits<T>::lowest(); }
  static T infinity() { return std::numeric_limits<T>::infinity(); }
  static T quiet_NaN() { return std::numeric_limits<T>::quiet_NaN(); }
  static int digits10() { return std::numeric_limits<T>::digits10; }
  static int digits() { return P; }
};

}  // namespace Eigen
