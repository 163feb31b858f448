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
    "evaluating format. softmax of a 2x2 row: <= 3 operations per entry, closed forms <= 3: entries agree "
    "to 8 eps relative. det = p^2 - (1-p)^2 cancels, so det and eigenvalue claims use absolute tolerances "
    "(8 eps). The SVD (Jacobi, backward stable) adds <= a few eps*||A||: absolute 8 eps. cond = s1/s2 has "
    "first-order relative error 16 eps/tanh a: asserted only where that is <= 1/4, decided from the closed "
    "form before computing (article §5, §13).";

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

template <class T>
void evaluate(report::check_report& rep, const format_spec& fmt, const std::string& a_text, const exact_info& ex,
              const run_settings& rs) {
  using std::exp;
  using std::tanh;
  const std::string inst = "a=" + a_text;
  const T e = eps<T>();
  const T a = number_traits<T>::from_string(a_text);
  const matrix<T> S = score_matrix(a);
  const matrix<T> A = attention_matrix(S, mask::none(), rs);

  // Closed forms, evaluated in the same format from the same stored a.
  const T p = T(1) / (T(1) + exp(T(-2) * a));
  const T th = tanh(a);

  rep.claims.push_back(claim_close("rows-sum-to-1", "each row of A sums to 1", inst, fmt, max_row_sum_error(A), T(0),
                                   T(4 * e), false, "4 eps (two rounded entries and one addition)"));
  rep.claims.push_back(claim_close("diagonal-p", "A_11 = A_22 = p = 1/(1+exp(-2a))", inst, fmt, A(0, 0), p, T(8 * e), true,
                                   "8 eps (<= 3 rounded operations on each side)"));
  rep.claims.push_back(claim_close("diagonal-p", "A_11 = A_22 = p = 1/(1+exp(-2a))", inst, fmt, A(1, 1), p, T(8 * e), true,
                                   "8 eps (<= 3 rounded operations on each side)"));
  const T det = det2(A);
  rep.claims.push_back(claim_close("det-equals-tanh", "det A = tanh a", inst, fmt, det, th, T(8 * e), false,
                                   "8 eps (p^2 - (1-p)^2 cancels: absolute)"));
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
                                     "8 eps (backward-stable SVD, ||A|| = 1)"));
    rep.claims.push_back(claim_close("singular-value-tanh", "sigma_2 = tanh a", inst, fmt, sv[1], th, T(8 * e), false,
                                     "8 eps (backward-stable SVD, ||A|| = 1)"));
    // Asserted only where the first-order bound 16 eps / tanh a is <= 1/4 (decided on the
    // closed form, before the condition number is computed).
    if (th > T(0) && T(T(64) * e) <= th) {
      const T cond = approx_condition_number(sv);
      rep.claims.push_back(claim_close("condition-number", "cond A = 1/tanh a", inst, fmt, cond, T(T(1) / th),
                                       T(T(16) * e / th + T(8) * e), true, "16 eps/tanh a + 8 eps (first order in the SVD error)"));
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
  rep.claims.push_back(claim_close("saturation-derivative", "d/da det A = d/da tanh a = 1 - tanh^2 a", inst, fmt, ddet,
                                   T(T(1) - th * th), T(16 * e), false, "16 eps (product rule over the softmax JVP)"));

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

  rep.ranks.push_back(measure_rank("S", inst, fmt, S, ex.rank_S, ex.source_S, rs.policies));
  rep.ranks.push_back(measure_rank("A", inst, fmt, A, ex.rank_A, ex.source_A, rs.policies));
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
