// attncert/number/outward.hpp — outward rounding of binary64 bounds computed in round to
// nearest: after one correctly rounded operation returned r for the exact y, y ≤ next_up(r) and
// y ≥ next_down(r) (the error is at most half an ulp of r's binade or of the binade below).  A
// bound evaluated with next_up after every operation is an upper bound, whatever the rounding
// of each step (subnormal results included).  Tier: enclosure (of the operations it wraps).
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace attncert {

/// The next binary64 number above x (x itself for +∞ and NaN; −0 and +0 go to 2⁻¹⁰⁷⁴).
inline double next_up(double x) noexcept {
  if (!(x < std::numeric_limits<double>::infinity())) return x;  // +inf, NaN
  if (x == 0) return 0x1p-1074;
  const auto b = std::bit_cast<std::uint64_t>(x);
  return std::bit_cast<double>(x > 0 ? b + 1 : b - 1);
}
/// The next binary64 number below x.
inline double next_down(double x) noexcept { return -next_up(-x); }

/// γ_k = k·u/(1 − k·u) (u = 2⁻⁵³) rounded up: the a priori bound of a sum of k products
/// evaluated in any order, with or without FMA (Higham, Accuracy and Stability, Lemma 3.1 and
/// §3.1).  Precondition: k·u < 1/2.
inline double gamma_up(std::size_t k) noexcept {
  const double ku = next_up(static_cast<double>(k) * 0x1p-53);
  return next_up(ku / next_down(1.0 - ku));
}

}  // namespace attncert
