// attncert/linalg/matrix.hpp — dense matrices over any attncert number type.
#pragma once

#include <Eigen/Core>
#include <string>

#include "attncert/deadline.hpp"
#include "attncert/error.hpp"
#include "attncert/number/eigen_support.hpp"
#include "attncert/number/format.hpp"
#include "attncert/number/traits.hpp"

namespace attncert {

template <class T>
using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
template <class T>
using vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;

/// Convert a matrix entry by entry with number_traits<To>::from_double (exact into
/// rationals and intervals; correctly rounded into approx types).
template <class To>
matrix<To> from_double_matrix(const matrix<double>& m) {
  matrix<To> r(m.rows(), m.cols());
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) r(i, j) = number_traits<To>::from_double(m(i, j));
  return r;
}

namespace detail {
template <class T>
struct emulated_parameters;
template <int P, int Emin, int Emax>
struct emulated_parameters<emulated_float<P, Emin, Emax>> {
  static constexpr int precision = P, emin = Emin, emax = Emax;
};
}  // namespace detail

/// Convert exact rationals to T: correctly rounded (one rounding, subnormals included) for
/// mpfr_float, float, double and the emulated formats; enclosing for mpfi_float.
template <class To>
To from_rational(const mpq_rational& q) {
  if constexpr (std::is_same_v<To, mpq_rational>) return q;
  else if constexpr (std::is_same_v<To, mpfr_float>) {
    mpfr_float r;
    mpfr_set_q(r.backend().data(), q.backend().data(), MPFR_RNDN);
    return r;
  } else if constexpr (std::is_same_v<To, mpfi_float>) {
    mpfi_float r;
    mpfi_set_q(r.backend().data(), q.backend().data());
    return r;
  } else if constexpr (std::is_same_v<To, double>) {
    return nearest_binary64(q.backend().data());
  } else if constexpr (std::is_same_v<To, float>) {
    return static_cast<float>(nearest_in_format(q.backend().data(), 24, -126, 127));  // exact conversion
  } else {
    using E = detail::emulated_parameters<To>;
    return To(nearest_in_format(q.backend().data(), E::precision, E::emin, E::emax));  // exact conversion
  }
}

template <class To>
matrix<To> from_rational_matrix(const matrix<mpq_rational>& m) {
  matrix<To> r(m.rows(), m.cols());
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) r(i, j) = from_rational<To>(m(i, j));
  return r;
}

/// Matrix product written out (no Eigen kernel): safe for intervals and rationals, and the
/// summation order is fixed (k ascending), so results are reproducible across types.
/// Precondition: a.cols() == b.rows() (else input_error).
template <class T>
matrix<T> multiply(const matrix<T>& a, const matrix<T>& b) {
  if (a.cols() != b.rows())
    throw input_error("shape mismatch in product: " + std::to_string(a.rows()) + "x" + std::to_string(a.cols()) +
                      " times " + std::to_string(b.rows()) + "x" + std::to_string(b.cols()));
  // Each c_ij is 0 + a_i0 b_0j + a_i1 b_1j + … added in this order (the recursive sum that defines
  // a product formed in T); the loops run column by column, down the rows, for the cache.
  matrix<T> c(a.rows(), b.cols());
  for (Eigen::Index j = 0; j < b.cols(); ++j) {
    check_deadline();  // one poll per column: the command's budget and interruption (deadline.hpp)
    for (Eigen::Index i = 0; i < a.rows(); ++i) c(i, j) = T(0);
    for (Eigen::Index k = 0; k < a.cols(); ++k) {
      const T& bkj = b(k, j);
      for (Eigen::Index i = 0; i < a.rows(); ++i) c(i, j) += a(i, k) * bkj;
    }
  }
  return c;
}

/// Transpose (exact in every tier).
template <class T>
matrix<T> transpose(const matrix<T>& a) {
  matrix<T> t(a.cols(), a.rows());
  for (Eigen::Index i = 0; i < a.rows(); ++i)
    for (Eigen::Index j = 0; j < a.cols(); ++j) t(j, i) = a(i, j);
  return t;
}

}  // namespace attncert
