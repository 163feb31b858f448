// attncert/number/dot2_loop.hpp — the Dot2 loop (Ogita–Rump–Oishi) across many columns, shared by
// the oracle's fast paths (oracle/fast_common.hpp) and the binary64 scores of the rank analysis
// (attention/binary64_enclosure.cpp).  Internal to the library, not API (as vector_dd.hpp).
// Include only from files compiled with -ffp-contract=off: the error-free transformations need
// every product rounded on its own.  The function has internal linkage (the anonymous namespace):
// each unit keeps its own copy compiled for its own instruction set (see vector_dd.hpp).
#pragma once

#include <cmath>
#include <cstddef>

namespace attncert::dot2_detail {

namespace {

/// Dot2 of x (d values) with the columns j in [jbegin, jend) of MT (d × n, row-major: column j is
/// MT[l·n + j]; a column-major n × d matrix's data is such an MT): s[j] + c[j] with
/// P[j] = Σ_l |RN(x_l MT_lj)|, added to what s, c, P hold (zeros for a fresh sum).  The compiler
/// vectorizes across j; each lane performs the scalar loop's IEEE operations in the same order.
/// Error bound (proofs/P11-oracle.md step 1): |x·MT_j − (s + c)| ≤ d(d + 1)u²P̂(1 + 2⁻²⁶) + d·2⁻¹⁰⁷⁰
/// for d ≤ 2²⁰ when nothing overflows.
inline void dot2_columns_loop(const double* x, const double* MT, std::size_t n, std::size_t d, std::size_t jbegin,
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

}  // namespace

}  // namespace attncert::dot2_detail
