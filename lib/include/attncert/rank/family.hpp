// attncert/rank/family.hpp — ranks of one attention layer over a whole parameter
// family S(a) = a·S₀ (exact tier), by exact real-root isolation.  The prover side of
// `attncert certify`; see proofs/P09-parameter-families.md.
//
// S₀ rational; q = lcm of the denominators of S₀ on the mask's support; e_ij = q·S₀_ij ∈ ℤ.
// With u = e^{a/q} (a > 0 ⇔ u > 1; a = 0 ⇔ u = 1), E_ij(a) = u^{e_ij} on the support.  Row i
// of E, EV and DX + EV (D = diag(row sums of E)) is multiplied by the unit u^{-min_j e_ij}, so
// every entry is an integer polynomial in u ("row-normalized"); this changes no rank at any
// u > 0, and row scaling by D⁻¹ > 0 does not either, so
//   rank softmax(S(a))[·V] [+ X]  =  rank M(u)   for every real a, u = e^{a/q}.
// Let r = rank of M over ℚ(u) and g = gcd of all r×r minors.  Then rank M(u₀) ≤ r for every
// u₀ (the (r+1)-minors vanish identically) and rank M(u₀) = r iff g(u₀) ≠ 0.  The roots of g
// with u₀ > 0 are isolated exactly (Sturm sequences over ℚ, rational bisection) and mapped to
// a = q·log u₀ in MPFI.  For the scores object the family is a·S₀ itself: rank S₀ for a ≠ 0,
// 0 at a = 0.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <boost/multiprecision/gmp.hpp>

#include "attncert/attention/mask.hpp"
#include "attncert/deadline.hpp"
#include "attncert/rank/exact_rank.hpp"
#include "attncert/linalg/matrix.hpp"

namespace attncert {

using attncert::mpz_int;
/// An integer polynomial, coefficients from degree 0 upwards, no trailing zeros (0 = {}).
using int_poly = std::vector<mpz_int>;

/// The layer of a family: S(a) = a·S0 under `mask`; V for output/residual, X for residual.
struct family_input {
  matrix<mpq_rational> S0;
  mask M = mask::none();
  layer_object object = layer_object::attention;
  std::optional<matrix<mpq_rational>> V, X;
};

/// The row-normalized polynomial matrix M(u) of a family (see the file comment).
struct poly_family {
  Eigen::Index rows = 0, cols = 0;
  std::vector<int_poly> entries;  ///< row-major
  mpz_int q = 1;                  ///< u = e^{a/q}
  mpz_int value_scale = 1;        ///< L: output/residual entries are L·(row-normalized D X + E V)
  const int_poly& at(Eigen::Index i, Eigen::Index j) const { return entries[static_cast<std::size_t>(i * cols + j)]; }
};

/// The family is well formed but its polynomials would be too large (exponent spread
/// q·(max − min) of a row above 1 000, e.g. float64 data with denominators 2^55): the
/// claim is valid, the method does not apply (certify answers UNDECIDED).
struct family_too_large : input_error {
  using input_error::input_error;
};

/// The claim is valid but lies beyond the method's stated limits (a range end with
/// |a/q| > 10^4, whose e^{a/q} would need rationals of more than 14 000 bits): certify
/// answers UNDECIDED with this message.
struct method_limit : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// Throws method_limit when |a/q| > 10^4.
void check_end_magnitude(const mpq_rational& a, const mpz_int& q);

/// Build M(u).  Errors (input_error): shapes, fully masked rows, object = scores;
/// family_too_large (see above).
poly_family build_family(const family_input& in);

/// Exact rank of M over ℚ(u) (FLINT fmpz_poly_mat_rank).  Tier: exact.
std::size_t generic_rank(const poly_family& F);

/// The minor det M(u)[rows, cols] as an integer polynomial (FLINT).  Tier: exact.
int_poly minor_polynomial(const poly_family& F, const std::vector<long>& rows, const std::vector<long>& cols);

/// A basis of the right kernel of M over ℚ(u) (polynomial vectors, FLINT), verified: M·N ≡ 0
/// and the vectors are independent.  Size cols − generic_rank.  Tier: exact.
std::vector<std::vector<int_poly>> kernel_basis(const poly_family& F);

/// A root of a squarefree polynomial: exactly lo == hi (a rational root), or the only root in
/// the open interval (lo, hi) with p(lo)·p(hi) < 0.
struct root_interval {
  mpq_rational lo, hi;
  bool exact() const { return lo == hi; }
};

/// Squarefree part p / gcd(p, p′), made primitive with positive leading coefficient.
int_poly squarefree_part(const int_poly& p);
/// gcd over ℤ[u] (primitive, positive leading coefficient; gcd(0, 0) = 0).
int_poly poly_gcd(const int_poly& a, const int_poly& b);
/// Sturm sequence p, p′, −rem(p₀, p₁), … each scaled by a positive rational to a primitive
/// integer polynomial (signs preserved).  Precondition: p squarefree, nonconstant.
std::vector<int_poly> sturm_sequence(const int_poly& p);
/// Sign variations of the Sturm sequence at x (zeros skipped); at +∞ when x is empty.
int sign_variations(const std::vector<int_poly>& sturm, const std::optional<mpq_rational>& x);
/// Sign of p(x), exactly.
int sign_at(const int_poly& p, const mpq_rational& x);

/// All roots u > 0 of p (p ≠ 0), isolated, increasing; each interval has width ≤ max_width
/// (if given) and lies in (0, ∞).  Tier: exact.
std::vector<root_interval> isolate_positive_roots(const int_poly& p, const std::optional<mpq_rational>& max_width = {});
/// Halve an isolating interval of a root of the squarefree p (no-op for an exact root).
void refine(root_interval& r, const int_poly& sqfree_p);

/// A parameter range for a: each end −∞/+∞ (nullopt) or rational, open or closed.
struct a_range {
  std::optional<mpq_rational> lo, hi;  ///< nullopt = −∞ / +∞
  bool lo_open = true, hi_open = true;
  bool is_point() const { return lo && hi && *lo == *hi; }
  bool contains(const mpq_rational& a) const;
  std::string describe() const;
};
/// Parse "(0, inf)", "[1e-3, 10]", "[0, 0]", "(-inf, 0]".  Errors: input_error.
a_range parse_a_range(const std::string& s);

/// Where a root u* lies relative to the image u-range of an a-range.
enum class placement { inside, outside, unknown };
/// Decide whether the root (isolating interval r of the squarefree g) corresponds to an a in
/// `range`, refining r and the MPFI enclosures of e^{a_end/q} up to max_bits.
placement place_root(root_interval& r, const int_poly& g, const a_range& range, const mpz_int& q, unsigned max_bits);

/// Enclosure of a = q·log u for u in [lo, hi] (u > 0), as decimal strings rounded outward
/// (digits significant digits).  Tier: enclosure.
std::pair<std::string, std::string> a_enclosure(const root_interval& r, const mpz_int& q, unsigned bits = 128, int digits = 20);

/// Decimal / string codecs for the certificate (exact).
std::vector<std::string> to_strings(const int_poly& p);
std::string rational_string(const mpq_rational& x);

/// One certified rank result over a parameter range.
struct drop_point {
  root_interval u;                     ///< isolating interval of u* (root of g)
  std::pair<std::string, std::string> a;  ///< enclosure of a* = q·log u*
  std::size_t rank = 0;                ///< exact rank at a*
  std::vector<long> witness_rows, witness_cols;  ///< a rank×rank minor nonzero at u* (if rank > 0)
};

struct family_rank_result {
  bool decided = false;
  std::string why_undecided;
  std::size_t generic = 0;              ///< rank over ℚ(u): the rank at every a ≠ 0 off the drops
  std::vector<std::pair<std::vector<long>, std::vector<long>>> minors;  ///< r×r minors used for g
  bool minors_complete = false;         ///< minors lists every r×r minor
  int_poly g;                           ///< squarefree part of their gcd
  std::vector<drop_point> drops;        ///< roots of g whose a lies in the range
};

/// Rank of the family's object for every a in `range`.  Guarantee (exact tier): when
/// decided, rank = generic at every a in the range except at the listed drops, where it is
/// drop.rank; every drop lies in the range.  Undecided: too many minors (> max_minors) or
/// roots that cannot be separated from a range end within max_bits.
family_rank_result family_rank(const poly_family& F, const a_range& range, unsigned max_bits = 4096,
                               std::size_t max_minors = 20000);

/// Row sums of the row-normalized E(u) (D_i(u) = Σ_j u^{e_ij − m_i} on the support): the
/// object's determinant is det M(u) / Π_i D_i(u).  Same preconditions as build_family.
std::vector<int_poly> row_normalizers(const family_input& in);

/// The sign of an integer polynomial H(u) over the image u = e^{a/q} of an a-range, exactly:
/// the roots of H in the image (isolated) and one rational sample point per open segment
/// between them, with the sign of H there (constant on the segment).  For a point range
/// a₀ ≠ 0 the single sample lies on the same side of every root as the transcendental u₀.
struct sign_analysis {
  bool decided = false;
  std::string why_undecided;
  bool identically_zero = false;
  int_poly sqfree;                       ///< squarefree part of H (empty if H ≡ 0)
  std::vector<root_interval> roots;      ///< roots of H in the image, increasing
  std::vector<mpq_rational> samples;     ///< one per segment, increasing
  std::vector<int> signs;                ///< sign of H at each sample
};
sign_analysis analyze_sign(const int_poly& H, const a_range& range, const mpz_int& q, unsigned max_bits = 4096);

}  // namespace attncert
