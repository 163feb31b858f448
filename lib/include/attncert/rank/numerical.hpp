// attncert/rank/numerical.hpp — the one numerical-rank measurement of the library: the
// numerical rank of a matrix formed in a format, under named policies (rank/policy.hpp), and
// whether it diverges from a certified exact rank [lo, hi].  `attncert rank`, `attncert
// drift` and every check measure through `approx_numerical_rank`; nothing else runs an SVD
// for a numerical rank.
//
// Tier: approx.  A numerical rank is a labelled measurement (format + policy + value), not a
// rank (docs/architecture.md, "A rank is an interval").
//
// Where the SVD runs (`svd_scalar_t`, written once here):
//   binary32, binary64, mpfrN  in the format itself (mpfrN at the caller's precision);
//   binary16, bfloat16         in binary32, on the exactly converted matrix — as NumPy and
//                              PyTorch upcast 16-bit matrices before an SVD; the singular
//                              values and thresholds stay binary32 (not rounded back);
//   mpfiN                      in MPFR at the current precision, on the interval midpoints.
// The policies' ε is that of the format the matrix was FORMED in, never of the SVD's type.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "attncert/linalg/spectra.hpp"
#include "attncert/number/format.hpp"
#include "attncert/number/interval.hpp"
#include "attncert/rank/policy.hpp"

namespace attncert {

namespace detail {
template <class T>
struct svd_scalar {
  using type = T;
};
template <>
struct svd_scalar<binary16> {
  using type = float;
};
template <>
struct svd_scalar<bfloat16> {
  using type = float;
};
template <>
struct svd_scalar<mpfi_float> {
  using type = mpfr_float;
};
}  // namespace detail

/// The number type the SVD of a matrix formed in T runs in (see the header comment).
template <class T>
using svd_scalar_t = typename detail::svd_scalar<T>::type;

/// Short label of the SVD's arithmetic for a matrix formed in `formed`: "binary32" for the
/// 16-bit formats, "mpfrN (midpoints)" for mpfiN, else the format's name.
std::string svd_label(const format_spec& formed);
/// The same, as a sentence for report settings: "binary32 (as NumPy/PyTorch upcast 16-bit
/// matrices)", "mpfr on interval midpoints", or the format's name.
std::string svd_description(const format_spec& formed);

/// The divergence rule, written once: a numerical rank diverges when it lies outside the
/// certified exact rank [lo, hi] (a measurement, not a failure).
inline bool numerical_rank_diverges(std::size_t rank, std::size_t lo, std::size_t hi) { return rank < lo || rank > hi; }

/// Singular values of M, decreasing, computed in svd_scalar_t<T> (the 16-bit upcast and the
/// interval midpoints above).  Tier: approx.  Empty for an empty matrix.
template <class T>
std::vector<svd_scalar_t<T>> approx_measured_singular_values(const matrix<T>& M) {
  using S = svd_scalar_t<T>;
  static_assert(tier_of<S> == tier::approx, "the SVD of a numerical rank runs in an approx type");
  if constexpr (std::is_same_v<S, T>) {
    return approx_singular_values(M);
  } else {
    matrix<S> C(M.rows(), M.cols());
    for (Eigen::Index i = 0; i < M.rows(); ++i)
      for (Eigen::Index j = 0; j < M.cols(); ++j) {
        if constexpr (std::is_same_v<T, mpfi_float>) C(i, j) = approx_mid(M(i, j));
        else C(i, j) = static_cast<S>(M(i, j));  // exact: every 16-bit number is a binary32 number
      }
    return approx_singular_values(C);
  }
}

/// One matrix's numerical ranks under every policy, in request order.
template <class S>
struct numerical_rank_measurement {
  std::vector<S> sigma;                ///< singular values in the SVD's type, decreasing
  std::vector<std::size_t> ranks;      ///< per policy
  std::vector<S> thresholds;           ///< per policy; 0 for an empty matrix
  std::vector<bool> diverges;          ///< per policy: rank outside [exact_lo, exact_hi]
  bool any_diverges = false;
};

/// The numerical rank of M (formed in `formed`, of number type T) under each policy, and the
/// divergence of each from the exact rank [exact_lo, exact_hi].  Tier: approx.
/// Precondition: M's entries are finite (the caller reports overflow before measuring).
template <class T>
numerical_rank_measurement<svd_scalar_t<T>> approx_numerical_rank(const matrix<T>& M, const format_spec& formed,
                                                                  const std::vector<rank_policy>& policies,
                                                                  std::size_t exact_lo, std::size_t exact_hi) {
  using S = svd_scalar_t<T>;
  numerical_rank_measurement<S> out;
  out.sigma = approx_measured_singular_values(M);
  for (const auto& p : policies) {
    const std::size_t r = p.rank(out.sigma, M.rows(), M.cols(), formed);
    const bool div = numerical_rank_diverges(r, exact_lo, exact_hi);
    out.ranks.push_back(r);
    out.thresholds.push_back(out.sigma.empty() ? S(0) : p.threshold(out.sigma[0], M.rows(), M.cols(), formed));
    out.diverges.push_back(div);
    out.any_diverges = out.any_diverges || div;
  }
  return out;
}

}  // namespace attncert
