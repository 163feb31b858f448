// tests/drift/sweep.cpp — `attncert drift` (drift/sweep.hpp): the two-token boundary of
// proofs/P10-two-token-drift.md, bisection against a brute-force scan, the closed-form fast
// path against the general certified path, a caller's own diagnostics, a sweep split into runs and
// merged (drift/runs.hpp).  (The renderings: tests/report/drift.cpp.)
#define BOOST_TEST_MODULE drift_sweep
#include "attncert/drift/sweep.hpp"

#include "attncert/drift/runs.hpp"
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "attncert/error.hpp"
#include "attncert/attention/softmax.hpp"
#include "attncert/linalg/spectra.hpp"
#include "attncert/rank/numerical.hpp"
#include "tests/support.hpp"

using namespace attncert;

namespace {

drift_request request(drift_family f, double from, double to, std::size_t points, bool log, const std::string& recipes,
                      const std::string& policies) {
  drift_request r;
  r.family = f;
  r.from = from;
  r.to = to;
  r.points = points;
  r.log = log;
  r.recipes = parse_recipes(recipes);
  r.policies = parse_policies(policies);
  return r;
}

matrix<double> form_fp64(double a) {
  drift_request r;
  const recipe_input in = drift_instance(r, a);
  return recipe_form<double, double, double, double, double>(in);
}

mpfr_float dec(const std::string& s) {
  mpfr_float x;
  if (s == "inf") mpfr_set_inf(x.backend().data(), 1);
  else mpfr_set_str(x.backend().data(), s.c_str(), 10, MPFR_RNDN);
  return x;
}

const double u54 = std::ldexp(1.0, -54);

}  // namespace

// P10 §2: the binary64 matrix the fp64 recipe forms, entry by entry.  With
// e = RN(exp(-2a)) = 1 - k·2^-53, z = RN(1 + e) = 2 - m·2^-52 (m = k/2, or for odd k the even
// one of (k ± 1)/2), x = RN(1/z) = 1/2 + m'·2^-54 (m' = m rounded up to even), and
// y = RN(e/z) = 1/2 - (k - m)·2^-54.  Here a = k·2^-54, for which k = round((1 - e^{-2a})·2^53).
BOOST_AUTO_TEST_CASE(two_token_fp64_formed_matrix_is_the_derived_one) {
  {
    const matrix<double> A = form_fp64(std::ldexp(1.0, -56));  // k = 0: exp(-2a) rounds to 1
    BOOST_TEST((A.array() == 0.5).all());
  }
  for (long k = 1; k <= 12; ++k) {
    const long m = k % 2 == 0 ? k / 2 : (((k - 1) / 2) % 2 == 0 ? (k - 1) / 2 : (k + 1) / 2);
    const long m_even = m % 2 == 0 ? m : m + 1;
    const double x = 0.5 + static_cast<double>(m_even) * u54, y = 0.5 - static_cast<double>(k - m) * u54;
    const matrix<double> A = form_fp64(static_cast<double>(k) * u54);
    BOOST_TEST_CONTEXT("k = " << k) {
      BOOST_TEST(A(0, 0) == x);
      BOOST_TEST(A(1, 1) == x);
      BOOST_TEST(A(0, 1) == y);
      BOOST_TEST(A(1, 0) == y);
    }
  }
  // sigma_2 of the formed matrix is x - y = (m' + k - m)·2^-54 and the numpy threshold is
  // 2ε·σ₁ = 8(x + y)·2^-54: k = 7 gives 7 < 8(1 + 2^-54), k = 8 gives 8 = 8 exactly (the
  // knife edge: the SVD's rounding decides), k = 9 gives 9 > 8(1 - 2^-54).  Eigen's JacobiSVD
  // resolves k = 7 and k = 9 as the exact singular values do (assumption A2 of P10):
  const rank_policy numpy = rank_policy::parse("numpy");
  const format_spec f64 = parse_format("binary64");
  BOOST_TEST(numpy.rank(approx_singular_values(form_fp64(7 * u54)), 2, 2, f64) == 1u);
  BOOST_TEST(numpy.rank(approx_singular_values(form_fp64(9 * u54)), 2, 2, f64) == 2u);
}

// P10 §3: under fp64/numpy the divergence (0, a*] ends where k switches 7 → 8 or 8 → 9, i.e.
// a* ≈ 7.5·2^-54 or 8.5·2^-54 (both in [1e-17, 1e-15]).
BOOST_AUTO_TEST_CASE(two_token_fp64_numpy_boundary) {
  drift_request r = request(drift_family::two_token, 1e-20, 1e-10, 41, true, "fp64", "numpy");
  const drift_result res = run_drift(r);
  BOOST_TEST_REQUIRE(res.divergence.size() == 1u);
  const auto& iv = res.divergence[0].intervals;
  BOOST_TEST_REQUIRE(iv.size() == 1u);
  BOOST_TEST(iv[0].first == 1e-20);
  const double astar = iv[0].second;
  BOOST_TEST_MESSAGE("fp64/numpy boundary a* = " << astar << " = " << astar / u54 << " * 2^-54");
  BOOST_TEST(astar > 1e-17);
  BOOST_TEST(astar < 1e-15);
  const bool at_7_5 = std::fabs(astar / (7.5 * u54) - 1) < 1e-8, at_8_5 = std::fabs(astar / (8.5 * u54) - 1) < 1e-8;
  BOOST_TEST((at_7_5 || at_8_5));
  BOOST_TEST(drift_diverges_at(r, r.recipes[0], r.policies[0], astar));
  BOOST_TEST(!drift_diverges_at(r, r.recipes[0], r.policies[0], astar * (1 + 2e-9)));
  // The exact rank is 2 on the whole sweep; at a = 0 it is 1 and fp64 agrees (no divergence).
  for (const auto& p : res.points) BOOST_TEST(p.exact.lo == 2u);
  r.from = 0;
  r.log = false;
  r.to = 1e-15;
  const drift_result lin = run_drift(r);
  BOOST_TEST(lin.points[0].exact.lo == 1u);
  BOOST_TEST(!lin.points[0].recipes[0].diverges);
  BOOST_TEST_REQUIRE(lin.divergence[0].intervals.size() == 1u);
  BOOST_TEST(lin.divergence[0].intervals[0].first > 0.0);  // bisected towards 0, never 0 itself
  BOOST_TEST(lin.divergence[0].intervals[0].first <= 1e-15 * 1e-9);
}

// Every switch a brute-force scan of 2001 points sees is one of the bisected ends, and vice
// versa (families and formats where the status switches once per grid gap; see the next test
// for one where it does not).
BOOST_AUTO_TEST_CASE(bisection_agrees_with_fine_scan) {
  struct c {
    drift_family f;
    double from, to;
    const char *recipe, *policy;
  } cases[] = {
      {drift_family::two_token, 1e-20, 1e2, "fp64", "numpy"},
      {drift_family::two_token, 1e-20, 1e2, "fp32", "numpy"},
      {drift_family::two_token, 1e-12, 1e2, "fp16", "absolute:1e-6"},
      {drift_family::two_token, 1e-12, 1e2, "bf16-fp32acc", "relative:1e-3"},
      {drift_family::causal, 1e-1, 1e3, "fp32", "numpy"},
      {drift_family::causal, 1e-1, 1e3, "bf16-fp32acc", "relative:1e-3"},
  };
  for (const auto& k : cases) {
    BOOST_TEST_CONTEXT(to_string(k.f) << " " << k.recipe << " " << k.policy) {
      drift_request r = request(k.f, k.from, k.to, 23, true, k.recipe, k.policy);
      r.enclosures = false;
      const drift_result res = run_drift(r);
      std::vector<double> ends;
      for (const auto& [lo, hi] : res.divergence[0].intervals) {
        if (lo != r.from) ends.push_back(lo);
        if (hi != r.to) ends.push_back(hi);
      }
      const int M = 2001;
      std::vector<std::pair<double, double>> switches;
      double prev = r.from;
      bool prev_s = drift_diverges_at(r, r.recipes[0], r.policies[0], prev);
      for (int i = 1; i < M; ++i) {
        const double x = i == M - 1 ? r.to : r.from * std::pow(r.to / r.from, static_cast<double>(i) / (M - 1));
        const bool s = drift_diverges_at(r, r.recipes[0], r.policies[0], x);
        if (s != prev_s) switches.emplace_back(prev, x);
        prev = x;
        prev_s = s;
      }
      BOOST_TEST(switches.size() == ends.size());
      BOOST_TEST(!switches.empty());
      for (const auto& [lo, hi] : switches) {
        bool found = false;
        for (double e : ends) found = found || (e >= lo / (1 + 1e-8) && e <= hi * (1 + 1e-8));
        BOOST_TEST(found, "no bisected end in the scan's switch [" << lo << ", " << hi << "]");
      }
    }
  }
}

// The stated assumption (one switch per grid gap) can fail in 16-bit formats: for log-odds
// under fp16-fp32acc/numpy the status flickers near a = 0.17 (σ_min of the binary16 matrix
// jitters around the threshold), so a coarse grid reports fewer switches than a fine scan.
// A grid as fine as the scan then recovers every switch, each located by bisection.
BOOST_AUTO_TEST_CASE(flicker_needs_a_finer_grid) {
  drift_request r = request(drift_family::log_odds, 0.15, 0.2, 6, false, "fp16-fp32acc", "numpy");
  r.enclosures = false;
  auto count_switches = [&](std::size_t n) {
    std::size_t c = 0;
    bool prev = drift_diverges_at(r, r.recipes[0], r.policies[0], r.from);
    for (std::size_t i = 1; i < n; ++i) {
      const double x = r.from + (r.to - r.from) * static_cast<double>(i) / static_cast<double>(n - 1);
      const bool s = drift_diverges_at(r, r.recipes[0], r.policies[0], i + 1 == n ? r.to : x);
      c += s != prev;
      prev = s;
    }
    return c;
  };
  auto ends = [&](const drift_result& res) {
    std::size_t e = 0;
    for (const auto& [lo, hi] : res.divergence[0].intervals) e += (lo != r.from) + (hi != r.to);
    return e;
  };
  const std::size_t fine = count_switches(2001);
  BOOST_TEST(fine > 2u);
  BOOST_TEST(ends(run_drift(r)) < fine);
  r.points = 2001;
  BOOST_TEST(ends(run_drift(r)) == fine);
}

// The closed form of two-token attention (P01) against the general certified path
// (transcendence method + Rump enclosures): same exact rank, intersecting enclosures.
BOOST_AUTO_TEST_CASE(closed_form_agrees_with_general_path) {
  drift_request fast = request(drift_family::two_token, 0, 1, 2, false, "fp64", "numpy");
  drift_request slow = fast;
  slow.closed_forms = false;
  for (double a : {0.0, 1e-30, 1e-9, 1e-3, 0.5, 3.0, 30.0}) {
    fast.from = slow.from = a;
    fast.to = slow.to = a + 1;
    const drift_result rf = run_drift(fast), rs = run_drift(slow);
    const drift_point &pf = rf.points[0], &ps = rs.points[0];
    BOOST_TEST_CONTEXT("a = " << a) {
      BOOST_TEST(pf.exact.closed_form);
      BOOST_TEST(!ps.exact.closed_form);
      BOOST_TEST(pf.exact.lo == ps.exact.lo);
      BOOST_TEST(pf.exact.hi == ps.exact.hi);
      precision_guard g(256);
      BOOST_TEST(dec(pf.smin_lo) <= dec(ps.smin_hi));
      BOOST_TEST(dec(ps.smin_lo) <= dec(pf.smin_hi));
      if (a > 0) BOOST_TEST(dec(ps.smin_lo) > 0);  // completeness: the general path certifies σ_min > 0
    }
  }
}

// Completeness of the general path: the causal diagonal e^{-a}/(i + e^{-a}) at a = 200 needs
// escalation beyond 128 bits; the rank 4 is certified and σ_min > 0 is certified.
BOOST_AUTO_TEST_CASE(general_path_escalates) {
  drift_request r = request(drift_family::causal, 200, 201, 2, false, "fp64,mpfr2048", "numpy");
  const drift_result res = run_drift(r);
  const auto& p = res.points[0];
  BOOST_TEST(p.exact.lo == 4u);
  BOOST_TEST(p.exact.hi == 4u);
  BOOST_TEST(p.enclosure_bits > 128u);
  precision_guard g(256);
  BOOST_TEST(dec(p.smin_lo) > 0);
  BOOST_TEST(dec(p.smin_hi) < mpfr_float("1e-80"));
  BOOST_TEST(p.recipes[0].diverges);    // binary64 loses e^{-200}
  BOOST_TEST(!p.recipes[1].diverges);   // 2048 bits keep it (σ_min ≈ 1.9e-261 > 2^-2045·4)
  // Identical values: the output has exact rank 1 for any attention.
  drift_request iv = request(drift_family::identical_values, 0.5, 2, 3, false, "fp64", "numpy");
  iv.object = layer_object::output;
  for (const auto& q : run_drift(iv).points) {
    BOOST_TEST(q.exact.lo == 1u);
    BOOST_TEST(q.exact.hi == 1u);
  }
}

BOOST_AUTO_TEST_CASE(bad_requests) {
  auto bad = [](auto&& mutate) {
    drift_request r = request(drift_family::two_token, 0, 1, 5, false, "fp64", "numpy");
    mutate(r);
    BOOST_CHECK_THROW(run_drift(r), input_error);
  };
  bad([](drift_request& r) { r.from = 1, r.to = 0; });
  bad([](drift_request& r) { r.log = true; });  // from = 0
  bad([](drift_request& r) { r.points = 1; });
  bad([](drift_request& r) { r.to = std::nan(""); });
  bad([](drift_request& r) { r.n = 3; });  // two-token has n = 2
  bad([](drift_request& r) { r.resolution = 0; });
  bad([](drift_request& r) { r.object = layer_object::residual; });
  bad([](drift_request& r) { r.to = 1e40; });
  BOOST_CHECK_THROW(parse_drift_family("three-token"), input_error);
}

// A caller's diagnostic (user_diagnostic) is measured like a policy: one that reproduces the numpy
// policy on the matrix it is given (binary64 numbers of the fp64 recipe) has the numpy policy's ranks
// and intervals exactly; one that always answers the exact rank never diverges; a constant 1 diverges
// wherever the exact rank is 2.  A diagnostic that throws stops the sweep with its exception.
BOOST_AUTO_TEST_CASE(user_diagnostics_are_measured_like_policies) {
  drift_request r = request(drift_family::two_token, 1e-18, 1e-12, 25, true, "fp64,fp32", "numpy");
  const format_spec f64 = parse_format("binary64");
  std::size_t calls = 0;
  std::set<std::string> recipes_seen;
  r.diagnostics.push_back({"numpy_again", [&](const matrix<double>& M, const recipe& rc) {
                             recipes_seen.insert(rc.name);
                             ++calls;  // numpy's threshold with binary64's epsilon, on whatever it is given
                             return approx_numerical_rank(M, f64, parse_policies("numpy"), 0, 99).ranks[0];
                           }});
  r.diagnostics.push_back({"exact", [](const matrix<double>&, const recipe&) { return std::size_t{2}; }});
  r.diagnostics.push_back({"one", [](const matrix<double>&, const recipe&) { return std::size_t{1}; }});
  const drift_result res = run_drift(r);
  BOOST_TEST(calls >= 2 * 25u);
  BOOST_TEST((recipes_seen == std::set<std::string>{"fp32", "fp64"}));
  // divergence: per recipe, the policy then the three diagnostics
  BOOST_TEST_REQUIRE(res.divergence.size() == 8u);
  BOOST_TEST(res.divergence[0].policy == "numpy");
  BOOST_TEST(res.divergence[1].policy == "diagnostic:numpy_again");
  // fp64: the diagnostic is the policy itself (binary64 SVD, binary64 epsilon)
  BOOST_TEST(res.divergence[0].intervals == res.divergence[1].intervals);
  BOOST_TEST_REQUIRE(res.divergence[1].intervals.size() == 1u);
  for (const auto& p : res.points) {
    BOOST_TEST(p.recipes[0].diagnostic_ranks[0] == p.recipes[0].ranks[0]);
    BOOST_TEST(p.recipes[0].diagnostic_ranks[1] == 2u);
    BOOST_TEST(!p.recipes[0].diagnostic_diverges[1]);
    BOOST_TEST(p.recipes[0].diagnostic_diverges[2]);
  }
  BOOST_TEST(res.divergence[2].intervals.empty());  // "exact"
  BOOST_TEST_REQUIRE(res.divergence[3].intervals.size() == 1u);  // "one": everywhere
  BOOST_TEST(res.divergence[3].intervals[0].first == r.from);
  BOOST_TEST(res.divergence[3].intervals[0].second == r.to);
  BOOST_TEST(res.divergence[4].recipe == "fp32");
  BOOST_TEST(res.divergence[5].policy == "diagnostic:numpy_again");

  drift_request bad = request(drift_family::two_token, 0.1, 1, 3, false, "fp64", "numpy");
  bad.diagnostics.push_back(
      {"broken", [](const matrix<double>&, const recipe&) -> std::size_t { throw input_error("broken diagnostic"); }});
  BOOST_CHECK_THROW(run_drift(bad), input_error);
}

// approx_formed_object gives the recipe's matrix as binary64 numbers (exactly, for fp64 and fp32),
// and nothing when the recipe overflows.
BOOST_AUTO_TEST_CASE(formed_object_as_binary64) {
  drift_request r;
  const recipe_input in = drift_instance(r, 0.75);
  const auto M = approx_formed_object(parse_recipe("fp64"), in);
  BOOST_TEST_REQUIRE(M.has_value());
  BOOST_TEST((*M == form_fp64(0.75)));
  const auto F = approx_formed_object(parse_recipe("fp32"), in);
  BOOST_TEST_REQUIRE(F.has_value());
  BOOST_TEST(((F->cast<float>().cast<double>()).array() == F->array()).all());
  drift_request big = request(drift_family::causal, 1, 1, 2, false, "fp16", "numpy");
  recipe_input over = drift_instance(big, 1e6);  // scores far beyond binary16's range
  BOOST_TEST(!approx_formed_object(parse_recipe("fp16"), over).has_value());
}

// An explicit grid (drift_request::grid): two runs of the whole grid that share their end point evaluate
// exactly the whole sweep's points, and their intervals, joined at the shared point, are the whole
// sweep's (the bisection depends only on from, to, log and the two points it starts from).
// Soundness of the split: two runs that share a point, each through its wire text, merge into the
// whole sweep's result, point for point and interval for interval (the intervals joined through the
// shared point), wherever the cut.
BOOST_AUTO_TEST_CASE(explicit_grid_runs_join_to_the_whole_sweep) {
  for (const bool log : {true, false}) {
    drift_request r = log ? request(drift_family::two_token, 1e-17, 1e-5, 37, true, "fp64,fp32", "numpy,absolute:1e-9")
                          : request(drift_family::causal, 0.5, 40, 23, false, "fp64,bf16", "numpy");
    r.enclosures = false;
    const drift_result whole = run_drift(r);
    const std::vector<double> g = drift_grid(r);
    for (const std::size_t cut : {std::size_t{1}, g.size() / 3, g.size() / 2, g.size() - 2}) {
      drift_request a = r, b = r;
      a.grid.assign(g.begin(), g.begin() + static_cast<long>(cut) + 1);
      b.grid.assign(g.begin() + static_cast<long>(cut), g.end());
      const drift_result m = merge_drift_runs(r, {drift_result_from_wire(drift_result_wire(run_drift(a))),
                                                  drift_result_from_wire(drift_result_wire(run_drift(b)))});
      BOOST_TEST_CONTEXT("log " << log << " cut " << cut) {
        BOOST_TEST(!m.partial);
        BOOST_TEST(m.not_computed.empty());
        BOOST_TEST(!m.bisection_stopped);
        BOOST_TEST(m.points_planned == whole.points_planned);
        BOOST_TEST((m.grid == whole.grid));
        BOOST_TEST_REQUIRE(m.points.size() == whole.points.size());
        for (std::size_t i = 0; i < whole.points.size(); ++i) {
          BOOST_TEST(m.points[i].a == whole.points[i].a);
          BOOST_TEST(m.points[i].diverges == whole.points[i].diverges);
          for (std::size_t k = 0; k < whole.points[i].recipes.size(); ++k)
            BOOST_TEST(m.points[i].recipes[k].ranks == whole.points[i].recipes[k].ranks);
        }
        BOOST_TEST_REQUIRE(m.divergence.size() == whole.divergence.size());
        for (std::size_t d = 0; d < whole.divergence.size(); ++d) {
          BOOST_TEST_CONTEXT(whole.divergence[d].recipe << " " << whole.divergence[d].policy) {
            BOOST_TEST((m.divergence[d].intervals == whole.divergence[d].intervals));
          }
        }
      }
    }
  }
  drift_request bad = request(drift_family::two_token, 0.1, 1, 3, false, "fp64", "numpy");
  bad.grid = {0.2, 0.1};
  BOOST_CHECK_THROW(run_drift(bad), input_error);
  bad.grid = {0.05, 0.2};
  BOOST_CHECK_THROW(run_drift(bad), input_error);
}

// The wire text loses nothing: every field of a result with enclosures, a recipe that overflowed
// (its failure text, σ = 0), non-finite numbers (cond = inf, a NaN planted), intervals and a gap.
BOOST_AUTO_TEST_CASE(wire_text_round_trips_every_field) {
  drift_request r = request(drift_family::two_token, 0.5, 1e6, 5, true, "fp16,fp64", "numpy,absolute:1e-3");
  r.enclosures = true;
  drift_result res = run_drift(r);
  res.points[0].recipes[0].condition_number = std::numeric_limits<double>::infinity();
  res.points[1].recipes[1].sigma_max = std::nan("");
  res.points[2].recipes[0].sigma_min = -0.0;
  res.not_computed.push_back({2e6, 3e6, 2});
  res.partial = true;
  bool overflowed = false;
  for (const auto& p : res.points) overflowed = overflowed || !p.recipes[0].formed;
  BOOST_TEST_REQUIRE(overflowed);  // fp16 overflows at a = 1e6: a failure text to carry
  const drift_result back = drift_result_from_wire(drift_result_wire(res));
  BOOST_TEST(drift_result_wire(back) == drift_result_wire(res));  // and field by field:
  BOOST_TEST((back.grid == res.grid));
  BOOST_TEST(back.partial == res.partial);
  BOOST_TEST(back.points_planned == res.points_planned);
  BOOST_TEST(back.not_computed.size() == 1);
  BOOST_TEST(back.not_computed[0].last == 3e6);
  BOOST_TEST_REQUIRE(back.points.size() == res.points.size());
  for (std::size_t i = 0; i < res.points.size(); ++i) {
    const drift_point &p = res.points[i], &q = back.points[i];
    BOOST_TEST(q.a == p.a);
    BOOST_TEST(q.exact.lo == p.exact.lo);
    BOOST_TEST(q.exact.hi == p.exact.hi);
    BOOST_TEST(q.exact.closed_form == p.exact.closed_form);
    BOOST_TEST(q.smin_lo == p.smin_lo);
    BOOST_TEST(q.cond_hi == p.cond_hi);
    BOOST_TEST(q.smin_hi_d == p.smin_hi_d);
    BOOST_TEST(q.enclosure_bits == p.enclosure_bits);
    for (std::size_t k = 0; k < p.recipes.size(); ++k) {
      const recipe_measurement &m = p.recipes[k], &n = q.recipes[k];
      BOOST_TEST(n.formed == m.formed);
      BOOST_TEST(n.failure == m.failure);
      BOOST_TEST((n.diverges_by_policy == m.diverges_by_policy));
      BOOST_TEST(std::memcmp(&n.sigma_min, &m.sigma_min, sizeof(double)) == 0);
      BOOST_TEST((std::isnan(n.sigma_max) ? std::isnan(m.sigma_max) : n.sigma_max == m.sigma_max));
      BOOST_TEST(n.condition_number == m.condition_number);
      BOOST_TEST(n.svd == m.svd);
    }
  }
  BOOST_TEST(back.divergence.size() == res.divergence.size());
  for (std::size_t d = 0; d < res.divergence.size(); ++d) {
    BOOST_TEST((back.divergence[d].intervals == res.divergence[d].intervals));
    BOOST_TEST(back.divergence[d].bisection_evaluations == res.divergence[d].bisection_evaluations);
  }
  BOOST_CHECK_THROW(drift_result_from_wire("{"), input_error);
  BOOST_CHECK_THROW(drift_result_from_wire("{\"wire\": \"something else\"}"), input_error);
  std::string t = drift_result_wire(res);
  t.replace(t.find("\"a\":\"") + 5, 1, "z");
  BOOST_CHECK_THROW(drift_result_from_wire(t), input_error);
}

// Runs left out or stopped early: the merge keeps every point computed once, names the gaps, and
// keeps the intervals within the computed stretches (an interval never spans a gap).
BOOST_AUTO_TEST_CASE(merge_names_the_runs_left_out) {
  drift_request r = request(drift_family::causal, 0.5, 60, 29, false, "fp64,bf16", "numpy,absolute:1e-3");
  r.enclosures = false;
  const drift_result whole = run_drift(r);
  const std::vector<double> g = drift_grid(r);
  auto run = [&](std::size_t s, std::size_t e) {
    drift_request x = r;
    x.grid.assign(g.begin() + static_cast<long>(s), g.begin() + static_cast<long>(e) + 1);
    return std::optional<drift_result>(run_drift(x));
  };
  // runs [0,7] [7,14] [14,21] [21,28]: run 1 stopped after its first 3 points, run 2 not computed
  drift_result stopped = *run(7, 9);
  stopped.partial = true;
  const drift_result m = merge_drift_runs(r, {run(0, 7), stopped, std::nullopt, run(21, 28)});
  std::vector<std::size_t> keep;
  for (std::size_t i = 0; i <= 9; ++i) keep.push_back(i);
  for (std::size_t i = 21; i <= 28; ++i) keep.push_back(i);
  BOOST_TEST_REQUIRE(m.points.size() == keep.size());
  for (std::size_t k = 0; k < keep.size(); ++k) {
    BOOST_TEST(m.grid[k] == g[keep[k]]);
    BOOST_TEST(m.points[k].diverges == whole.points[keep[k]].diverges);
    for (std::size_t j = 0; j < m.points[k].recipes.size(); ++j)
      BOOST_TEST(m.points[k].recipes[j].ranks == whole.points[keep[k]].recipes[j].ranks);
  }
  BOOST_TEST(m.partial);
  BOOST_TEST(m.bisection_stopped);  // run 1 stopped: its switch towards g[14] was not bisected
  BOOST_TEST(m.points_planned == 29);
  BOOST_TEST_REQUIRE(m.not_computed.size() == 1);
  BOOST_TEST(m.not_computed[0].first == g[10]);
  BOOST_TEST(m.not_computed[0].last == g[20]);
  BOOST_TEST(m.not_computed[0].points == 11);
  std::size_t n = 0;
  for (const auto& d : m.divergence)
    for (const auto& [lo, hi] : d.intervals) {
      BOOST_TEST(((g[0] <= lo && hi <= g[9]) || (g[21] <= lo && hi <= g[28])), d.recipe << " " << d.policy << " [" << lo << ", " << hi << "]");
      ++n;
    }
  BOOST_TEST(n > 0);
  // two gaps, one of them the first point alone
  const drift_result m2 = merge_drift_runs(r, {std::nullopt, run(1, 7), std::nullopt, run(21, 28)});
  BOOST_TEST_REQUIRE(m2.not_computed.size() == 2);
  BOOST_TEST(m2.not_computed[0].first == g[0]);
  BOOST_TEST(m2.not_computed[0].points == 1);
  BOOST_TEST(m2.not_computed[1].first == g[8]);
  BOOST_TEST(m2.not_computed[1].last == g[20]);
  // errors: nothing computed, runs out of order, runs of another sweep
  BOOST_CHECK_THROW(merge_drift_runs(r, {std::nullopt, std::nullopt}), input_error);
  BOOST_CHECK_THROW(merge_drift_runs(r, {run(21, 28), run(0, 7)}), input_error);
  drift_request other = r;
  other.policies = parse_policies("numpy");
  BOOST_CHECK_THROW(merge_drift_runs(other, {run(0, 7), run(7, 14)}), input_error);
  drift_request shifted = r;
  shifted.from = 0.25;
  BOOST_CHECK_THROW(merge_drift_runs(shifted, {run(0, 7)}), input_error);
}

// Above drift_mpfi_max_n the exact side is the factored exact rank and the binary64 singular
// values.  Soundness against independent references: the exact rank of the rational scores a·QKᵀ
// formed here (layer_rank, the general path), and σ_min of the object computed in MPFR at 128 bits
// (Jacobi; its error, about 2^-115, is far below the binary64 enclosure's width), which every
// reported [smin_lo, smin_hi] must contain.  a = 0 (uniform attention, rank 1) included.
BOOST_AUTO_TEST_CASE(large_n_uses_the_factored_rank_and_binary64_sigma) {
  for (const layer_object obj : {layer_object::attention, layer_object::output}) {
    drift_request r = request(drift_family::random, 0, 2, 2, false, "fp64", "numpy");
    r.n = drift_mpfi_max_n + 8;
    r.d = 6;
    r.object = obj;
    const drift_result res = run_drift(r);
    BOOST_TEST_REQUIRE(res.points.size() >= 2u);
    for (const drift_point& p : res.points) {
      BOOST_TEST_CONTEXT("object " << to_string(obj) << ", a = " << p.a) {
        const recipe_input in = drift_instance(r, p.a);
        const matrix<mpq_rational> SK = multiply(matrix<mpq_rational>(from_double_matrix<mpq_rational>(in.Q) * mpq_rational(p.a)),
                                                 transpose(from_double_matrix<mpq_rational>(in.K)));
        std::optional<matrix<mpq_rational>> V;
        if (in.V) V = from_double_matrix<mpq_rational>(*in.V);
        const rank_interval ri = layer_rank(SK, in.M, obj, V, std::nullopt, rank_options{});
        BOOST_TEST(p.exact.lo == ri.lo);
        BOOST_TEST(p.exact.hi == ri.hi);
        BOOST_TEST(p.enclosure_bits == 53u);
        precision_guard g(128);
        matrix<mpfr_float> S = multiply(from_double_matrix<mpfr_float>(in.Q), transpose(from_double_matrix<mpfr_float>(in.K)));
        for (Eigen::Index i = 0; i < S.size(); ++i) S(i) *= mpfr_float(p.a);
        matrix<mpfr_float> X = masked_softmax(S, in.M);
        if (obj == layer_object::output) X = multiply(X, from_double_matrix<mpfr_float>(*in.V));
        const std::vector<mpfr_float> sv = approx_singular_values(X);
        const mpfr_float smin = sv.back();
        BOOST_TEST(dec(p.smin_lo) <= smin, p.smin_lo << " > sigma_min " << smin);
        BOOST_TEST(smin <= dec(p.smin_hi), p.smin_hi << " < sigma_min " << smin);
        if (p.a > 0 && ri.lo == static_cast<std::size_t>(r.n)) BOOST_TEST(dec(p.smin_lo) > 0);  // decided here
      }
    }
  }
  drift_request big = request(drift_family::random, 0, 1, 2, false, "fp64", "numpy");
  big.n = drift_max_n + 1;
  BOOST_CHECK_THROW(run_drift(big), input_error);
}
