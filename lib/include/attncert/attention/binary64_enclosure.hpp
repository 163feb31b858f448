// attncert/attention/binary64_enclosure.hpp — the objects of one attention layer (scores,
// attention, output, residual) enclosed in binary64 midpoint-radius form, at binary64 speed.
// Tier: enclosure — every exact entry lies in [mid − rad, mid + rad].  The bounds are a priori
// (γ_k = k·u/(1 − k·u) for sums of k products in any order, u = 2⁻⁵³, plus underflow allowances)
// and the exponential is number/double_double.hpp's exp_with_bound; each step's bound is stated
// where it is computed and derived in proofs/P16-fast-singular-values.md, part A.
//
// These feed linalg/fast_svd.hpp (certified singular values of 1k–4k-token matrices); the MPFI
// path (form the object in mpfi_float) stays for inputs that are not binary64 numbers and for
// small matrices whose enclosures must escalate.
#pragma once

#include <optional>

#include "attncert/attention/mask.hpp"
#include "attncert/linalg/fast_svd.hpp"
#include "attncert/linalg/matrix.hpp"
#include "attncert/number/types.hpp"

namespace attncert {

/// M as binary64 numbers when every entry is one exactly; nullopt otherwise.  Tier: exact.
std::optional<matrix<double>> exactly_binary64(const matrix<mpq_rational>& M);

/// The scale c of c·Q·Kᵀ: an exact rational, or 1/√d.
struct score_scale {
  std::optional<mpq_rational> rational;  ///< used when set
  bool inv_sqrt_d = false;               ///< else 1/√d, d = Q's width (1 when neither is set)
};

/// Enclosure of S = c·Q·Kᵀ for binary64 Q (n_q×d) and K (n_k×d).
/// Errors: input_error if the scale is zero or a score bound is not finite (overflow).
binary64_enclosure enclose_scores_binary64(const matrix<double>& Q, const matrix<double>& K, const score_scale& c);

/// c·Q·Kᵀ enclosed in MPFI at the current precision, for binary64 Q (n_q×d) and K (n_k×d): each
/// dot product summed exactly (the d products are exact at 106 bits; one mpfr_sum rounded down and
/// one up), then multiplied by c's enclosure.  Entries that M masks are set to exact zeros and not
/// computed (softmax ignores them).  Tier: enclosure.  Much cheaper than the generic MPFI product
/// at large n (the deflated escalation of proofs/P16 part D forms the layer once per precision).
/// Errors: input_error for a non-finite input.  The rows are computed on `threads` threads
/// (number/parallel.hpp: the same enclosures as on one).
matrix<mpfi_float> enclose_scores_mpfi(const matrix<double>& Q, const matrix<double>& K, const score_scale& c, const mask& M,
                                       unsigned threads = 1);

/// Enclosure of softmax(S) under mask M (masked entries exactly 0), row by row, for S inside
/// the enclosure `S`.  Errors: input_error for a fully masked row, and when the scores'
/// radius is too large for a useful bound (> 1/2: use the MPFI path).
binary64_enclosure enclose_attention_binary64(const binary64_enclosure& S, const mask& M);

/// Enclosure of A·V for A inside `A` and binary64 V (rows = A's columns).
binary64_enclosure enclose_product_binary64(const binary64_enclosure& A, const matrix<double>& V);

/// Enclosure of X + Y for Y inside `Y` and binary64 X of the same shape.
binary64_enclosure enclose_sum_binary64(const matrix<double>& X, const binary64_enclosure& Y);

}  // namespace attncert
