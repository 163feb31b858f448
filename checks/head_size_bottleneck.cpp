// checks/head_size_bottleneck.cpp — the low-rank bottleneck of a head
// (S. Bhojanapalli, C. Yun, A. S. Rawat, S. J. Reddi, S. Kumar, "Low-Rank Bottleneck in
// Multi-head Attention Models", 2020).
//
// A positive row-stochastic P (n×n) is the softmax of some score matrix of rank ≤ d_p iff
// rank(log P · C) ≤ d_p, C = I − 11ᵀ/n.  For declared P and d_p the check certifies
// impossibility with a nonzero (d_p+1)-minor of log P · C (MPFI, filter then escalate) or
// possibility with an explicit factorization S = Q Kᵀ checked against P (exactly where an
// identity applies, and by an enclosure).  Proof: proofs/L2-head-size-bottleneck.md.
#include "checks/literature.hpp"

namespace attncert::checks {
namespace {

constexpr int n = 4;
constexpr std::size_t top_rank = n - 1;  // rank of C = I − 11ᵀ/n

const char* error_model =
    "Approx tier: log P_ij carries relative error <= 2 eps, so the centred scores L = log P * C carry absolute "
    "error <= (n+4) eps * max|log P|; softmax(L) then reproduces P entrywise with relative error <= "
    "(2(n+4) max|log P| + 2n + 8) eps (tolerance fixed from the declared P before computing). Enclosure tier: "
    "minors of log P * C by MPFI cofactor expansion, escalating from --certify-bits to --certify-max-bits; "
    "a factorization is accepted when max |softmax(Q K^T) - P| <= 2^-100 certainly. Exact tier: rationals.";

using Q = mpq_rational;

struct instance {
  std::string name;
  matrix<Q> P;
  // Power structure P_ij ∝ Π_f w_fj^{q_fi} (integer q): the factorization S = Σ_f q_f (log w_f)ᵀ
  // of rank ≤ #factors reproduces P exactly (exp(q log w) = w^q).  Empty if none.
  std::vector<std::vector<int>> q;
  std::vector<std::vector<Q>> w;
};

using hsb::power_structured;

const std::vector<instance>& instances() {
  static const std::vector<instance> v = [] {
    std::vector<instance> out;
    const std::vector<int> q = {1, 2, -1, 0};
    const std::vector<Q> w = {Q(1), Q(2), Q(3), Q(4)};
    out.push_back({"power-structured", power_structured(q, w), {q}, {w}});
    // Two factors: rank 2 exactly (a nonzero 2x2 minor, and the factorization).
    const std::vector<std::vector<int>> q2 = {q, {0, 1, 1, -1}};
    const std::vector<std::vector<Q>> w2 = {w, {Q(2), Q(1), Q(1), Q(3)}};
    out.push_back({"two-factor power-structured", power_structured(q2, w2), q2, w2});
    matrix<Q> G(n, n);
    const int g[n][n] = {{1, 2, 3, 4}, {4, 1, 2, 3}, {2, 2, 5, 1}, {3, 4, 1, 2}};
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) G(i, j) = Q(g[i][j], 10);
    out.push_back({"generic", G, {}, {}});
    // Power structure perturbed by 1e-40 along row-sum-zero directions: rank 3, but its
    // minors are ~1e-40 and ~1e-80 (escalation), and binary64 sees rank 1.
    matrix<Q> E(n, n);
    const int e[n][n] = {{1, -1, 0, 0}, {0, 1, -1, 0}, {0, 0, 1, -1}, {-1, 0, 0, 1}};
    const Q eps = number_traits<Q>::from_string("1e-40");
    matrix<Q> Pp = power_structured(q, w);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) Pp(i, j) += eps * Q(e[i][j]);
    out.push_back({"power-structured + 1e-40", Pp, {}, {}});
    return out;
  }();
  return v;
}

using hsb::centred_log;

// The factor scores Σ_f q_f (log w_f)ᵀ in T.
template <class T>
matrix<T> factor_scores(const instance& in) {
  using std::log;
  using boost::multiprecision::log;
  matrix<T> S = matrix<T>::Zero(n, n);
  for (std::size_t f = 0; f < in.q.size(); ++f)
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        S(i, j) += T(in.q[f][static_cast<std::size_t>(i)]) * log(from_rational<T>(in.w[f][static_cast<std::size_t>(j)]));
  return S;
}

// Certified max |softmax(S) − P| <= 2^-100 for the scores `make` builds at each precision.
template <class F>
escalation certify_reproduces(const instance& in, F make, const run_settings& rs) {
  return escalate(
      [&] {
        matrix<mpfi_float> A = masked_softmax(make());
        if (rs.fault != 0)
          for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j) A(i, j) = A(i, j) * (mpfi_float(1) + mpfi_float(rs.fault));
        mpfi_float worst(0);
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < n; ++j) worst = max_of(worst, abs_of(mpfi_float(A(i, j) - from_rational<mpfi_float>(in.P(i, j)))));
        return std::vector<mpfi_float>{mpfi_float(mpfi_float(std::ldexp(1.0, -100)) - worst), worst};
      },
      rs.certify_bits, rs.certify_max_bits);
}

// Certified rank lower bound of L = log P · C, escalating until it reaches `target`.
struct certified_lower {
  std::size_t rank = 0;
  unsigned bits = 0;
  std::string witness;
};

certified_lower certify_rank_at_least(const matrix<Q>& P, std::size_t target, const run_settings& rs) {
  return ziv_escalate(precision_schedule{rs.certify_bits, rs.certify_max_bits}, [&](unsigned bits) {
    certified_lower out;
    precision_guard g(bits);
    const auto lb = certified_rank_lower_bound(centred_log<mpfi_float>(P));
    out.rank = lb.rank;
    out.bits = g.bits();
    std::string rows, cols;
    for (auto r : lb.rows) rows += std::to_string(r + 1);
    for (auto c : lb.cols) cols += std::to_string(c + 1);
    out.witness = lb.rank == 0 ? "no nonzero minor" : "minor rows " + rows + " cols " + cols + " in " +
                                                          number_traits<mpfi_float>::to_string(lb.minor, 6);
    const bool enough = lb.rank >= target;
    return ziv_step<certified_lower>{std::move(out), enough};
  }).value;
}

struct exact_info {
  std::vector<std::size_t> rank;  // exact rank of L per instance (lower = upper bound)
  std::vector<std::string> source;
};

exact_info exact_and_enclosure_part(report::check_report& rep, const run_settings& rs) {
  exact_info info;
  // rank C = n − 1 over ℚ: every centred score matrix has rank ≤ n − 1 (upper bound).
  matrix<Q> C = matrix<Q>::Identity(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) C(i, j) -= Q(1, n);
  const std::size_t rank_C = rank(C);
  rep.claims.push_back(claim_exact("centring-rank", "rank(I - 11^T/n) = n - 1", "n=4", std::to_string(rank_C), "3",
                                   rank_C == top_rank, "rank over Q by elimination"));
  for (const auto& in : instances()) {
    bool ok = true;
    for (int i = 0; i < n; ++i) {
      Q s(0);
      for (int j = 0; j < n; ++j) { ok = ok && in.P(i, j) > 0; s += in.P(i, j); }
      ok = ok && s == 1;
    }
    rep.claims.push_back(claim_exact("positive-row-stochastic", "P > 0 entrywise and every row sums to 1", in.name,
                                     ok ? "yes" : "no", "yes", ok, "rationals"));
    if (!in.q.empty()) {
      // Possibility for d_p = #factors: S = Σ_f q_f (log w_f)^T.
      const std::size_t dp = in.q.size();
      const std::string dps = std::to_string(dp);
      const matrix<Q> Pf = power_structured(in.q, in.w);
      const bool same = Pf == in.P;
      rep.claims.push_back(claim_exact("factorization-exact",
                                       "softmax(sum_f q_f (log w_f)^T) = P, by exp(q log w) = w^q (integer q)", in.name,
                                       same ? "equal" : "differ", "equal", same, "rational powers, normalized"));
      const escalation e = certify_reproduces(in, [&] { return factor_scores<mpfi_float>(in); }, rs);
      rep.claims.push_back(claim_escalated("factorization-reproduces-P",
                                           "max |softmax(sum_f q_f (log w_f)^T) - P| <= 2^-100 (rank <= " + dps + ")",
                                           in.name + ", d_p=" + dps, e, "max diff in " + e.shown.at(1), "<= 2^-100",
                                           "enclosure of 2^-100 - max diff must be > 0"));
      // Negative control: "P is not the softmax of any rank-d_p score matrix" — refuted by the
      // exact factorization above.
      report::claim_row r = claim_exact("rank" + dps + "-impossible",
                                        "P is not the softmax of any rank-" + dps + " score matrix", in.name,
                                        same ? "a rank-" + dps + " factorization reproduces P exactly" : "no factorization checked",
                                        "no rank-" + dps + " score matrix gives P", !same,
                                        "refuted by an explicit factorization checked exactly");
      rep.claims.push_back(negative_control(r));
      // The factorization's rank is tight: a nonzero dp-minor (impossibility below d_p).
      const certified_lower lb = certify_rank_at_least(in.P, dp, rs);
      if (dp >= 2) {
        report::claim_row ri = make_row("impossible-rank-" + std::to_string(dp - 1),
                                        "P is not the softmax of any score matrix of rank <= " + std::to_string(dp - 1),
                                        in.name + ", d_p=" + std::to_string(dp - 1), "mpfi" + std::to_string(lb.bits),
                                        tier::enclosure);
        ri.computed = "rank(log P C) >= " + std::to_string(lb.rank) + " by " + lb.witness;
        ri.expected = ">= " + dps;
        ri.tolerance = "0";
        ri.tolerance_rule = "a certified nonzero minor (filter, then escalate: decided at " + std::to_string(lb.bits) + " bits)";
        ri.result = lb.rank >= dp ? verdict::pass : verdict::undecided;
        rep.claims.push_back(ri);
      }
      info.rank.push_back(lb.rank == dp && same ? dp : 0);
      info.source.push_back("rank >= " + std::to_string(lb.rank) + " by " + lb.witness + " (MPFI " + std::to_string(lb.bits) +
                            " bits); rank <= " + dps + " by the factorization sum_f q_f (log w_f)^T");
      continue;
    }
    // Impossibility for every d_p < n − 1 by a nonzero (d_p + 1)-minor.
    std::size_t reached = 0;
    std::string witness;
    for (std::size_t dp = 1; dp + 1 <= top_rank; ++dp) {
      const certified_lower lb = certify_rank_at_least(in.P, dp + 1, rs);
      report::claim_row r = make_row("impossible-rank-" + std::to_string(dp),
                                     "P is not the softmax of any score matrix of rank <= " + std::to_string(dp),
                                     in.name + ", d_p=" + std::to_string(dp), "mpfi" + std::to_string(lb.bits),
                                     tier::enclosure);
      r.computed = "rank(log P C) >= " + std::to_string(lb.rank) + " by " + lb.witness;
      r.expected = ">= " + std::to_string(dp + 1);
      r.tolerance = "0";
      r.tolerance_rule = "a certified nonzero minor (filter, then escalate: decided at " + std::to_string(lb.bits) + " bits)";
      r.result = lb.rank >= dp + 1 ? verdict::pass : verdict::undecided;
      rep.claims.push_back(r);
      reached = lb.rank;
      witness = lb.witness + " (MPFI " + std::to_string(lb.bits) + " bits)";
    }
    // Possibility for d_p = n − 1: S = log P · C itself (rank <= n − 1), checked against P.
    const escalation e = certify_reproduces(in, [&] { return centred_log<mpfi_float>(in.P); }, rs);
    rep.claims.push_back(claim_escalated("factorization-reproduces-P", "max |softmax(log P C) - P| <= 2^-100 (rank <= n-1)",
                                         in.name + ", d_p=3", e, "max diff in " + e.shown.at(1), "<= 2^-100",
                                         "enclosure of 2^-100 - max diff must be > 0"));
    info.rank.push_back(reached == top_rank ? top_rank : 0);
    info.source.push_back("rank >= " + std::to_string(reached) + " by " + witness + "; rank <= n-1 = 3 (rank C)");
  }
  return info;
}

template <class T>
void evaluate(report::check_report& rep, const format_spec& fmt, const exact_info& ex, const run_settings& rs) {
  const T e = eps<T>();
  for (std::size_t k = 0; k < instances().size(); ++k) {
    const instance& in = instances()[k];
    // Tolerance from the declared P (binary64 estimate of max |log P|), before computing.
    double maxlog = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) maxlog = std::max(maxlog, std::abs(std::log(number_traits<Q>::to_double(in.P(i, j)))));
    const double factor = 2 * (n + 4) * maxlog + 2 * n + 8;
    const matrix<T> L = centred_log<T>(in.P);
    const matrix<T> A = attention_matrix(L, mask::none(), rs);
    T worst(0);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        const T p = from_rational<T>(in.P(i, j));
        worst = max_of(worst, T(abs_of(T(A(i, j) - p)) / p));
      }
    rep.claims.push_back(claim_close("softmax-of-centred-log-is-P", "softmax(log P C) = P (entrywise, relative)", in.name, fmt,
                                     worst, T(0), T(T(factor) * e), false,
                                     "(2(n+4) max|log P| + 2n + 8) eps = " + std::to_string(factor) + " eps"));
    if (ex.rank[k] != 0)
      rep.ranks.push_back(measure_rank("log P C", in.name, fmt, L, ex.rank[k], ex.source[k], rs));
  }
}

report::check_report run(const run_settings& rs) {
  report::check_report rep;
  const exact_info ex = exact_and_enclosure_part(rep, rs);
  for_each_format(rs, [&]<class T>(const format_spec& f) { evaluate<T>(rep, f, ex, rs); });
  return rep;
}

}  // namespace

check_entry make_head_size_bottleneck() {
  return {"head-size-bottleneck", "The low-rank bottleneck of a head (Bhojanapalli et al. 2020)", "§9",
          "proofs/L2-head-size-bottleneck.md", error_model, run};
}

}  // namespace attncert::checks
