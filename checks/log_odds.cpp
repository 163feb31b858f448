// checks/log_odds.cpp — scores constrain log-odds, not normalized rank (§3).
//
// On strictly positive rows, log A_ij − log A_ik = S_ij − S_ik.  Hence the smallest rank of a
// score matrix producing A is rank(log A · P), P = I − 11ᵀ/n (Bhojanapalli et al. 2020): any
// S' with softmax(S') = A differs from S by row constants, S'P = SP, and S·P itself produces A.
// And rank S = 1 does not bound rank A: S = q kᵀ with q = k = (1, 2, 3) gives E_ij = e^{ij},
// a generalized Vandermonde matrix of full rank.  Proof: proofs/P05-log-odds.md.
#include "checks/common.hpp"

namespace attncert::checks {
namespace {

constexpr int n = 4;

const char* error_model =
    "log-softmax entries (S_ij - m) - log Z carry absolute error <= (n+4) eps max|S| (one subtraction, "
    "a normalizer with n-1 additions, one log); a log-odds difference doubles it: absolute 2(n+4) eps "
    "max|S|. softmax(SP) vs softmax(S): SP has absolute error <= (n+2) eps max|S| per entry, which "
    "becomes a relative error of twice that in each probability: relative (2(n+2) max|S| + 2(n+3)) eps.";

// S = Q Kᵀ with K's first column all ones: rank S = 2, but S·P has rank 1.
void make_scores(matrix<double>& Qm, matrix<double>& Km) {
  Qm.resize(n, 2);
  Km.resize(n, 2);
  Qm << 1, 0.5, -0.75, 1, 0.25, -1.5, 2, 0.75;
  Km << 1, 0.25, 1, -0.5, 1, 1.25, 1, -1;
}

matrix<mpq_rational> centering(int m) {
  matrix<mpq_rational> P(m, m);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < m; ++j) P(i, j) = (i == j ? mpq_rational(1) : mpq_rational(0)) - mpq_rational(1, m);
  return P;
}

struct exact_info {
  std::size_t rank_S = 0, rank_SP = 0, rank_vdm = 0;
  std::string src_vdm;
};

exact_info exact_part(report::check_report& rep, const run_settings& rs) {
  exact_info info;
  matrix<double> Qd, Kd;
  make_scores(Qd, Kd);
  const matrix<mpq_rational> S = multiply(from_double_matrix<mpq_rational>(Qd), transpose(from_double_matrix<mpq_rational>(Kd)));
  const matrix<mpq_rational> SP = multiply(S, centering(n));
  info.rank_S = rank(S);
  info.rank_SP = rank(SP);
  rep.claims.push_back(claim_exact("min-score-rank", "smallest score rank producing A = rank(log A * P) = rank(S P) < rank S",
                                   "QK^T, K[:,0] = 1", "rank S = " + std::to_string(info.rank_S) + ", rank SP = " +
                                   std::to_string(info.rank_SP), "rank SP = 1 < rank S = 2",
                                   info.rank_S == 2 && info.rank_SP == 1, "ranks over Q"));
  // S − SP has constant rows, so softmax(SP) = softmax(S) exactly (row shifts cancel).
  const matrix<mpq_rational> D = S - SP;
  bool constant_rows = true;
  for (int i = 0; i < n; ++i)
    for (int j = 1; j < n; ++j) constant_rows = constant_rows && D(i, j) == D(i, 0);
  rep.claims.push_back(claim_exact("SP-produces-A", "S - SP is constant along rows, so softmax(SP) = softmax(S)",
                                   "QK^T, K[:,0] = 1", constant_rows ? "constant rows" : "non-constant rows",
                                   "constant rows", constant_rows, "exact rational subtraction"));
  // Rank-one scores, full-rank attention: certified minor.
  {
    precision_guard g(rs.certify_bits);
    matrix<mpfi_float> q(3, 1);
    q << mpfi_float(1), mpfi_float(2), mpfi_float(3);
    const matrix<mpfi_float> A = masked_softmax(scores(q, q, mpfi_float(1)));
    const auto lb = certified_rank_lower_bound(A);
    matrix<mpq_rational> q3(3, 1);
    q3 << mpq_rational(1), mpq_rational(2), mpq_rational(3);
    const auto xr = cross_checked_rank(rep, "A", "q = k = (1,2,3)", 3, "diag(x) * Vandermonde(x), x_i = e^i distinct (P05)",
                                       layer_rank(matrix<mpq_rational>(multiply(q3, transpose(q3))), mask::none(),
                                                  layer_object::attention));
    info.rank_vdm = xr.rank;
    info.src_vdm = xr.source;
    matrix<mpq_rational> qq(3, 1);
    qq << mpq_rational(1), mpq_rational(2), mpq_rational(3);
    const matrix<mpq_rational> Sq = multiply(qq, transpose(qq));
    const std::size_t rs1 = rank(Sq);
    report::claim_row r = make_row("rank-one-scores-full-rank", "S = q k^T (rank 1) yet softmax(S) has rank 3",
                                   "q = k = (1,2,3)", "mpfi" + std::to_string(g.bits()), tier::enclosure);
    r.computed = "rank S = " + std::to_string(rs1) + "; det A in " + number_traits<mpfi_float>::to_string(lb.minor, 12);
    r.expected = "rank S = 1; det A != 0";
    r.tolerance = "0";
    r.tolerance_rule = "exact rank over Q and an enclosure of det A excluding 0";
    r.result = (rs1 == 1 && lb.rank == 3) ? verdict::pass : (rs1 != 1 ? verdict::fail : verdict::undecided);
    rep.claims.push_back(r);
  }
  return info;
}

template <class T>
void evaluate(report::check_report& rep, const format_spec& fmt, const exact_info& ex, const run_settings& rs) {
  const T e = eps<T>();
  matrix<double> Qd, Kd;
  make_scores(Qd, Kd);
  const matrix<T> S = scores(from_double_matrix<T>(Qd), from_double_matrix<T>(Kd), T(1));
  const T smax = max_abs(S);
  // Log-odds identity against the reference key 0.
  const matrix<T> O = log_odds(S, mask::none(), 0);
  T worst(0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) worst = max_of(worst, abs_of(T(O(i, j) - (S(i, j) - S(i, 0)))));
  rep.claims.push_back(claim_close("log-odds-identity", "log A_ij - log A_i0 = S_ij - S_i0", "QK^T, K[:,0] = 1", fmt, worst,
                                   T(0), T(T(2 * (n + 4)) * e * smax), false, "2(n+4) eps max|S|"));
  // S·P reproduces A.
  const matrix<T> P = from_rational_matrix<T>(centering(n));
  const matrix<T> SP = multiply(S, P);
  const matrix<T> A = attention_matrix(S, mask::none(), rs), A2 = masked_softmax(SP);
  T rel(0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) rel = max_of(rel, abs_of(T((A2(i, j) - A(i, j)) / A(i, j))));
  rep.claims.push_back(claim_close("SP-produces-A", "softmax(S P) = softmax(S) (worst relative difference)",
                                   "QK^T, K[:,0] = 1", fmt, rel, T(0), T((T(2 * (n + 2)) * smax + T(2 * (n + 3))) * e),
                                   false, "(2(n+2) max|S| + 2(n+3)) eps"));
  // Ranks: S, log A · P (= S·P exactly), and the rank-one-score instance's A.
  const matrix<T> L = multiply(masked_log_softmax(S), P);
  rep.ranks.push_back(measure_rank("S", "QK^T, K[:,0] = 1", fmt, S, ex.rank_S, "exact elimination over Q", rs));
  rep.ranks.push_back(measure_rank("logA*P", "QK^T, K[:,0] = 1", fmt, L, ex.rank_SP,
                                   "exact: log A * P = S P, rank over Q", rs));
  matrix<T> q(3, 1);
  q << T(1), T(2), T(3);
  const matrix<T> Sv = scores(q, q, T(1));
  rep.ranks.push_back(measure_rank("S", "q = k = (1,2,3)", fmt, Sv, 1, "exact: q k^T with q, k != 0", rs));
  rep.ranks.push_back(measure_rank("A", "q = k = (1,2,3)", fmt, masked_softmax(Sv), ex.rank_vdm, ex.src_vdm, rs));
}

report::check_report run(const run_settings& rs) {
  report::check_report rep;
  const exact_info ex = exact_part(rep, rs);
  for_each_format(rs, [&]<class T>(const format_spec& f) { evaluate<T>(rep, f, ex, rs); });
  return rep;
}

}  // namespace

check_entry make_log_odds() {
  return {"log-odds", "Scores constrain log-odds, not the rank of A", "§3", "proofs/P05-log-odds.md", error_model, run};
}

}  // namespace attncert::checks
