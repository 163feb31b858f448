// attncert/linalg/deflated_svd.hpp — the k smallest singular values of a large square matrix,
// escalated to MPFR precision p on a deflated subspace: the binary64 SVD's trailing vectors are
// refined at p bits (approx tier), then the k smallest singular values are enclosed from a k×k
// block and three norm bounds (enclosure tier).  Nothing of size n×n is factorized in MPFR: the
// cost is a few n×n×k products per refinement step.  See proofs/P16-fast-singular-values.md,
// part D, for the theorem and every bound below.
//
// The bound (A n×n; U = [U₁ U₂], V = [V₁ V₂] with U₁, V₁ the first n − k columns of the binary64
// factors and U₂, V₂ the refined n×k blocks at p bits; M = UᵀAV = [M₁₁ M₁₂; M₂₁ M₂₂]):
//   α' ≥ ‖UᵀU − I‖₂, β' ≥ ‖VᵀV − I‖₂                 (both < 1: U, V invertible)
//   σ_min(M₁₁) ≥ s := (1 − α)·ŝ_{n−k} − √(1 + α)·ρ     (Weyl, from P16's α, ρ for [U₁ ·], [V₁ ·])
//   ε ≥ max(‖M₁₂‖, ‖M₂₁‖)                            (from the residuals AV₂ − U₂Σ₂, AᵀU₂ − V₂Σ₂)
//   σ(M₂₂) ⊂ [l_j, h_j]                              (certified_singular_values of the k×k block)
//   η = s − h₁ > 0,  δ = min(ε, 2ε²/(η + √(η² + 4ε²)))   (C.-K. Li and R.-C. Li, 2005, on the
//                                                     Jordan–Wielandt matrix of M)
//   σ_{n−k+j}(A) ∈ [max(0, l_j − δ)/√((1 + α')(1 + β')), (h_j + δ)/√((1 − α')(1 − β'))].
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "attncert/linalg/certified_svd.hpp"
#include "attncert/linalg/fast_svd.hpp"

namespace attncert {

/// What one deflated escalation did (for the report).
struct deflation_report {
  std::size_t k = 0;           ///< singular values escalated (the trailing k)
  unsigned bits = 0;           ///< MPFR precision p
  int refinement_steps = 0;    ///< refinement steps run (approx tier)
  double residual = 0;         ///< ‖AᵀU₂ − V₂Σ₂‖_F of the refined vectors (approx, for the reader)
  double epsilon = 0;          ///< ε, rounded up (+∞ when not reached)
  double gap = 0;              ///< η, rounded down (≤ 0: no claim)
  std::string why_not;         ///< empty when the bound applied; otherwise why nothing was claimed
  bool orthogonalized = false; ///< the bound applied after U₂ was orthogonalized against U₁ (step 0′)
};

/// The refined trailing singular vectors at p bits (approx tier), kept between precisions.
struct deflation_vectors {
  matrix<mpfr_float> V2;  ///< n×k; empty: start from the binary64 factors
};

/// Enclosures of the k smallest singular values σ_{n−k+1} ≥ … ≥ σ_n (returned in that order) of
/// every real matrix Ã that lies inside both the interval matrix `A` and the binary64 enclosure
/// `F` was computed from (certified_singular_values_binary64).  Tier: enclosure.  Computes at
/// the current precision (precision_guard).
/// Guarantee: each returned interval contains the exact singular value of every such Ã; when
/// the bound does not apply (report.why_not says why: α' or β' ≥ 1, no gap η > 0, a non-finite
/// quantity, MPFR underflow, a precision below 64 bits) — first with the refined vectors, then with them orthogonalized
/// against U₁, V₁ (step 0′, report.orthogonalized) — every returned interval is [0, +∞).
/// `vectors` is a warm start (from a lower precision) and receives the refined V₂.
/// Preconditions (else input_error): A square n×n, F.valid and not transposed, F of size n,
/// 0 < k < n.  `max_steps` bounds the refinement.  The MPFR products run on `threads` threads
/// (number/parallel.hpp: the same results as on one).  The n×n×k products are split into
/// binary64 slices multiplied by BLAS (detail::split below, P16 part D) while the slices of A fit
/// in 1 GiB and p is at most about 980 bits, else they are MPFR loops; the environment variable
/// ATTNCERT_NO_SPLIT_PRODUCTS (any value) forces the MPFR loops, for comparison.
std::vector<mpfi_float> deflated_trailing_singular_values(const matrix<mpfi_float>& A, const binary64_svd_factors& F,
                                                          std::size_t k, deflation_vectors& vectors,
                                                          deflation_report& report, int max_steps = 200,
                                                          unsigned threads = 1);

namespace detail::split {
/// A matrix M as slices (the Ozaki scheme; P16 part D, "Split products"):
///   M = sum_{s<S} 2^(e - (s+1)·beta)·m[s] + R,  every m[s] integer valued with |m[s]_ij| <= 2^beta - 1,
///   |R_ij| < 2^(e - S·beta),  e the least integer with |M_ij| < 2^e for every entry.
/// `zero` when M = 0 (then m holds S zero matrices and e = 0).
/// Sliced by column (`ecol` not empty): column j uses the exponent ecol[j] instead of e (the least
/// with |M_ij| < 2^ecol[j] over its column; e for a zero column), e = max ecol.
struct slices {
  std::vector<matrix<double>> m;
  long e = 0;
  bool zero = true;
  std::vector<long> ecol;
};
/// beta for products whose inner dimension is `inner`: floor((53 - ceil(log2 inner)) / 2), so that
/// inner·(2^beta - 1)^2 < 2^53 and every partial sum of a slice product is an exact integer.
int slice_bits(Eigen::Index inner);
/// The number of slices for p bits: ceil((p + 8) / beta), so that the product's bound below is
/// at most 2^-p·inner·2^(eA + eB) for S <= 2^8 - 3.
int slice_count(long p, int beta);
/// The slices of M (exact arithmetic: each step moves integer bits out of an exact remainder).
/// The MPFR version runs on `threads` threads (the same slices as on one).
slices slice(const matrix<mpfr_float>& M, int S, int beta, unsigned threads = 1, bool per_column = false);
slices slice(const matrix<double>& M, int S, int beta);
/// Y = RN_p(sum over s + t < S of op(A)_s·B_t, exactly) at the current precision p, with the slice
/// products from BLAS (exact: integer entries and partial sums below 2^53, whatever the order or
/// fma use of the dgemm), op(A) = Aᵀ when `transpose_a`.  `inner` is the inner dimension.
/// Guarantee: |Y_ij − (op(A)·B)_ij| <= 2^-p·|Y_ij| + eps for every entry, with eps (returned, exact,
/// 64 bits) = inner·(S + 3)·2^(eA + eB − S·beta): the pairs s + t >= S dropped (at most S pairs
/// per level, each entry below inner·2^(eA + eB − (s+t)·beta)), plus |R_A·B| and |(A − R_A)·R_B|.
matrix<mpfr_float> product(const slices& A, bool transpose_a, const slices& B, Eigen::Index inner, int S, int beta,
                           mpfr_float& eps, unsigned threads = 1);
/// A matrix in bands of entries (the Ozaki scheme made componentwise): entry A_il belongs to band
/// a = floor((e − exp A_il)/beta) (the last band, max_bands − 1, takes every smaller entry), e the
/// least with |A| < 2^e; band a is A's entries of that band (0 elsewhere), sliced with its own
/// exponent e_a; H_il = 2^(e_a − e) for A_il in band a (2^-1000 when smaller), 0 where A_il = 0.
struct banded {
  std::vector<slices> bands;
  matrix<double> H;
  long e = 0;
};
banded slice_banded(const matrix<mpfr_float>& A, int S, int beta, std::size_t max_bands, unsigned threads = 1);
/// op(A)·X for a banded A and a p-bit X whose entries may differ in magnitude by many orders (the
/// trailing singular vectors of a graded matrix): X's entries are banded within their column
/// (exponent f_bj for band b: |X_lj| < 2^f_bj), every pair of bands multiplied as in `product`
/// (X's band sliced by column, on the inner indices it uses), and all of it summed with one
/// rounding.
/// Guarantee: |Y_ij − (op(A)·X)_ij| <= 2^-p·|Y_ij| + err_ij, err_ij >= (S + 3)·2^(−S·beta)·
/// sum_l 2^(e_a(i,l))·2^(f_b(l,j)) over the nonzero terms — per pair of bands, the two remainders and
/// the dropped pairs of slices, as for `product` — computed as (S + 3)·2^(e + c_j − S·beta)·(op(H)·G)_ij
/// with G_lj = 2^(f_bj − c_j), c_j = max_b f_bj, the product bounded from BLAS.  So each term
/// A_il·X_lj is carried to about S·beta bits of its own bands, as in a p-bit recursive sum.
matrix<mpfr_float> product_banded(const banded& A, bool transpose_a, const matrix<mpfr_float>& X, int S, int beta,
                                  matrix<mpfr_float>& err, unsigned threads = 1);
}  // namespace detail::split

/// The number of trailing singular values to escalate so that the split is well separated: the
/// smallest k ≥ k_min with lo[n−k−1] ≥ 2·hi[n−k] in the binary64 enclosures `sigma` (decreasing),
/// at most k_max; 0 when there is none.
std::size_t deflation_split(const std::vector<mpfi_float>& sigma, std::size_t k_min, std::size_t k_max);

}  // namespace attncert
