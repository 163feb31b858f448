// Tests of attncert/attention/binary64_enclosure.hpp: the scores, attention, output and
// residual of one attention layer enclosed in binary64 midpoint-radius form.
//
// Ground truth never comes from the code under test:
//  * the same objects formed from the exact rational inputs in MPFI at 256 bits with the
//    templated primitives (scores<T>, masked_softmax<T>, multiply, residual; the scale 1/√d
//    as default_scale<mpfi_float>(d), a rational scale with mpfi_set_q).  Those enclosures
//    contain the exact values and are ~2^-250 wide relative to them (checked), far below the
//    binary64 radii (~2^-50 relative), so "every point of the MPFI interval lies in
//    [mid − rad, mid + rad]" can only fail if the binary64 enclosure is wrong;
//  * mid − rad and mid + rad are formed in MPFR at 2200 bits, where the sum or difference of
//    any two binary64 numbers is exact (checked through MPFR's ternary value), and compared
//    with the MPFI ends exactly (mpfr_cmp) — never through doubles;
//  * exactly_binary64 against hand-built rationals (powers of two at and beyond binary64's
//    range ends, 1/3) and against the doubles the random rationals were made from.
// A checker self-test shrinks a computed radius by 2^40 and requires the checker to report
// violations, so the containment check is not vacuous.
// Random inputs (float32 values: normal samples rounded to float, optionally scaled by a
// power of two; full 53-bit binary64 samples in the Dot2 cancellation test, whose reference
// runs at 1024 bits) come from std::mt19937_64 seeded with ATTNCERT_SEED if set, otherwise a fixed
// default; the seed is printed.
#define BOOST_TEST_MODULE attention_binary64_enclosure
#include <boost/test/unit_test.hpp>

#include "../support.hpp"

#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iomanip>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/LU>

#include "attncert/attention/binary64_enclosure.hpp"
#include "attncert/attention/heads.hpp"
#include "attncert/attention/mask.hpp"
#include "attncert/attention/scores.hpp"
#include "attncert/attention/softmax.hpp"
#include "attncert/error.hpp"
#include "attncert/linalg/matrix.hpp"
#include "attncert/number/interval.hpp"
#include "attncert/number/precision_guard.hpp"

using namespace attncert;
using Q = mpq_rational;

namespace {

using bool_matrix = Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic>;

constexpr unsigned reference_bits = 256;
constexpr mpfr_prec_t exact_bits = 2200;  // > 1024 + 1074 + 2: a ± b is exact for binary64 a, b

// ---- data -------------------------------------------------------------------------

// float32 values (normal samples of standard deviation `sigma`, rounded to float) times 2^e.
// Exact in binary64 for the exponents used here (no underflow below 2^-1074).
matrix<double> random_float32(std::mt19937_64& rng, Eigen::Index r, Eigen::Index c, double sigma = 1.0, int e = 0) {
  std::normal_distribution<double> nd(0.0, sigma);
  matrix<double> m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) m(i, j) = std::ldexp(static_cast<double>(static_cast<float>(nd(rng))), e);
  return m;
}

// The exact rationals of binary64 numbers.
matrix<Q> to_rational(const matrix<double>& m) {
  matrix<Q> r(m.rows(), m.cols());
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) r(i, j) = Q(m(i, j));
  return r;
}

// 2^e as an exact rational.
Q pow2q(long e) {
  Q r(1);
  if (e >= 0) mpq_mul_2exp(r.backend().data(), r.backend().data(), static_cast<mp_bitcnt_t>(e));
  else mpq_div_2exp(r.backend().data(), r.backend().data(), static_cast<mp_bitcnt_t>(-e));
  return r;
}

// A random mask with at least one allowed key in every row.
bool_matrix random_allowed(std::mt19937_64& rng, Eigen::Index r, Eigen::Index c) {
  std::bernoulli_distribution b(0.5);
  std::uniform_int_distribution<Eigen::Index> col(0, c - 1);
  bool_matrix m(r, c);
  for (Eigen::Index i = 0; i < r; ++i) {
    for (Eigen::Index j = 0; j < c; ++j) m(i, j) = b(rng);
    m(i, col(rng)) = true;
  }
  return m;
}

std::string hex(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", x);
  return buf;
}

// A matrix in hexadecimal floating point (exact), for failure reports.
std::string hex(const matrix<double>& m) {
  std::ostringstream os;
  os << m.rows() << "x" << m.cols() << " [";
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    os << (i ? "; " : "");
    for (Eigen::Index j = 0; j < m.cols(); ++j) os << (j ? " " : "") << hex(m(i, j));
  }
  return os.str() + "]";
}

std::string show(const mpfr_float& x) {
  std::ostringstream os;
  os << std::setprecision(25) << x;
  return os.str();
}

// ---- the MPFI reference ----------------------------------------------------------------

// The scale of the reference scores: the rational, else 1/√d (or 1).
mpfi_float reference_scale(const score_scale& c, Eigen::Index d) {
  if (c.rational) return from_rational<mpfi_float>(*c.rational);
  if (c.inv_sqrt_d) return default_scale<mpfi_float>(d);
  return mpfi_float(1);
}

// S = c·QKᵀ in MPFI (call inside a precision_guard of reference_bits).
matrix<mpfi_float> reference_scores(const matrix<double>& Qd, const matrix<double>& Kd, const score_scale& c) {
  const matrix<mpfi_float> Qi = from_rational_matrix<mpfi_float>(to_rational(Qd));
  const matrix<mpfi_float> Ki = from_rational_matrix<mpfi_float>(to_rational(Kd));
  return scores(Qi, Ki, reference_scale(c, Qd.cols()));
}

// ---- the containment check ---------------------------------------------------------------

struct containment {
  long checked = 0;
  long violations = 0;
  std::string first;  // the first violating entry, in full
};

// Does every point of E(i, j) lie in [mid − rad, mid + rad]?  Every entry is checked; also
// that mid and rad are finite and rad ≥ 0, and (a guard on the reference itself) that the
// MPFI interval is tight: width ≤ 2^-200·max(|ends|) + 2^-1200.
containment check_contains(const binary64_enclosure& B, const matrix<mpfi_float>& E) {
  BOOST_REQUIRE_EQUAL(B.mid.rows(), E.rows());
  BOOST_REQUIRE_EQUAL(B.mid.cols(), E.cols());
  BOOST_REQUIRE_EQUAL(B.rad.rows(), E.rows());
  BOOST_REQUIRE_EQUAL(B.rad.cols(), E.cols());
  containment c;
  mpfr_t lo, hi, w, m;
  mpfr_inits2(exact_bits, lo, hi, w, m, static_cast<mpfr_ptr>(nullptr));
  for (Eigen::Index j = 0; j < E.cols(); ++j)
    for (Eigen::Index i = 0; i < E.rows(); ++i) {
      ++c.checked;
      const double mid = B.mid(i, j), rad = B.rad(i, j);
      const mpfr_float L = lower_of(E(i, j)), U = upper_of(E(i, j));
      // the reference's width, relative to its magnitude
      mpfr_sub(w, U.backend().data(), L.backend().data(), MPFR_RNDU);
      mpfr_abs(m, U.backend().data(), MPFR_RNDU);
      if (mpfr_cmpabs(L.backend().data(), m) > 0) mpfr_abs(m, L.backend().data(), MPFR_RNDU);
      mpfr_mul_2si(m, m, -200, MPFR_RNDU);
      mpfr_set_ui_2exp(lo, 1, -1200, MPFR_RNDN);
      mpfr_add(m, m, lo, MPFR_RNDU);
      BOOST_REQUIRE_MESSAGE(mpfr_cmp(w, m) <= 0, "the MPFI reference is not tight at (" << i << ", " << j << "): ["
                                                     << show(L) << ", " << show(U) << "]");
      bool ok = std::isfinite(mid) && std::isfinite(rad) && rad >= 0;
      if (ok) {
        mpfr_set_d(lo, mid, MPFR_RNDN);  // exact
        mpfr_set_d(hi, mid, MPFR_RNDN);
        const int t1 = mpfr_sub_d(lo, lo, rad, MPFR_RNDD);
        const int t2 = mpfr_add_d(hi, hi, rad, MPFR_RNDU);
        BOOST_REQUIRE_MESSAGE(t1 == 0 && t2 == 0, "mid ± rad not exact at " << exact_bits << " bits");
        ok = mpfr_cmp(L.backend().data(), lo) >= 0 && mpfr_cmp(U.backend().data(), hi) <= 0;
      }
      if (!ok) {
        if (c.violations == 0) {
          std::ostringstream os;
          os << "entry (" << i << ", " << j << "): mid = " << hex(mid) << " (" << std::setprecision(17) << mid
             << "), rad = " << hex(rad) << " (" << rad << "); MPFI [" << show(L) << ", " << show(U) << "]";
          c.first = os.str();
        }
        ++c.violations;
      }
    }
  mpfr_clears(lo, hi, w, m, static_cast<mpfr_ptr>(nullptr));
  return c;
}

// Assert containment; on failure print the entry and the inputs that produced it.
void require_contains(const binary64_enclosure& B, const matrix<mpfi_float>& E, const std::string& what,
                      const std::string& inputs) {
  const containment c = check_contains(B, E);
  BOOST_TEST(c.violations == 0, what << ": " << c.violations << " of " << c.checked << " entries not enclosed; first "
                                     << c.first << "\n  inputs: " << inputs);
}

std::string describe_scores(const matrix<double>& Qd, const matrix<double>& Kd, const std::string& scale) {
  return "Q = " + hex(Qd) + ", K = " + hex(Kd) + ", scale " + scale;
}

score_scale rational_scale(const Q& q) { return score_scale{q, false}; }
score_scale inv_sqrt_d() { return score_scale{std::nullopt, true}; }

}  // namespace

// =====================================================================================
// exactly_binary64
// =====================================================================================

BOOST_AUTO_TEST_CASE(exactly_binary64_single_entries) {
  auto one = [](const Q& q) {
    matrix<Q> m(1, 1);
    m(0, 0) = q;
    return exactly_binary64(m);
  };
  auto is = [&](const Q& q, double v) {
    const auto r = one(q);
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST(r->rows() == 1);
    BOOST_TEST(r->cols() == 1);
    // bitwise: same value and same sign of zero
    return (*r)(0, 0) == v && std::signbit((*r)(0, 0)) == std::signbit(v);
  };
  BOOST_TEST(!one(Q(1, 3)).has_value());
  BOOST_TEST(!one(Q(-1, 3)).has_value());
  BOOST_TEST(is(Q(1, 2), 0.5));
  BOOST_TEST(is(Q(-3, 4), -0.75));
  BOOST_TEST(is(Q(0), 0.0));
  BOOST_TEST(is(Q(6, 8), 0.75));                          // not in lowest terms as written
  BOOST_TEST(is(pow2q(-1074), 0x1p-1074));                // smallest subnormal
  BOOST_TEST(is(-pow2q(-1074), -0x1p-1074));
  BOOST_TEST(is(Q(3) * pow2q(-1074), 0x3p-1074));         // a subnormal with two bits
  BOOST_TEST(is(pow2q(-1022), 0x1p-1022));                // smallest normal
  BOOST_TEST(!one(pow2q(-1075)).has_value());             // half the smallest subnormal: rounds to 0
  BOOST_TEST(!one(Q(3) * pow2q(-1075)).has_value());      // between two subnormals
  BOOST_TEST(!one(pow2q(-1100)).has_value());
  BOOST_TEST(is((pow2q(53) - 1) * pow2q(971), std::numeric_limits<double>::max()));
  BOOST_TEST(!one(pow2q(1024)).has_value());              // overflows
  BOOST_TEST(!one(pow2q(1100)).has_value());
  BOOST_TEST(!one(-pow2q(1100)).has_value());
  BOOST_TEST(is(pow2q(53) - 1, 0x1.fffffffffffffp52));    // 53 bits: exact
  BOOST_TEST(!one(pow2q(53) + 1).has_value());            // 54 bits: not
  BOOST_TEST(!one(Q(1) + pow2q(-60)).has_value());
}

// Every entry must be a binary64 number; one bad entry anywhere makes the whole answer nullopt.
// Random float32 data round-trips bit for bit.
BOOST_AUTO_TEST_CASE(exactly_binary64_matrices) {
  auto rng = make_rng(1);
  for (int trial = 0; trial < 20; ++trial) {
    const matrix<double> D = random_float32(rng, 4, 6, 1.0, (trial % 5 - 2) * 300);
    const matrix<Q> R = to_rational(D);
    const auto back = exactly_binary64(R);
    BOOST_REQUIRE(back.has_value());
    BOOST_TEST(back->rows() == D.rows());
    BOOST_TEST(back->cols() == D.cols());
    BOOST_TEST((*back == D));
    std::uniform_int_distribution<Eigen::Index> ri(0, 3), ci(0, 5);
    matrix<Q> bad = R;
    bad(ri(rng), ci(rng)) = trial % 2 ? Q(1, 3) : pow2q(-1075);
    BOOST_TEST(!exactly_binary64(bad).has_value());
  }
  BOOST_TEST(exactly_binary64(matrix<Q>(0, 3)).has_value());
}

// =====================================================================================
// scores
// =====================================================================================

namespace {

// Soundness of enclose_scores_binary64 for `trials` random float32 inputs of sizes
// (nq × d), (nk × d), scaled by 2^e.
void scores_case(std::uint64_t salt, Eigen::Index nq, Eigen::Index nk, Eigen::Index d, const score_scale& c,
                 const std::string& scale_name, int e, int trials = 6) {
  precision_guard g(reference_bits);
  auto rng = make_rng(salt);
  for (int t = 0; t < trials; ++t) {
    const matrix<double> Qd = random_float32(rng, nq, d, 1.0, e), Kd = random_float32(rng, nk, d, 1.0, e);
    const binary64_enclosure S = enclose_scores_binary64(Qd, Kd, c);
    require_contains(S, reference_scores(Qd, Kd, c), "scores " + scale_name, describe_scores(Qd, Kd, scale_name));
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(scores_inv_sqrt_5) { scores_case(10, 7, 9, 5, inv_sqrt_d(), "1/sqrt(5)", 0); }

BOOST_AUTO_TEST_CASE(scores_exact_scale_half) {
  scores_case(11, 7, 9, 4, rational_scale(Q(1, 2)), "1/2", 0);
  scores_case(12, 7, 9, 4, inv_sqrt_d(), "1/sqrt(4)", 0);  // 1/√4 = 1/2 exactly: δc = 0
}

BOOST_AUTO_TEST_CASE(scores_rational_third) { scores_case(13, 7, 9, 5, rational_scale(Q(1, 3)), "1/3", 0); }

BOOST_AUTO_TEST_CASE(scores_no_scale) { scores_case(14, 5, 6, 3, score_scale{}, "1 (default)", 0); }

BOOST_AUTO_TEST_CASE(scores_large_magnitudes) {
  scores_case(15, 7, 9, 5, inv_sqrt_d(), "1/sqrt(5)", 20);
  scores_case(16, 7, 9, 5, rational_scale(Q(1, 3)), "1/3", 20);
}

// Entries ~2^-540: products ~2^-1080 underflow into the subnormals (or to zero).
BOOST_AUTO_TEST_CASE(scores_tiny_magnitudes_underflow) {
  scores_case(17, 7, 9, 5, inv_sqrt_d(), "1/sqrt(5)", -540);
  scores_case(18, 7, 9, 4, rational_scale(Q(1, 2)), "1/2", -540);
  scores_case(19, 7, 9, 5, rational_scale(Q(1, 3)), "1/3", -540);
  scores_case(20, 7, 9, 5, rational_scale(Q(1, 3)), "1/3", -530);  // partly subnormal, partly normal
}

// A rational scale whose nearest binary64 number is subnormal (issue 28, R1): MPFR rounds c to 53
// bits in its own, wider exponent range, and the conversion to binary64 rounds again.  With
// Q = K = [[2^510]] and c = 3·2^-1076 the exact score is 3·2^-56 while ĉ = 2^-1074: a δc taken
// from the first rounding alone (0 here) gave [2^-54, …], which misses it.  Every numerator and
// exponent below puts ĉ among the subnormals, or rounds c to zero (then the scale is refused).
BOOST_AUTO_TEST_CASE(scores_subnormal_scale) {
  precision_guard g(reference_bits);
  const matrix<double> Qd = matrix<double>::Constant(1, 1, std::ldexp(1.0, 510));
  int checked = 0;
  for (int k = 1060; k <= 1078; ++k)
    for (int num : {1, 3, 5, 7, 11, 13}) {
      Q c(num);
      c /= Q(boost::multiprecision::mpz_int(1) << k);
      const std::string name = std::to_string(num) + "/2^" + std::to_string(k);
      if (std::ldexp(static_cast<double>(num), -k) == 0.0) {  // RN(c) = 0
        BOOST_CHECK_THROW(enclose_scores_binary64(Qd, Qd, rational_scale(c)), input_error);
        continue;
      }
      const binary64_enclosure S = enclose_scores_binary64(Qd, Qd, rational_scale(c));
      require_contains(S, reference_scores(Qd, Qd, rational_scale(c)), "scores, subnormal scale " + name,
                       describe_scores(Qd, Qd, name));
      ++checked;
    }
  BOOST_TEST(checked > 90);
}

// Exact cancellation: Q·Kᵀ = 0 exactly (orthogonal rows); the enclosures must contain 0.
BOOST_AUTO_TEST_CASE(scores_exact_zero) {
  precision_guard g(reference_bits);
  matrix<double> Qd(2, 2), Kd(2, 2);
  Qd << 1.5, -2.25, 0x1p-600, 0x1p-500;
  Kd << 2.25, 1.5, -0x1p-500, 0x1p-600;
  for (const auto& [c, name] : {std::pair{inv_sqrt_d(), std::string("1/sqrt(2)")},
                                std::pair{rational_scale(Q(1, 3)), std::string("1/3")}}) {
    const binary64_enclosure S = enclose_scores_binary64(Qd, Kd, c);
    require_contains(S, reference_scores(Qd, Kd, c), "scores with exact zeros, scale " + name,
                     describe_scores(Qd, Kd, name));
  }
}

namespace {

// A full 53-bit binary64 sample of N(0, 1); when `scaled`, one in eight is multiplied by 2^40 or
// by 2^-40 (one in sixteen each).
double random_binary64(std::mt19937_64& rng, bool scaled) {
  std::normal_distribution<double> nd(0.0, 1.0);
  std::uniform_int_distribution<int> pick(0, 15);
  const double x = nd(rng);
  if (!scaled) return x;
  const int p = pick(rng);
  return p == 0 ? std::ldexp(x, 40) : p == 1 ? std::ldexp(x, -40) : x;
}

// The exact Σ_{l < end} q_il k_jl (Qr: the rationals of Q).
Q exact_dot(const matrix<Q>& Qr, Eigen::Index i, const matrix<double>& Kd, Eigen::Index j, Eigen::Index end) {
  Q s(0);
  for (Eigen::Index l = 0; l < end; ++l) s += Qr(i, l) * Q(Kd(j, l));
  return s;
}

// nk key rows that nearly cancel against every row of Qd (nq × d, stages·nq < d): the first
// d − stages·nq components are random binary64 (a few scaled by 2^±40); then, block after block,
// the next nq components x solve Q_b x = −r in binary64 (Q_b: those nq columns of Qd, r_i: the
// exact q_i·k_j so far, rounded).  One stage leaves |q_i·k_j| ≈ u·Σ_l |q_il k_jl| (x is rounded),
// two leave ≈ u²·Σ_l |q_il k_jl|.
matrix<double> cancelling_keys(std::mt19937_64& rng, const matrix<double>& Qd, Eigen::Index nk, int stages) {
  const Eigen::Index nq = Qd.rows(), d = Qd.cols(), nfree = d - stages * nq;
  const matrix<Q> Qr = to_rational(Qd);
  matrix<double> Kd = matrix<double>::Zero(nk, d);
  for (Eigen::Index j = 0; j < nk; ++j) {
    for (Eigen::Index l = 0; l < nfree; ++l) Kd(j, l) = random_binary64(rng, true);
    for (int s = 0; s < stages; ++s) {
      const Eigen::Index b = nfree + s * nq;
      Eigen::VectorXd r(nq);
      for (Eigen::Index i = 0; i < nq; ++i) r(i) = -exact_dot(Qr, i, Kd, j, b).convert_to<double>();
      const Eigen::VectorXd x = Qd.middleCols(b, nq).partialPivLu().solve(r);
      Kd.row(j).segment(b, nq) = x.transpose();
    }
  }
  return Kd;
}

}  // namespace

// Dot2 under heavy cancellation: binary64 (not float32) Q and K with full 53-bit entries, d = 64,
// a few entries scaled by 2^±40, and every key row chosen so that all its scores cancel, to
// ≈ u·P (one stage) or ≈ u²·P (two stages), P = Σ_l |q_il k_jl| (up to ~2^80).  A naive sum is
// wrong by far more than u|t| here, and so is Dot2 with two stages (its error is ~u²P).  The
// reference runs at 1024 bits, where the MPFI dot products are exact (the products' bits span
// fewer than 400 binary places), so it stays tight however deep the cancellation.
BOOST_AUTO_TEST_CASE(scores_dot2_heavy_cancellation) {
  precision_guard g(1024);
  auto rng = make_rng(21);
  const Eigen::Index d = 64, nk = 20;
  long total = 0, cancelling = 0;
  for (int t = 0; t < 8; ++t) {
    const Eigen::Index nq = 3 + (t / 2) % 2;
    const int stages = 1 + t % 2;
    matrix<double> Qd(nq, d);
    for (Eigen::Index i = 0; i < nq; ++i)
      for (Eigen::Index l = 0; l < d; ++l) Qd(i, l) = random_binary64(rng, l < d - 2 * nq);  // the solves' blocks unscaled
    const matrix<double> Kd = cancelling_keys(rng, Qd, nk, stages);
    const matrix<Q> Qr = to_rational(Qd);
    for (Eigen::Index i = 0; i < nq; ++i)
      for (Eigen::Index j = 0; j < nk; ++j) {
        double P = 0;
        for (Eigen::Index l = 0; l < d; ++l) P += std::fabs(Qd(i, l) * Kd(j, l));
        const double tij = exact_dot(Qr, i, Kd, j, d).convert_to<double>();
        ++total;
        if (std::fabs(tij) < 0x1p-20 * P) ++cancelling;
      }
    for (const auto& [c, name] : {std::pair{inv_sqrt_d(), std::string("1/sqrt(64)")},
                                  std::pair{rational_scale(Q(1, 3)), std::string("1/3")}}) {
      const binary64_enclosure S = enclose_scores_binary64(Qd, Kd, c);
      require_contains(S, reference_scores(Qd, Kd, c),
                       "scores cancelling in " + std::to_string(stages) + " stage(s), scale " + name,
                       describe_scores(Qd, Kd, name));
    }
  }
  BOOST_TEST(cancelling * 10 >= total * 9,
             cancelling << " of " << total << " scores cancel below 2^-20·Σ|q k|: the case does not stress Dot2");
}

// =====================================================================================
// attention, output, residual
// =====================================================================================

namespace {

// Soundness of the scores → attention → A·V → X + A·V chain under the mask M, against the
// same chain in MPFI from the exact inputs.
void layer_case(std::mt19937_64& rng, Eigen::Index nq, Eigen::Index nk, Eigen::Index d, Eigen::Index dv,
                double sigma, const score_scale& c, const std::string& scale_name, const mask& M,
                bool check_spread = false) {
  precision_guard g(reference_bits);
  const matrix<double> Qd = random_float32(rng, nq, d, sigma), Kd = random_float32(rng, nk, d, sigma);
  const matrix<double> Vd = random_float32(rng, nk, dv), Xd = random_float32(rng, nq, dv);
  const std::string inputs = describe_scores(Qd, Kd, scale_name) + ", mask " + M.describe() + ", V = " + hex(Vd) +
                             ", X = " + hex(Xd);
  const std::string what = " (mask " + M.describe() + ", scale " + scale_name + ")";

  const binary64_enclosure S = enclose_scores_binary64(Qd, Kd, c);
  const matrix<mpfi_float> Si = reference_scores(Qd, Kd, c);
  require_contains(S, Si, "scores" + what, inputs);

  const binary64_enclosure A = enclose_attention_binary64(S, M);
  const matrix<mpfi_float> Ai = masked_softmax(Si, M);
  require_contains(A, Ai, "attention" + what, inputs);
  for (Eigen::Index i = 0; i < nq; ++i)
    for (Eigen::Index j = 0; j < nk; ++j)
      if (!M.allows(i, j)) BOOST_TEST((A.mid(i, j) == 0 && A.rad(i, j) == 0), "masked entry not exactly 0");

  if (check_spread) {  // some allowed weights are below e^-708 (the absolute allowance is exercised)
    bool spread = false;
    for (Eigen::Index i = 0; i < nq; ++i) {
      double hi = -std::numeric_limits<double>::infinity(), lo = -hi;
      for (Eigen::Index j = 0; j < nk; ++j)
        if (M.allows(i, j)) hi = std::max(hi, S.mid(i, j)), lo = std::min(lo, S.mid(i, j));
      spread = spread || hi - lo > 720;
    }
    BOOST_TEST(spread, "no row's scores spread over more than 708: the case does not test what it should");
  }

  const binary64_enclosure O = enclose_product_binary64(A, Vd);
  const matrix<mpfi_float> Oi = multiply(Ai, from_rational_matrix<mpfi_float>(to_rational(Vd)));
  require_contains(O, Oi, "output A·V" + what, inputs);

  const binary64_enclosure R = enclose_sum_binary64(Xd, O);
  const matrix<mpfi_float> Ri = residual(from_rational_matrix<mpfi_float>(to_rational(Xd)), Oi);
  require_contains(R, Ri, "residual X + A·V" + what, inputs);
}

std::vector<mask> masks_for(std::mt19937_64& rng, Eigen::Index nq, Eigen::Index nk) {
  return {mask::none(), mask::causal(), mask::from_matrix(random_allowed(rng, nq, nk))};
}

}  // namespace

// Normal-size scores (d = 8, N(0, 1), 1/√8), each mask.
BOOST_AUTO_TEST_CASE(layer_normal_scores) {
  auto rng = make_rng(30);
  for (int t = 0; t < 3; ++t)
    for (const mask& M : masks_for(rng, 6, 9)) layer_case(rng, 6, 9, 8, 3, 1.0, inv_sqrt_d(), "1/sqrt(8)", M);
}

// Scores of size ~10–100 with a rational scale 1/3 (δc ≠ 0 feeds the softmax).
BOOST_AUTO_TEST_CASE(layer_moderate_scores_third) {
  auto rng = make_rng(31);
  for (int t = 0; t < 2; ++t)
    for (const mask& M : masks_for(rng, 7, 7)) layer_case(rng, 7, 7, 5, 4, 4.0, rational_scale(Q(1, 3)), "1/3", M);
}

// Scale 1, entries of size 40, d = 4: scores of size ~10^3–10^4, rows spread over far more
// than 708, so many weights are below e^-708 (binary64 weight 0 with an absolute allowance).
BOOST_AUTO_TEST_CASE(layer_wide_spread_scores) {
  auto rng = make_rng(32);
  for (int t = 0; t < 2; ++t)
    for (const mask& M : masks_for(rng, 6, 10))
      layer_case(rng, 6, 10, 4, 3, 40.0, rational_scale(Q(1)), "1", M, /*check_spread=*/true);
}

// Many keys: nk = 300, d = 64, 1/√64, so the row sums are Sum2 sums of up to 300 weights (mask
// none; a random mask, about 150; causal, top-left aligned, gives rows of 1–3 keys).  N(0, 1)
// inputs, then small ones (σ = 0.05, 0.1): scores near 0, weights near 1 and tight radii, where
// the row sum's rounding matters most (a plain running sum there is off by several times the
// radius: |A − mid| up to ~2.5 rad was measured with Sum2's compensation dropped).
BOOST_AUTO_TEST_CASE(layer_many_keys) {
  auto rng = make_rng(34);
  for (const mask& M : masks_for(rng, 3, 300)) layer_case(rng, 3, 300, 64, 4, 1.0, inv_sqrt_d(), "1/sqrt(64)", M);
  for (double sigma : {0.05, 0.1})
    for (int t = 0; t < 3; ++t)
      for (const mask& M : masks_for(rng, 3, 300)) layer_case(rng, 3, 300, 64, 4, sigma, inv_sqrt_d(), "1/sqrt(64)", M);
}

// Spread just around the threshold: scores z − max near −708 on both sides.
BOOST_AUTO_TEST_CASE(attention_near_the_underflow_threshold) {
  precision_guard g(reference_bits);
  matrix<double> Sd(1, 8);
  Sd << 0.0, -707.9, -708.0, -708.1, -707.5, -709.0, -745.0, -760.0;
  const binary64_enclosure S{Sd, matrix<double>::Zero(1, 8)};
  const matrix<mpfi_float> Si = from_rational_matrix<mpfi_float>(to_rational(Sd));
  require_contains(enclose_attention_binary64(S, mask::none()), masked_softmax(Si, mask::none()),
                   "attention near e^-708", "S = " + hex(Sd));
}

// Exact scores given without a radius (rad empty: the mid is the exact score), and a residual
// of a product whose A carries no radius.
BOOST_AUTO_TEST_CASE(inputs_without_radius) {
  precision_guard g(reference_bits);
  auto rng = make_rng(33);
  for (int t = 0; t < 4; ++t) {
    const matrix<double> Sd = random_float32(rng, 5, 6, t < 2 ? 3.0 : 400.0);
    const binary64_enclosure S{Sd, matrix<double>()};
    const matrix<mpfi_float> Si = from_rational_matrix<mpfi_float>(to_rational(Sd));
    for (const mask& M : masks_for(rng, 5, 6))
      require_contains(enclose_attention_binary64(S, M), masked_softmax(Si, M),
                       "attention of exact scores, mask " + M.describe(), "S = " + hex(Sd));
    const matrix<double> Ad = random_float32(rng, 5, 6), Vd = random_float32(rng, 6, 2), Xd = random_float32(rng, 5, 2);
    const binary64_enclosure O = enclose_product_binary64(binary64_enclosure{Ad, matrix<double>()}, Vd);
    const matrix<mpfi_float> Oi = multiply(from_rational_matrix<mpfi_float>(to_rational(Ad)),
                                           from_rational_matrix<mpfi_float>(to_rational(Vd)));
    const std::string inputs = "A = " + hex(Ad) + ", V = " + hex(Vd) + ", X = " + hex(Xd);
    require_contains(O, Oi, "A·V of exact A", inputs);
    const binary64_enclosure R = enclose_sum_binary64(Xd, binary64_enclosure{O.mid, matrix<double>()});
    const matrix<mpfi_float> Ri = residual(from_rational_matrix<mpfi_float>(to_rational(Xd)),
                                           from_rational_matrix<mpfi_float>(to_rational(O.mid)));
    require_contains(R, Ri, "X + Y of exact Y", inputs);
  }
}

// =====================================================================================
// completeness: the bounds are useful, not only true
// =====================================================================================

BOOST_AUTO_TEST_CASE(attention_radii_are_small) {
  auto rng = make_rng(40);
  for (int t = 0; t < 5; ++t) {
    const matrix<double> Qd = random_float32(rng, 16, 8), Kd = random_float32(rng, 16, 8);
    const matrix<double> Vd = random_float32(rng, 16, 4);
    for (const mask& M : masks_for(rng, 16, 16)) {
      const binary64_enclosure A = enclose_attention_binary64(enclose_scores_binary64(Qd, Kd, inv_sqrt_d()), M);
      double worst = 0;  // largest rad / (1e-13·mid + 1e-300)
      for (Eigen::Index i = 0; i < A.mid.size(); ++i)
        worst = std::max(worst, A.rad.data()[i] / (1e-13 * A.mid.data()[i] + 1e-300));
      BOOST_TEST(worst <= 1.0, "attention radius above 1e-13·mid + 1e-300 (ratio " << worst << "), mask "
                                                                                   << M.describe());
      // A·V: the radius is small against Σ_k |A_ik||V_kj|
      const binary64_enclosure O = enclose_product_binary64(A, Vd);
      const matrix<double> scale = A.mid.cwiseAbs() * Vd.cwiseAbs();
      for (Eigen::Index i = 0; i < O.rad.size(); ++i)
        BOOST_TEST(O.rad.data()[i] <= 1e-13 * scale.data()[i] + 1e-300);
    }
  }
}

// d = 64, n = 512 (float32 N(0, 1), 1/√64): every score radius is ≤ 4u|mid| (Dot2) and every allowed
// attention radius ≤ 64u·mid (Sum2), u = 2^-53.  The bounds these replaced gave score radii
// γ_64‖q‖‖k‖/8 + … ≈ 6e-14 (≈ 500u for |mid| ≈ 1) and attention radii ≥ γ_512·mid ≈ 512u·mid:
// both fail here.
BOOST_AUTO_TEST_CASE(radii_are_a_few_ulps_at_d64_n512) {
  auto rng = make_rng(42);
  const matrix<double> Qd = random_float32(rng, 4, 64), Kd = random_float32(rng, 512, 64);
  const binary64_enclosure S = enclose_scores_binary64(Qd, Kd, inv_sqrt_d());
  double worst = 0;  // largest rad / (4u|mid| + 1e-20)
  for (Eigen::Index i = 0; i < S.mid.size(); ++i)
    worst = std::max(worst, S.rad.data()[i] / (4 * 0x1p-53 * std::fabs(S.mid.data()[i]) + 1e-20));
  BOOST_TEST(worst <= 1.0, "score radius above 4u|mid| + 1e-20 (ratio " << worst << ")");
  BOOST_TEST_MESSAGE("scores: largest rad / (4u|mid| + 1e-20) = " << worst);
  for (const mask& M : {mask::none(), mask::causal()}) {
    const binary64_enclosure A = enclose_attention_binary64(S, M);
    worst = 0;  // largest rad / (64u·mid + 1e-300) over the allowed entries
    for (Eigen::Index i = 0; i < A.mid.rows(); ++i)
      for (Eigen::Index j = 0; j < A.mid.cols(); ++j)
        if (M.allows(i, j)) worst = std::max(worst, A.rad(i, j) / (64 * 0x1p-53 * A.mid(i, j) + 1e-300));
    BOOST_TEST(worst <= 1.0, "attention radius above 64u·mid + 1e-300 (ratio " << worst << "), mask " << M.describe());
    BOOST_TEST_MESSAGE("attention, mask " << M.describe() << ": largest rad / (64u·mid + 1e-300) = " << worst);
  }
}

// =====================================================================================
// errors
// =====================================================================================

BOOST_AUTO_TEST_CASE(errors) {
  auto rng = make_rng(50);
  const matrix<double> Qd = random_float32(rng, 3, 4), Kd = random_float32(rng, 5, 4);
  const binary64_enclosure S = enclose_scores_binary64(Qd, Kd, inv_sqrt_d());
  bool_matrix allowed = bool_matrix::Constant(3, 5, true);
  allowed.row(1).setConstant(false);
  BOOST_TEST(input_error_of([&] { enclose_attention_binary64(S, mask::from_matrix(allowed)); }) != "");
  // a fully masked row given without a radius, too
  BOOST_TEST(input_error_of([&] {
               enclose_attention_binary64(binary64_enclosure{S.mid, matrix<double>()}, mask::from_matrix(allowed));
             }) != "");
  // other input errors
  BOOST_TEST(input_error_of([&] { enclose_attention_binary64(S, mask::from_matrix(bool_matrix::Constant(3, 4, true))); }) != "");
  BOOST_TEST(input_error_of([&] { enclose_scores_binary64(Qd, random_float32(rng, 5, 3), inv_sqrt_d()); }) != "");
  BOOST_TEST(input_error_of([&] { enclose_scores_binary64(Qd, Kd, rational_scale(Q(0))); }) != "");
  BOOST_TEST(input_error_of([&] { enclose_product_binary64(S, random_float32(rng, 4, 2)); }) != "");
  BOOST_TEST(input_error_of([&] { enclose_sum_binary64(random_float32(rng, 3, 4), S); }) != "");
  // overflow is reported, not enclosed by infinities
  BOOST_TEST(input_error_of([&] {
               enclose_scores_binary64(matrix<double>::Constant(1, 2, 0x1p600), matrix<double>::Constant(1, 2, 0x1p600),
                                       score_scale{});
             }) != "");
  // a radius too large for the binary64 softmax bound
  BOOST_TEST(input_error_of([&] {
               enclose_attention_binary64(binary64_enclosure{S.mid, matrix<double>::Constant(3, 5, 1.0)}, mask::none());
             }) != "");
}

// =====================================================================================
// the checker catches too-small radii
// =====================================================================================

// Divide the radii of computed enclosures by 2^40: the mids are rounded values of irrational
// quantities (d = 5: nonzero scores are multiples of 1/√5; attention is transcendental), so
// their errors (~2^-53 relative) exceed the shrunk radii (~2^-90 relative) and check_contains
// must report violations; with the true radii it reports none.  (With d = 4, 1/√4 = 1/2 and
// float32 products, the scores can be exact binary64 numbers: nothing to catch.)
BOOST_AUTO_TEST_CASE(checker_catches_shrunk_radius) {
  precision_guard g(reference_bits);
  auto rng = make_rng(60);
  const matrix<double> Qd = random_float32(rng, 6, 5), Kd = random_float32(rng, 7, 5);
  const binary64_enclosure S = enclose_scores_binary64(Qd, Kd, inv_sqrt_d());
  const matrix<mpfi_float> Si = reference_scores(Qd, Kd, inv_sqrt_d());
  const binary64_enclosure A = enclose_attention_binary64(S, mask::none());
  const matrix<mpfi_float> Ai = masked_softmax(Si, mask::none());
  BOOST_TEST(check_contains(S, Si).violations == 0);
  BOOST_TEST(check_contains(A, Ai).violations == 0);

  const binary64_enclosure S_bad{S.mid, S.rad * 0x1p-40}, A_bad{A.mid, A.rad * 0x1p-40};
  const containment cs = check_contains(S_bad, Si), ca = check_contains(A_bad, Ai);
  BOOST_TEST_MESSAGE("shrunk radii: " << cs.violations << " of " << cs.checked << " scores and " << ca.violations
                                      << " of " << ca.checked << " attention entries reported");
  BOOST_TEST(cs.violations >= 1);
  BOOST_TEST(ca.violations >= 1);

  // a mid moved by more than its radius, and a negative radius, are reported too
  binary64_enclosure A_moved = A;
  A_moved.mid(0, 0) = A.mid(0, 0) + 4 * A.rad(0, 0);
  BOOST_TEST(check_contains(A_moved, Ai).violations == 1);
  binary64_enclosure A_neg = A;
  A_neg.rad(1, 1) = -A.rad(1, 1);
  BOOST_TEST(check_contains(A_neg, Ai).violations == 1);
}

// enclose_scores_mpfi: every allowed entry contains the exact c·q_i·k_j, compared as rationals (c is
// 3/7, or 1/√16 = 1/4 through the 1/√d path), masked entries are exact zeros, and the widths are
// about 2^-p relative.  Entries across 2^±40 and a dot product with heavy cancellation included.
BOOST_AUTO_TEST_CASE(mpfi_scores_from_exactly_summed_dot_products) {
  auto rng = make_rng(41);
  const matrix<double> Qd = random_float32(rng, 9, 16, 1.0, 40);
  matrix<double> Kd = random_float32(rng, 11, 16, 1.0, -40);
  Kd.row(3) = Qd.row(2) * std::ldexp(1.0, -80);  // q_2·k_3: terms of one sign …
  Kd(3, 0) = -Kd(3, 0) * (1 + 0x1p-30);           // … and one nearly cancelling them
  const bool_matrix allowed = random_allowed(rng, 9, 11);
  const mask M = mask::from_matrix(allowed);
  const matrix<Q> Qr = to_rational(Qd), Kr = to_rational(Kd);
  for (bool inv_sqrt_d : {false, true}) {
    score_scale c;
    if (inv_sqrt_d) c.inv_sqrt_d = true;
    else c.rational = Q(3, 7);
    const Q cq = inv_sqrt_d ? Q(1, 4) : Q(3, 7);
    precision_guard g(200);
    const matrix<mpfi_float> S = enclose_scores_mpfi(Qd, Kd, c, M);
    for (Eigen::Index i = 0; i < 9; ++i)
      for (Eigen::Index j = 0; j < 11; ++j) {
        const mpfi_float& s = S(i, j);
        if (!allowed(i, j)) {
          BOOST_TEST((lower_of(s) == 0 && upper_of(s) == 0));
          continue;
        }
        Q dot(0);
        for (Eigen::Index l = 0; l < 16; ++l) dot += Qr(i, l) * Kr(j, l);
        const Q t = cq * dot;
        BOOST_TEST((mpfr_cmp_q(lower_of(s).backend().data(), t.backend().data()) <= 0 &&
                    mpfr_cmp_q(upper_of(s).backend().data(), t.backend().data()) >= 0),
                   "(" << i << ", " << j << ") inv_sqrt_d " << inv_sqrt_d << ": the exact score is outside");
        const mpfr_float w = upper_of(s) - lower_of(s), x = abs(from_rational<mpfr_float>(t));
        BOOST_TEST(w <= x * pow(mpfr_float(2), -190), "(" << i << ", " << j << ") width " << w.str(5));
      }
  }
}
