// Tests of attncert/attention/softmax.hpp, mask.hpp and scores.hpp.
//
// References used, independent of the code under test:
//  * closed forms computed in the test (two-entry softmax 1/(1+e^-d), hand products);
//  * for the interval tier, the same softmax in MPFR at 512 bits: it is within ~2^-500 of
//    the exact value, far below the 2^-128 granularity of the 128-bit enclosure, so
//    "the enclosure contains the 512-bit value" can only fail if the enclosure is wrong
//    (or the exact value lies within 2^-500 of an endpoint: probability ~2^-370);
//  * for log-odds, the exact difference S_ij - S_i,ref of dyadic scores (exact in MPFR);
//  * for softmax_jvp, a central finite difference in MPFR at 256 bits.
//
// Random inputs come from std::mt19937_64 seeded with ATTNCERT_SEED if set, otherwise a
// fixed default; the seed is printed.
#define BOOST_TEST_MODULE attention_softmax
#include <boost/test/unit_test.hpp>

#include "../support.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <random>
#include <tuple>
#include <type_traits>

#include "attncert/attention/mask.hpp"
#include "attncert/attention/scores.hpp"
#include "attncert/attention/softmax.hpp"
#include "attncert/error.hpp"
#include "attncert/linalg/matrix.hpp"
#include "attncert/number/interval.hpp"
#include "attncert/number/precision_guard.hpp"
#include "attncert/number/traits.hpp"

using namespace attncert;

namespace {

using approx_types = std::tuple<float, double, binary16, bfloat16, mpfr_float>;
using bool_matrix = Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic>;

constexpr double inf = std::numeric_limits<double>::infinity();

// ---- helpers ----------------------------------------------------------------------

// A working precision of 113 bits for MPFR/MPFI types (`working_precision<T> wp;`),
// nothing for the others.
struct no_guard {
  explicit no_guard(unsigned) {}
};
template <class T>
using guard_for = std::conditional_t<std::is_same_v<T, mpfr_float> || std::is_same_v<T, mpfi_float>, precision_guard, no_guard>;
template <class T>
struct working_precision : guard_for<T> {
  working_precision() : guard_for<T>(113) {}
};

template <class T>
double to_d(const T& x) { return number_traits<T>::to_double(x); }

template <class T>
double eps_of() { return to_d(number_traits<T>::epsilon()); }

// The epsilon to use when a result in T is compared with a binary64 reference: that of T,
// but no less than binary64's (the reference and the comparison are rounded in binary64).
template <class T>
double ref_eps() { return std::max(eps_of<T>(), 0x1p-52); }

// Absolute slack for probabilities below the normal range of T (binary16 subnormals).
template <class T>
double tiny_of() { return std::is_same_v<T, binary16> ? 0x1p-24 : 1e-300; }

// A matrix from a row-major list of doubles (converted with from_double).
template <class T>
matrix<T> mat(Eigen::Index r, Eigen::Index c, std::initializer_list<double> v) {
  matrix<double> m(r, c);
  auto it = v.begin();
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) m(i, j) = *it++;
  return from_double_matrix<T>(m);
}

// Random dyadic scores k / 2^frac_bits with |score| <= bound.
matrix<double> random_scores(std::mt19937_64& rng, Eigen::Index r, Eigen::Index c, int bound, int frac_bits) {
  std::uniform_int_distribution<long> d(-(long(bound) << frac_bits), long(bound) << frac_bits);
  matrix<double> m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) m(i, j) = std::ldexp(static_cast<double>(d(rng)), -frac_bits);
  return m;
}

bool_matrix bools(Eigen::Index r, Eigen::Index c, std::initializer_list<int> v) {
  bool_matrix m(r, c);
  auto it = v.begin();
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) m(i, j) = *it++ != 0;
  return m;
}

// Two-entry softmax of (a, b): the first probability 1 / (1 + e^(b - a)), in binary64.
double two_softmax_first(double a, double b) { return 1.0 / (1.0 + std::exp(b - a)); }

}  // namespace

// =====================================================================================
// softmax: basic properties in every approx type
// =====================================================================================

// Every row of a softmax lies in [0, 1] and sums to 1.  Each entry is exp (<= 1/2 ulp),
// divided by a sum of n terms (<= (n-1)/2 ulp accumulated) (<= 1/2 ulp), so the row sum is
// within about (n+1)/2 ulp of 1 (first order); the test allows (n + 3) eps.  Entries lie in
// [0, 1] exactly: exp(s - max) <= 1 and the normalizer, which contains exp(0) = 1, is at
// least every term.
BOOST_AUTO_TEST_CASE_TEMPLATE(rows_are_probability_vectors, T, approx_types) {
  working_precision<T> wp;
  auto rng = make_rng(1);
  const double tol_eps = ref_eps<T>();
  for (int trial = 0; trial < 20; ++trial) {
    const Eigen::Index n = 1 + trial % 7;
    const matrix<T> S = from_double_matrix<T>(random_scores(rng, 4, n, 8, 6));
    const matrix<T> A = masked_softmax(S);
    BOOST_TEST_REQUIRE(A.rows() == 4);
    BOOST_TEST_REQUIRE(A.cols() == n);
    for (Eigen::Index i = 0; i < A.rows(); ++i) {
      double sum = 0;
      for (Eigen::Index j = 0; j < n; ++j) {
        const double a = to_d(A(i, j));
        BOOST_TEST(a >= 0.0);
        BOOST_TEST(a <= 1.0);
        sum += a;
      }
      BOOST_TEST(std::abs(sum - 1.0) <= (static_cast<double>(n) + 3) * tol_eps, "row " << i << " sums to " << sum);
    }
  }
}

// The entries against a binary64 reference of the formula; the reference itself is computed
// with the shift, in binary64, and the input scores are exact in T.
BOOST_AUTO_TEST_CASE_TEMPLATE(matches_binary64_reference, T, approx_types) {
  working_precision<T> wp;
  auto rng = make_rng(2);
  const matrix<double> Sd = random_scores(rng, 5, 6, 6, 4);
  const matrix<T> A = masked_softmax(from_double_matrix<T>(Sd));
  for (Eigen::Index i = 0; i < Sd.rows(); ++i) {
    const double m = Sd.row(i).maxCoeff();
    double z = 0;
    for (Eigen::Index j = 0; j < Sd.cols(); ++j) z += std::exp(Sd(i, j) - m);
    for (Eigen::Index j = 0; j < Sd.cols(); ++j) {
      const double ref = std::exp(Sd(i, j) - m) / z;
      BOOST_TEST(std::abs(to_d(A(i, j)) - ref) <= 10 * ref_eps<T>() * ref + tiny_of<T>(),
                 "entry (" << i << ", " << j << "): " << to_d(A(i, j)) << " vs " << ref);
    }
  }
}

// softmax(s + c 1) = softmax(s).  The constant is large enough that exp(s + c) overflows in
// T (except in MPFR, whose exponent range is huge), so an implementation that does not
// shift by the row maximum returns inf/inf = NaN here.  Scores are integers and s + c is
// exact in T, so a correct implementation evaluates the same shifted differences.
BOOST_AUTO_TEST_CASE_TEMPLATE(invariant_under_row_constant, T, approx_types) {
  working_precision<T> wp;
  auto rng = make_rng(3);
  double c = 0;
  if constexpr (std::is_same_v<T, double>) c = 800;          // exp overflows above ~709.8
  else if constexpr (std::is_same_v<T, binary16>) c = 96;    // exp overflows above ~11.1
  else if constexpr (std::is_same_v<T, mpfr_float>) c = 1e6;
  else c = 96;                                               // float, bfloat16: above ~88.7
  const matrix<double> Sd = random_scores(rng, 4, 5, 4, 0);
  matrix<double> Sc = Sd;
  for (Eigen::Index j = 0; j < Sc.cols(); ++j) Sc(1, j) += c;  // one row shifted up...
  for (Eigen::Index j = 0; j < Sc.cols(); ++j) Sc(2, j) -= c;  // ...one down (underflow side)
  const matrix<T> A = masked_softmax(from_double_matrix<T>(Sd));
  const matrix<T> B = masked_softmax(from_double_matrix<T>(Sc));
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j) {
      BOOST_TEST(!number_traits<T>::is_nan(B(i, j)), "NaN at (" << i << ", " << j << ")");
      BOOST_TEST(std::abs(to_d(A(i, j)) - to_d(B(i, j))) <= 4 * ref_eps<T>() * to_d(A(i, j)) + 1e-300,
                 "entry (" << i << ", " << j << "): " << to_d(A(i, j)) << " vs " << to_d(B(i, j)));
    }
}

// =====================================================================================
// softmax: the shift (regression tests for an unshifted or wrongly shifted softmax)
// =====================================================================================

// exp(1000) overflows binary64: without the max shift this row is inf/inf = NaN.  With it,
// A = (1/(1+e^-1000), e^-1000/(1+e^-1000)) = (1, 0) in binary64 (e^-1000 < 2^-1074).
BOOST_AUTO_TEST_CASE(large_scores_do_not_overflow) {
  const matrix<double> A = masked_softmax(mat<double>(1, 2, {1000, 0}));
  BOOST_TEST(std::isfinite(A(0, 0)));
  BOOST_TEST(std::isfinite(A(0, 1)));
  BOOST_TEST(A(0, 0) == 1.0);
  BOOST_TEST(A(0, 1) == std::exp(-1000.0));  // 0 in binary64 (underflow of a true probability)
  // Reversed order: the maximum is not the first entry.
  const matrix<double> B = masked_softmax(mat<double>(1, 2, {0, 1000}));
  BOOST_TEST(B(0, 0) == std::exp(-1000.0));
  BOOST_TEST(B(0, 1) == 1.0);
}

// exp(-1000) underflows to 0 in binary64: without the shift this row is 0/0 = NaN.  The
// exact answer is (1/(1+e^-1), e^-1/(1+e^-1)) = (0.731..., 0.268...).
BOOST_AUTO_TEST_CASE(very_negative_scores_do_not_underflow) {
  const matrix<double> A = masked_softmax(mat<double>(1, 2, {-1000, -1001}));
  const double p = two_softmax_first(-1000, -1001);
  BOOST_TEST(std::isfinite(A(0, 0)));
  BOOST_TEST(std::abs(A(0, 0) - p) <= 4e-16);
  BOOST_TEST(std::abs(A(0, 1) - (1 - p)) <= 4e-16);
  BOOST_TEST(A(0, 0) > 0.73);
}

// =====================================================================================
// masks
// =====================================================================================

// The mask is applied BEFORE normalization.  Future (masked) scores are huge: a softmax that
// normalizes over the whole row and zeroes masked entries afterwards leaves rows that sum
// to ~0; one that takes the maximum over masked entries too underflows to 0/0.  Masked
// entries must be exact zeros and each row the softmax of its allowed prefix.
BOOST_AUTO_TEST_CASE_TEMPLATE(causal_mask_is_applied_before_normalization, T, approx_types) {
  working_precision<T> wp;
  const matrix<double> Sd = (matrix<double>(4, 4) << 0.5, 1000, 1000, 1000,
                                                     0, 1, 1000, 1000,
                                                     1, 2, 3, 1000,
                                                     -2, 0, 1, 3).finished();
  const matrix<T> A = masked_softmax(from_double_matrix<T>(Sd), mask::causal());
  const double e = ref_eps<T>();
  for (Eigen::Index i = 0; i < 4; ++i) {
    // Reference: softmax of the allowed prefix S(i, 0..i), in binary64.
    double m = -inf, z = 0, sum = 0;
    for (Eigen::Index j = 0; j <= i; ++j) m = std::max(m, Sd(i, j));
    for (Eigen::Index j = 0; j <= i; ++j) z += std::exp(Sd(i, j) - m);
    for (Eigen::Index j = 0; j < 4; ++j) {
      const double a = to_d(A(i, j));
      sum += a;
      if (j > i) {
        BOOST_TEST(a == 0.0, "masked entry (" << i << ", " << j << ") is " << a);
      } else {
        const double ref = std::exp(Sd(i, j) - m) / z;
        BOOST_TEST(std::abs(a - ref) <= 8 * e * ref, "entry (" << i << ", " << j << "): " << a << " vs " << ref);
      }
    }
    BOOST_TEST(std::abs(sum - 1.0) <= 8 * e, "row " << i << " sums to " << sum);
  }
  BOOST_TEST(to_d(A(0, 0)) == 1.0);  // a single allowed key gets all the weight, exactly
}

// Causal masks are top-left aligned for n_q != n_k (torch.tril): row i sees keys 0..i.
BOOST_AUTO_TEST_CASE(causal_mask_rectangular_is_top_left_aligned) {
  const matrix<double> A = masked_softmax(mat<double>(2, 3, {0, 0, 0, 0, 0, 0}), mask::causal());
  BOOST_TEST(A(0, 0) == 1.0);
  BOOST_TEST(A(0, 1) == 0.0);
  BOOST_TEST(A(0, 2) == 0.0);
  BOOST_TEST(A(1, 0) == 0.5);
  BOOST_TEST(A(1, 1) == 0.5);
  BOOST_TEST(A(1, 2) == 0.0);
}

// An explicit boolean mask (true = allowed): zeros where disallowed, renormalized elsewhere.
BOOST_AUTO_TEST_CASE(explicit_mask) {
  const bool_matrix allowed = bools(2, 3, {1, 0, 1,
                                           0, 1, 1});
  const matrix<double> A = masked_softmax(mat<double>(2, 3, {1, 500, 3,
                                                             -700, 2, 2}), mask::from_matrix(allowed));
  const double p = two_softmax_first(1, 3);
  BOOST_TEST(std::abs(A(0, 0) - p) <= 4e-16);
  BOOST_TEST(A(0, 1) == 0.0);
  BOOST_TEST(std::abs(A(0, 2) - (1 - p)) <= 4e-16);
  BOOST_TEST(A(1, 0) == 0.0);
  BOOST_TEST(A(1, 1) == 0.5);
  BOOST_TEST(A(1, 2) == 0.5);
  BOOST_TEST(mask::from_matrix(allowed).describe() == "explicit");
}

BOOST_AUTO_TEST_CASE(explicit_mask_shape_mismatch_is_input_error) {
  const matrix<double> S = mat<double>(2, 3, {0, 0, 0, 0, 0, 0});
  BOOST_CHECK_THROW(masked_softmax(S, mask::from_matrix(bools(3, 2, {1, 1, 1, 1, 1, 1}))), input_error);
  BOOST_CHECK_THROW(masked_softmax(S, mask::from_matrix(bools(2, 2, {1, 1, 1, 1}))), input_error);
  BOOST_CHECK_THROW(masked_log_softmax(S, mask::from_matrix(bools(3, 3, {1, 1, 1, 1, 1, 1, 1, 1, 1}))), input_error);
  BOOST_CHECK_NO_THROW(masked_softmax(S, mask::from_matrix(bools(2, 3, {1, 1, 1, 1, 1, 1}))));
}

// A fully masked row has no softmax (0/0): error (default) / zeros / NaN, and the other rows
// are unaffected.
BOOST_AUTO_TEST_CASE_TEMPLATE(fully_masked_row_policies, T, approx_types) {
  working_precision<T> wp;
  const matrix<T> S = mat<T>(2, 2, {1, 2, 3, 3});
  const mask M = mask::from_matrix(bools(2, 2, {0, 0, 1, 1}));
  BOOST_CHECK_THROW(masked_softmax(S, M), input_error);
  BOOST_CHECK_THROW(masked_softmax(S, M, empty_row_policy::error), input_error);
  BOOST_CHECK_THROW(masked_log_softmax(S, M), input_error);

  const matrix<T> Z = masked_softmax(S, M, empty_row_policy::zeros);
  BOOST_TEST(to_d(Z(0, 0)) == 0.0);
  BOOST_TEST(to_d(Z(0, 1)) == 0.0);
  BOOST_TEST(to_d(Z(1, 0)) == 0.5);
  BOOST_TEST(to_d(Z(1, 1)) == 0.5);

  const matrix<T> N = masked_softmax(S, M, empty_row_policy::nan);
  BOOST_TEST(number_traits<T>::is_nan(N(0, 0)));
  BOOST_TEST(number_traits<T>::is_nan(N(0, 1)));
  BOOST_TEST(to_d(N(1, 0)) == 0.5);
  BOOST_TEST(to_d(N(1, 1)) == 0.5);
}

BOOST_AUTO_TEST_CASE(empty_row_policy_names) {
  BOOST_TEST((parse_empty_row_policy("error") == empty_row_policy::error));
  BOOST_TEST((parse_empty_row_policy("zeros") == empty_row_policy::zeros));
  BOOST_TEST((parse_empty_row_policy("nan") == empty_row_policy::nan));
  BOOST_CHECK_THROW(parse_empty_row_policy("zero"), input_error);
  BOOST_CHECK_THROW(parse_empty_row_policy(""), input_error);
}

// A NaN or infinite allowed score is bad input, not a silent NaN row.
BOOST_AUTO_TEST_CASE_TEMPLATE(non_finite_scores_are_input_errors, T, approx_types) {
  working_precision<T> wp;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double bad : {nan, inf, -inf}) {
    const matrix<T> S = mat<T>(2, 2, {0, 1, 2, bad});
    BOOST_CHECK_THROW(masked_softmax(S), input_error);
    BOOST_CHECK_THROW(masked_log_softmax(S), input_error);
  }
}

// =====================================================================================
// intervals: soundness and completeness
// =====================================================================================

// SOUNDNESS: for random dyadic scores (exact as thin intervals) every entry of the 128-bit
// interval softmax contains the 512-bit MPFR softmax (within ~2^-500 of the exact value).
// COMPLETENESS: every enclosure is narrower than 2^-100.
BOOST_AUTO_TEST_CASE(interval_softmax_contains_high_precision_value) {
  auto rng = make_rng(4);
  for (int trial = 0; trial < 20; ++trial) {
    const Eigen::Index n = 1 + trial % 6;
    const matrix<double> Sd = random_scores(rng, 3, n, 20, 10);
    const mask M = trial % 2 == 0 ? mask::none() : mask::causal();
    matrix<mpfr_float> ref;
    {
      precision_guard g(512);
      ref = masked_softmax(from_double_matrix<mpfr_float>(Sd), M);
    }
    precision_guard g(128);
    const matrix<mpfi_float> A = masked_softmax(from_double_matrix<mpfi_float>(Sd), M);
    const mpfr_float width_cap = ldexp(mpfr_float(1), -100);
    for (Eigen::Index i = 0; i < A.rows(); ++i)
      for (Eigen::Index j = 0; j < A.cols(); ++j) {
        BOOST_TEST(contains(A(i, j), ref(i, j)),
                   "trial " << trial << " (" << i << ", " << j << "): " << number_traits<mpfi_float>::to_string(A(i, j), 40)
                            << " misses " << ref(i, j).str(40, std::ios_base::scientific));
        BOOST_TEST(mpfr_float(upper_of(A(i, j)) - lower_of(A(i, j))) < width_cap,
                   "enclosure of (" << i << ", " << j << ") too wide: " << number_traits<mpfi_float>::to_string(A(i, j), 20));
      }
  }
}

// Masked entries of an interval softmax are exact zeros (thin [0, 0]), and an allowed
// single key gets the thin interval [1, 1].
BOOST_AUTO_TEST_CASE(interval_softmax_masked_entries_are_exact) {
  precision_guard g(64);
  const matrix<mpfi_float> A = masked_softmax(from_double_matrix<mpfi_float>(matrix<double>::Constant(2, 2, 3.0)), mask::causal());
  BOOST_TEST(lower_of(A(0, 1)) == 0);
  BOOST_TEST(upper_of(A(0, 1)) == 0);
  BOOST_TEST(lower_of(A(0, 0)) == 1);
  BOOST_TEST(upper_of(A(0, 0)) == 1);
  BOOST_TEST(contains(A(1, 0), mpfr_float(0.5)));
}

// =====================================================================================
// log-softmax and log-odds
// =====================================================================================

// log-softmax equals log(softmax) where the probability did not underflow.  log(A) carries
// the relative error of A (about (n + 2)/2 ulp) as an absolute error; L itself is within
// a few ulp of |L|.  The test allows (n + 4) eps + 4 eps |L|.
BOOST_AUTO_TEST_CASE_TEMPLATE(log_softmax_is_log_of_softmax, T, approx_types) {
  working_precision<T> wp;
  auto rng = make_rng(5);
  const Eigen::Index n = 5;
  const matrix<T> S = from_double_matrix<T>(random_scores(rng, 4, n, 3, 4));  // gaps <= 6: no subnormals
  const matrix<T> A = masked_softmax(S), L = masked_log_softmax(S);
  using std::log;
  const double e = ref_eps<T>();
  for (Eigen::Index i = 0; i < S.rows(); ++i)
    for (Eigen::Index j = 0; j < n; ++j) {
      const double l = to_d(L(i, j)), la = to_d(T(log(A(i, j))));
      BOOST_TEST(std::abs(l - la) <= (n + 4) * e + 4 * e * std::abs(l), "(" << i << ", " << j << "): " << l << " vs " << la);
    }
}

// With a score gap of 2000 the small probability underflows (e^-2000 < 2^-1074), so
// log(softmax) is -inf; log-softmax stays finite and equals the exact -2000 (log(1 + e^-2000)
// rounds to 0).  Masked entries are -inf.
BOOST_AUTO_TEST_CASE(log_softmax_stays_finite_where_softmax_underflows) {
  const matrix<double> S = mat<double>(2, 2, {0, -2000, 2000, 0});
  const matrix<double> A = masked_softmax(S), L = masked_log_softmax(S);
  BOOST_TEST(A(0, 1) == 0.0);  // the premise: the probability underflowed
  BOOST_TEST(std::isfinite(L(0, 1)));
  BOOST_TEST(L(0, 0) == 0.0);
  BOOST_TEST(L(0, 1) == -2000.0);
  BOOST_TEST(L(1, 0) == 0.0);
  BOOST_TEST(L(1, 1) == -2000.0);

  const matrix<double> Lm = masked_log_softmax(mat<double>(2, 2, {1, 2, 1, 1}), mask::causal());
  BOOST_TEST(Lm(0, 0) == 0.0);
  BOOST_TEST(Lm(0, 1) == -inf);
  BOOST_TEST(std::abs(Lm(1, 0) - std::log(0.5)) <= 1e-16);
}

// log_odds(S)_ij = S_ij - S_i,ref exactly (§3).  In binary64 within a few ulp of the log-
// probabilities involved, including a gap of 2000 where the probabilities underflow.
BOOST_AUTO_TEST_CASE(log_odds_equal_score_differences) {
  auto rng = make_rng(6);
  const matrix<double> S = random_scores(rng, 3, 4, 30, 8);
  for (Eigen::Index ref = 0; ref < S.cols(); ++ref) {
    const matrix<double> O = log_odds(S, mask::none(), ref);
    for (Eigen::Index i = 0; i < S.rows(); ++i)
      for (Eigen::Index j = 0; j < S.cols(); ++j)
        BOOST_TEST(std::abs(O(i, j) - (S(i, j) - S(i, ref))) <= 1e-12,
                   "ref " << ref << " (" << i << ", " << j << "): " << O(i, j) << " vs " << S(i, j) - S(i, ref));
  }
  const matrix<double> O = log_odds(mat<double>(1, 2, {0, -2000}), mask::none(), 0);
  BOOST_TEST(O(0, 1) == -2000.0);
}

// Interval log-odds contain the exact score difference (dyadic, exact in MPFR).
BOOST_AUTO_TEST_CASE(interval_log_odds_contain_exact_difference) {
  auto rng = make_rng(7);
  const matrix<double> Sd = random_scores(rng, 3, 5, 50, 12);
  precision_guard g(96);
  const matrix<mpfi_float> O = log_odds(from_double_matrix<mpfi_float>(Sd), mask::none(), 2);
  for (Eigen::Index i = 0; i < Sd.rows(); ++i)
    for (Eigen::Index j = 0; j < Sd.cols(); ++j) {
      const mpfr_float exact = mpfr_float(Sd(i, j)) - mpfr_float(Sd(i, 2));  // exact: 96 bits suffice
      BOOST_TEST(contains(O(i, j), exact), "(" << i << ", " << j << "): " << number_traits<mpfi_float>::to_string(O(i, j)));
    }
}

BOOST_AUTO_TEST_CASE(log_odds_errors_and_masked_entries) {
  const matrix<double> S = mat<double>(2, 2, {1, 2, 3, 5});
  BOOST_CHECK_THROW(log_odds(S, mask::none(), 2), input_error);
  BOOST_CHECK_THROW(log_odds(S, mask::none(), -1), input_error);
  BOOST_CHECK_THROW(log_odds(S, mask::causal(), 1), input_error);  // key 1 is masked in row 0
  const matrix<double> O = log_odds(S, mask::causal(), 0);
  BOOST_TEST(O(0, 0) == 0.0);
  BOOST_TEST(O(0, 1) == -inf);
  BOOST_TEST(std::abs(O(1, 1) - 2.0) <= 1e-15);
}

// =====================================================================================
// softmax_jvp
// =====================================================================================

// dA against the central difference (A(S + h dS) - A(S - h dS)) / 2h in MPFR at 256 bits with
// h = 2^-60.  Truncation error: h^2/6 times a third derivative of softmax, which is at most
// a small constant (< 2^4) here since |dS| <= 1 and n <= 4: < 2^-120 + 4.  Rounding error:
// each softmax entry carries about n 2^-256 relative error, divided by 2h: < 2^-190.  The
// test allows 2^-100; a wrong jvp (missing the mean term, wrong sign, mask ignored) is off
// by O(1).
BOOST_AUTO_TEST_CASE(softmax_jvp_matches_central_difference) {
  auto rng = make_rng(8);
  precision_guard g(256);
  std::uniform_real_distribution<double> u(-1, 1);
  const mpfr_float h = ldexp(mpfr_float(1), -60), tol = ldexp(mpfr_float(1), -100);
  for (int trial = 0; trial < 6; ++trial) {
    const mask M = trial % 2 == 0 ? mask::none() : mask::causal();
    const matrix<mpfr_float> S = from_double_matrix<mpfr_float>(random_scores(rng, 4, 4, 4, 20));
    matrix<mpfr_float> dS(4, 4), Sp(4, 4), Sm(4, 4);
    for (Eigen::Index i = 0; i < 4; ++i)
      for (Eigen::Index j = 0; j < 4; ++j) {
        dS(i, j) = mpfr_float(u(rng));
        Sp(i, j) = S(i, j) + h * dS(i, j);
        Sm(i, j) = S(i, j) - h * dS(i, j);
      }
    const matrix<mpfr_float> dA = softmax_jvp(masked_softmax(S, M), dS, M);
    const matrix<mpfr_float> Ap = masked_softmax(Sp, M), Am = masked_softmax(Sm, M);
    for (Eigen::Index i = 0; i < 4; ++i) {
      mpfr_float row(0);
      for (Eigen::Index j = 0; j < 4; ++j) {
        const mpfr_float fd = (Ap(i, j) - Am(i, j)) / (2 * h);
        BOOST_TEST(mpfr_float(abs(dA(i, j) - fd)) < tol,
                   "trial " << trial << " (" << i << ", " << j << "): " << dA(i, j).str(30) << " vs " << fd.str(30));
        row += dA(i, j);
      }
      BOOST_TEST(mpfr_float(abs(row)) < tol);  // rows of A stay stochastic: dA rows sum to 0
    }
  }
}

BOOST_AUTO_TEST_CASE(softmax_jvp_shape_mismatch_is_input_error) {
  BOOST_CHECK_THROW(softmax_jvp(matrix<double>(matrix<double>::Zero(2, 2)), matrix<double>(matrix<double>::Zero(2, 3))),
                    input_error);
}

// =====================================================================================
// scores
// =====================================================================================

// S = scale Q K^T, by hand: Q = [[1, 2, 0, 1], [0, -1, 3, 2]], K = [[1, 0, 0, 0],
// [2, 1, -1, 1], [0, 0, 1, 1]].  QK^T = [[1, 5, 1], [0, -2, 5]].  d = 4: default scale 1/2.
BOOST_AUTO_TEST_CASE(scores_by_hand_binary64) {
  const matrix<double> Q = mat<double>(2, 4, {1, 2, 0, 1, 0, -1, 3, 2});
  const matrix<double> K = mat<double>(3, 4, {1, 0, 0, 0, 2, 1, -1, 1, 0, 0, 1, 1});
  const matrix<double> expected = mat<double>(2, 3, {1, 5, 1, 0, -2, 5});
  const matrix<double> S3 = scores(Q, K, 3.0), Sd = scores(Q, K);
  BOOST_TEST_REQUIRE(S3.rows() == 2);
  BOOST_TEST_REQUIRE(S3.cols() == 3);
  BOOST_TEST_REQUIRE(Sd.rows() == 2);
  BOOST_TEST_REQUIRE(Sd.cols() == 3);
  for (Eigen::Index i = 0; i < 2; ++i)
    for (Eigen::Index j = 0; j < 3; ++j) {
      BOOST_TEST(S3(i, j) == 3 * expected(i, j));
      BOOST_TEST(Sd(i, j) == 0.5 * expected(i, j));
    }
  BOOST_TEST(default_scale<double>(4) == 0.5);
  BOOST_TEST(default_scale<double>(64) == 0.125);
}

// Default scale 1/sqrt(d) with d = 3 (irrational): the interval scale and scores enclose
// the exact values (checked against 512-bit MPFR, which is within 2^-500 of them).
BOOST_AUTO_TEST_CASE(scores_default_scale_interval_encloses_exact) {
  const matrix<double> Qd = (matrix<double>(2, 3) << 1, 2, 3, -1, 0, 2).finished();
  const matrix<double> Kd = (matrix<double>(2, 3) << 1, 1, 1, 2, 0, -1).finished();
  const matrix<double> QKt = Qd * Kd.transpose();  // small integers: exact
  mpfr_float inv_sqrt3;
  matrix<mpfr_float> ref(2, 2);
  {
    precision_guard g(512);
    inv_sqrt3 = 1 / sqrt(mpfr_float(3));
    for (Eigen::Index i = 0; i < 2; ++i)
      for (Eigen::Index j = 0; j < 2; ++j) ref(i, j) = QKt(i, j) * inv_sqrt3;
  }
  precision_guard g(80);
  BOOST_TEST(contains(default_scale<mpfi_float>(3), inv_sqrt3));
  const matrix<mpfi_float> S = scores(from_double_matrix<mpfi_float>(Qd), from_double_matrix<mpfi_float>(Kd));
  for (Eigen::Index i = 0; i < 2; ++i)
    for (Eigen::Index j = 0; j < 2; ++j) BOOST_TEST(contains(S(i, j), ref(i, j)));
}

// Exact rational scores: Q = [[1/2, -1/3], [2, 0]], K = [[3, 6/5], [1/7, 1]], scale 2/3.
// QK^T = [[3/2 - 2/5, 1/14 - 1/3], [6, 2/7]] = [[11/10, -11/42], [6, 2/7]];
// times 2/3: [[11/15, -11/63], [4, 4/21]].
BOOST_AUTO_TEST_CASE(scores_exact_rationals) {
  using Q = mpq_rational;
  matrix<Q> q(2, 2), k(2, 2);
  q << Q(1, 2), Q(-1, 3), Q(2), Q(0);
  k << Q(3), Q(6, 5), Q(1, 7), Q(1);
  const matrix<Q> S = scores(q, k, Q(2, 3));
  BOOST_TEST(S(0, 0) == Q(11, 15));
  BOOST_TEST(S(0, 1) == Q(-11, 63));
  BOOST_TEST(S(1, 0) == Q(4));
  BOOST_TEST(S(1, 1) == Q(4, 21));
}

BOOST_AUTO_TEST_CASE(scores_shape_errors) {
  const matrix<double> Q = matrix<double>::Ones(2, 4), K = matrix<double>::Ones(3, 5);
  BOOST_CHECK_THROW(scores(Q, K, 1.0), input_error);
  BOOST_CHECK_THROW(scores(Q, K), input_error);
  BOOST_CHECK_THROW(default_scale<double>(0), input_error);
  BOOST_CHECK_THROW(scores(matrix<double>(2, 0), matrix<double>(3, 0)), input_error);  // d = 0: no 1/sqrt(d)
}
