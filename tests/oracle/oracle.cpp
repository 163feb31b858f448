// Tests of oracle/oracle.hpp: rounding to the target formats against MPFR, soundness and
// completeness of the double-double fast path against a 1024-bit MPFR recomputation, the Ziv
// stage on exact midpoints, policies and bad input, and the candidate / attention grading.
#define BOOST_TEST_MODULE attention_oracle
#include <mpfr.h>

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <random>

#include "../support.hpp"
#include "attncert/number/traits.hpp"
#include "attncert/oracle/backward.hpp"
#include "attncert/grading/grading.hpp"
#include "attncert/oracle/fast_row.hpp"
#include "attncert/error.hpp"
#include "attncert/number/double_double.hpp"
#include "attncert/number/exp_batch.hpp"

using namespace attncert;
using namespace attncert::oracle;
using namespace attncert::grading;  // grade_candidate, grade_attention

namespace {

const target_format all_targets[] = {target_format::binary64, target_format::binary32, target_format::binary16,
                                     target_format::bfloat16};

// Independent reference: MPFR's own rounding with the format's exponent range and subnormals.
double ref_round(mpfr_srcptr x, target_format t) {
  const int p = target_precision(t), emin = target_emin(t);
  const int emax = t == target_format::binary64 ? 1024 : (t == target_format::binary16 ? 16 : 128);
  const mpfr_exp_t old_min = mpfr_get_emin(), old_max = mpfr_get_emax();
  mpfr_set_emin(emin - p + 2);  // MPFR exponents: x = 0.1b * 2^e
  mpfr_set_emax(emax);
  mpfr_t y;
  mpfr_init2(y, p);
  int inex = mpfr_set(y, x, MPFR_RNDN);
  inex = mpfr_check_range(y, inex, MPFR_RNDN);
  mpfr_subnormalize(y, inex, MPFR_RNDN);
  const double r = mpfr_get_d(y, MPFR_RNDN);  // exact
  mpfr_clear(y);
  mpfr_set_emin(old_min);
  mpfr_set_emax(old_max);
  return r;
}

double ref_round_sum(double a, double b, target_format t) {
  mpfr_t x;
  mpfr_init2(x, 2200);
  mpfr_set_d(x, a, MPFR_RNDN);
  mpfr_add_d(x, x, b, MPFR_RNDN);  // exact at 2200 bits
  const double r = ref_round(x, t);
  mpfr_clear(x);
  return r;
}

// Exact attention output (b = h = 0 of a single head) at `bits` with MPFR, straightforwardly.
std::vector<double> exact_row_error(const oracle::detail::row_inputs& in, const std::vector<double>& hi,
                                    const std::vector<double>& lo, const std::vector<double>& rad, double scale_num,
                                    double scale_den, bool inv_sqrt_d, bool& sound) {
  const mpfr_prec_t P = 1024;
  mpfr_t s, t, m, w, W, acc, tmp;
  for (auto* v : {&s, &t, &m, &w, &W, &acc, &tmp}) mpfr_init2(*v, P);
  if (inv_sqrt_d) {
    mpfr_set_ui(s, static_cast<unsigned long>(in.d), MPFR_RNDN);
    mpfr_rec_sqrt(s, s, MPFR_RNDN);
  } else {
    mpfr_set_d(s, scale_num, MPFR_RNDN);
    mpfr_div_d(s, s, scale_den, MPFR_RNDN);
  }
  std::vector<mpfr_t> sc(in.nk);
  bool first = true;
  for (std::size_t j = 0; j < in.nk; ++j) {
    mpfr_init2(sc[j], P);
    mpfr_set_zero(sc[j], 1);
    if (!in.allowed[j]) continue;
    for (std::size_t l = 0; l < in.d; ++l) {
      mpfr_set_d(tmp, in.q[l], MPFR_RNDN);
      mpfr_mul_d(tmp, tmp, in.K[j * in.d + l], MPFR_RNDN);
      mpfr_add(sc[j], sc[j], tmp, MPFR_RNDN);
    }
    mpfr_mul(sc[j], sc[j], s, MPFR_RNDN);
    if (first || mpfr_cmp(sc[j], m) > 0) mpfr_set(m, sc[j], MPFR_RNDN);
    first = false;
  }
  std::vector<double> errs(in.dv);
  sound = true;
  for (std::size_t k = 0; k < in.dv; ++k) {
    mpfr_set_zero(W, 1);
    mpfr_set_zero(acc, 1);
    for (std::size_t j = 0; j < in.nk; ++j) {
      if (!in.allowed[j]) continue;
      mpfr_sub(w, sc[j], m, MPFR_RNDN);
      mpfr_exp(w, w, MPFR_RNDN);
      mpfr_add(W, W, w, MPFR_RNDN);
      mpfr_mul_d(tmp, w, in.V[j * in.dv + k], MPFR_RNDN);
      mpfr_add(acc, acc, tmp, MPFR_RNDN);
    }
    mpfr_div(acc, acc, W, MPFR_RNDN);
    mpfr_sub_d(acc, acc, hi[k], MPFR_RNDN);
    mpfr_sub_d(acc, acc, lo[k], MPFR_RNDN);
    mpfr_abs(acc, acc, MPFR_RNDN);
    errs[k] = mpfr_get_d(acc, MPFR_RNDU);
    // the MPFR value itself errs by far less than 2^-1000 relative: compare with a margin
    if (std::isfinite(rad[k]) && errs[k] > rad[k]) sound = false;
  }
  for (auto* v : {&s, &t, &m, &w, &W, &acc, &tmp}) mpfr_clear(*v);
  for (auto& x : sc) mpfr_clear(x);
  return errs;
}

struct row_case {
  std::vector<double> q, K, KT, V;
  std::vector<std::uint8_t> allowed;
  std::size_t nk, d, dv;
  oracle::detail::row_inputs in() const {
    return {q.data(), K.data(), KT.data(), V.data(), allowed.data(), nk, d, dv, 0, 0, 0};
  }
};

row_case make_row(std::mt19937_64& rng, std::size_t nk, std::size_t d, std::size_t dv, double qscale = 1.0) {
  std::normal_distribution<double> N(0, 1);
  row_case c;
  c.nk = nk;
  c.d = d;
  c.dv = dv;
  for (std::size_t l = 0; l < d; ++l) c.q.push_back(N(rng) * qscale);
  for (std::size_t i = 0; i < nk * d; ++i) c.K.push_back(N(rng));
  for (std::size_t i = 0; i < nk * dv; ++i) c.V.push_back(N(rng));
  c.allowed.assign(nk, 1);
  c.KT.resize(d * nk);
  for (std::size_t j = 0; j < nk; ++j)
    for (std::size_t l = 0; l < d; ++l) c.KT[l * nk + j] = c.K[j * d + l];
  return c;
}

tensor4 tens(std::size_t n, std::size_t d, std::vector<double> v) {
  tensor4 t;
  t.n = n;
  t.d = d;
  t.values = std::move(v);
  return t;
}

}  // namespace

BOOST_AUTO_TEST_CASE(rounding_to_targets_matches_mpfr) {
  auto rng = make_rng(1);
  std::uniform_real_distribution<double> U(-4, 4);
  std::uniform_int_distribution<int> E(-30, 30), small(-1074, -900);
  std::size_t n = 0, bad = 0;
  for (target_format t : all_targets) {
    for (int it = 0; it < 4000; ++it) {
      double a = std::ldexp(U(rng), E(rng));
      double b;
      switch (it % 4) {
        case 0: b = std::ldexp(U(rng), E(rng) - 60); break;  // tail far below
        case 1: {  // a at a midpoint of the target, b a tiny tail of either sign or 0
          const double ulp = target_ulp(a, t);
          a = (std::floor(a / ulp) + 0.5) * ulp;
          b = (it % 8 == 1) ? 0.0 : std::ldexp(U(rng), -80 + E(rng) / 4);
          break;
        }
        case 2: b = std::ldexp(U(rng), small(rng)); a = std::ldexp(U(rng), -140); break;  // subnormal range
        default: b = -a * (1 + std::ldexp(U(rng), -40)); break;  // cancellation
      }
      if (t == target_format::binary16 && std::fabs(a) > 60000) continue;
      const double got = round_sum_to_target(a, b, t), want = ref_round_sum(a, b, t);
      ++n;
      if (!(got == want || (std::isnan(got) && std::isnan(want)))) {
        if (++bad <= 3)
          BOOST_ERROR("round_sum_to_target(" << a << ", " << b << ", " << to_string(t) << ") = " << got << ", MPFR says " << want);
      }
    }
  }
  BOOST_TEST(bad == 0u);
  BOOST_TEST(n > 10000u);
  BOOST_TEST_MESSAGE(n << " sums rounded as MPFR rounds them");
}

BOOST_AUTO_TEST_CASE(fast_path_enclosures_are_sound_and_tight) {
  auto rng = make_rng(2);
  std::size_t rows = 0, decided = 0;
  double worst_ratio = 0;
  for (int it = 0; it < 60; ++it) {
    const std::size_t nk = 1 + rng() % 40, d = 1 + rng() % 16, dv = 1 + rng() % 6;
    const int kind = it % 5;
    row_case c = make_row(rng, nk, d, dv, kind == 1 ? 30.0 : 1.0);
    if (kind == 2)  // cancelling values: pairs of keys nearly equal with opposite values
      for (std::size_t j = 1; j < nk; j += 2) {
        for (std::size_t l = 0; l < d; ++l) c.K[j * d + l] = c.K[(j - 1) * d + l] + std::ldexp(1.0, -30);
        for (std::size_t k = 0; k < dv; ++k) c.V[j * dv + k] = -c.V[(j - 1) * dv + k] * 1e8, c.V[(j - 1) * dv + k] *= 1e8;
      }
    if (kind == 3)  // causal-like mask
      for (std::size_t j = nk / 2 + 1; j < nk; ++j) c.allowed[j] = 0;
    for (std::size_t j = 0; j < nk; ++j)
      for (std::size_t l = 0; l < d; ++l) c.KT[l * nk + j] = c.K[j * d + l];
    auto in = c.in();
    bool inv = kind != 4;
    if (inv) {  // s = 1/sqrt(d) to 106 bits, radius from MPFR
      mpfr_t s, r;
      mpfr_init2(s, 400);
      mpfr_init2(r, 400);
      mpfr_set_ui(s, static_cast<unsigned long>(d), MPFR_RNDN);
      mpfr_rec_sqrt(s, s, MPFR_RNDN);
      in.scale_hi = mpfr_get_d(s, MPFR_RNDN);
      mpfr_sub_d(r, s, in.scale_hi, MPFR_RNDN);
      in.scale_lo = mpfr_get_d(r, MPFR_RNDN);
      mpfr_sub_d(r, r, in.scale_lo, MPFR_RNDN);
      in.scale_rad = std::ldexp(std::fabs(mpfr_get_d(r, MPFR_RNDU)), 1) + 0x1p-1000;  // generous
      mpfr_clear(s);
      mpfr_clear(r);
    } else {
      in.scale_hi = 0.125;  // exact power of two
    }
    oracle::detail::row_workspace ws;
    std::vector<double> hi(dv), lo(dv), rad(dv);
    ++rows;
    if (!oracle::detail::fast_row(in, ws, hi.data(), lo.data(), rad.data())) continue;
    bool sound = true;
    const auto errs = exact_row_error(in, hi, lo, rad, 1, 8, inv, sound);
    BOOST_TEST(sound, "fast path enclosure misses the 1024-bit value in case " << it);
    double vmax = 0;
    for (double v : c.V) vmax = std::max(vmax, std::fabs(v));
    for (std::size_t k = 0; k < dv; ++k) {
      BOOST_TEST(std::isfinite(rad[k]));
      if (kind != 2) BOOST_TEST(rad[k] <= std::ldexp(vmax, -90), "radius " << rad[k] << " not tight, case " << it);
      if (rad[k] > 0) worst_ratio = std::max(worst_ratio, errs[k] / rad[k]);
      ++decided;
    }
  }
  BOOST_TEST(decided > 0u);
  BOOST_TEST_MESSAGE(rows << " rows; largest actual error / radius = " << worst_ratio);
}

BOOST_AUTO_TEST_CASE(exact_midpoints_are_decided_or_reported_faithful) {
  // Equal scores, values 1 and 1 + 2^-52: the exact output is the midpoint 1 + 2^-53; the shift by
  // an exactly computed difference makes every weight exactly 1, so MPFI returns a point: RNE = 1.
  oracle_request r;
  r.Q = tens(1, 2, {1, 1});
  r.K = tens(2, 2, {0, 0, 0, 0});
  r.V = tens(2, 1, {1.0, 1.0 + 0x1p-52});
  auto res = run_oracle(r);
  BOOST_TEST(res.reference[0] == 1.0);
  BOOST_TEST(res.correctly_rounded == 1u);
  // Two groups of equal scores averaging to 1 + 2^-53 with irrational weights: faithful only.
  r.Q = tens(1, 1, {1});
  r.K = tens(4, 1, {1, 1, 0, 0});
  r.V = tens(4, 1, {1.0, 1.0 + 0x1p-52, 1.0, 1.0 + 0x1p-52});
  r.max_bits = 512;
  res = run_oracle(r);
  BOOST_TEST(res.faithful_only == 1u);
  BOOST_TEST((res.reference[0] == 1.0 || res.reference[0] == 1.0 + 0x1p-52));
  BOOST_TEST(res.by_mpfi.size() == 0u);
}

BOOST_AUTO_TEST_CASE(threads_do_not_change_the_answer) {
  auto rng = make_rng(3);
  std::normal_distribution<double> N(0, 1);
  oracle_request r;
  std::vector<double> q(40 * 8), k(40 * 8), v(40 * 5);
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = N(rng);
  r.Q = tens(40, 8, q);
  r.K = tens(40, 8, k);
  r.V = tens(40, 5, v);
  r.mask = mask_kind::causal;
  r.threads = 1;
  const auto a = run_oracle(r);
  r.threads = 2;
  const auto b = run_oracle(r);
  BOOST_TEST(a.reference == b.reference);
  BOOST_TEST(a.correctly_rounded == a.elements);
}

// With NaN in a value column every row is bad input; whichever thread meets one first, the error
// names the first row in index order, as a single-threaded run does (the CLI and Python compare it).
BOOST_AUTO_TEST_CASE(the_error_names_the_first_bad_row_whatever_the_threads) {
  auto rng = make_rng(5);
  std::normal_distribution<double> N(0, 1);
  oracle_request r;
  std::vector<double> q(64 * 4), k(64 * 4), v(64 * 3);
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = N(rng);
  for (std::size_t j = 0; j < 64; ++j) v[j * 3 + 1] = std::nan("");
  r.Q = tens(64, 4, q);
  r.K = tens(64, 4, k);
  r.V = tens(64, 3, v);
  r.threads = 1;
  const std::string want = input_error_of([&] { run_oracle(r); });
  BOOST_TEST(want.find("(0, 0, 0)") != std::string::npos, want);
  r.threads = 2;
  for (int t = 0; t < 400; ++t) BOOST_TEST(input_error_of([&] { run_oracle(r); }) == want);
  // the backward pass too: NaN in dO from row 5 on
  r.V.values = std::vector<double>(v.size(), 0.25);
  oracle::backward_inputs g;
  g.dO.assign(64 * 3, 1.0);
  for (std::size_t i = 5; i < 64; ++i) g.dO[i * 3] = std::nan("");
  r.threads = 1;
  const std::string want_b = input_error_of([&] { run_oracle_backward(r, g); });
  BOOST_TEST(!want_b.empty());
  r.threads = 2;
  for (int t = 0; t < 400; ++t) BOOST_TEST(input_error_of([&] { run_oracle_backward(r, g); }) == want_b);
}

// A row sample computes the sampled rows exactly as the full run does and leaves the others out
// (NaN, decided_by::padding, not counted as elements); a sample of the wrong size is bad input, and
// the backward refuses a sample.
BOOST_AUTO_TEST_CASE(row_sample_computes_only_the_sampled_rows) {
  auto rng = make_rng(4);
  std::normal_distribution<double> N(0, 1);
  oracle_request r;
  std::vector<double> q(24 * 6), k(24 * 6), v(24 * 3);
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = N(rng);
  r.Q = tens(24, 6, q);
  r.K = tens(24, 6, k);
  r.V = tens(24, 3, v);
  r.mask = mask_kind::causal;
  r.lse.want = true;
  const auto full = run_oracle(r);
  r.row_sample.assign(24, 0);
  for (std::size_t i : {0u, 5u, 6u, 23u}) r.row_sample[i] = 1;
  const auto part = run_oracle(r);
  BOOST_TEST(part.elements == 4u * 3u);
  BOOST_TEST(part.padding_rows == 20u);
  for (std::size_t i = 0; i < 24; ++i)
    for (std::size_t c = 0; c < 3; ++c) {
      const std::size_t e = i * 3 + c;
      if (r.row_sample[i]) {
        BOOST_TEST(part.reference[e] == full.reference[e]);
        BOOST_TEST(part.lse_reference[i] == full.lse_reference[i]);
      } else {
        BOOST_TEST(std::isnan(part.reference[e]));
        BOOST_TEST((part.how[e] == decided_by::padding));
      }
    }
  r.row_sample.assign(23, 1);
  BOOST_CHECK_THROW(run_oracle(r), input_error);
  r.row_sample.assign(24, 1);
  oracle::backward_inputs g;
  g.dO.assign(24 * 3, 1.0);
  BOOST_CHECK_THROW(run_oracle_backward(r, g), input_error);
}

BOOST_AUTO_TEST_CASE(bad_input_and_policies) {
  oracle_request r;
  r.Q = tens(2, 2, {1, 2, 3, 4});
  r.K = tens(2, 2, {1, 0, 0, 1});
  r.V = tens(2, 1, {5, 6});
  auto expect_error = [&](const oracle_request& x, const std::string& what) {
    try {
      run_oracle(x);
      BOOST_ERROR("no error for " << what);
    } catch (const input_error& e) {
      BOOST_TEST_MESSAGE(what << ": " << e.what());
    }
  };
  auto x = r;
  x.K = tens(2, 3, {1, 0, 0, 1, 0, 0});
  expect_error(x, "feature mismatch");
  x = r;
  x.V = tens(3, 1, {1, 2, 3});
  expect_error(x, "length mismatch");
  x = r;
  x.Q = tens(0, 2, {});
  expect_error(x, "empty Q");
  x = r;
  x.V.values[1] = std::nan("");
  expect_error(x, "NaN value");
  x = r;
  x.max_bits = 64;
  expect_error(x, "precision too low");
  x = r;
  x.mask = mask_kind::explicit_mask;
  x.M.nq = 2;
  x.M.nk = 2;
  x.M.allowed = {1, 1, 0, 0};
  expect_error(x, "fully masked row");
  x.empty_rows = empty_row_policy::zeros;
  auto res = run_oracle(x);
  BOOST_TEST(res.reference[1] == 0.0);
  BOOST_TEST(res.exact_policy == 1u);
  x.empty_rows = empty_row_policy::nan;
  res = run_oracle(x);
  BOOST_TEST(std::isnan(res.reference[1]));
  // NaN input with allow_nonfinite: IEEE semantics on the touched rows only
  x = r;
  x.V.values[1] = std::numeric_limits<double>::infinity();
  x.allow_nonfinite = true;
  x.mask = mask_kind::causal;
  res = run_oracle(x);
  BOOST_TEST(res.ieee_nonfinite == 1u);
  BOOST_TEST(res.correctly_rounded == 1u);
  BOOST_TEST(res.reference[0] == 5.0);
  // A huge scale: binary64 scores overflow; the exact computation does not.
  x = r;
  x.scale.inv_sqrt_d = false;
  x.scale.rational = attncert::number_traits<attncert::mpq_rational>::from_string("1e300");
  res = run_oracle(x);
  BOOST_TEST(res.correctly_rounded == 2u);
  BOOST_TEST(res.reference[0] == 6.0);  // q0 = (1, 2): key 1 scores 2 > 1, so all weight (to 2^-10^300) is on it
}

BOOST_AUTO_TEST_CASE(candidate_grading_counts_ulps_from_the_truth) {
  oracle_request r;
  r.Q = tens(3, 2, {1, 2, 3, 4, 5, 6});
  r.K = tens(3, 2, {1, 0, 0, 1, 1, 1});
  r.V = tens(3, 2, {0.5, -1, 2, 3, -4, 1});
  const auto res = run_oracle(r);
  std::vector<double> c = res.reference;
  auto g = grade_candidate(res, c, target_format::binary64, "ref");
  BOOST_TEST(g.max_ulp <= 0.5);
  BOOST_TEST(g.beyond[1] == 0u);
  c[4] = c[4] + 7 * target_ulp(c[4], target_format::binary64);
  c[2] = std::numeric_limits<double>::quiet_NaN();
  g = grade_candidate(res, c, target_format::binary64, "off");
  BOOST_TEST(g.max_ulp >= 6.5);
  BOOST_TEST(g.max_ulp <= 7.5);
  BOOST_TEST(g.beyond[3] == 1u);  // > 4 ulps
  BOOST_TEST(g.beyond[4] == 0u);  // > 16 ulps
  BOOST_TEST(g.nonfinite_where_finite == 1u);
  BOOST_TEST(g.worst[2] == 2u);
  BOOST_TEST(g.worst[3] == 0u);
}

BOOST_AUTO_TEST_CASE(attention_grading_certifies_the_output_bound) {
  auto rng = make_rng(4);
  std::normal_distribution<double> N(0, 1);
  oracle_request r;
  const std::size_t n = 12, d = 4;
  std::vector<double> q(n * d), k(n * d), v(n * 3);
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = N(rng);
  r.Q = tens(n, d, q);
  r.K = tens(n, d, k);
  r.V = tens(n, 3, v);
  r.mask = mask_kind::causal;
  // A candidate: the true attention perturbed row by row (rows still need not sum to 1).
  std::vector<double> A(n * n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    double m = -1e300, W = 0;
    std::vector<double> s(i + 1);
    for (std::size_t j = 0; j <= i; ++j) {
      for (std::size_t l = 0; l < d; ++l) s[j] += q[i * d + l] * k[j * d + l] / 2;
      m = std::max(m, s[j]);
    }
    for (std::size_t j = 0; j <= i; ++j) W += std::exp(s[j] - m);
    for (std::size_t j = 0; j <= i; ++j) A[i * n + j] = std::exp(s[j] - m) / W * (1 + 1e-3 * N(rng));
  }
  auto g = grade_attention(r, A);
  BOOST_TEST(g.rows == n);
  // A theorem: never refuted.  Decided on every row except where it holds with equality (row 0
  // attends one key; equality if that key's value has the largest norm).
  BOOST_TEST(g.bound_refuted == 0u);
  BOOST_TEST(g.bound_certified + g.bound_undecided == n);
  BOOST_TEST(g.bound_certified >= n - 1);
  for (std::size_t i = 1; i < n; ++i) BOOST_TEST(g.row_l1[i] > 0);
  BOOST_TEST(g.max_row_l1 < 0.01);
}

namespace {

// The exact row of proofs/P14 at 1024 bits with MPFR: x_j = C·tanh(s·q·k_j / C) + a_j over the
// allowed keys (a_j = add_hi + add_lo exactly), W = Σ e^{x_j - m} + e^{sink - m},
// o_k = keep_factor · Σ_{kept} e^{x_j - m} v_jk / W.  Returns false when some |o_k - (hi + lo)|
// exceeds rad_k, or |W - (W_hi + W_lo)| exceeds W_err (ws.m is the fast path's shift).
bool variant_row_sound(const oracle::detail::row_inputs& in, double scale, double keep_factor_num,
                       double keep_factor_den, const oracle::detail::row_workspace& ws, const std::vector<double>& hi,
                       const std::vector<double>& lo, const std::vector<double>& rad, double& worst_ratio) {
  const mpfr_prec_t P = 1024;
  mpfr_t x, t, W, acc, kf, m;
  for (auto* v : {&x, &t, &W, &acc, &kf, &m}) mpfr_init2(*v, P);
  mpfr_set_d(m, ws.m, MPFR_RNDN);
  mpfr_set_d(kf, keep_factor_num, MPFR_RNDN);
  mpfr_div_d(kf, kf, keep_factor_den, MPFR_RNDN);
  std::vector<mpfr_t> w(in.nk);
  mpfr_set_zero(W, 1);
  for (std::size_t j = 0; j < in.nk; ++j) {
    mpfr_init2(w[j], P);
    mpfr_set_zero(w[j], 1);
    if (!in.allowed[j]) continue;
    mpfr_set_zero(x, 1);
    for (std::size_t l = 0; l < in.d; ++l) {
      mpfr_set_d(t, in.q[l], MPFR_RNDN);
      mpfr_mul_d(t, t, in.K[j * in.d + l], MPFR_RNDN);
      mpfr_add(x, x, t, MPFR_RNDN);
    }
    mpfr_mul_d(x, x, scale, MPFR_RNDN);
    if (in.softcap > 0) {
      mpfr_div_d(x, x, in.softcap, MPFR_RNDN);
      mpfr_tanh(x, x, MPFR_RNDN);
      mpfr_mul_d(x, x, in.softcap, MPFR_RNDN);
    }
    if (in.add_hi) {
      mpfr_add_d(x, x, in.add_hi[j], MPFR_RNDN);
      mpfr_add_d(x, x, in.add_lo[j], MPFR_RNDN);
    }
    mpfr_sub(x, x, m, MPFR_RNDN);
    mpfr_exp(w[j], x, MPFR_RNDN);
    mpfr_add(W, W, w[j], MPFR_RNDN);
  }
  if (in.has_sink) {
    mpfr_set_d(x, in.sink, MPFR_RNDN);
    mpfr_sub(x, x, m, MPFR_RNDN);
    mpfr_exp(x, x, MPFR_RNDN);
    mpfr_add(W, W, x, MPFR_RNDN);
  }
  bool sound = true;
  auto check = [&](mpfr_t v, double h, double l, double r) {
    mpfr_sub_d(v, v, h, MPFR_RNDN);
    mpfr_sub_d(v, v, l, MPFR_RNDN);
    mpfr_abs(v, v, MPFR_RNDN);
    const double e = mpfr_get_d(v, MPFR_RNDU);
    if (!(e <= r)) sound = false;
    if (r > 0) worst_ratio = std::max(worst_ratio, e / r);
  };
  mpfr_set(t, W, MPFR_RNDN);
  check(t, ws.W_hi, ws.W_lo, ws.W_err);
  for (std::size_t k = 0; k < in.dv; ++k) {
    mpfr_set_zero(acc, 1);
    for (std::size_t j = 0; j < in.nk; ++j) {
      if (!in.allowed[j] || (in.keep && !in.keep[j])) continue;
      mpfr_mul_d(t, w[j], in.V[j * in.dv + k], MPFR_RNDN);
      mpfr_add(acc, acc, t, MPFR_RNDN);
    }
    if (in.keep) mpfr_mul(acc, acc, kf, MPFR_RNDN);
    mpfr_div(acc, acc, W, MPFR_RNDN);
    check(acc, hi[k], lo[k], rad[k]);
  }
  for (auto* v : {&x, &t, &W, &acc, &kf, &m}) mpfr_clear(*v);
  for (auto& v : w) mpfr_clear(v);
  return sound;
}

}  // namespace

// Soundness of the variants' fast path (softcap through the double-double tanh, additive terms
// with a two-word value, the sink in the denominator, dropout with 1/(1 - P) as an enclosure):
// every output enclosure and the enclosure of the row sum contain the 1024-bit value.
BOOST_AUTO_TEST_CASE(variant_fast_path_enclosures_are_sound) {
  auto rng = make_rng(7);
  std::uniform_real_distribution<double> U(-4, 4);
  std::size_t rows = 0, decided = 0;
  double worst_ratio = 0;
  const double caps[] = {0.3, 1.0, 5.0, 30.0, 0.0};
  for (int it = 0; it < 80; ++it) {
    const std::size_t nk = 1 + rng() % 24, d = 1 + rng() % 8, dv = 1 + rng() % 4;
    row_case c = make_row(rng, nk, d, dv, it % 3 == 0 ? 8.0 : 1.0);
    auto in = c.in();
    in.scale_hi = 0.125;  // exact
    in.softcap = caps[it % 5];
    std::vector<double> ah(nk), al(nk), ar(nk, 0.0);
    if (it % 2 == 0) {  // ALiBi-like term plus a bias: a two-word exact value per key
      for (std::size_t j = 0; j < nk; ++j) {
        ah[j] = -0.5 * static_cast<double>(nk - 1 - j) + U(rng);
        al[j] = std::ldexp(U(rng), -60);
      }
      in.add_hi = ah.data();
      in.add_lo = al.data();
      in.add_rad = ar.data();
    }
    if (it % 4 == 1) {
      in.has_sink = true;
      in.sink = U(rng) * (it % 8 == 1 ? 10 : 1);
    }
    if (it % 10 == 9) {  // every key masked: only the sink remains (the output is 0)
      in.has_sink = true;
      std::fill(c.allowed.begin(), c.allowed.end(), 0);
    }
    std::vector<std::uint8_t> keep(nk);
    double kf_num = 1, kf_den = 1;
    if (it % 3 == 2) {  // dropout P = 0.1: keep factor 10/9, an enclosure of two words
      for (auto& x : keep) x = static_cast<std::uint8_t>(rng() % 4 != 0);
      in.keep = keep.data();
      kf_num = 10, kf_den = 9;
      mpfr_t f, r;
      mpfr_init2(f, 400);
      mpfr_init2(r, 400);
      mpfr_set_ui(f, 10, MPFR_RNDN);
      mpfr_div_ui(f, f, 9, MPFR_RNDN);
      in.keep_hi = mpfr_get_d(f, MPFR_RNDN);
      mpfr_sub_d(r, f, in.keep_hi, MPFR_RNDN);
      in.keep_lo = mpfr_get_d(r, MPFR_RNDN);
      mpfr_sub_d(r, r, in.keep_lo, MPFR_RNDN);
      in.keep_rad = std::fabs(mpfr_get_d(r, MPFR_RNDU)) * 2 + 0x1p-1000;
      mpfr_clear(f);
      mpfr_clear(r);
    }
    oracle::detail::row_workspace ws;
    std::vector<double> hi(dv), lo(dv), rad(dv);
    ++rows;
    if (!oracle::detail::fast_row(in, ws, hi.data(), lo.data(), rad.data())) continue;
    ++decided;
    BOOST_TEST(variant_row_sound(in, 0.125, kf_num, kf_den, ws, hi, lo, rad, worst_ratio),
               "variant fast-path enclosure misses the 1024-bit value in case " << it << " (softcap " << in.softcap
                                                                               << ")");
    for (std::size_t k = 0; k < dv; ++k) BOOST_TEST(std::isfinite(rad[k]));
  }
  BOOST_TEST(decided >= rows / 2);
  BOOST_TEST_MESSAGE(rows << " rows, " << decided << " decided by the fast path; largest actual error / radius = "
                          << worst_ratio);
}

// The softcap runs eight keys at a time (AVX-512 lanes) or four (AVX2, also on an AVX-512
// processor with exp_batch_limit_isa(1)), and the keys past the last full group one by one (the
// scalar softcap_quotient and finish_softcap).  A key's capped score, radius and tanh depend on
// its own score only, so rotating the keys until each one falls in the scalar tail must give it
// the same bits as in a vector lane, at either width; and the two widths must agree.  The scores
// cover the branches: 2|y| > 708 (tanh = ±1), tiny scores (1 - e rounds to 0), exact zeros, both
// signs, and a masked key inside a group.
BOOST_AUTO_TEST_CASE(softcap_lanes_match_the_scalar_softcap_bit_for_bit) {
  auto rng = make_rng(11);
  const double caps[] = {30.0, 0.0625, 3.0, 0x1p-10};
  std::size_t compared = 0;
  for (const int isa_cap : {2, 1})
  for (double C : caps) {
    // d = 1, q = 1, scale 1/8: key j's score is K_j / 8 = C t_j, so y_j = t_j (exactly for a
    // power-of-two C).  2|y| > 708 gives tanh = ±1; y = 0 gives 1 - e = 0; |y| between 168 and
    // 354 is left out: there the division's product conditions decline the whole row (e < 2^-484).
    const std::size_t nk = 13, d = 1, dv = 2;  // 13 = 3 groups of four + 1, or one of eight + 5 scalar keys
    row_case c = make_row(rng, nk, d, dv);
    const double t[] = {0.7, -1.3, 0.0, 400.0, -2.5, 1e-5, 12.5, -40.0, 100.0, -1e-5, 3.3, -500.0, -0.01};
    c.q = {1.0};
    for (std::size_t j = 0; j < nk; ++j) c.K[j] = c.KT[j] = 8 * C * t[j];
    c.allowed[5] = 0;
    auto layout = [&](const row_case& base, std::size_t shift) {  // key j goes to position (j + shift) % nk
      row_case r = base;
      for (std::size_t j = 0; j < nk; ++j) {
        const std::size_t p = (j + shift) % nk;
        for (std::size_t l = 0; l < d; ++l) r.K[p * d + l] = base.K[j * d + l];
        for (std::size_t l = 0; l < dv; ++l) r.V[p * dv + l] = base.V[j * dv + l];
        r.allowed[p] = base.allowed[j];
      }
      for (std::size_t j = 0; j < nk; ++j)
        for (std::size_t l = 0; l < d; ++l) r.KT[l * nk + j] = r.K[j * d + l];
      return r;
    };
    struct key_bits {
      double s_hi, s_lo, s_rad, th_hi, th_lo, th_rad;
    };
    auto run_at = [&](int cap, const row_case& r, std::vector<key_bits>& out) {
      auto in = r.in();
      in.scale_hi = 0.125;
      in.softcap = C;
      BOOST_TEST_REQUIRE(r.q.size() == 1u);
      oracle::detail::row_workspace ws;
      std::vector<double> hi(dv), lo(dv), rad(dv);
      const int previous = exp_batch_limit_isa(cap);
      const bool ok = oracle::detail::fast_row(in, ws, hi.data(), lo.data(), rad.data());
      exp_batch_limit_isa(previous);
      if (!ok) return false;
      out.clear();
      for (std::size_t j = 0; j < nk; ++j)
        out.push_back({ws.s_hi[j], ws.s_lo[j], ws.s_rad[j], ws.th_hi[j], ws.th_lo[j], ws.th_rad[j]});
      return true;
    };
    auto run = [&](const row_case& r, std::vector<key_bits>& out) { return run_at(isa_cap, r, out); };
    std::vector<key_bits> lanes, tail, other_width;
    BOOST_TEST_REQUIRE(run(c, lanes), "fast path declined the softcap row, C = " << C);
    BOOST_TEST_REQUIRE(run_at(3 - isa_cap, c, other_width));
    for (std::size_t j = 0; j < nk; ++j)
      if (c.allowed[j])
        BOOST_TEST(std::memcmp(&lanes[j], &other_width[j], sizeof(key_bits)) == 0,
                   "key " << j << " (C = " << C << "): the two kernel widths differ");
    for (std::size_t j = 0; j + 1 < nk; ++j) {  // key j at the last position nk - 1: the scalar tail
      if (!c.allowed[j]) continue;
      const std::size_t shift = nk - 1 - j;
      const bool ran = run(layout(c, shift), tail);
      BOOST_TEST_REQUIRE(ran, "fast path declined the rotated row, key " << j << ", C = " << C);
      const key_bits a = lanes[j], b = tail[nk - 1];
      const bool same = std::memcmp(&a, &b, sizeof a) == 0;
      BOOST_TEST(same, "key " << j << " (C = " << C << "): lane " << a.s_hi << " + " << a.s_lo << " ± " << a.s_rad
                              << ", tanh " << a.th_hi << " ± " << a.th_rad << "; scalar " << b.s_hi << " + " << b.s_lo
                              << " ± " << b.s_rad << ", tanh " << b.th_hi << " ± " << b.th_rad);
      ++compared;
    }
  }
  BOOST_TEST(compared == 2u * 4u * 11u);
  BOOST_TEST_MESSAGE(compared << " softcapped keys identical in a vector lane and in the scalar tail (vectorized: "
                              << oracle::detail::kernel_vectorized() << ")");
}

// The exponential's kernels (AVX-512, AVX2, scalar: number/exp_batch.hpp), and with them the Dot2
// loops' (AVX-512F, AVX2: oracle/fast_common.hpp), give fast_row the same bits: every output, weight and score of a row compared with the widest kernel and with the
// kernel capped at AVX2 (exp_batch_limit_isa(1)) and at scalar (0).  Sizes that leave tails of
// every length for 4 and 8 lanes, masks, a softcap (its own batch of exponentials).
BOOST_AUTO_TEST_CASE(kernel_widths_give_the_same_bits) {
  auto rng = make_rng(13);
  std::size_t rows = 0;
  for (int it = 0; it < 60; ++it) {
    // every sixth case past the AVX-512 Dot2 loops' 64-wide register blocks (a full block and a tail)
    const std::size_t wide_case = it % 6 == 5 ? 4 : 1;
    const std::size_t nk = 1 + rng() % (40 * wide_case), d = 1 + rng() % 20, dv = 1 + rng() % (20 * wide_case);
    row_case c = make_row(rng, nk, d, dv, it % 4 == 0 ? 6.0 : 1.0);
    if (it % 3 == 1)
      for (auto& a : c.allowed) a = static_cast<std::uint8_t>(rng() % 3 != 0);
    auto in = c.in();
    in.scale_hi = 0.125;
    in.softcap = it % 5 == 2 ? 30.0 : 0.0;
    struct result {
      bool ok;
      std::vector<double> hi, lo, rad, w_hi, w_lo, s_hi, s_lo, s_rad;
      double W_hi, W_lo, W_err;
    };
    auto run = [&](int cap) {
      const int previous = exp_batch_limit_isa(cap);
      oracle::detail::row_workspace ws;
      result r;
      r.hi.resize(dv);
      r.lo.resize(dv);
      r.rad.resize(dv);
      r.ok = oracle::detail::fast_row(in, ws, r.hi.data(), r.lo.data(), r.rad.data());
      exp_batch_limit_isa(previous);
      r.w_hi = ws.w_hi, r.w_lo = ws.w_lo, r.s_hi = ws.s_hi, r.s_lo = ws.s_lo, r.s_rad = ws.s_rad;
      r.W_hi = ws.W_hi, r.W_lo = ws.W_lo, r.W_err = ws.W_err;
      return r;
    };
    auto bits = [](const std::vector<double>& a, const std::vector<double>& b) {
      return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
    };
    const result wide = run(2);
    for (int cap : {1, 0}) {
      const result r = run(cap);
      BOOST_TEST(r.ok == wide.ok, "case " << it << ", cap " << cap);
      if (!r.ok || !wide.ok) continue;
      const bool same = bits(r.hi, wide.hi) && bits(r.lo, wide.lo) && bits(r.rad, wide.rad) && bits(r.w_hi, wide.w_hi) &&
                        bits(r.w_lo, wide.w_lo) && bits(r.s_hi, wide.s_hi) && bits(r.s_lo, wide.s_lo) &&
                        bits(r.s_rad, wide.s_rad) && std::memcmp(&r.W_hi, &wide.W_hi, sizeof(double)) == 0 &&
                        std::memcmp(&r.W_lo, &wide.W_lo, sizeof(double)) == 0 &&
                        std::memcmp(&r.W_err, &wide.W_err, sizeof(double)) == 0;
      BOOST_TEST(same, "case " << it << " (n_k " << nk << ", d " << d << ", d_v " << dv << "): cap " << cap
                               << " differs from " << exp_batch_isa());
      rows += r.ok;
    }
  }
  BOOST_TEST(rows > 60u);
  BOOST_TEST_MESSAGE(rows << " row comparisons identical; widest kernel here: " << exp_batch_isa());
}

// Peaked rows whose weights fall in [e^-708, 2^-900] (low words near the subnormal range, the
// weights with an absolute instead of a relative bound): the enclosures stay sound against
// MPFR, also when the largest weight's value is 0 so that the output is made of tiny weights
// only; and on ordinary peaked rows the fast path stays tight (radius far below an ulp).
BOOST_AUTO_TEST_CASE(peaked_rows_with_tiny_weights_are_sound_and_tight) {
  auto rng = make_rng(8);
  std::uniform_real_distribution<double> U(0, 1);
  double worst_ratio = 0, widest = 0;
  for (int it = 0; it < 40; ++it) {
    const std::size_t nk = 2 + rng() % 30, dv = 1 + rng() % 3;
    row_case c = make_row(rng, nk, 1, dv);
    c.q = {1.0};
    for (std::size_t j = 0; j < nk; ++j) c.K[j] = c.KT[j] = j == 0 ? 0.0 : -(600.0 + 110.0 * U(rng));  // z_j = K_j
    if (it % 2 == 1)
      for (std::size_t k = 0; k < dv; ++k) c.V[k] = 0.0;  // the largest weight carries a zero value
    auto in = c.in();
    in.scale_hi = 1.0;
    if (it % 4 == 2) in.softcap = 1000.0;

    oracle::detail::row_workspace ws;
    std::vector<double> hi(dv), lo(dv), rad(dv);
    BOOST_TEST_REQUIRE(oracle::detail::fast_row(in, ws, hi.data(), lo.data(), rad.data()));
    BOOST_TEST(variant_row_sound(in, 1.0, 1, 1, ws, hi, lo, rad, worst_ratio), "peaked case " << it);
    if (it % 2 == 0)
      for (std::size_t k = 0; k < dv; ++k)
        if (hi[k] != 0) widest = std::max(widest, rad[k] / std::fabs(hi[k]));
  }
  BOOST_TEST(widest < 0x1p-70, "a peaked row's relative radius " << widest << " is not tight");
  BOOST_TEST_MESSAGE("largest actual error / radius = " << worst_ratio << ", widest relative radius " << widest);
}
