// Tests of grading/grading.hpp: the errors of a graded array from the exact values (abs, rel and
// ulp maxima with their indices, beyond-threshold counts, skipped and non-finite elements), the
// four rules of the published test suites (ulp, flash, torch_sdpa, assert_close) at and around
// their thresholds, fudge_needed_for, the run-to-run spread, bad settings, and the truths of the
// backward's gradients (their ranks and index orders, padding rows of a packed layout skipped, the
// per-gradient flash k and torch-sdpa fudge factors).
//
// The truths are chosen by hand (hi/lo/rad/reference vectors; o = hi + lo exactly, rad = 0
// unless stated) with dyadic values, so every expected figure below is exact in binary64 and
// compared with ==.  Each comment shows the arithmetic.
#define BOOST_TEST_MODULE grading_grading
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "attncert/error.hpp"
#include "attncert/field.hpp"
#include "attncert/grading/grading.hpp"

using namespace attncert;
using namespace attncert::grading;

namespace {

const double qnan = std::numeric_limits<double>::quiet_NaN();
const double pinf = std::numeric_limits<double>::infinity();
const double dmax = std::numeric_limits<double>::max();

double p2(int e) { return std::ldexp(1.0, e); }

// Exact truths chosen by hand: o_e = hi[e] + lo[e], rad[e] = 0, reference = hi (representable
// values).  Owns the vectors a truth_view points to; build the view with view() and keep the
// exact_truth alive while it is used.
struct exact_truth {
  std::vector<double> hi, lo, rad, ref;
  std::array<std::size_t, 4> shape{};
  std::size_t rank = 4;
  target_format target = target_format::binary64;

  exact_truth(std::array<std::size_t, 4> s, target_format t, double fill, std::size_t r = 4)
      : shape(s), rank(r), target(t) {
    const std::size_t n = s[0] * s[1] * s[2] * (r == 4 ? s[3] : 1);
    hi.assign(n, fill);
    lo.assign(n, 0.0);
    rad.assign(n, 0.0);
    ref.assign(n, fill);
  }
  exact_truth(const exact_truth&) = delete;
  exact_truth& operator=(const exact_truth&) = delete;

  // Element number of (b, h, i, k) in C order.
  std::size_t at(std::size_t b, std::size_t h, std::size_t i, std::size_t k = 0) const {
    return ((b * shape[1] + h) * shape[2] + i) * (rank == 4 ? shape[3] : 1) + k;
  }
  void set(std::size_t e, double v) { hi[e] = ref[e] = v; }
  truth_view view() const {
    truth_view v;
    v.hi = &hi;
    v.lo = &lo;
    v.rad = &rad;
    v.reference = &ref;
    v.target = target;
    v.shape = shape;
    v.rank = rank;
    v.what = rank == 4 ? "output" : "LSE";
    return v;
  }
};

// "(b,h,i,k)" of the first `rank` entries, so that index checks print what they compare.
std::string idx(const std::array<std::size_t, 4>& a, std::size_t rank = 4) {
  std::ostringstream os;
  os << "(";
  for (std::size_t q = 0; q < rank; ++q) os << (q ? "," : "") << a[q];
  os << ")";
  return os.str();
}

rule_settings rule(grading_rule r) {
  rule_settings s;
  s.rule = r;
  return s;
}

// The truth of errors_give_each_maximum_with_its_index: shape (2, 3, 2, 4), o = 1 except
//   A (0,1,0,2): o = 1.875, c = 1.875 + 2^-5:  d = 2^-5,   4 ulps (bf16 ulp at 1.875 = 2^-7),  rel 2^-5/1.875 = 1/60
//   B (1,0,1,1): o = 1,     c = 1 + 3*2^-7:    d = 3*2^-7, 3 ulps (2^-7),                      rel 3*2^-7 = 0.0234375
//   C (1,2,1,3): o = 8,     c = 8 + 2^-4:      d = 2^-4,   1 ulp  (ulp at 8 = 2^3 * 2^-7),    rel 2^-7
//   D (0,0,0,1): o = 0.5,   c = 0.5 + 2^-9:    d = 2^-9,   0.5 ulp (ulp at 0.5 = 2^-8),      rel 2^-8
// so the largest abs error is C's, the largest rel error B's and the largest ulp error A's.
struct four_errors {
  exact_truth t{{2, 3, 2, 4}, target_format::bfloat16, 1.0};
  std::vector<double> c;
  std::size_t A = t.at(0, 1, 0, 2), B = t.at(1, 0, 1, 1), C = t.at(1, 2, 1, 3), D = t.at(0, 0, 0, 1);
  four_errors() {
    t.set(A, 1.875);
    t.set(C, 8.0);
    t.set(D, 0.5);
    c = t.hi;
    c[A] = 1.875 + p2(-5);
    c[B] = 1 + 3 * p2(-7);
    c[C] = 8 + p2(-4);
    c[D] = 0.5 + p2(-9);
  }
};

}  // namespace

// ---- approx_errors --------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(errors_give_each_maximum_with_its_index) {
  four_errors f;
  const truth_view tv = f.t.view();
  BOOST_TEST(idx(tv.index(f.C)) == "(1,2,1,3)");  // e = ((1*3 + 2)*2 + 1)*4 + 3 = 47
  BOOST_TEST(f.C == 47u);
  const candidate_grade g = approx_errors(tv, f.c, "c");
  BOOST_TEST(g.name == "c");
  BOOST_TEST(g.elements == 48u);
  BOOST_TEST(g.compared == 48u);
  BOOST_TEST(g.skipped == 0u);
  BOOST_TEST(g.nonfinite_where_finite == 0u);
  BOOST_TEST(g.index_rank == 4u);
  BOOST_TEST(g.max_abs == p2(-4));
  BOOST_TEST(idx(g.worst_abs) == "(1,2,1,3)");
  BOOST_TEST(g.has_worst_rel);
  BOOST_TEST(g.max_rel == 3 * p2(-7));
  BOOST_TEST(idx(g.worst_rel) == "(1,0,1,1)");
  BOOST_TEST(g.has_worst);
  BOOST_TEST(g.max_ulp == 4.0);
  BOOST_TEST(idx(g.worst) == "(0,1,0,2)");
  BOOST_TEST(g.worst_truth == 1.875);
  BOOST_TEST(g.worst_reference == 1.875);
  BOOST_TEST(g.worst_value == 1.875 + p2(-5));
  BOOST_TEST(g.mean_ulp == (4 + 3 + 1 + 0.5) / 48);
  // beyond 0.5, 1, 2, 4, 16 ulps (strictly): {A, B, C}, {A, B}, {A, B}, {}, {} — D sits at 0.5, A at 4
  BOOST_TEST(g.beyond[0] == 3u);
  BOOST_TEST(g.beyond[1] == 2u);
  BOOST_TEST(g.beyond[2] == 2u);
  BOOST_TEST(g.beyond[3] == 0u);
  BOOST_TEST(g.beyond[4] == 0u);
}

BOOST_AUTO_TEST_CASE(errors_in_ulps_of_binary32) {
  // The same errors in ulps of binary32 (ulp at 1.875 and 1 = 2^-23, at 8 = 2^-20, at 0.5 = 2^-24):
  //   A 2^-5 / 2^-23 = 2^18,  B 3*2^-7 / 2^-23 = 3*2^16,  C 2^-4 / 2^-20 = 2^16,  D 2^-9 / 2^-24 = 2^15
  four_errors f;
  f.t.target = target_format::binary32;
  const candidate_grade g = approx_errors(f.t.view(), f.c, "c");
  BOOST_TEST(g.max_ulp == p2(18));
  BOOST_TEST(idx(g.worst) == "(0,1,0,2)");
  BOOST_TEST(g.mean_ulp == (p2(18) + 3 * p2(16) + p2(16) + p2(15)) / 48);
  BOOST_TEST(g.beyond[4] == 4u);  // all four beyond 16 ulps
  BOOST_TEST(g.max_abs == p2(-4));  // abs and rel errors do not depend on the format
  BOOST_TEST(g.max_rel == 3 * p2(-7));
}

BOOST_AUTO_TEST_CASE(ulps_are_measured_at_the_exact_value_below_a_power_of_two) {
  // o = 1 - 2^-60 is stored as hi = 1, lo = -2^-60; o < 1, so ulp_bf16(o) = 2^-1 * 2^-7 = 2^-8 (not
  // ulp(1) = 2^-7).  The bf16 number below 1, c = 1 - 2^-8, is d = 2^-8 - 2^-60 = (1 - 2^-52) ulps
  // away: not correctly rounded (the correctly rounded value is 1, d = 2^-60 = 2^-52 ulps).
  exact_truth t({1, 1, 1, 4}, target_format::bfloat16, 1.0);
  t.lo[0] = -p2(-60);
  // o = -2 + 2^-59: |o| < 2, ulp 2^-7; c = -2 + 2^-7 is 2^-7 - 2^-59 = (1 - 2^-52) ulps away
  t.set(1, -2.0);
  t.lo[1] = p2(-59);
  // o = 1 + 2^-60 (lo of the same sign): ulp(o) = ulp(1) = 2^-7; c = 1 + 2^-7 is (1 - 2^-53) ulps away
  t.lo[2] = p2(-60);
  // o = 0.75 - 2^-60 (not near a power of two): ulp 2^-8; c = 0.75 + 2^-8 is (1 + 2^-52) ulps away
  t.set(3, 0.75);
  t.lo[3] = -p2(-60);
  const std::vector<double> c = {1 - p2(-8), -2 + p2(-7), 1 + p2(-7), 0.75 + p2(-8)};
  const candidate_grade g = approx_errors(t.view(), c, "c");
  BOOST_TEST(g.beyond[0] == 4u);  // every element is about 1 ulp off: none is correctly rounded
  BOOST_TEST(g.max_ulp == 1 + p2(-52));
  BOOST_TEST(g.mean_ulp == ((1 - p2(-52)) + (1 - p2(-52)) + (1 - p2(-53)) + (1 + p2(-52))) / 4);
  rule_settings s = rule(grading_rule::ulp);
  s.max_ulp = 0.5;
  const candidate_grade r = approx_grade(t.view(), c, nullptr, s, "c");
  BOOST_TEST(!r.rule.pass);
  BOOST_TEST(r.rule.violations == 4u);
  // the correctly rounded values pass max_ulp 0.5 (d = 2^-60 and 2^-59 are tiny in ulps)
  const std::vector<double> cr = {1.0, -2.0, 1.0, 0.75};
  const candidate_grade ok = approx_grade(t.view(), cr, nullptr, s, "cr");
  BOOST_TEST(ok.rule.pass);
  BOOST_TEST(ok.max_ulp == p2(-52));  // element 1: 2^-59 / 2^-7
  // binary32: ulp_f32(1 - 2^-60) = 2^-24; c = 1 - 2^-24 is (1 - 2^-36) ulps away
  t.target = target_format::binary32;
  const std::vector<double> c32 = {1 - p2(-24), -2.0, 1.0, 0.75};
  BOOST_TEST(approx_errors(t.view(), c32, "c").max_ulp == 1 - p2(-36));
  // the run-to-run spread measures in the same ulps: |c1 - c2| = 2^-24 at o = 1 - 2^-60 is 1 ulp
  BOOST_TEST(approx_rerun_spread(t.view(), c32, cr).max_ulp == 1.0);
}

BOOST_AUTO_TEST_CASE(errors_skip_truths_without_enclosure_and_count_nonfinite_candidates) {
  // Shape (1, 1, 2, 3), binary64, o = 0 everywhere:
  //   e0 rad = pinf, e1 hi = NaN: no enclosed truth, skipped (their candidates' NaNs do not count);
  //   e2 NaN, e3 +pinf: non-finite where the truth is finite;  e4 2^-10, e5 -0: compared.
  exact_truth t({1, 1, 2, 3}, target_format::binary64, 0.0);
  t.rad[0] = pinf;
  t.hi[1] = qnan;
  const std::vector<double> c = {qnan, qnan, qnan, pinf, p2(-10), -0.0};
  const candidate_grade g = approx_errors(t.view(), c, "c");
  BOOST_TEST(g.elements == 6u);
  BOOST_TEST(g.skipped == 2u);
  BOOST_TEST(g.nonfinite_where_finite == 2u);
  BOOST_TEST(g.compared == 2u);
  BOOST_TEST(g.max_abs == p2(-10));
  BOOST_TEST(idx(g.worst_abs) == "(0,0,1,1)");
  // every compared truth is 0: no relative error, no index
  BOOST_TEST(!g.has_worst_rel);
  BOOST_TEST(g.max_rel == 0.0);
  // ulp of binary64 at 0 is the smallest subnormal 2^-1074: 2^-10 / 2^-1074 = 2^1064 ulps
  BOOST_TEST(g.max_ulp == p2(1064));
  BOOST_TEST(idx(g.worst) == "(0,0,1,1)");
  // a relative error appears as soon as one compared truth is not 0: e5's o = 2^-3, c = -0, rel 1
  t.set(5, 0.125);
  const candidate_grade h = approx_errors(t.view(), c, "c");
  BOOST_TEST(h.has_worst_rel);
  BOOST_TEST(h.max_rel == 1.0);
  BOOST_TEST(idx(h.worst_rel) == "(0,0,1,2)");
  BOOST_TEST(h.max_abs == 0.125);
  // nothing compared at all: no index anywhere
  const std::vector<double> all_nan(6, qnan);
  const candidate_grade n = approx_errors(t.view(), all_nan, "n");
  BOOST_TEST(n.compared == 0u);
  BOOST_TEST(n.nonfinite_where_finite == 4u);
  BOOST_TEST(!n.has_worst);
  BOOST_TEST(!n.has_worst_rel);
  BOOST_TEST(n.mean_ulp == 0.0);
}

BOOST_AUTO_TEST_CASE(lse_errors_have_rank_3_indices) {
  // An LSE of shape (2, 3, 4), binary32, o = 2 except o(0,1,2) = -0.5:
  //   (1,2,3): c = 2 + 2^-20,     d = 2^-20, rel 2^-21, ulp_f32(2) = 2^-22:  4 ulps
  //   (0,1,2): c = -0.5 + 2^-21,  d = 2^-21, rel 2^-20, ulp_f32(0.5) = 2^-24:  8 ulps
  exact_truth t({2, 3, 4, 1}, target_format::binary32, 2.0, 3);
  const std::size_t a = t.at(1, 2, 3), b = t.at(0, 1, 2);
  BOOST_TEST(a == 23u);  // (1*3 + 2)*4 + 3
  BOOST_TEST(b == 6u);   // (0*3 + 1)*4 + 2
  t.set(b, -0.5);
  std::vector<double> c = t.hi;
  c[a] = 2 + p2(-20);
  c[b] = -0.5 + p2(-21);
  const truth_view tv = t.view();
  BOOST_TEST(tv.size() == 24u);
  BOOST_TEST(idx(tv.index(a)) == "(1,2,3,0)");
  const candidate_grade g = approx_errors(tv, c, "lse");
  BOOST_TEST(g.index_rank == 3u);
  BOOST_TEST(g.max_abs == p2(-20));
  BOOST_TEST(idx(g.worst_abs) == "(1,2,3,0)");
  BOOST_TEST(g.max_rel == p2(-20));
  BOOST_TEST(idx(g.worst_rel) == "(0,1,2,0)");
  BOOST_TEST(g.max_ulp == 8.0);
  BOOST_TEST(idx(g.worst) == "(0,1,2,0)");
  const rerun_spread s = approx_rerun_spread(tv, t.hi, c);
  BOOST_TEST(s.index_rank == 3u);
  BOOST_TEST(idx(s.worst) == "(1,2,3,0)");
}

// ---- flash ----------------------------------------------------------------------------------------

namespace {
// Shape (1, 1, 2, 2), bf16, o = {1, 1, 0.5, 2}; the baseline is off by 2^-7 at (0,0,0,1) and by
// 2^-9 at (0,0,1,0): max |b - o| = 2^-7, max |b - o|/|o| = max(2^-7/1, 2^-9/0.5) = 2^-7.
// With k = 2 and atol = 2^-9 the threshold is 2 * 2^-7 + 2^-9 = 9 * 2^-9.
struct flash_case {
  exact_truth t{{1, 1, 2, 2}, target_format::bfloat16, 1.0};
  std::vector<double> b;
  flash_case() {
    t.set(2, 0.5);
    t.set(3, 2.0);
    b = t.hi;
    b[1] = 1 + p2(-7);
    b[2] = 0.5 - p2(-9);
  }
};
}  // namespace

BOOST_AUTO_TEST_CASE(flash_passes_exactly_at_its_threshold_and_fails_just_above) {
  flash_case f;
  rule_settings s = rule(grading_rule::flash);
  s.atol = p2(-9);
  std::vector<double> c = f.t.hi;
  c[3] = 2 + 9 * p2(-9);  // |c - o| = 9 * 2^-9 = the threshold, at (0,0,1,1)
  candidate_grade g = approx_grade(f.t.view(), c, &f.b, s, "c");
  const rule_verdict& v = g.rule;
  BOOST_TEST(v.graded);
  BOOST_TEST(v.pass);
  BOOST_TEST(v.reason.empty());
  BOOST_TEST(v.k == 2.0);
  BOOST_TEST(v.atol == p2(-9));
  BOOST_TEST(v.baseline_max_abs == p2(-7));
  BOOST_TEST(v.baseline_max_rel == p2(-7));
  BOOST_TEST(v.observed == 9 * p2(-9));
  BOOST_TEST(v.threshold == 9 * p2(-9));
  BOOST_TEST(v.margin == 0.0);
  BOOST_TEST(v.ratio == 1.0);
  BOOST_TEST(v.violations == 0u);
  BOOST_TEST(v.has_at);
  BOOST_TEST(idx(v.at) == "(0,0,1,1)");
  BOOST_TEST(v.k_needed == 2.0);  // (9 * 2^-9 - 2^-9) / 2^-7
  // one binary64 ulp above (ulp(2) = 2^-51): fails, k needed (8 * 2^-9 + 2^-51) / 2^-7 = 2 + 2^-44
  c[3] = std::nextafter(c[3], pinf);
  g = approx_grade(f.t.view(), c, &f.b, s, "c");
  BOOST_TEST(!g.rule.pass);
  BOOST_TEST(g.rule.violations == 1u);
  BOOST_TEST(g.rule.observed == 9 * p2(-9) + p2(-51));
  BOOST_TEST(g.rule.margin == -p2(-51));
  BOOST_TEST(g.rule.k_needed == 2 + p2(-44));
  BOOST_TEST(g.rule.reason.find("k needed") != std::string::npos);
  // default atol 0: threshold 2 * 2^-7 = 2^-6 < 9 * 2^-9; k needed 9 * 2^-9 / 2^-7 = 2.25, and k = 2.25 passes
  c[3] = 2 + 9 * p2(-9);
  s.atol.reset();
  g = approx_grade(f.t.view(), c, &f.b, s, "c");
  BOOST_TEST(!g.rule.pass);
  BOOST_TEST(g.rule.atol == 0.0);
  BOOST_TEST(g.rule.threshold == p2(-6));
  BOOST_TEST(g.rule.ratio == 9 * p2(-9) / p2(-6));  // 1.125
  BOOST_TEST(g.rule.k_needed == 2.25);
  s.flash_k = 2.25;
  g = approx_grade(f.t.view(), c, &f.b, s, "c");
  BOOST_TEST(g.rule.pass);
  BOOST_TEST(g.rule.threshold == 9 * p2(-9));
  // violations count every element over the threshold: k = 0.25 gives 2^-9; errors 9*2^-9, 2^-7 (c[1]), 2^-9 (c[2])
  s.flash_k = 0.25;
  c[1] = 1 + p2(-7);
  c[2] = 0.5 + p2(-9);
  g = approx_grade(f.t.view(), c, &f.b, s, "c");
  BOOST_TEST(g.rule.threshold == p2(-9));
  BOOST_TEST(g.rule.violations == 2u);
  // an error at most atol needs no k
  s.flash_k = 2;
  s.atol = 0.5;
  BOOST_TEST(approx_grade(f.t.view(), c, &f.b, s, "c").rule.k_needed == 0.0);
}

BOOST_AUTO_TEST_CASE(flash_fails_on_a_nonfinite_baseline_or_candidate) {
  flash_case f;
  const rule_settings s = rule(grading_rule::flash);
  const std::vector<double> exact = f.t.hi;  // a perfect candidate
  BOOST_TEST(approx_grade(f.t.view(), exact, &f.b, s, "c").rule.pass);
  std::vector<double> b = f.b;
  b[0] = qnan;
  const candidate_grade g = approx_grade(f.t.view(), exact, &b, s, "c");
  BOOST_TEST(!g.rule.pass);
  BOOST_TEST(g.rule.baseline_nonfinite == 1u);
  BOOST_TEST(g.rule.reason.find("baseline") != std::string::npos);
  BOOST_TEST(g.rule.baseline_max_abs == p2(-7));  // measured over the finite elements
  std::vector<double> c = exact;
  c[2] = -pinf;
  const candidate_grade h = approx_grade(f.t.view(), c, &f.b, s, "c");
  BOOST_TEST(!h.rule.pass);
  BOOST_TEST(h.rule.nonfinite == 1u);
  BOOST_TEST(h.rule.reason.find("NaN/Inf") != std::string::npos);
  // a baseline NaN where the truth is not enclosed does not count
  f.t.rad[0] = pinf;
  BOOST_TEST(approx_grade(f.t.view(), exact, &b, s, "c").rule.pass);
}

BOOST_AUTO_TEST_CASE(every_rule_fails_on_a_nan_candidate) {
  flash_case f;
  std::vector<double> c = f.t.hi;
  c[1] = qnan;
  rule_settings s;
  for (grading_rule r : {grading_rule::ulp, grading_rule::flash, grading_rule::torch_sdpa, grading_rule::assert_close}) {
    s.rule = r;
    s.max_ulp = 1e300;
    const candidate_grade g = approx_grade(f.t.view(), c, &f.b, s, "c");
    BOOST_TEST_CONTEXT("rule " << to_string(r)) {
      BOOST_TEST(g.rule.graded);
      BOOST_TEST(!g.rule.pass);
      BOOST_TEST(g.rule.nonfinite == 1u);
      BOOST_TEST(g.rule.reason.rfind("1 NaN/Inf", 0) == 0u);
    }
  }
}

// ---- torch_sdpa -----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(torch_sdpa_tolerances_come_from_the_baseline) {
  // bf16: default_atol 1e-3, default_rtol 1.6e-2.  o = {1, 0.125} (shape (1,1,1,2)).
  exact_truth t({1, 1, 1, 2}, target_format::bfloat16, 1.0);
  t.set(1, 0.125);
  const std::vector<double> c = t.hi;
  rule_settings s = rule(grading_rule::torch_sdpa);  // F = 4
  // baseline errors above the defaults: b - o = {0, 2^-8}: max abs 2^-8 > 1e-3, max rel 2^-8/2^-3 = 2^-5 > 1.6e-2
  //   atol = 4 * 2^-8 = 2^-6, rtol = 4 * 2^-5 = 2^-3
  std::vector<double> b = {1, 0.125 + p2(-8)};
  candidate_grade g = approx_grade(t.view(), c, &b, s, "c");
  BOOST_TEST(g.rule.fudge == 4.0);
  BOOST_TEST(g.rule.defaults.atol == 1e-3);
  BOOST_TEST(g.rule.defaults.rtol == 1.6e-2);
  BOOST_TEST(g.rule.baseline_max_abs == p2(-8));
  BOOST_TEST(g.rule.baseline_max_rel == p2(-5));
  BOOST_TEST(g.rule.atol == p2(-6));
  BOOST_TEST(g.rule.rtol == p2(-3));
  BOOST_TEST(g.rule.pass);
  // baseline errors below the defaults: b - o = {2^-12, 0}: max abs 2^-12 < 1e-3, max rel 2^-12 < 1.6e-2
  //   atol = 4 * 1e-3, rtol = 4 * 1.6e-2
  b = {1 + p2(-12), 0.125};
  g = approx_grade(t.view(), c, &b, s, "c");
  BOOST_TEST(g.rule.baseline_max_abs == p2(-12));
  BOOST_TEST(g.rule.atol == 4 * 1e-3);
  BOOST_TEST(g.rule.rtol == 4 * 1.6e-2);
  // binary64 takes assert_close's (1e-7, 1e-7); float16's atol is 1e-3 (not assert_close's 1e-5)
  t.target = target_format::binary64;
  b = t.hi;
  g = approx_grade(t.view(), c, &b, s, "c");
  BOOST_TEST(g.rule.atol == 4 * 1e-7);
  BOOST_TEST(g.rule.rtol == 4 * 1e-7);
  t.target = target_format::binary16;
  g = approx_grade(t.view(), c, &b, s, "c");
  BOOST_TEST(g.rule.atol == 4 * 1e-3);
  BOOST_TEST(g.rule.rtol == 4 * 1e-3);
}

BOOST_AUTO_TEST_CASE(torch_sdpa_rtol_guard_and_zero_truths) {
  // o = {1, 2^-108}, bf16; the baseline has 2^-8 there (binary64 has no 2^-8 + 2^-108), off by
  // 2^-8 - 2^-108, which binary64 rounds to 2^-8: max rel 2^-8 / 2^-108 = 2^100 ~ 1.27e30.
  exact_truth t({1, 1, 1, 2}, target_format::bfloat16, 1.0);
  t.set(1, p2(-108));
  const std::vector<double> c = t.hi;
  std::vector<double> b = {1, p2(-8)};
  rule_settings s = rule(grading_rule::torch_sdpa);
  s.fudge = 1;  // F * R = 2^100 > 1e30: PyTorch's guard resets rtol to default_rtol
  candidate_grade g = approx_grade(t.view(), c, &b, s, "c");
  BOOST_TEST(g.rule.baseline_max_rel == p2(100));
  BOOST_TEST(g.rule.rtol == 1.6e-2);
  BOOST_TEST(g.rule.atol == p2(-8));
  s.fudge = 0.5;  // F * R = 2^99 ~ 6.3e29 <= 1e30: kept
  g = approx_grade(t.view(), c, &b, s, "c");
  BOOST_TEST(g.rule.rtol == p2(99));
  BOOST_TEST(g.rule.atol == p2(-9));
  // o = 0 and b = 0: 0/0 counts as default_rtol (nan_to_num(qnan=default_rtol))
  t.set(1, 0.0);
  b = {1, 0};
  g = approx_grade(t.view(), c, &b, s, "c");
  BOOST_TEST(g.rule.baseline_max_rel == 1.6e-2);
  // o = 0 and b = 2^-10: x/0 counts as the largest binary64 number; 4 * DBL_MAX > 1e30: default_rtol
  b = {1, p2(-10)};
  s.fudge = 4;
  g = approx_grade(t.view(), c, &b, s, "c");
  BOOST_TEST(g.rule.baseline_max_rel == dmax);
  BOOST_TEST(g.rule.rtol == 1.6e-2);
  BOOST_TEST(g.rule.atol == 4 * 1e-3);
}

BOOST_AUTO_TEST_CASE(fudge_needed_for_both_branches) {
  // Within the guard: max_e d_e / (A + R |o_e|) = max(0.01 / (0.001 + 0.016), 0.02 / (0.001 + 0.016 * 0.5))
  //   = max(0.588..., 2.222...) = 0.02 / 0.009
  BOOST_TEST(fudge_needed_for({0.01, 0.02}, {1, 0.5}, 0.001, 0.016, 0.016) == 0.02 / (0.001 + 0.016 * 0.5));
  // Beyond 1e30/R (R = 1e40: 1e30/R = 1e-10): d = 0.5 at |o| = 1e-31 needs d / (A + R|o|) = 0.5 / (1e-3 + 1e9)
  //   = 5e-10 > 1e-10, so no F <= 1e-10 passes; above it rtol = default_rtol and F = (d - 0.016 |o|) / A = 500
  const double beyond = fudge_needed_for({0.5, 1e-3}, {1e-31, 1}, 1e-3, 1e40, 0.016);
  BOOST_TEST(beyond == (0.5 - 0.016 * 1e-31) / 1e-3);
  // R = +pinf (allowed by the contract): every F > 0 has F * R > 1e30, so rtol = default_rtol and
  //   F = (0.5 - 0.016 * 1) / 1e-3 = 484
  BOOST_TEST(fudge_needed_for({0.5}, {1}, 1e-3, pinf, 0.016) == (0.5 - 0.016) / 1e-3);
  // no error needs no fudge
  BOOST_TEST(fudge_needed_for({0, 0}, {1, 2}, 1e-3, 0.016, 0.016) == 0.0);
  BOOST_TEST(fudge_needed_for({}, {}, 1e-3, 0.016, 0.016) == 0.0);
}

BOOST_AUTO_TEST_CASE(torch_sdpa_passes_at_the_fudge_needed_and_fails_below) {
  // o = {1, 0.125}, b - o = {0, 2^-8}: A = 2^-8, R = 2^-5 (as above).  c - o = {9 * 2^-7, 0}:
  //   fudge needed = 9 * 2^-7 / (2^-8 + 2^-5 * 1) = 9 * 2^-7 / (9 * 2^-8) = 2 exactly;
  //   at F = 2: atol = 2^-7, rtol = 2^-4, tolerance 2^-7 + 2^-4 = 9 * 2^-7 = |c - o|: passes.
  exact_truth t({1, 1, 1, 2}, target_format::bfloat16, 1.0);
  t.set(1, 0.125);
  const std::vector<double> b = {1, 0.125 + p2(-8)};
  const std::vector<double> c = {1 + 9 * p2(-7), 0.125};
  rule_settings s = rule(grading_rule::torch_sdpa);
  candidate_grade g = approx_grade(t.view(), c, &b, s, "c");  // F = 4
  BOOST_TEST(g.rule.pass);
  BOOST_TEST(g.rule.fudge_needed == 2.0);
  s.fudge = 2;
  g = approx_grade(t.view(), c, &b, s, "c");
  BOOST_TEST(g.rule.pass);
  BOOST_TEST(g.rule.observed == 9 * p2(-7));
  BOOST_TEST(g.rule.threshold == 9 * p2(-7));
  BOOST_TEST(g.rule.ratio == 1.0);
  BOOST_TEST(idx(g.rule.at) == "(0,0,0,0)");
  s.fudge = 0.99 * 2;
  g = approx_grade(t.view(), c, &b, s, "c");
  BOOST_TEST(!g.rule.pass);
  BOOST_TEST(g.rule.violations == 1u);
  BOOST_TEST(g.rule.fudge_needed == 2.0);
  BOOST_TEST(g.rule.reason.find("fudge needed 2") != std::string::npos);

  // Non-dyadic figures: pass just above the fudge needed (binary64 rounding), fail at 0.99 of it.
  exact_truth u({1, 2, 1, 3}, target_format::binary32, 0.0);
  const double o[] = {0.3, -0.7, 1.1, 0.05, -0.0625, 2.5};
  const double eb[] = {1e-6, -3e-6, 2e-7, 5e-6, 0, -1e-6};
  const double ec[] = {4e-6, 9e-6, -3e-5, 2e-5, 1e-6, 7e-6};
  std::vector<double> bu(6), cu(6);
  for (std::size_t e = 0; e < 6; ++e) {
    u.set(e, o[e]);
    bu[e] = o[e] + eb[e];
    cu[e] = o[e] + ec[e];
  }
  rule_settings su = rule(grading_rule::torch_sdpa);
  const double fn = approx_grade(u.view(), cu, &bu, su, "c").rule.fudge_needed;
  BOOST_TEST(fn > 0.0);
  su.fudge = fn * (1 + p2(-48));
  BOOST_TEST(approx_grade(u.view(), cu, &bu, su, "c").rule.pass);
  su.fudge = 0.99 * fn;
  const candidate_grade below = approx_grade(u.view(), cu, &bu, su, "c");
  BOOST_TEST(!below.rule.pass);
  BOOST_TEST(below.rule.violations >= 1u);
}

// ---- assert_close ---------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(assert_close_defaults_per_dtype) {
  // torch.testing's _DTYPE_PRECISIONS as (rtol, atol)
  const struct {
    target_format t;
    double rtol, atol, sdpa_rtol, sdpa_atol;
  } table[] = {{target_format::binary64, 1e-7, 1e-7, 1e-7, 1e-7},
               {target_format::binary32, 1.3e-6, 1e-5, 1.3e-6, 1e-5},
               {target_format::binary16, 1e-3, 1e-5, 1e-3, 1e-3},
               {target_format::bfloat16, 1.6e-2, 1e-5, 1.6e-2, 1e-3}};
  for (const auto& row : table) {
    BOOST_TEST_CONTEXT("format " << to_string(row.t)) {
      BOOST_TEST(assert_close_defaults(row.t).rtol == row.rtol);
      BOOST_TEST(assert_close_defaults(row.t).atol == row.atol);
      BOOST_TEST(sdpa_defaults(row.t).rtol == row.sdpa_rtol);
      BOOST_TEST(sdpa_defaults(row.t).atol == row.sdpa_atol);
      // approx_grade applies them when no --atol / --rtol is given, and the overrides otherwise
      exact_truth t({1, 1, 1, 1}, row.t, 1.0);
      rule_settings s = rule(grading_rule::assert_close);
      const std::vector<double> c = {1.0};
      candidate_grade g = approx_grade(t.view(), c, nullptr, s, "c");
      BOOST_TEST(g.rule.graded);
      BOOST_TEST(g.rule.pass);
      BOOST_TEST(g.rule.rtol == row.rtol);
      BOOST_TEST(g.rule.atol == row.atol);
      BOOST_TEST(g.rule.defaults.rtol == row.rtol);
      BOOST_TEST(g.rule.defaults.atol == row.atol);
      s.atol = 0.5;
      g = approx_grade(t.view(), c, nullptr, s, "c");
      BOOST_TEST(g.rule.atol == 0.5);
      BOOST_TEST(g.rule.rtol == row.rtol);
      s.atol.reset();
      s.rtol = 0.25;
      g = approx_grade(t.view(), c, nullptr, s, "c");
      BOOST_TEST(g.rule.atol == row.atol);
      BOOST_TEST(g.rule.rtol == 0.25);
    }
  }
  // the bf16 default at work: o = 1, |c - o| = 2^-6 = 0.015625 <= 1e-5 + 1.6e-2 passes; 2^-6 + 2^-9 fails
  exact_truth t({1, 1, 1, 1}, target_format::bfloat16, 1.0);
  const rule_settings s = rule(grading_rule::assert_close);
  BOOST_TEST(approx_grade(t.view(), {1 + p2(-6)}, nullptr, s, "c").rule.pass);
  BOOST_TEST(!approx_grade(t.view(), {1 + p2(-6) + p2(-9)}, nullptr, s, "c").rule.pass);
}

BOOST_AUTO_TEST_CASE(assert_close_decides_at_the_largest_ratio) {
  // binary64, shape (1, 2, 1, 2), o = {1, 100, 1, 1}, atol = rtol = 2^-10: tolerance 2^-9 at o = 1,
  // 101 * 2^-10 at o = 100.
  //   (0,0,0,0): d = 3 * 2^-10, ratio 1.5  (a violation)
  //   (0,0,0,1): d = 2^-4,      ratio 64/101 (the largest |c - o|, within its tolerance)
  //   (0,1,0,0): d = 2^-8,      ratio 2    (the decisive element)
  //   (0,1,0,1): d = 2^-9,      ratio 1    (exactly at the tolerance: not a violation)
  exact_truth t({1, 2, 1, 2}, target_format::binary64, 1.0);
  t.set(1, 100.0);
  const std::vector<double> c = {1 - 3 * p2(-10), 100 + p2(-4), 1 + p2(-8), 1 + p2(-9)};
  rule_settings s = rule(grading_rule::assert_close);
  s.atol = p2(-10);
  s.rtol = p2(-10);
  candidate_grade g = approx_grade(t.view(), c, nullptr, s, "c");
  BOOST_TEST(!g.rule.pass);
  BOOST_TEST(g.rule.violations == 2u);
  BOOST_TEST(idx(g.rule.at) == "(0,1,0,0)");
  BOOST_TEST(g.rule.observed == p2(-8));
  BOOST_TEST(g.rule.threshold == p2(-9));
  BOOST_TEST(g.rule.ratio == 2.0);
  BOOST_TEST(g.rule.margin == -p2(-9));
  BOOST_TEST(g.max_abs == p2(-4));
  BOOST_TEST(idx(g.worst_abs) == "(0,0,0,1)");
  BOOST_TEST(g.rule.reason.rfind("2 elements over", 0) == 0u);
  // atol = rtol = 2^-7: tolerance 2^-6 at o = 1; the decisive element is still (0,1,0,0), ratio 2^-8/2^-6
  s.atol = p2(-7);
  s.rtol = p2(-7);
  g = approx_grade(t.view(), c, nullptr, s, "c");
  BOOST_TEST(g.rule.pass);
  BOOST_TEST(g.rule.violations == 0u);
  BOOST_TEST(idx(g.rule.at) == "(0,1,0,0)");
  BOOST_TEST(g.rule.ratio == 0.25);
  BOOST_TEST(g.rule.margin == p2(-6) - p2(-8));
  // zero tolerances: exact elements have ratio 0, the others +pinf
  s.atol = 0;
  s.rtol = 0;
  const std::vector<double> one_off = {1, 100, 1, 1 + p2(-20)};
  g = approx_grade(t.view(), one_off, nullptr, s, "c");
  BOOST_TEST(g.rule.violations == 1u);
  BOOST_TEST(g.rule.ratio == pinf);
  BOOST_TEST(idx(g.rule.at) == "(0,1,0,1)");
}

// ---- ulp ------------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(ulp_rule_grades_only_with_a_bound) {
  four_errors f;  // ulp errors 4, 3, 1, 0.5 (bf16)
  rule_settings s = rule(grading_rule::ulp);
  candidate_grade g = approx_grade(f.t.view(), f.c, nullptr, s, "c");
  BOOST_TEST(!g.rule.graded);
  BOOST_TEST(g.rule.pass);
  BOOST_TEST(g.rule.reason.empty());
  BOOST_TEST(g.max_ulp == 4.0);  // the errors are measured all the same
  s.max_ulp = 2;
  g = approx_grade(f.t.view(), f.c, nullptr, s, "c");
  BOOST_TEST(g.rule.graded);
  BOOST_TEST(!g.rule.pass);
  BOOST_TEST(g.rule.violations == 2u);  // A (4) and B (3)
  BOOST_TEST(g.rule.observed == 4.0);
  BOOST_TEST(g.rule.threshold == 2.0);
  BOOST_TEST(g.rule.ratio == 2.0);
  BOOST_TEST(idx(g.rule.at) == "(0,1,0,2)");
  BOOST_TEST(g.rule.reason.find("exceeds " + field("max_ulp") + " 2 (2 elements over it)") != std::string::npos);
  s.max_ulp = 4;  // exactly at the largest error: passes
  g = approx_grade(f.t.view(), f.c, nullptr, s, "c");
  BOOST_TEST(g.rule.pass);
  BOOST_TEST(g.rule.violations == 0u);
  BOOST_TEST(g.rule.margin == 0.0);
  s.max_ulp = 0.5;  // A, B, C over it; D at 0.5 is not
  BOOST_TEST(approx_grade(f.t.view(), f.c, nullptr, s, "c").rule.violations == 3u);
  s.max_ulp = 0;  // only the exact elements pass a bound of 0
  BOOST_TEST(approx_grade(f.t.view(), f.c, nullptr, s, "c").rule.violations == 4u);
  BOOST_TEST(approx_grade(f.t.view(), f.t.hi, nullptr, s, "c").rule.pass);
}

// ---- bad input ------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(bad_settings_and_sizes_are_input_errors) {
  exact_truth t({1, 1, 2, 2}, target_format::binary32, 1.0);
  const std::vector<double> c = t.hi, shorter(3, 1.0);
  // a missing baseline
  BOOST_CHECK_THROW(approx_grade(t.view(), c, nullptr, rule(grading_rule::flash), "c"), input_error);
  BOOST_CHECK_THROW(approx_grade(t.view(), c, nullptr, rule(grading_rule::torch_sdpa), "c"), input_error);
  BOOST_CHECK_NO_THROW(approx_grade(t.view(), c, nullptr, rule(grading_rule::assert_close), "c"));
  BOOST_CHECK_NO_THROW(approx_grade(t.view(), c, nullptr, rule(grading_rule::ulp), "c"));
  BOOST_TEST(rule_needs_baseline(grading_rule::flash));
  BOOST_TEST(rule_needs_baseline(grading_rule::torch_sdpa));
  BOOST_TEST(!rule_needs_baseline(grading_rule::ulp));
  BOOST_TEST(!rule_needs_baseline(grading_rule::assert_close));
  // size mismatches: candidate, baseline, either run
  BOOST_CHECK_THROW(approx_errors(t.view(), shorter, "c"), input_error);
  BOOST_CHECK_THROW(approx_grade(t.view(), shorter, nullptr, rule(grading_rule::assert_close), "c"), input_error);
  BOOST_CHECK_THROW(approx_grade(t.view(), c, &shorter, rule(grading_rule::flash), "c"), input_error);
  BOOST_CHECK_THROW(approx_grade(t.view(), c, &shorter, rule(grading_rule::torch_sdpa), "c"), input_error);
  BOOST_CHECK_THROW(approx_rerun_spread(t.view(), c, shorter), input_error);
  BOOST_CHECK_THROW(approx_rerun_spread(t.view(), shorter, c), input_error);
  // negative, NaN or infinite settings, each named
  for (double bad : {-1.0, -0.5e-300, qnan, pinf}) {
    BOOST_TEST_CONTEXT("value " << bad) {
      auto expect_named = [](const rule_settings& s, const std::string& option) {  // the field, marked (field.hpp)
        try {
          validate_rule_settings(s);
          BOOST_ERROR("accepted a bad " + option);
        } catch (const input_error& e) {
          BOOST_TEST(std::string(e.what()).find(option) != std::string::npos);
        }
      };
      rule_settings s;
      s.max_ulp = bad;
      expect_named(s, field("max_ulp"));
      s = rule_settings{};
      s.flash_k = bad;
      expect_named(s, field("flash_k"));
      s = rule_settings{};
      s.fudge = bad;
      expect_named(s, field("fudge"));
      s = rule_settings{};
      s.atol = bad;
      expect_named(s, field("atol"));
      s = rule_settings{};
      s.rtol = bad;
      expect_named(s, field("rtol"));
      // approx_grade validates too
      s = rule(grading_rule::assert_close);
      s.rtol = bad;
      BOOST_CHECK_THROW(approx_grade(t.view(), c, nullptr, s, "c"), input_error);
    }
  }
  rule_settings zero;  // zeros are valid
  zero.max_ulp = 0;
  zero.flash_k = 0;
  zero.fudge = 0;
  zero.atol = 0;
  zero.rtol = 0;
  BOOST_CHECK_NO_THROW(validate_rule_settings(zero));
}

BOOST_AUTO_TEST_CASE(rule_names_parse_and_print) {
  BOOST_CHECK(parse_grading_rule("ulp") == grading_rule::ulp);
  BOOST_CHECK(parse_grading_rule("flash") == grading_rule::flash);
  BOOST_CHECK(parse_grading_rule("torch-sdpa") == grading_rule::torch_sdpa);
  BOOST_CHECK(parse_grading_rule("torch_sdpa") == grading_rule::torch_sdpa);
  BOOST_CHECK(parse_grading_rule("assert-close") == grading_rule::assert_close);
  BOOST_CHECK(parse_grading_rule("assert_close") == grading_rule::assert_close);
  for (const char* bad : {"", "ULP", "Flash", "sdpa", "torch", "assert close", "assertclose", "ulps", "flash "})
    BOOST_CHECK_THROW(parse_grading_rule(bad), input_error);
  for (grading_rule r : {grading_rule::ulp, grading_rule::flash, grading_rule::torch_sdpa, grading_rule::assert_close}) {
    BOOST_CHECK(parse_grading_rule(to_string(r)) == r);
    BOOST_TEST(!rule_statement(r).empty());
    BOOST_TEST(!rule_source(r).empty());
  }
  BOOST_TEST(to_string(grading_rule::torch_sdpa) == "torch-sdpa");
  BOOST_TEST(to_string(grading_rule::assert_close) == "assert-close");
}

// ---- run-to-run spread ----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(rerun_spread_counts_what_differs) {
  // binary32, shape (1, 1, 2, 3), o = 1:
  //   e0 1 / 1, e1 NaN / NaN, e2 -0 / +0: equal;
  //   e3 1 + 2^-20 / 1 - 2^-21: |c1 - c2| = 3 * 2^-21 = 12 ulps of binary32 at 1 (2^-23), at (0,0,1,0);
  //   e4 +pinf / -pinf, e5 1 / NaN: differing, non-finite.
  exact_truth t({1, 1, 2, 3}, target_format::binary32, 1.0);
  const std::vector<double> c1 = {1, qnan, -0.0, 1 + p2(-20), pinf, 1};
  const std::vector<double> c2 = {1, qnan, 0.0, 1 - p2(-21), -pinf, qnan};
  rerun_spread s = approx_rerun_spread(t.view(), c1, c1);
  BOOST_TEST(s.elements == 6u);
  BOOST_TEST(s.differing == 0u);
  BOOST_TEST(s.nonfinite_differing == 0u);
  BOOST_TEST(!s.has_worst);
  BOOST_TEST(s.max_abs == 0.0);
  s = approx_rerun_spread(t.view(), c1, c2);
  BOOST_TEST(s.differing == 3u);
  BOOST_TEST(s.nonfinite_differing == 2u);
  BOOST_TEST(s.max_abs == 3 * p2(-21));
  BOOST_TEST(s.max_ulp == 12.0);
  BOOST_TEST(s.has_worst);
  BOOST_TEST(idx(s.worst) == "(0,0,1,0)");
  BOOST_TEST(s.index_rank == 4u);
  // +pinf equals +pinf; the largest of several finite differences wins
  const std::vector<double> d1 = {1, 1 + p2(-22), pinf, 1, 1, 1 + p2(-10)};
  const std::vector<double> d2 = {1, 1, pinf, 1, 1, 1};
  s = approx_rerun_spread(t.view(), d1, d2);
  BOOST_TEST(s.differing == 2u);
  BOOST_TEST(s.nonfinite_differing == 0u);
  BOOST_TEST(s.max_abs == p2(-10));
  BOOST_TEST(idx(s.worst) == "(0,0,1,2)");
  // no ulp figure where the truth is not enclosed (the difference still counts)
  t.rad[5] = pinf;
  s = approx_rerun_spread(t.view(), d1, d2);
  BOOST_TEST(s.max_abs == p2(-10));
  BOOST_TEST(s.max_ulp == 2.0);  // e1: 2^-22 / 2^-23
}

// ---- from an oracle result ------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(truths_of_an_oracle_result) {
  // Q, K, V of shape (3, 2): every output element is graded against the oracle's own enclosure.
  oracle_request r;
  r.Q.n = r.K.n = r.V.n = 3;
  r.Q.d = r.K.d = r.V.d = 2;
  r.Q.values = {1, 2, 3, 4, 5, 6};
  r.K.values = {1, 0, 0, 1, 1, 1};
  r.V.values = {0.5, -1, 2, 3, -4, 1};
  const oracle_result res = run_oracle(r);
  BOOST_CHECK_THROW(lse_truth(res), input_error);  // no LSE was requested
  const truth_view out = output_truth(res, target_format::binary32);
  BOOST_TEST(out.size() == 6u);
  BOOST_TEST(out.rank == 4u);
  BOOST_TEST(idx(out.shape) == "(1,1,3,2)");
  BOOST_CHECK(out.target == target_format::binary32);
  // the binary64 reference rounded to binary32: |c - o| <= 0.5 ulp32 + 0.5 ulp64 = (0.5 + 2^-30) ulp32
  std::vector<double> c32(res.reference.size());
  for (std::size_t e = 0; e < c32.size(); ++e) c32[e] = static_cast<float>(res.reference[e]);
  rule_settings s = rule(grading_rule::ulp);
  s.max_ulp = 0.5 + p2(-28);
  const candidate_grade g = approx_grade(out, c32, nullptr, s, "c");
  BOOST_TEST(g.rule.pass);
  BOOST_TEST(g.compared == 6u);
  BOOST_TEST(grade_candidate(res, c32, target_format::binary32, "c").max_ulp == g.max_ulp);
  r.lse.want = true;
  const oracle_result with_lse = run_oracle(r);
  const truth_view lt = lse_truth(with_lse);
  BOOST_TEST(lt.rank == 3u);
  BOOST_TEST(lt.size() == 3u);
  BOOST_TEST(approx_errors(lt, with_lse.lse_reference, "lse").max_ulp <= 0.5);
}

// ---- the gradients of the backward pass ------------------------------------------------------------

namespace {
// A gradient tensor of `shape` with exact dyadic values v_e = e/4 (rad 0): o = hi exactly.
gradient_tensor dyadic_gradient(std::vector<std::size_t> shape) {
  gradient_tensor g;
  g.shape = std::move(shape);
  std::size_t n = 1;
  for (auto x : g.shape) n *= x;
  for (std::size_t e = 0; e < n; ++e) g.hi.push_back(static_cast<double>(e) / 4);
  g.reference = g.hi;
  g.lo.assign(n, 0.0);
  g.rad.assign(n, 0.0);
  return g;
}
}  // namespace

BOOST_AUTO_TEST_CASE(gradient_truths_have_their_own_rank_and_index_order) {
  // dsink: rank 1, index (h); one element 2 binary32 ulps off (ulp32 at 0.75 = 2^-24) is found at (2)
  const gradient_tensor ds = dyadic_gradient({4});
  const truth_view t1 = gradient_truth(ds, target_format::binary32, "dsink");
  BOOST_TEST(t1.rank == 1u);
  BOOST_TEST(t1.index_order == "h");
  BOOST_TEST(idx(t1.index(3), 1) == "(3)");
  std::vector<double> c = ds.hi;
  c[3] = 0.75 + p2(-23);
  const candidate_grade g1 = approx_errors(t1, c, "g1.dsink");
  BOOST_TEST(g1.index_rank == 1u);
  BOOST_TEST(g1.index_order == "h");
  BOOST_TEST(g1.max_ulp == 2.0);
  BOOST_TEST(idx(g1.worst, 1) == "(3)");
  // dbias of a bias broadcast as (1, 2, 1, 3): index (b, h, i, j) over the bias's own dimensions;
  // element 4 is (0, 1, 0, 1) (e = ((0*2 + 1)*1 + 0)*3 + 1)
  const gradient_tensor db = dyadic_gradient({1, 2, 1, 3});
  const truth_view t4 = gradient_truth(db, target_format::binary64, "dbias");
  BOOST_TEST(t4.index_order == "b,h,i,j");
  BOOST_TEST(idx(t4.index(4)) == "(0,1,0,1)");
  c = db.hi;
  c[4] = qnan;  // NaN where the truth is finite fails the rule, as for an output
  rule_settings s = rule(grading_rule::ulp);
  s.max_ulp = 64;
  const candidate_grade g4 = approx_grade(t4, c, nullptr, s, "g1.dbias");
  BOOST_TEST(g4.nonfinite_where_finite == 1u);
  BOOST_TEST(!g4.rule.pass);
  // dk / dv index (b, h_kv, j, k); an unknown name gets d0, d1, ...
  BOOST_TEST(gradient_truth(dyadic_gradient({1, 2, 3, 2}), target_format::binary64, "dk").index_order == "b,h_kv,j,k");
  BOOST_TEST(gradient_truth(dyadic_gradient({2, 3}), target_format::binary64, "other").index_order == "d0,d1");
  // bad tensors are internal errors (the backward result is ours)
  BOOST_CHECK_THROW(gradient_truth(dyadic_gradient({1, 1, 1, 1, 2}), target_format::binary64, "dq"), internal_error);
  gradient_tensor bad = dyadic_gradient({2, 2});
  bad.rad.pop_back();
  BOOST_CHECK_THROW(gradient_truth(bad, target_format::binary64, "dq"), internal_error);
  bad.shape.clear();
  BOOST_CHECK_THROW(gradient_truth(bad, target_format::binary64, "dq"), internal_error);
}

BOOST_AUTO_TEST_CASE(padding_rows_of_a_packed_layout_are_not_graded) {
  // thd with cu_seqlens (0, 1, 3): batch 0 has one row, batch 1 two; internal (B=2, H=1, n=2, d=2),
  // so internal row 1 (b 0, i 1) is padding: absent from the caller's tensor (3 rows of 2).
  output_layout lay;
  lay.layout = oracle::qkv_layout::thd;
  lay.B = 2;
  lay.H = 1;
  lay.nq = 2;
  lay.dv = 2;
  lay.cu_q = {0, 1, 3};
  lay.total_q = 3;
  const gradient_tensor dq = dyadic_gradient({2, 1, 2, 2});
  truth_view t = gradient_truth(dq, target_format::binary64, "dq");
  skip_absent_rows(t, lay);
  BOOST_TEST(!t.enclosed(2));
  BOOST_TEST(!t.enclosed(3));
  BOOST_TEST(t.enclosed(4));
  // the caller's rows (internal rows 0, 2, 3), exact: converted back they leave NaN in row 1
  const std::vector<double> external = {0, 0.25, 1, 1.25, 1.5, 1.75};
  const std::vector<double> c = lay.output_to_internal(external);
  BOOST_TEST(std::isnan(c[2]));
  rule_settings s = rule(grading_rule::ulp);
  s.max_ulp = 0;
  const candidate_grade g = approx_grade(t, c, nullptr, s, "g1.dq");
  BOOST_TEST(g.rule.pass);
  BOOST_TEST(g.skipped == 2u);
  BOOST_TEST(g.compared == 6u);
  BOOST_TEST(g.nonfinite_where_finite == 0u);
  // without the mask the NaN row fails the rule (so the mask is what spares it)
  const truth_view unmasked = gradient_truth(dq, target_format::binary64, "dq");
  BOOST_TEST(!approx_grade(unmasked, c, nullptr, s, "g1.dq").rule.pass);
  // a layout without padding leaves no mask; a shape that disagrees is an internal error
  lay.layout = oracle::qkv_layout::bhsd;
  truth_view t2 = gradient_truth(dq, target_format::binary64, "dq");
  skip_absent_rows(t2, lay);
  BOOST_TEST(t2.absent.empty());
  lay.dv = 3;
  BOOST_CHECK_THROW(skip_absent_rows(t2, lay), internal_error);
}

BOOST_AUTO_TEST_CASE(gradient_rules_take_the_published_factors) {
  BOOST_TEST(to_string(gradient_kind::dbias) == "dbias");
  BOOST_TEST(sdpa_gradient_fudge(gradient_kind::dq) == 180.0);
  BOOST_TEST(sdpa_gradient_fudge(gradient_kind::dk) == 16.0);
  BOOST_TEST(sdpa_gradient_fudge(gradient_kind::dv) == 4.0);
  BOOST_TEST(sdpa_gradient_fudge(gradient_kind::dbias) == 45.0);
  BOOST_TEST(sdpa_gradient_fudge(gradient_kind::dsink) == 45.0);
  rule_settings s = rule(grading_rule::flash);
  s.atol = 1e-5;
  const rule_settings d = gradient_rule_settings(s, gradient_kind::dk, false, false);
  BOOST_TEST(d.flash_k == 3.0);
  BOOST_TEST(d.fudge == 16.0);
  BOOST_TEST(*d.atol == 1e-5);  // the other settings are the forward's
  s.flash_k = 2.5;
  s.fudge = 7;
  const rule_settings given = gradient_rule_settings(s, gradient_kind::dq, true, true);
  BOOST_TEST(given.flash_k == 2.5);  // --flash-k / --fudge given: they apply to every gradient
  BOOST_TEST(given.fudge == 7.0);
}

// ---- the verdict of an oracle call ------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(verdict_fails_with_the_reason_of_each_failing_grade) {
  four_errors f;  // ulp errors 4, 3, 1, 0.5 (bf16)
  oracle_result res;
  rule_settings s = rule(grading_rule::ulp);
  s.max_ulp = 2;
  std::vector<candidate_grade> cands = {approx_grade(f.t.view(), f.c, nullptr, s, "c1")};
  s.max_ulp = 4;
  cands.push_back(approx_grade(f.t.view(), f.c, nullptr, s, "c2"));  // at the bound: passes
  graded_call call;
  call.result = &res;
  call.candidates = &cands;
  oracle_verdict v = decide_oracle_verdict(call);
  BOOST_CHECK(v.result == outcome::fail);
  BOOST_TEST(!v.passed());
  BOOST_TEST(v.exit_status() == 1);
  BOOST_TEST_REQUIRE(v.reasons.size() == 1u);
  BOOST_TEST(v.reasons[0] == "candidate c1 fails " + field("rule") + " ulp: max error 4 ulps exceeds " + field("max_ulp") +
                                 " 2 (2 elements over it)");
  // the CLI's spelling of that reason
  BOOST_TEST(spell_fields(v.reasons[0], cli_spelling) ==
             "candidate c1 fails --rule ulp: max error 4 ulps exceeds --max-ulp 2 (2 elements over it)");
  // FlashAttention's comparison of the first two candidates: c1's 4 ulps <= 2 x c2's 4 ulps
  BOOST_TEST_REQUIRE(v.comparison.has_value());
  BOOST_TEST(v.comparison->candidate == "c1");
  BOOST_TEST(v.comparison->baseline == "c2");
  BOOST_TEST(v.comparison->pass);
  BOOST_TEST(v.comparison->ratio.value() == 1.0);
  // a failure hides undecided rows and an uncomputed backward: the exit status stays 1
  res.undecided_rows = 2;
  call.backward_not_computed = "the backward was not computed";
  v = decide_oracle_verdict(call);
  BOOST_CHECK(v.result == outcome::fail);
  BOOST_TEST(v.reasons.size() == 1u);
  // a refuted output bound fails too, after the candidates' reasons
  res.undecided_rows = 0;
  call.backward_not_computed.clear();
  std::vector<candidate_grade> passing = {cands[1]};
  call.candidates = &passing;
  attention_grade att;
  att.rows = 4;
  att.bound_refuted = 3;
  call.attention = &att;
  v = decide_oracle_verdict(call);
  BOOST_CHECK(v.result == outcome::fail);
  BOOST_TEST_REQUIRE(v.reasons.size() == 1u);
  BOOST_TEST(v.reasons[0] == "the output bound was refuted on 3 rows");
  BOOST_TEST(!v.comparison.has_value());  // one candidate: no comparison
  att.bound_refuted = 0;
  BOOST_CHECK(decide_oracle_verdict(call).result == outcome::pass);
}

BOOST_AUTO_TEST_CASE(verdict_of_undecided_rows_is_partial) {
  four_errors f;
  oracle_result res;
  res.undecided_rows = 5;
  rule_settings s = rule(grading_rule::ulp);
  s.max_ulp = 16;
  const std::vector<candidate_grade> cands = {approx_grade(f.t.view(), f.c, nullptr, s, "c1")};
  graded_call call;
  call.result = &res;
  call.candidates = &cands;
  oracle_verdict v = decide_oracle_verdict(call);
  BOOST_CHECK(v.result == outcome::undecided);
  BOOST_TEST(v.exit_status() == 3);
  BOOST_TEST(!v.passed());
  BOOST_TEST_REQUIRE(v.reasons.size() == 1u);
  BOOST_TEST(spell_fields(v.reasons[0], cli_spelling) == "5 rows undecided: not computed within --max-seconds");
  // the backward not computed: undecided as well, its reason after the rows'
  call.backward_not_computed = "no backward";
  v = decide_oracle_verdict(call);
  BOOST_CHECK(v.result == outcome::undecided);
  BOOST_TEST_REQUIRE(v.reasons.size() == 2u);
  BOOST_TEST(v.reasons[1] == "no backward");
  res.undecided_rows = 0;
  v = decide_oracle_verdict(call);
  BOOST_CHECK(v.result == outcome::undecided);
  BOOST_TEST(v.reasons == std::vector<std::string>{"no backward"});
}

BOOST_AUTO_TEST_CASE(no_candidate_gives_no_verdict) {
  oracle_result res;
  graded_call call;
  call.result = &res;
  oracle_verdict v = decide_oracle_verdict(call);
  BOOST_CHECK(v.result == outcome::none);
  BOOST_TEST(v.passed());
  BOOST_TEST(v.exit_status() == 0);
  BOOST_TEST(v.reasons.empty());
  BOOST_TEST(!v.comparison.has_value());
  // the ulp rule without max_ulp grades nothing: still no verdict
  four_errors f;
  const std::vector<candidate_grade> cands = {approx_grade(f.t.view(), f.c, nullptr, rule(grading_rule::ulp), "c1")};
  call.candidates = &cands;
  BOOST_CHECK(decide_oracle_verdict(call).result == outcome::none);
  // no oracle result: a caller's bug
  call.result = nullptr;
  BOOST_CHECK_THROW(decide_oracle_verdict(call), internal_error);
  BOOST_TEST(to_string(outcome::none) == "none");
  BOOST_TEST(to_string(outcome::undecided) == "undecided");
}

BOOST_AUTO_TEST_CASE(gradient_sets_are_judged_per_kernel) {
  four_errors f;
  oracle_result res;
  rule_settings s = rule(grading_rule::ulp);
  gradient_set_grade set{"g1", "k1", {}};
  set.gradients.push_back({gradient_kind::dq, "k1.dq.npy", approx_grade(f.t.view(), f.c, nullptr, s, "g1.dq"), s, std::nullopt, ""});
  BOOST_CHECK(gradient_set_outcome(set) == outcome::none);  // no max_ulp: nothing graded
  s.max_ulp = 8;
  set.gradients.push_back({gradient_kind::dk, "k1.dk.npy", approx_grade(f.t.view(), f.c, nullptr, s, "g1.dk"), s, std::nullopt, ""});
  BOOST_CHECK(gradient_set_outcome(set) == outcome::pass);
  s.max_ulp = 1;
  set.gradients.push_back({gradient_kind::dv, "k1.dv.npy", approx_grade(f.t.view(), f.c, nullptr, s, "g1.dv"), s, std::nullopt, ""});
  BOOST_CHECK(gradient_set_outcome(set) == outcome::fail);
  const std::vector<gradient_set_grade> sets = {set};
  graded_call call;
  call.result = &res;
  call.gradient_candidates = &sets;
  const oracle_verdict v = decide_oracle_verdict(call);
  BOOST_CHECK(v.result == outcome::fail);
  BOOST_TEST_REQUIRE(v.reasons.size() == 1u);
  BOOST_TEST(v.reasons[0].rfind("gradient candidate g1 dv fails " + field("rule") + " ulp: max error 4 ulps exceeds ", 0) == 0u);
}
