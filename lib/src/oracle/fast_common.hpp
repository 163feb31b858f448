// lib/src/oracle/fast_common.hpp — what the forward and the backward fast paths share (not
// installed, not API): the two Dot2 loops that dominate them — one vector with many columns (the
// scores q·k_j, the backward's dO·v_j) and many weighted rows (the value sums Σ_j w_j v_j) — and
// their dispatch between the AVX2 build of this header and its AVX-512F build
// (fast_sums_avx512.cpp).  Include only from files compiled with -ffp-contract=off
// (fast_kernel.cpp, fast_backward.cpp, fast_sums_avx512.cpp): the error-free transformations below
// need every product rounded on its own.
//
// The loops are plain C++ that the compiler vectorizes across columns j (dot2_columns) or value
// components k (dot2_weighted_rows): a lane performs exactly the scalar loop's IEEE operations in
// the same order (no reassociation without -ffast-math; no contraction), so the AVX2 build, the
// AVX-512F unit and a scalar build give the same bits.  On an AMD Zen 5 (512-bit data paths) the
// AVX-512F unit took the oracle from 85 to 66 ms for one head at n = 1024 (README).  The loop bodies
// have internal linkage (the anonymous namespace): each unit keeps its own copy compiled for its
// own instruction set, and the linker cannot pick the AVX-512F copy for a processor without it
// (see attncert/number/vector_dd.hpp).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "attncert/number/dot2_loop.hpp"

namespace attncert::oracle::detail {

namespace {

/// Multiplying a bound evaluated with at most 256 round-to-nearest operations on nonnegative
/// terms by this factor makes it an upper bound of the exact expression ((1 + u)^256 < 1 + 2^-44),
/// as in P11.
constexpr double round_up_factor = 1.0 + 0x1p-40;
/// Absolute allowance for the roundings that may fall in the subnormal range (each such
/// rounding errs by at most 2^-1075 absolutely), per operation counted.
constexpr double subnormal_allowance = 0x1p-1070;

/// Dot2 of x with the columns j in [jbegin, jend) of MT (number/dot2_loop.hpp; error bound:
/// proofs/P11-oracle.md step 1).
using ::attncert::dot2_detail::dot2_columns_loop;

/// Dot2 of the weights (w_hi + w_lo)[j] with the rows j = keys[0], ..., keys[count - 1] of V
/// (row-major, dv columns), in that order, added to as (sums), ac (compensations) and ap
/// (Σ_j |RN(w_hi,j v_jk)|) per component k; w_lo's products join the compensation (P11 step 4).
inline void dot2_weighted_rows_loop(const std::size_t* keys, std::size_t count, const double* w_hi, const double* w_lo,
                                    const double* V, std::size_t dv, double* __restrict as, double* __restrict ac,
                                    double* __restrict ap) {
  for (std::size_t t = 0; t < count; ++t) {
    const std::size_t j = keys[t];
    const double wh = w_hi[j], wl = w_lo[j];
    const double* __restrict v = V + j * dv;
    for (std::size_t k = 0; k < dv; ++k) {
      const double p = wh * v[k];
      const double e = std::fma(wh, v[k], -p);
      const double sn = as[k] + p;
      const double bb = sn - as[k];
      const double sig = (as[k] - (sn - bb)) + (p - bb);
      as[k] = sn;
      ac[k] = ac[k] + std::fma(wl, v[k], sig + e);
      ap[k] = ap[k] + std::fabs(p);
    }
  }
}

}  // namespace

// fast_sums_avx512.cpp: the loops above compiled for AVX-512F (no-ops returning false from
// sums_avx512_compiled() when the build has no AVX2 kernel).
bool sums_avx512_compiled();
void dot2_columns_avx512(const double* x, const double* MT, std::size_t n, std::size_t d, std::size_t jbegin,
                         std::size_t jend, double* s, double* c, double* P);
void dot2_weighted_rows_avx512(const std::size_t* keys, std::size_t count, const double* w_hi, const double* w_lo,
                               const double* V, std::size_t dv, double* as, double* ac, double* ap);

/// The softcap's arrays, indexed by key (row_workspace's, fast_row.hpp), for its vector passes
/// (softcap_lanes.hpp): scores x = s_hi + s_lo ± s_rad, y = x / C with its relative bound y_b,
/// the exponentials' arguments z and results f with bound f_b, tanh th ± th_rad.
struct softcap_view {
  double *s_hi, *s_lo, *s_rad;
  double *y_hi, *y_lo, *y_b;
  double *z_hi, *z_lo;
  const double *f_hi, *f_lo, *f_b;
  double *th_hi, *th_lo, *th_rad;
  const std::uint8_t* allowed;
};
// softcap_lanes.hpp's passes at eight lanes (fast_sums_avx512.cpp; they return jb, doing
// nothing, when the unit was built without AVX-512).
std::size_t softcap_quotients_avx512(const softcap_view& sv, double m_hi, double m_lo, std::size_t jb,
                                     std::size_t je, std::size_t* redo, std::size_t& nredo);
std::size_t softcap_finish_avx512(const softcap_view& sv, double C, std::size_t jb, std::size_t je,
                                  std::size_t* redo, std::size_t& nredo);

// fast_kernel.cpp: the loops above, run by the AVX-512F unit when exp_batch runs its AVX-512F
// kernel (the processor has it, and exp_batch_limit_isa has not capped it: the tests compare the
// widths), else by the caller's own build.
bool sums_use_avx512();
void dot2_columns(const double* x, const double* MT, std::size_t n, std::size_t d, std::size_t jbegin,
                  std::size_t jend, double* s, double* c, double* P);
void dot2_weighted_rows(const std::size_t* keys, std::size_t count, const double* w_hi, const double* w_lo,
                        const double* V, std::size_t dv, double* as, double* ac, double* ap);

}  // namespace attncert::oracle::detail
