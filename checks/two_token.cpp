// checks/two_token.cpp — the article's exact rank-one construction (§4–6).
//
// q = k = (1, −1)ᵀ with one feature, S(a) = a·qkᵀ = [[a, −a], [−a, a]], a ≥ 0.
// A = softmax(S) = [[p, 1−p], [1−p, p]], p = 1/(1 + e^{−2a}); eigenvalues 1 (uniform
// (1,1)) and 2p − 1 = tanh a (contrast (1,−1)); det A = tanh a; singular values {1, tanh a};
// cond = 1/tanh a; rank S ≤ 1 while rank A = 2 for a > 0 and 1 at a = 0;
// d/da tanh a = 1 − tanh² a; values (v, −v) give outputs ±tanh(a)·v.
// Proof: proofs/P01-two-token.md.
#include "checks/common.hpp"

namespace attncert::checks {
namespace {

// The grid of a, declared before anything is computed (article: at least these points).
const std::vector<std::string> grid = {"0", "1e-20", "1e-17", "1e-9", "1e-3", "0.5", "1", "5", "20", "40"};

const char* error_model =
    "Every elementary operation (including exp and tanh) has relative error <= eps = 2^(1-p) of the "
    "evaluating format. Values with a nonzero true value are compared RELATIVELY with a certified value "
    "(MPFI at the stored a, never a formula in the same format): p = A_11 within 8 eps; det = p^2 - (1-p)^2 "
    "cancels (absolute error <= 8 eps), so det and sigma_2 = tanh a are within 8 eps / tanh a relative; the "
    "SVD (backward stable) adds <= a few eps*||A||, so sigma_1 = 1 within 8 eps; cond = s1/s2 within "
    "16 eps/tanh a + 8 eps; the saturation derivative 4p(1-p) = 1 - tanh^2 a goes through 1 - (2p - 1), "
    "which cancels: within 16 eps + 8 eps/(1-p) relative. A relative bound above 1/4 means the format "
    "cannot resolve the value: the row is not asserted, and is flagged DIVERGES when it is off (article "
    "§5, §6, §13). Residuals whose true value is exactly 0 (row sums, eigen-residuals, det - (2p-1), "
    "transmission) keep absolute tolerances.";

template <class T>
matrix<T> score_matrix(const T& a) {
  matrix<T> q(2, 1);
  q << T(1), T(-1);
  return scores(q, q, a);  // a · q qᵀ (k = q)
}

template <class T>
T det2(const matrix<T>& A) {
  return A(0, 0) * A(1, 1) - A(0, 1) * A(1, 0);
}

struct exact_info {
  std::size_t rank_S = 0, rank_A = 0;
  std::string source_S, source_A;
};

// Exact and enclosure tier: rank S over Q, and rank A from a certified sign of det A.
exact_info exact_part(report::check_report& rep, const std::string& a_text, const run_settings& rs) {
  exact_info info;
  const std::string inst = "a=" + a_text;
  const mpq_rational a = number_traits<mpq_rational>::from_string(a_text);
  const matrix<mpq_rational> S = score_matrix(a);
  const std::size_t want_S = a == 0 ? 0 : 1, want_A = a == 0 ? 1 : 2;
  const auto rS = cross_checked_rank(rep, "S", inst, want_S, "S = a q k^T with q, k != 0", exact_rank_rational(S));
  info.rank_S = rS.rank;
  info.source_S = rS.source;
  rep.claims.push_back(claim_exact("rank-S-le-1", "rank S <= 1 (S = a*q*k^T, one feature)", inst, std::to_string(info.rank_S),
                                   "<= 1", info.rank_S <= 1, "exact rank over Q"));
  const auto rA = cross_checked_rank(rep, "A", inst, want_A, a == 0 ? "a = 0: equal rows" : "det A = tanh a > 0 (P01)",
                                     layer_rank(S, mask::none(), layer_object::attention));
  info.rank_A = rA.rank;
  info.source_A = rA.source;
  if (a == 0) {
    // S = 0: every exp is exactly 1 and A = [[1/2, 1/2], [1/2, 1/2]] is rational.
    matrix<mpq_rational> A(2, 2);
    A << mpq_rational(1, 2), mpq_rational(1, 2), mpq_rational(1, 2), mpq_rational(1, 2);
    const std::size_t r0 = rank(A);
    rep.claims.push_back(claim_exact("rank-A-collapses-at-0", "at a = 0 both rows are equal and rank A = 1", inst,
                                     std::to_string(r0), "1", r0 == 1, "rank over Q"));
    return info;
  }
  const certified_sign s = certify_sign(
      [&] {
        const mpfi_float ai = number_traits<mpfi_float>::from_string(a_text);
        return det2(masked_softmax(score_matrix(ai)));
      },
      rs.certify_bits, rs.certify_max_bits, true);
  rep.claims.push_back(claim_from_sign("rank-A-full", "rank A = 2 for a > 0 although rank S = 1 (det A > 0)", inst, s, "> 0",
                                       "enclosure: the whole interval must be > 0 (escalated from " +
                                           std::to_string(rs.certify_bits) + " bits, cap " +
                                           std::to_string(rs.certify_max_bits) + ")"));
  return info;
}

// Certified values at the stored a (a binary number, exact in Q): p = 1/(1 + e^{-2a}), tanh a and
// 1 - tanh^2 a = 4 e^{-2a}/(1 + e^{-2a})^2 (written without cancellation), enclosed in MPFI.
struct certified_closed_forms {
  certified_value p, tanh_a, sech2;
  mpfr_float tanh_mid, one_minus_p;  // binary64-range-safe midpoints for tolerances (MPFR exponent range)
};

template <class T>
certified_closed_forms certify_closed_forms(const T& a_stored, const run_settings& rs) {
  const mpq_rational aq = exact_rational_of(a_stored);
  auto a_enc = [&] {
    mpfi_float x;
    mpfi_set_q(x.backend().data(), aq.backend().data());
    return x;
  };
  certified_closed_forms c;
  c.p = certify_value([&] { return mpfi_float(mpfi_float(1) / (mpfi_float(1) + exp(mpfi_float(-2 * a_enc())))); },
                      rs.certify_bits, rs.certify_max_bits, certify_width_for<T>());
  c.tanh_a = certify_value([&] { return mpfi_float(tanh(a_enc())); }, rs.certify_bits, rs.certify_max_bits, certify_width_for<T>());
  c.sech2 = certify_value(
      [&] {
        const mpfi_float e = exp(mpfi_float(-2 * a_enc()));
        return mpfi_float(4 * e / ((1 + e) * (1 + e)));
      },
      rs.certify_bits, rs.certify_max_bits, certify_width_for<T>());
  {
    precision_guard g(c.tanh_a.bits);
    c.tanh_mid = lower_of(c.tanh_a.enclosure);
    // 1 - p = e^{-2a}/(1 + e^{-2a}) = sech2 / (4 p): lower end, for the cancellation bound
    c.one_minus_p = mpfr_float(lower_of(c.sech2.enclosure) / (4 * upper_of(c.p.enclosure)));
  }
  return c;
}

template <class T>
void evaluate(report::check_report& rep, const format_spec& fmt, const std::string& a_text, const exact_info& ex,
              const run_settings& rs) {
  const std::string inst = "a=" + a_text;
  const T e = eps<T>();
  const T a = number_traits<T>::from_string(a_text);
  const matrix<T> S = score_matrix(a);
  const matrix<T> A = attention_matrix(S, mask::none(), rs);
  // Certified values and relative tolerances, fixed before anything below is computed.
  const certified_closed_forms cf = certify_closed_forms(a, rs);
  const mpfr_float me = ldexp(mpfr_float(1), 1 - static_cast<int>(number_traits<T>::bits() ? number_traits<T>::bits() : 64));
  const mpfr_float tol_p = 8 * me;
  const mpfr_float tol_det = cf.tanh_mid > 0 ? mpfr_float(8 * me / cf.tanh_mid) : mpfr_float(1);
  const mpfr_float tol_sat = 16 * me + mpfr_float(8 * me / cf.one_minus_p);
  // The closed form in the same format, only for residuals whose true value is exactly 0.
  const T th = number_traits<T>::from_string(cf.tanh_mid.str(digits_for<T>() + 3, std::ios_base::scientific));

  rep.claims.push_back(claim_close("rows-sum-to-1", "each row of A sums to 1", inst, fmt, max_row_sum_error(A), T(0),
                                   T(4 * e), false, "4 eps (two rounded entries and one addition)"));
  rep.claims.push_back(claim_certified("diagonal-p", "A_11 = A_22 = p = 1/(1+exp(-2a))", inst, fmt, A(0, 0), cf.p, tol_p,
                                       "8 eps (<= 3 rounded operations)"));
  rep.claims.push_back(claim_certified("diagonal-p", "A_11 = A_22 = p = 1/(1+exp(-2a))", inst, fmt, A(1, 1), cf.p, tol_p,
                                       "8 eps (<= 3 rounded operations)"));
  const T det = det2(A);
  rep.claims.push_back(claim_certified("det-equals-tanh", "det A = tanh a", inst, fmt, det, cf.tanh_a, tol_det,
                                       "8 eps / tanh a (p^2 - (1-p)^2 cancels: absolute error 8 eps)", 8 * me));
  rep.claims.push_back(claim_close("det-equals-2p-1", "det A = 2p - 1 (with the computed p)", inst, fmt, det,
                                   T(T(2) * A(0, 0) - T(1)), T(8 * e), false, "8 eps (cancellation: absolute)"));

  // Eigenpairs: A·(1,1) = (1,1) and A·(1,−1) = tanh(a)·(1,−1).
  matrix<T> u(2, 1), c(2, 1);
  u << T(1), T(1);
  c << T(1), T(-1);
  const matrix<T> Au = multiply(A, u), Ac = multiply(A, c);
  T res_u = max_of(abs_of(T(Au(0, 0) - T(1))), abs_of(T(Au(1, 0) - T(1))));
  T res_c = max_of(abs_of(T(Ac(0, 0) - th)), abs_of(T(Ac(1, 0) + th)));
  rep.claims.push_back(claim_close("eigenpair-uniform", "A (1,1)^T = 1 * (1,1)^T", inst, fmt, res_u, T(0), T(4 * e), false,
                                   "4 eps (max residual)"));
  rep.claims.push_back(claim_close("eigenpair-contrast", "A (1,-1)^T = tanh(a) * (1,-1)^T", inst, fmt, res_c, T(0),
                                   T(8 * e), false, "8 eps (max residual; cancellation: absolute)"));

  // Singular values and condition number (approx-tier SVD; not asserted on intervals).
  if constexpr (tier_of<T> == tier::approx) {
    std::vector<T> sv;  // the SVD of a numerical rank (binary32 for the 16-bit formats)
    for (const auto& s : approx_measured_singular_values(A)) sv.push_back(T(s));
    rep.claims.push_back(claim_close("singular-value-1", "sigma_1 = 1", inst, fmt, sv[0], T(1), T(8 * e), false,
                                     "8 eps (backward-stable SVD, ||A|| = 1 exactly, so absolute = relative)"));
    rep.claims.push_back(claim_certified("singular-value-tanh", "sigma_2 = tanh a", inst, fmt, sv[1], cf.tanh_a, tol_det,
                                         "8 eps / tanh a (backward-stable SVD: absolute error 8 eps, ||A|| = 1)", 8 * me));
    // Asserted only where the first-order bound 16 eps / tanh a is <= 1/4 (decided on the
    // certified tanh a, before the condition number is computed).
    if (cf.tanh_mid > 0 && 64 * me <= cf.tanh_mid) {
      const T cond = approx_condition_number(sv);
      const certified_value inv = certify_value([&] { return mpfi_float(1 / cf.tanh_a.enclosure); }, cf.tanh_a.bits,
                                                rs.certify_max_bits, certify_width_for<T>());
      rep.claims.push_back(claim_certified("condition-number", "cond A = 1/tanh a", inst, fmt, cond, inv,
                                           mpfr_float(16 * me / cf.tanh_mid + 8 * me),
                                           "16 eps/tanh a + 8 eps (first order in the SVD error)"));
    } else {
      rep.claims.push_back(claim_skipped("condition-number", "cond A = 1/tanh a", inst, fmt, tier_of<T>,
                                         "not asserted: 16 eps/tanh a > 1/4 in this format (near-singular; §5, §13 "
                                         "interpret such points through conditioning)"));
    }
  } else {
    rep.claims.push_back(claim_skipped("singular-value-tanh", "sigma_2 = tanh a", inst, fmt, tier_of<T>,
                                       "interval SVD is issue-3 work; det and eigenpair enclosures above cover it"));
  }

  // Saturation (§6): d det/da through the softmax's forward derivative equals 1 − tanh² a.
  matrix<T> dS(2, 2);
  dS << T(1), T(-1), T(-1), T(1);  // dS/da = q kᵀ
  const matrix<T> dA = softmax_jvp(A, dS);
  const T ddet = dA(0, 0) * A(1, 1) + A(0, 0) * dA(1, 1) - dA(0, 1) * A(1, 0) - A(0, 1) * dA(1, 0);
  rep.claims.push_back(claim_certified("saturation-derivative", "d/da det A = d/da tanh a = 1 - tanh^2 a", inst, fmt, ddet,
                                       cf.sech2, tol_sat,
                                       "16 eps + 8 eps/(1-p) (product rule over the softmax JVP; its 1 - (2p-1) cancels)"));

  // Contrast transmission (§4): values (v, −v) give outputs ±tanh(a)·v.
  matrix<T> V(2, 3);
  V << T(1), T(-0.5), T(2), T(-1), T(0.5), T(-2);
  const matrix<T> O = multiply(A, V);
  T worst(0);
  for (int k = 0; k < 3; ++k) {
    worst = max_of(worst, abs_of(T(O(0, k) - th * V(0, k))));
    worst = max_of(worst, abs_of(T(O(1, k) + th * V(0, k))));
  }
  rep.claims.push_back(claim_close("contrast-transmission", "values (v,-v) give outputs +-tanh(a) v", inst, fmt, worst,
                                   T(0), T(16 * e), false, "8 eps * max|v| (max|v| = 2)"));

  rep.ranks.push_back(measure_rank("S", inst, fmt, S, ex.rank_S, ex.source_S, rs));
  rep.ranks.push_back(measure_rank("A", inst, fmt, A, ex.rank_A, ex.source_A, rs));
}

report::check_report run(const run_settings& rs) {
  report::check_report rep;
  std::map<std::string, exact_info> ex;
  for (const auto& a : grid) ex[a] = exact_part(rep, a, rs);
  for_each_format(rs, [&]<class T>(const format_spec& f) {
    for (const auto& a : grid) evaluate<T>(rep, f, a, ex[a], rs);
  });
  return rep;
}

}  // namespace

check_entry make_two_token() {
  return {"two-token", "Rank-one scores, full-rank attention: the two-token family", "§4-6", "proofs/P01-two-token.md",
          error_model, run};
}

}  // namespace attncert::checks
