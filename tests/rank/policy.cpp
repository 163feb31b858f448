// Tests of attncert/rank/policy.hpp and lib/src/rank/policy.cpp.
//
// Every expected threshold is computed by hand from the rule each library documents:
//   numpy.linalg.matrix_rank   S.max() * max(M, N) * finfo(dtype).eps,        S > tol
//   MATLAB rank                max(size(A)) * eps(max(s)),                    s > tol
//   torch.linalg.matrix_rank   max(atol, rtol * sigma1); rtol = max(m,n) eps when not
//                              given, and 0 when not given but atol > 0,       S > tol
//   LAPACK xGELSD (rcond)      rcond * S(1),                                  S > tol
//   Eigen JacobiSVD::rank      max(sigma1 * min(m,n) * eps, numeric_limits::min()),
//                              counts sigma >= tol (it drops sigma < tol)
// where eps is that of the dtype the matrix was FORMED in.  All powers of two below are
// exact in every type used, so the comparisons are exact.
#define BOOST_TEST_MODULE linalg_rank_policy
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attncert/error.hpp"
#include "attncert/linalg/matrix.hpp"
#include "attncert/rank/policy.hpp"
#include "attncert/linalg/spectra.hpp"
#include "attncert/number/format.hpp"
#include "attncert/number/precision_guard.hpp"

using namespace attncert;

namespace {

const std::vector<std::string> canonical_names = {
    "numpy", "matlab", "eigen", "torch", "torch:0.001", "torch:default:0.5", "torch:0.25:0.125",
    "lapack", "lapack:0.001", "absolute:0.5", "relative:0.25"};

const format_spec f64 = parse_format("binary64");
const format_spec f16 = parse_format("binary16");

double p2(int e) { return std::ldexp(1.0, e); }

double thr(const std::string& policy, double sigma1, long m, long n, const format_spec& f) {
  return rank_policy::parse(policy).threshold(sigma1, m, n, f);
}

}  // namespace

// =====================================================================================
// parsing and names
// =====================================================================================

BOOST_AUTO_TEST_CASE(name_round_trips_for_every_policy) {
  for (const auto& s : canonical_names) {
    const rank_policy p = rank_policy::parse(s);
    BOOST_TEST(p.name() == s);  // these spellings are the canonical ones
    const rank_policy q = rank_policy::parse(p.name());
    BOOST_TEST(q.name() == p.name());
    BOOST_TEST((q.type() == p.type()));
    BOOST_TEST(q.inclusive() == p.inclusive());
    BOOST_TEST(q.formula() == p.formula());
    BOOST_TEST(!p.formula().empty());
    for (double sigma1 : {1.0, 3.0, 1e5})  // same rule after the round trip
      BOOST_TEST(q.threshold(sigma1, 3, 2, f16) == p.threshold(sigma1, 3, 2, f16));
  }
  // Non-canonical spellings normalise and still round-trip.
  BOOST_TEST(rank_policy::parse("torch:default").name() == "torch");
  BOOST_TEST(rank_policy::parse(rank_policy::parse("torch:0.1:0").name()).name() == rank_policy::parse("torch:0.1:0").name());
  BOOST_TEST(rank_policy::parse("absolute:1e-3").name() == "absolute:0.001");
}

BOOST_AUTO_TEST_CASE(parse_sets_the_kind) {
  using k = rank_policy::kind;
  BOOST_TEST((rank_policy::parse("numpy").type() == k::numpy));
  BOOST_TEST((rank_policy::parse("matlab").type() == k::matlab));
  BOOST_TEST((rank_policy::parse("torch:0.1").type() == k::torch));
  BOOST_TEST((rank_policy::parse("lapack").type() == k::lapack));
  BOOST_TEST((rank_policy::parse("eigen").type() == k::eigen));
  BOOST_TEST((rank_policy::parse("absolute:1").type() == k::absolute));
  BOOST_TEST((rank_policy::parse("relative:1").type() == k::relative));
}

BOOST_AUTO_TEST_CASE(bad_policies_are_input_errors) {
  for (const char* bad : {"foo", "", "absolute", "absolute:", "absolute:-1", "absolute:x", "absolute:nan", "absolute:inf",
                          "absolute:1e999", "relative:1:2", "relative", "numpy:1", "matlab:2", "eigen:0", "torch:1:2:3",
                          "torch:x", "torch:-1", "lapack:1:2", "lapack:-0.5"}) {
    BOOST_CHECK_THROW(rank_policy::parse(bad), input_error);
  }
}

BOOST_AUTO_TEST_CASE(parse_policies_lists) {
  const auto ps = parse_policies("numpy,matlab,absolute:0.5");
  BOOST_TEST_REQUIRE(ps.size() == 3u);
  BOOST_TEST(ps[0].name() == "numpy");
  BOOST_TEST(ps[1].name() == "matlab");
  BOOST_TEST(ps[2].name() == "absolute:0.5");
  BOOST_CHECK_THROW(parse_policies("numpy,numpy"), input_error);
  BOOST_CHECK_THROW(parse_policies("torch,torch:default"), input_error);  // same policy, two spellings
  BOOST_CHECK_THROW(parse_policies("numpy,,matlab"), input_error);
  BOOST_CHECK_THROW(parse_policies("numpy,"), input_error);
  BOOST_CHECK_THROW(parse_policies(""), input_error);
  BOOST_CHECK_THROW(parse_policies("numpy,foo"), input_error);
}

// =====================================================================================
// thresholds by hand
// =====================================================================================

// A 3 × 2 matrix (max(m,n) = 3, min(m,n) = 2) with sigma1 = 3, formed in binary64 (eps =
// 2^-52, smallest normal 2^-1022) and in binary16 (eps = 2^-10, smallest normal 2^-14).
// eps(3) = 2^(floor(log2 3) - (p - 1)) = 2^(1 - 52) in binary64, 2^(1 - 10) in binary16.
BOOST_AUTO_TEST_CASE(thresholds_by_hand_3x2_binary64) {
  BOOST_TEST(thr("numpy", 3, 3, 2, f64) == 9 * p2(-52));
  BOOST_TEST(thr("matlab", 3, 3, 2, f64) == 3 * p2(-51));
  BOOST_TEST(thr("torch", 3, 3, 2, f64) == 9 * p2(-52));
  BOOST_TEST(thr("torch:0.25", 3, 3, 2, f64) == 0.75);
  BOOST_TEST(thr("lapack", 3, 3, 2, f64) == 3 * p2(-52));
  BOOST_TEST(thr("lapack:0.125", 3, 3, 2, f64) == 0.375);
  BOOST_TEST(thr("eigen", 3, 3, 2, f64) == 6 * p2(-52));
  BOOST_TEST(thr("absolute:0.5", 3, 3, 2, f64) == 0.5);
  BOOST_TEST(thr("relative:0.25", 3, 3, 2, f64) == 0.75);
  // The shape is symmetric in (m, n): a 2 × 3 matrix has the same thresholds.
  BOOST_TEST(thr("numpy", 3, 2, 3, f64) == 9 * p2(-52));
  BOOST_TEST(thr("eigen", 3, 2, 3, f64) == 6 * p2(-52));
}

BOOST_AUTO_TEST_CASE(thresholds_by_hand_3x2_binary16) {
  BOOST_TEST(thr("numpy", 3, 3, 2, f16) == 9 * p2(-10));
  BOOST_TEST(thr("matlab", 3, 3, 2, f16) == 3 * p2(-9));
  BOOST_TEST(thr("torch", 3, 3, 2, f16) == 9 * p2(-10));
  BOOST_TEST(thr("torch:0.25", 3, 3, 2, f16) == 0.75);
  BOOST_TEST(thr("lapack", 3, 3, 2, f16) == 3 * p2(-10));
  BOOST_TEST(thr("eigen", 3, 3, 2, f16) == 6 * p2(-10));
  BOOST_TEST(thr("absolute:0.5", 3, 3, 2, f16) == 0.5);
  BOOST_TEST(thr("relative:0.25", 3, 3, 2, f16) == 0.75);
  // bfloat16: eps = 2^-7.
  BOOST_TEST(thr("numpy", 3, 3, 2, parse_format("bf16")) == 9 * p2(-7));
  BOOST_TEST(thr("numpy", 3, 3, 2, parse_format("binary32")) == 9 * p2(-23));
}

// The same thresholds evaluated in other singular-value types: the epsilon comes from the
// format the matrix was formed in, never from T.
BOOST_AUTO_TEST_CASE(threshold_epsilon_is_the_formed_formats_not_the_svd_types) {
  const rank_policy numpy = rank_policy::parse("numpy");
  BOOST_TEST(numpy.threshold(3.0f, 3, 2, f16) == 9 * static_cast<float>(p2(-10)));
  BOOST_TEST(numpy.threshold(3.0f, 3, 2, f64) == 9 * static_cast<float>(p2(-52)));
  BOOST_TEST(numpy.threshold(binary16(3), 3, 2, f16) == binary16(9 * p2(-10)));
  precision_guard g(256);
  BOOST_TEST(numpy.threshold(mpfr_float(3), 3, 2, f16) == mpfr_float(9 * p2(-10)));
  BOOST_TEST(numpy.threshold(mpfr_float(3), 3, 2, f64) == mpfr_float(9 * p2(-52)));
  BOOST_TEST(numpy.threshold(mpfr_float(3), 3, 2, parse_format("mpfr200")) ==
             3 * 3 * ldexp(mpfr_float(1), 1 - static_cast<int>(working_bits_for(200))));
}

// THE WRONG-EPSILON TEST: singular values {1, 1e-3} of a 2 × 2 matrix.  Formed in binary16,
// numpy's threshold is 1 · 2 · 2^-10 ≈ 1.95e-3 > 1e-3: numerical rank 1.  Formed in binary64
// (threshold 2 · 2^-52) the rank is 2.  A policy that took eps from the SVD's type (double
// here) would report rank 2 for both.
BOOST_AUTO_TEST_CASE(binary16_formed_matrix_uses_binary16_epsilon) {
  matrix<double> M(2, 2);
  M << 1, 0, 0, static_cast<double>(binary16(1e-3));  // the binary16 matrix, held in binary64
  const std::vector<double> s = approx_singular_values(M);
  BOOST_TEST_REQUIRE(s.size() == 2u);
  BOOST_TEST(std::abs(s[1] - 1e-3) < 1e-6);
  const rank_policy numpy = rank_policy::parse("numpy");
  BOOST_TEST(numpy.threshold(s[0], 2, 2, f16) == 2 * p2(-10));
  BOOST_TEST(numpy.rank(s, 2, 2, f16) == 1u);
  BOOST_TEST(numpy.rank(s, 2, 2, f64) == 2u);
  // Same verdicts from torch's default and MATLAB's rule (eps(1) = 2^-10 in binary16).
  BOOST_TEST(rank_policy::parse("torch").rank(s, 2, 2, f16) == 1u);
  BOOST_TEST(rank_policy::parse("matlab").rank(s, 2, 2, f16) == 1u);
  BOOST_TEST(rank_policy::parse("matlab").rank(s, 2, 2, f64) == 2u);
}

// A singular value exactly equal to the threshold counts for eigen (σ ≥ τ) and not for the
// others (σ > τ).
BOOST_AUTO_TEST_CASE(inclusive_only_for_eigen) {
  for (const auto& name : canonical_names) {
    const rank_policy p = rank_policy::parse(name);
    for (const format_spec& f : {f64, f16}) {
      const double sigma1 = 3;
      const double t = p.threshold(sigma1, 3, 2, f);
      BOOST_TEST_REQUIRE(t < sigma1);
      const std::vector<double> at = {sigma1, t};
      const std::vector<double> above = {sigma1, std::nextafter(t, 1e9)};
      const std::vector<double> below = {sigma1, std::nextafter(t, 0.0)};
      const bool eigen = p.type() == rank_policy::kind::eigen;
      BOOST_TEST(p.inclusive() == eigen);
      BOOST_TEST(p.rank(at, 3, 2, f) == (eigen ? 2u : 1u), name << " in " << f.name);
      BOOST_TEST(p.rank(above, 3, 2, f) == 2u, name << " in " << f.name);
      BOOST_TEST(p.rank(below, 3, 2, f) == 1u, name << " in " << f.name);
    }
  }
}

// MATLAB: eps(x) = 2^(floor(log2 x) - 52) in binary64 (eps(3) = 2^-51, eps(4) = 2^-50,
// eps(1) = 2^-52, eps(0.75) = 2^-53), clamped at the subnormal spacing 2^(emin - p + 1).
BOOST_AUTO_TEST_CASE(matlab_eps_of_sigma1) {
  BOOST_TEST(thr("matlab", 3, 2, 2, f64) == 2 * p2(-51));
  BOOST_TEST(thr("matlab", std::nextafter(4.0, 0.0), 2, 2, f64) == 2 * p2(-51));
  BOOST_TEST(thr("matlab", 4, 2, 2, f64) == 2 * p2(-50));
  BOOST_TEST(thr("matlab", 1, 2, 2, f64) == 2 * p2(-52));
  BOOST_TEST(thr("matlab", 0.75, 2, 2, f64) == 2 * p2(-53));
  BOOST_TEST(thr("matlab", 1e300, 5, 2, f64) == 5 * p2(996 - 52));  // 2^996 <= 1e300 < 2^997
  // binary16: eps(3) = 2^-9; below the normal range (2^-14) the spacing is 2^-24.
  BOOST_TEST(thr("matlab", 3, 2, 2, f16) == 2 * p2(-9));
  BOOST_TEST(thr("matlab", p2(-20), 2, 2, f16) == 2 * p2(-24));
  BOOST_TEST(thr("matlab", 0, 2, 2, f16) == 0.0);
}

// Eigen's floor: the threshold is at least the smallest normal number of the format.
BOOST_AUTO_TEST_CASE(eigen_threshold_floor_is_smallest_normal) {
  BOOST_TEST(thr("eigen", p2(-20), 2, 2, f16) == p2(-14));
  BOOST_TEST(thr("eigen", p2(-1000), 2, 2, f64) == p2(-1022));
  BOOST_TEST(thr("eigen", 1, 2, 2, f16) == 2 * p2(-10));
  // A tiny matrix formed in binary16 has Eigen rank 0: every σ is below 2^-14.
  BOOST_TEST(rank_policy::parse("eigen").rank(std::vector<double>{p2(-20), p2(-21)}, 2, 2, f16) == 0u);
}

// torch with explicit tolerances: max(atol, rtol σ1).
BOOST_AUTO_TEST_CASE(torch_with_explicit_rtol_and_atol) {
  BOOST_TEST(thr("torch:0.001:0.5", 3, 3, 2, f64) == 0.5);       // atol wins
  BOOST_TEST(thr("torch:0.001:0.5", 1000, 3, 2, f64) == 1.0);    // rtol σ1 wins
  BOOST_TEST(thr("torch:0:0.5", 1e10, 3, 2, f64) == 0.5);        // rtol = 0: absolute only
  BOOST_TEST(thr("torch:0.25", 3, 3, 2, f16) == 0.75);           // atol = 0
  const rank_policy p = rank_policy::parse("torch:0.001:0.5");
  BOOST_TEST(p.rank(std::vector<double>{3, 0.6, 0.5, 0.4}, 3, 2, f64) == 2u);
}

// torch.linalg.matrix_rank: "If rtol is not specified and atol is specified to be larger
// than zero then rtol is set to zero."  So with atol = 0.5 and no rtol the threshold is
// 0.5 whatever σ1 is; with σ1 = 2^60 formed in binary64, max(m,n)·eps·σ1 = 3·2^8 = 768 would
// be the threshold if the default rtol were kept.
BOOST_AUTO_TEST_CASE(torch_default_rtol_is_zero_when_atol_is_given) {
  BOOST_TEST(thr("torch:default:0.5", p2(60), 3, 2, f64) == 0.5);
  BOOST_TEST(rank_policy::parse("torch:default:0.5").rank(std::vector<double>{p2(60), 100.0, 1.0}, 3, 2, f64) == 3u);
  // Without atol the default rtol applies.
  BOOST_TEST(thr("torch", p2(60), 3, 2, f64) == 768.0);
}

// =====================================================================================
// rank() edge cases
// =====================================================================================

BOOST_AUTO_TEST_CASE(empty_zero_and_nan_singular_values) {
  for (const auto& name : canonical_names) {
    const rank_policy p = rank_policy::parse(name);
    BOOST_TEST(p.rank(std::vector<double>{}, 0, 0, f64) == 0u, name);
    BOOST_TEST(p.rank(std::vector<double>{0.0, 0.0}, 2, 2, f64) == 0u, name);  // zero matrix
    BOOST_TEST(p.rank(std::vector<double>{0.0, 0.0}, 2, 2, f16) == 0u, name);
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  BOOST_TEST(rank_policy::parse("absolute:0.5").rank(std::vector<double>{2.0, nan, 1.0}, 3, 3, f64) == 2u);
}

// Counting on a full spectrum: σ = (3, 1, 2^-40, 0) of a 4 × 4 matrix formed in binary64.
// numpy: τ = 3·4·2^-52 ≈ 2.7e-15 -> rank 3; absolute:0.5 -> 2; relative:0.5 -> 1.
BOOST_AUTO_TEST_CASE(rank_counts_above_threshold) {
  const std::vector<double> s = {3, 1, p2(-40), 0};
  BOOST_TEST(rank_policy::parse("numpy").rank(s, 4, 4, f64) == 3u);
  BOOST_TEST(rank_policy::parse("absolute:0.5").rank(s, 4, 4, f64) == 2u);
  BOOST_TEST(rank_policy::parse("relative:0.5").rank(s, 4, 4, f64) == 1u);
  BOOST_TEST(rank_policy::parse("numpy").rank(s, 4, 4, f16) == 2u);  // τ = 12·2^-10
}
