// lib/src/oracle/fast_common.hpp — what the forward and the backward fast paths share (not
// installed, not API): Dot2 of one vector with many columns, four at a time.  Include only from
// files compiled with -ffp-contract=off (fast_kernel.cpp, fast_backward.cpp): the error-free
// transformations below need every product rounded on its own.
#pragma once

#include <cmath>
#include <cstddef>

namespace attncert::oracle::detail {

/// Dot2 (Ogita-Rump-Oishi) of x (d values) with the columns j in [jbegin, jend) of MT (d × n,
/// row-major: column j is MT[l·n + j]): s[j] + c[j] with P[j] = Σ_l |RN(x_l MT_lj)|, added to what
/// s, c, P hold (zeros for a fresh sum).  Error bound: proofs/P11-oracle.md step 1.
inline void dot2_columns(const double* x, const double* MT, std::size_t n, std::size_t d, std::size_t jbegin,
                         std::size_t jend, double* __restrict s, double* __restrict c, double* __restrict P) {
  for (std::size_t l = 0; l < d; ++l) {
    const double xl = x[l];
    const double* __restrict col = MT + l * n;
    for (std::size_t j = jbegin; j < jend; ++j) {
      const double p = xl * col[j];
      const double e = std::fma(xl, col[j], -p);
      const double sn = s[j] + p;
      const double bb = sn - s[j];
      const double sig = (s[j] - (sn - bb)) + (p - bb);
      s[j] = sn;
      c[j] = c[j] + (sig + e);
      P[j] = P[j] + std::fabs(p);
    }
  }
}

}  // namespace attncert::oracle::detail
