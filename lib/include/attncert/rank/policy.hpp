// attncert/rank/policy.hpp — named numerical-rank policies.
//
// A numerical rank is a *measurement*, not a rank: it is labelled by the format the matrix
// was formed in, the policy and its threshold.  ε below is the machine epsilon 2^(1-p) of
// the format the matrix was FORMED in (not of the SVD's working type), m × n its shape,
// σ₁ ≥ σ₂ ≥ … its singular values.
//
//   numpy          σ > σ₁ · max(m,n) · ε                       numpy.linalg.matrix_rank default
//   matlab         σ > max(m,n) · eps(σ₁)                      MATLAB rank(); eps(x) = spacing at x
//   torch[:R[:A]]  σ > max(atol, rtol · σ₁)                    torch.linalg.matrix_rank
//                  (rtol = max(m,n)·ε unless given, or 0 when only atol > 0 is given;
//                  R = "default" keeps the default rtol)
//   lapack[:R]     σ > rcond · σ₁, rcond = ε unless given       xGELSD / xGELSS with rcond
//   eigen          σ ≥ max(σ₁ · min(m,n) · ε, smallest normal)  Eigen JacobiSVD::rank()
//   absolute:τ     σ > τ
//   relative:τ     σ > τ · σ₁
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "attncert/number/format.hpp"

namespace attncert {

class rank_policy {
 public:
  enum class kind { numpy, matlab, torch, lapack, eigen, absolute, relative };

  /// Parse "numpy", "matlab", "torch", "torch:RTOL", "torch:RTOL:ATOL", "lapack",
  /// "lapack:RCOND", "eigen", "absolute:TAU", "relative:TAU".  Throws input_error.
  static rank_policy parse(const std::string& text);

  kind type() const { return type_; }
  /// Canonical name (round-trips through parse).
  std::string name() const;
  /// The rule as a formula, for reports.
  std::string formula() const;
  /// Does σ == threshold count toward the rank?  (Only eigen uses ≥.)
  bool inclusive() const { return type_ == kind::eigen; }

  /// The threshold for a matrix of shape m × n with largest singular value sigma1, formed in
  /// `formed`, evaluated in T (the singular values' type).
  template <class T>
  T threshold(const T& sigma1, long m, long n, const format_spec& formed) const {
    using std::ldexp;
    using std::frexp;
    const int p = static_cast<int>(formed.precision_bits());
    const T eps = ldexp(T(1), 1 - p);
    const T big = T(static_cast<int>(m > n ? m : n));
    const T small = T(static_cast<int>(m < n ? m : n));
    switch (type_) {
      case kind::numpy: return sigma1 * big * eps;
      case kind::matlab: {
        if (!(sigma1 > T(0))) return T(0);
        int e = 0;
        (void)frexp(sigma1, &e);  // sigma1 = f · 2^e, f in [0.5, 1): floor(log2 sigma1) = e - 1
        long q = static_cast<long>(e - 1);
        if (q < formed.min_normal_exponent()) q = formed.min_normal_exponent();
        return big * ldexp(T(1), static_cast<int>(q - (p - 1)));
      }
      case kind::torch: {
        // PyTorch: rtol defaults to max(m,n)·ε, but to 0 when atol > 0 is given alone.
        const T rtol = rtol_ < 0 ? (atol_ > 0 ? T(0) : T(big * eps)) : T(rtol_);
        const T r = rtol * sigma1;
        const T a(atol_);
        return r < a ? a : r;
      }
      case kind::lapack: return (rcond_ < 0 ? eps : T(rcond_)) * sigma1;
      case kind::eigen: {
        const T t = sigma1 * small * eps;
        const T tiny = ldexp(T(1), static_cast<int>(formed.min_normal_exponent()));
        return t < tiny ? tiny : t;
      }
      case kind::absolute: return T(tau_);
      default: return T(tau_) * sigma1;
    }
  }

  /// Number of singular values above the threshold (≥ for eigen).  `sigma` must be sorted in
  /// decreasing order (as returned by approx_singular_values); NaN singular values are not
  /// counted.  Returns 0 for an empty list.
  template <class T>
  std::size_t rank(const std::vector<T>& sigma, long m, long n, const format_spec& formed) const {
    if (sigma.empty()) return 0;
    const T t = threshold(sigma[0], m, n, formed);
    std::size_t r = 0;
    for (const T& s : sigma)
      if (inclusive() ? s >= t : s > t) ++r;
    return r;
  }

  /// For the policies whose threshold is max(alpha·σ₁, beta) with a strict comparison (numpy,
  /// torch, lapack, absolute, relative): sets alpha, beta (exact binary64 numbers, as the
  /// threshold above uses them) and returns true; false for matlab and eigen.
  bool linear_threshold(long m, long n, const format_spec& formed, double& alpha, double& beta) const {
    const int p = static_cast<int>(formed.precision_bits());
    const double eps = std::ldexp(1.0, 1 - p);
    const double big = static_cast<double>(m > n ? m : n);
    switch (type_) {
      case kind::numpy: alpha = big * eps; beta = 0; return true;
      case kind::torch: alpha = rtol_ < 0 ? (atol_ > 0 ? 0.0 : big * eps) : rtol_; beta = atol_; return true;
      case kind::lapack: alpha = rcond_ < 0 ? eps : rcond_; beta = 0; return true;
      case kind::absolute: alpha = 0; beta = tau_; return true;
      case kind::relative: alpha = tau_; beta = 0; return true;
      default: return false;
    }
  }

 private:
  kind type_ = kind::numpy;
  double rtol_ = -1, atol_ = 0, rcond_ = -1, tau_ = 0;
};

/// Parse a comma-separated list of policies; duplicates are rejected.
std::vector<rank_policy> parse_policies(const std::string& list);

}  // namespace attncert
