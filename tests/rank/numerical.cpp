// Tests of attncert/rank/numerical.hpp: the one numerical-rank measurement.
//
//   * 16-bit formats: the SVD runs in binary32 on the exactly converted matrix, the singular
//     values and thresholds stay binary32, and ε is that of the 16-bit format (NumPy/PyTorch);
//   * a policy threshold boundary: σ equal to the threshold is counted by eigen (≥) and not
//     by numpy / absolute (>) — diagonal matrices, whose Jacobi SVD is exact;
//   * the divergence rule: a numerical rank diverges iff it lies outside the exact [lo, hi];
//   * mpfiN: measured on the interval midpoints in MPFR.
#define BOOST_TEST_MODULE rank_numerical
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <type_traits>

#include "attncert/number/precision_guard.hpp"
#include "attncert/rank/numerical.hpp"

using namespace attncert;

namespace {
const format_spec f16 = parse_format("binary16");
const format_spec bf16 = parse_format("bfloat16");
const format_spec f64 = parse_format("binary64");
double p2(int e) { return std::ldexp(1.0, e); }
}  // namespace

BOOST_AUTO_TEST_CASE(svd_types_and_labels) {
  static_assert(std::is_same_v<svd_scalar_t<binary16>, float>);
  static_assert(std::is_same_v<svd_scalar_t<bfloat16>, float>);
  static_assert(std::is_same_v<svd_scalar_t<float>, float>);
  static_assert(std::is_same_v<svd_scalar_t<double>, double>);
  static_assert(std::is_same_v<svd_scalar_t<mpfi_float>, mpfr_float>);
  BOOST_TEST(svd_label(f16) == "binary32");
  BOOST_TEST(svd_label(bf16) == "binary32");
  BOOST_TEST(svd_label(f64) == "binary64");
  BOOST_TEST(svd_label(parse_format("mpfi128")) == "mpfr128 (midpoints)");
  BOOST_TEST(svd_description(f16) == "binary32 (as NumPy/PyTorch upcast 16-bit matrices)");
  BOOST_TEST(svd_description(parse_format("mpfi128")) == "mpfr on interval midpoints");
  BOOST_TEST(svd_description(parse_format("mpfr256")) == "mpfr256");
}

// A binary16 matrix is measured by a binary32 SVD of the same (exactly converted) entries;
// its singular values are not rounded back to binary16; thresholds use binary16's ε = 2^-10.
BOOST_AUTO_TEST_CASE(sixteen_bit_upcast) {
  matrix<binary16> H(2, 2);
  H << binary16(1.0), binary16(0.5), binary16(0.25), binary16(1.0);
  matrix<float> F(2, 2);
  F << 1.0f, 0.5f, 0.25f, 1.0f;
  const auto m = approx_numerical_rank(H, f16, {rank_policy::parse("numpy")}, 2, 2);
  static_assert(std::is_same_v<decltype(m.sigma)::value_type, float>);
  const std::vector<float> ref = approx_singular_values(F);
  BOOST_TEST(m.sigma == ref, boost::test_tools::per_element());
  bool some_not_binary16 = false;  // a binary16 SVD (or a rounding back) would lose these bits
  for (float s : m.sigma) some_not_binary16 = some_not_binary16 || static_cast<float>(binary16(s)) != s;
  BOOST_TEST(some_not_binary16);
  BOOST_TEST(m.thresholds[0] == m.sigma[0] * 2.0f * static_cast<float>(p2(-10)));  // max(m,n) = 2, ε of binary16
  BOOST_TEST(m.ranks[0] == 2u);
  BOOST_TEST(!m.any_diverges);

  // bfloat16: ε = 2^-7.  diag(1, 2^-7): numpy's threshold 1·2·2^-7 = 2^-6 drops σ₂ = 2^-7.
  matrix<bfloat16> B(2, 2);
  B << bfloat16(1.0), bfloat16(0.0), bfloat16(0.0), bfloat16(p2(-7));
  const auto b = approx_numerical_rank(B, bf16, {rank_policy::parse("numpy")}, 2, 2);
  BOOST_TEST(b.thresholds[0] == static_cast<float>(p2(-6)));
  BOOST_TEST(b.ranks[0] == 1u);
  BOOST_TEST(b.diverges[0]);
}

// diag(1, 2^-51) in binary64 (2 × 2): numpy's and eigen's thresholds are both 1·2·2^-52 =
// 2^-51 = σ₂ exactly; numpy counts σ > t (rank 1), eigen σ ≥ t (rank 2).  absolute:τ at τ = σ₂
// drops it, just below keeps it.
BOOST_AUTO_TEST_CASE(policy_threshold_boundary) {
  matrix<double> D = matrix<double>::Zero(2, 2);
  D(0, 0) = 1;
  D(1, 1) = p2(-51);
  const std::vector<rank_policy> ps = {rank_policy::parse("numpy"), rank_policy::parse("eigen"),
                                       rank_policy::parse("absolute:4.440892098500626e-16"), rank_policy::parse("absolute:4.4e-16")};
  BOOST_TEST(ps[2].threshold(1.0, 2, 2, f64) == p2(-51));
  BOOST_TEST(ps[3].threshold(1.0, 2, 2, f64) < p2(-51));
  const auto m = approx_numerical_rank(D, f64, ps, 2, 2);
  BOOST_TEST(m.sigma[1] == p2(-51));
  BOOST_TEST(m.thresholds[0] == p2(-51));
  BOOST_TEST(m.thresholds[1] == p2(-51));
  BOOST_TEST(m.ranks[0] == 1u);
  BOOST_TEST(m.ranks[1] == 2u);
  BOOST_TEST(m.ranks[2] == 1u);
  BOOST_TEST(m.ranks[3] == 2u);
}

// rank < lo or rank > hi diverges; inside [lo, hi] (an undecided exact rank) does not.
BOOST_AUTO_TEST_CASE(divergence_rule) {
  BOOST_TEST(numerical_rank_diverges(1, 2, 3));
  BOOST_TEST(!numerical_rank_diverges(2, 2, 3));
  BOOST_TEST(!numerical_rank_diverges(3, 2, 3));
  BOOST_TEST(numerical_rank_diverges(4, 2, 3));
  BOOST_TEST(!numerical_rank_diverges(0, 0, 0));

  matrix<double> D = matrix<double>::Zero(3, 3);
  D(0, 0) = 1;
  D(1, 1) = 0.5;
  D(2, 2) = p2(-60);  // below every default threshold
  const std::vector<rank_policy> ps = {rank_policy::parse("numpy"), rank_policy::parse("absolute:0.75")};
  const auto exact3 = approx_numerical_rank(D, f64, ps, 3, 3);
  BOOST_TEST(exact3.ranks[0] == 2u);
  BOOST_TEST(exact3.ranks[1] == 1u);
  BOOST_TEST(exact3.diverges[0]);
  BOOST_TEST(exact3.diverges[1]);
  BOOST_TEST(exact3.any_diverges);
  const auto undecided = approx_numerical_rank(D, f64, ps, 2, 3);  // exact rank in [2, 3]
  BOOST_TEST(!undecided.diverges[0]);
  BOOST_TEST(undecided.diverges[1]);
  const auto wide = approx_numerical_rank(D, f64, ps, 1, 3);
  BOOST_TEST(!wide.any_diverges);
}

// mpfiN: the SVD of the midpoint matrix in MPFR at the current precision.
BOOST_AUTO_TEST_CASE(interval_midpoints) {
  precision_guard g(128);
  matrix<mpfi_float> I(2, 2);
  I(0, 0) = mpfi_float(mpfr_float(0.75), mpfr_float(1.25));  // midpoint 1
  I(0, 1) = mpfi_float(0);
  I(1, 0) = mpfi_float(0);
  I(1, 1) = mpfi_float(mpfr_float(0.125), mpfr_float(0.375));  // midpoint 0.25
  const auto m = approx_numerical_rank(I, parse_format("mpfi128"), {rank_policy::parse("absolute:0.2")}, 2, 2);
  BOOST_TEST(m.sigma.size() == 2u);
  BOOST_TEST(m.sigma[0] == mpfr_float(1));
  BOOST_TEST(m.sigma[1] == mpfr_float(0.25));
  BOOST_TEST(m.ranks[0] == 2u);
}
