// tests/rank/family.cpp — parameter-family ranks by exact root isolation: families
// with known answers (two-token, causal, identical values, an isolated drop confirmed by an
// MPFR sweep), Sturm isolation against polynomials with known roots, and cross-checks
// against the transcendence method (linalg/attention_rank.hpp) at a = 1.
#define BOOST_TEST_MODULE rank_family
#include <boost/test/unit_test.hpp>

#include "../random_matrices.hpp"
#include "../support.hpp"
#include "attncert/attention/softmax.hpp"
#include "attncert/linalg/exact.hpp"
#include "attncert/number/precision_guard.hpp"
#include "attncert/rank/family.hpp"

using namespace attncert;
using Q = mpq_rational;

namespace {

matrix<Q> mat(std::initializer_list<std::initializer_list<int>> rows) {
  matrix<Q> m(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(rows.begin()->size()));
  Eigen::Index i = 0;
  for (const auto& r : rows) {
    Eigen::Index j = 0;
    for (int x : r) m(i, j++) = x;
    ++i;
  }
  return m;
}

family_rank_result run(const matrix<Q>& S0, const std::string& range, layer_object obj = layer_object::attention,
                       const mask& M = mask::none(), std::optional<matrix<Q>> V = {}, std::optional<matrix<Q>> X = {}) {
  family_input in;
  in.S0 = S0;
  in.M = M;
  in.object = obj;
  in.V = V;
  in.X = X;
  return family_rank(build_family(in), parse_a_range(range));
}

// det softmax(a·S0) in MPFR at `bits` (approx tier; used only where it is far from 0).
mpfr_float approx_det(const matrix<Q>& S0, const mpfr_float& a) {
  matrix<mpfr_float> S(S0.rows(), S0.cols());
  for (Eigen::Index i = 0; i < S0.rows(); ++i)
    for (Eigen::Index j = 0; j < S0.cols(); ++j) S(i, j) = a * mpfr_float(S0(i, j));
  const matrix<mpfr_float> A = masked_softmax(S);
  return cofactor_determinant(A);
}

}  // namespace

BOOST_AUTO_TEST_CASE(two_token_rank_two_for_every_positive_a_and_one_at_zero) {
  const matrix<Q> S0 = mat({{1, -1}, {-1, 1}});
  const auto pos = run(S0, "(0, inf)");
  BOOST_TEST(pos.decided);
  BOOST_TEST(pos.generic == 2u);
  BOOST_TEST(pos.drops.empty());
  const auto closed = run(S0, "[0, inf)");
  BOOST_TEST_REQUIRE(closed.drops.size() == 1u);
  BOOST_TEST(closed.drops[0].u.exact());
  BOOST_TEST(closed.drops[0].u.lo == Q(1));
  BOOST_TEST(closed.drops[0].rank == 1u);
  // negative a: the same (u^4 - 1 has only u = 1 as a positive root)
  BOOST_TEST(run(S0, "(-inf, 0)").drops.empty());
  BOOST_TEST(run(S0, "(-inf, inf)").drops.size() == 1u);
}

BOOST_AUTO_TEST_CASE(causal_masks_are_full_rank_for_every_a) {
  auto rng = make_rng(1);
  for (int t = 0; t < 10; ++t) {
    const Eigen::Index n = 2 + t % 4;
    const matrix<Q> S0 = random_int(rng, n, n, 3);
    const auto r = run(S0, "(-inf, inf)", layer_object::attention, mask::causal());
    BOOST_TEST(r.decided);
    BOOST_TEST(r.generic == static_cast<std::size_t>(n));
    BOOST_TEST(r.drops.empty());  // det = u^k (positive diagonal): no positive root
  }
}

BOOST_AUTO_TEST_CASE(identical_values_give_rank_one_output_for_every_a) {
  auto rng = make_rng(2);
  for (int t = 0; t < 10; ++t) {
    const matrix<Q> S0 = random_int(rng, 3, 3, 3);
    matrix<Q> v = random_int(rng, 1, 2, 3);
    if (v(0, 0) == 0 && v(0, 1) == 0) v(0, 0) = 1;
    matrix<Q> V(3, 2);
    for (int i = 0; i < 3; ++i) V.row(i) = v.row(0);
    const auto r = run(S0, "(-inf, inf)", layer_object::output, mask::none(), V);
    BOOST_TEST(r.decided);
    BOOST_TEST(r.generic == 1u);
    BOOST_TEST(r.drops.empty());
  }
}

BOOST_AUTO_TEST_CASE(residual_restores_rank_of_identical_values) {
  const matrix<Q> S0 = mat({{1, 0, -1}, {0, 2, 1}, {1, 1, 0}});
  const matrix<Q> V = mat({{1, 2}, {1, 2}, {1, 2}});
  const matrix<Q> X = mat({{1, 0}, {0, 1}, {2, -1}});
  const auto r = run(S0, "(-inf, inf)", layer_object::residual, mask::none(), V, X);
  BOOST_TEST(r.generic == 2u);
  BOOST_TEST(r.drops.empty());  // X + 1v^T does not depend on a
}

// The isolated drop: S0 with det E(u) = -u^6 + 2u^5 - 2u^2 + 1 = -(u^2 - u - 1)(u^4 - u^3 + ... ),
// root u* = golden ratio, a* = log((1 + sqrt 5)/2).
BOOST_AUTO_TEST_CASE(isolated_drop_is_found_and_confirmed_by_an_mpfr_sweep_only_inside_its_interval) {
  const matrix<Q> S0 = mat({{0, 2, -2}, {1, 2, 1}, {1, 0, 2}});
  const auto r = run(S0, "(0, inf)");
  BOOST_TEST_REQUIRE(r.decided);
  BOOST_TEST(r.generic == 3u);
  BOOST_TEST_REQUIRE(r.drops.size() == 1u);
  const auto& d = r.drops[0];
  BOOST_TEST(d.rank == 2u);
  precision_guard pg(256);
  const mpfr_float alo(d.a.first), ahi(d.a.second);
  const mpfr_float astar = log((1 + sqrt(mpfr_float(5))) / 2);
  BOOST_TEST((alo <= astar && astar <= ahi));
  BOOST_TEST(ahi - alo < mpfr_float(1e-9));
  // Sweep: det softmax(a S0) changes sign exactly once on a grid of (0, 3], and that change
  // brackets the isolating interval; just outside the interval the determinant is nonzero
  // with opposite signs.
  int changes = 0;
  mpfr_float prev_a = 0, prev = approx_det(S0, mpfr_float("0.005"));
  for (int k = 1; k <= 600; ++k) {
    const mpfr_float a = mpfr_float(k) / 200;
    const mpfr_float v = approx_det(S0, a);
    BOOST_TEST(abs(v) > mpfr_float(1e-40));
    if ((v > 0) != (prev > 0)) {
      ++changes;
      BOOST_TEST((prev_a < alo && ahi < a));
    }
    prev = v;
    prev_a = a;
  }
  BOOST_TEST(changes == 1);
  const mpfr_float below = approx_det(S0, alo - mpfr_float(1e-12)), above = approx_det(S0, ahi + mpfr_float(1e-12));
  BOOST_TEST(((below > 0) != (above > 0)));
  // On a range that excludes a*, no drop; on one that just contains it, the drop.
  BOOST_TEST(run(S0, "(0, 0.48)").drops.empty());
  BOOST_TEST(run(S0, "[0.482, 10]").drops.empty());
  BOOST_TEST(run(S0, "[0.481, 0.482]").drops.size() == 1u);
}

BOOST_AUTO_TEST_CASE(generic_rank_agrees_with_the_transcendence_method) {
  auto rng = make_rng(3);
  for (int t = 0; t < 12; ++t) {
    const Eigen::Index n = 2 + t % 3;
    matrix<Q> S0 = random_int(rng, n, n, 2);
    if (t % 3 == 0) S0.row(1) = S0.row(0);  // proportional rows of E: rank drop over Q(u)
    family_input in;
    in.S0 = S0;
    const poly_family F = build_family(in);
    const auto tm = layer_rank(S0, mask::none(), layer_object::attention);
    BOOST_TEST_REQUIRE(tm.exact());
    BOOST_TEST(generic_rank(F) == tm.lo);
    BOOST_TEST(kernel_basis(F).size() == static_cast<std::size_t>(n) - tm.lo);
  }
}

BOOST_AUTO_TEST_CASE(isolation_finds_exactly_the_known_positive_roots) {
  auto rng = make_rng(4);
  std::uniform_int_distribution<int> num(1, 40), den(1, 9), cnt(0, 4);
  for (int t = 0; t < 40; ++t) {
    // p = c * prod (den u - num) * (u^2 + 1) * (u + 3): positive rational roots, plus complex and negative ones
    std::vector<Q> roots;
    int_poly p = {3, 1};
    auto mul = [](const int_poly& a, const int_poly& b) {
      int_poly c(a.size() + b.size() - 1);
      for (std::size_t i = 0; i < a.size(); ++i)
        for (std::size_t j = 0; j < b.size(); ++j) c[i + j] += a[i] * b[j];
      return c;
    };
    p = mul(p, {1, 0, 1});
    const int k = cnt(rng);
    for (int i = 0; i < k; ++i) {
      const int a = num(rng), b = den(rng);
      const Q r(a, b);
      if (std::find(roots.begin(), roots.end(), r) != roots.end()) continue;
      roots.push_back(r);
      p = mul(p, {mpz_int(-a), mpz_int(b)});
    }
    p = mul(p, p);  // repeated roots: isolation works on the squarefree part
    std::sort(roots.begin(), roots.end());
    const auto iso = isolate_positive_roots(p, Q(1, 1000));
    BOOST_TEST_REQUIRE(iso.size() == roots.size());
    for (std::size_t i = 0; i < roots.size(); ++i) {
      BOOST_TEST((iso[i].lo <= roots[i] && roots[i] <= iso[i].hi));
      BOOST_TEST(iso[i].hi - iso[i].lo <= Q(1, 1000));
    }
  }
  // Irrational roots: u^2 - 2 (sqrt 2), and the golden ratio.
  const auto s2 = isolate_positive_roots({-2, 0, 1}, Q(1, 1 << 20));
  BOOST_TEST_REQUIRE(s2.size() == 1u);
  BOOST_TEST((s2[0].lo * s2[0].lo < 2 && s2[0].hi * s2[0].hi > 2));
}

BOOST_AUTO_TEST_CASE(sturm_counts_roots_between_points) {
  const int_poly p = {-6, 11, -6, 1};  // (u-1)(u-2)(u-3)
  const auto s = sturm_sequence(p);
  BOOST_TEST(sign_variations(s, Q(0)) - sign_variations(s, std::nullopt) == 3);
  BOOST_TEST(sign_variations(s, Q(3, 2)) - sign_variations(s, Q(5, 2)) == 1);
  BOOST_TEST(sign_variations(s, Q(4)) - sign_variations(s, std::nullopt) == 0);
}

BOOST_AUTO_TEST_CASE(ranges_parse_and_reject) {
  const auto r = parse_a_range("[1e-3, 10]");
  BOOST_TEST((r.lo && *r.lo == Q(1, 1000) && !r.lo_open && r.hi && *r.hi == 10));
  BOOST_TEST(r.contains(Q(1, 1000)));
  BOOST_TEST(!parse_a_range("(0, inf)").contains(Q(0)));
  BOOST_CHECK_THROW(parse_a_range("(1, 0)"), input_error);
  BOOST_CHECK_THROW(parse_a_range("0, 1"), input_error);
  BOOST_CHECK_THROW(parse_a_range("(0, x)"), input_error);
}

// Filter, then escalate: a range end 4e-34 below the drop a* = log φ cannot be separated from
// it with 64-bit enclosures of e^{a}, so the answer is undecided there; a higher cap decides,
// on both sides of a*.
BOOST_AUTO_TEST_CASE(escalation_decides_a_range_end_next_to_a_drop) {
  const matrix<Q> S0 = mat({{0, 2, -2}, {1, 2, 1}, {1, 0, 2}});
  family_input in;
  in.S0 = S0;
  const poly_family F = build_family(in);
  const auto below = parse_a_range("(0, 0.481211825059603447497758913424368]");
  const auto above = parse_a_range("(0, 0.481211825059603447497758913424369]");
  const auto low = family_rank(F, below, 64);
  BOOST_TEST(!low.decided);
  BOOST_TEST(low.why_undecided.find("64 bits") != std::string::npos);
  const auto hi = family_rank(F, below, 256);
  BOOST_TEST(hi.decided);
  BOOST_TEST(hi.drops.empty());
  const auto hi2 = family_rank(F, above, 256);
  BOOST_TEST(hi2.decided);
  BOOST_TEST(hi2.drops.size() == 1u);
}

// Regression (issue 11): with the factor u, the lowest isolating interval used to start at
// lo = 0, where g(0) = 0; refining with g then always kept the left half and lost the root
// (every root in (0, 1) — a < 0 — was mislaid).  Intervals now lie in (0, ∞) with ends that
// are roots of neither p nor u·p, and refine() checks its precondition instead of assuming it.
BOOST_AUTO_TEST_CASE(roots_below_one_with_the_factor_u_are_refined_correctly) {
  // g = u (u^2 + u - 1): the positive root (sqrt 5 - 1)/2 = 1/phi ≈ 0.618 < 1
  const int_poly g = {0, -1, 1, 1};
  auto iso = isolate_positive_roots(g);
  BOOST_TEST_REQUIRE(iso.size() == 1u);
  BOOST_TEST(iso[0].lo > 0);
  BOOST_TEST(sign_at(g, iso[0].lo) != 0);
  root_interval r = iso[0];
  for (int k = 0; k < 60; ++k) refine(r, g);  // with g, as the callers do
  const double phi_inv = (std::sqrt(5.0) - 1) / 2;
  BOOST_TEST(r.lo.convert_to<double>() <= phi_inv + 1e-15);
  BOOST_TEST(r.hi.convert_to<double>() >= phi_inv - 1e-15);
  BOOST_TEST((r.hi - r.lo).convert_to<double>() < 1e-15);
  // a root very close to 0: u (1000 u - 1)
  const auto tiny = isolate_positive_roots({0, -1, 1000});
  BOOST_TEST_REQUIRE(tiny.size() == 1u);
  BOOST_TEST((tiny[0].lo > 0 && tiny[0].lo < Q(1, 1000) && tiny[0].hi > Q(1, 1000)));
  // refine refuses an interval whose end is a root (it would lose the root silently)
  root_interval bad{Q(0), Q(1)};
  BOOST_CHECK_THROW(refine(bad, g), std::logic_error);
}

// place_root escalates precision without a fixed bisection budget: a range end 10^-300 away from
// the drop a* = log(2) (q = 1, g = u - 2) is decided at the default cap.
BOOST_AUTO_TEST_CASE(range_end_within_1e_300_of_a_root_is_decided) {
  // log 2 to 320 digits (from MPFR), minus / plus 10^-300
  mpfr_t l2;
  mpfr_init2(l2, 1200);
  mpfr_const_log2(l2, MPFR_RNDN);
  char* s = nullptr;
  mpfr_asprintf(&s, "%.330Rf", l2);
  const Q log2q = number_traits<mpq_rational>::from_string(s);
  mpfr_free_str(s);
  mpfr_clear(l2);
  const Q eps = Q(1) / Q(boost::multiprecision::pow(mpz_int(10), 300));
  const int_poly g = {-2, 1};
  for (int side : {-1, 1}) {
    a_range range;
    range.lo = log2q + side * eps;  // log2q is within 10^-329 of log 2
    range.lo_open = true;
    auto iso = isolate_positive_roots(g);
    BOOST_TEST_REQUIRE(iso.size() == 1u);
    const placement p = place_root(iso[0], g, range, mpz_int(1), 4096);
    BOOST_TEST((p == (side < 0 ? placement::inside : placement::outside)));
  }
}

BOOST_AUTO_TEST_CASE(range_ends_beyond_the_magnitude_limit_are_refused) {
  BOOST_CHECK_THROW(check_end_magnitude(Q(10001), mpz_int(1)), method_limit);
  BOOST_CHECK_NO_THROW(check_end_magnitude(Q(-10000), mpz_int(1)));
  BOOST_CHECK_NO_THROW(check_end_magnitude(Q(20000), mpz_int(2)));
}
