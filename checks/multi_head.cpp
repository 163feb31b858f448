// checks/multi_head.cpp — multiple heads are not independent certificates (§9).
//
// (1) Identical heads add no rank: [H, H] has the rank of H.  (2) An output projection can
// discard a head's contribution: with W_O = [W₁; 0], concat(H₁, H₂)·W_O = H₁W₁ whatever H₂
// is.  (3) Negative control: a width-one head (rank-one scores) gives rank-2 attention for
// every a > 0 on two tokens.  Proof: proofs/P07-multi-head.md.
#include "checks/common.hpp"

namespace attncert::checks {
namespace {

constexpr int n = 4, dm = 3, dh = 2;

const char* error_model =
    "Heads are computed by the same deterministic code path, so identical heads give bitwise identical "
    "blocks (tolerance 0). A projected output is a dot product of length 2*dh over entries with relative "
    "error <= (3n+dm+6) eps: relative tolerance 4(n+dm+dh+4) eps against H1*W1 (zero rows of W_O contribute "
    "exact zeros). Ranks of the width-one control are certified by an MPFI determinant enclosure.";

const std::vector<std::string> width_one_grid = {"1e-6", "1e-3", "0.1", "1", "10"};

struct data {
  matrix<double> X, Wq1, Wk1, Wv1, Wq2, Wk2, Wv2, W1;
};

data make_data(std::uint64_t seed) {
  dyadic_source src(seed ^ 0x9Du);
  data d;
  d.X = src.matrix_of(n, dm);
  d.Wq1 = src.matrix_of(dm, dh); d.Wk1 = src.matrix_of(dm, dh); d.Wv1 = src.matrix_of(dm, dh);
  d.Wq2 = src.matrix_of(dm, dh); d.Wk2 = src.matrix_of(dm, dh); d.Wv2 = src.matrix_of(dm, dh);
  d.W1 = src.matrix_of(dh, dm);
  return d;
}

template <class T>
head_weights<T> head(const matrix<double>& q, const matrix<double>& k, const matrix<double>& v) {
  return {from_double_matrix<T>(q), from_double_matrix<T>(k), from_double_matrix<T>(v), T(1) / T(2)};
}

// Width-one control: two tokens x₁, x₂ ∈ ℝ³, Wq = Wk = w (3×1): scores a·(Xw)(Xw)ᵀ.
template <class T>
matrix<T> width_one_attention(const T& a) {
  matrix<T> X(2, 3), w(3, 1);
  X << T(1), T(0.5), T(-1), T(-0.5), T(0.25), T(2);
  w << T(1), T(0.5), T(0.25);
  const matrix<T> q = multiply(X, w);
  return masked_softmax(scores(q, q, a));
}

struct exact_info {
  std::size_t rank_H1 = 0;
  std::string src_H1;
  std::map<std::string, std::size_t> rank_w1;
  std::map<std::string, std::string> src_w1;
};

exact_info exact_part(report::check_report& rep, const data& d, const run_settings& rs) {
  exact_info info;
  {
    precision_guard g(rs.certify_bits);
    const auto H = head_outputs(from_double_matrix<mpfi_float>(d.X), {head<mpfi_float>(d.Wq1, d.Wk1, d.Wv1)});
    const auto lb = certified_rank_lower_bound(H[0]);
    const matrix<mpq_rational> Xq = exact_of(d.X);
    const matrix<mpq_rational> B = multiply(multiply(Xq, exact_of(d.Wq1)), transpose(multiply(Xq, exact_of(d.Wk1)))) * mpq_rational(1, 2);
    const auto xr = cross_checked_rank(rep, "H1", "two identical heads", lb.rank,
                                       "MPFI 2x2 minor " + number_traits<mpfi_float>::to_string(lb.minor, 12) + " != 0",
                                       layer_rank(B, mask::none(), layer_object::output, multiply(Xq, exact_of(d.Wv1))));
    info.rank_H1 = xr.rank;
    info.src_H1 = xr.source;
    const matrix<mpfi_float> C = concat_columns(std::vector<matrix<mpfi_float>>{H[0], H[0]});
    const auto lbc = certified_rank_lower_bound(C);
    report::claim_row r = make_row("identical-heads-add-no-rank", "rank [H1, H1] = rank H1 = 2", "two identical heads",
                                   "mpfi" + std::to_string(g.bits()), tier::enclosure);
    r.computed = "rank H1 >= " + std::to_string(lb.rank) + ", rank [H1,H1] >= " + std::to_string(lbc.rank);
    r.expected = "both = 2 (upper bound: duplicated columns, dh = 2)";
    r.tolerance = "0";
    r.tolerance_rule = "certified minors (lower bound) + structure (upper bound)";
    r.result = (lb.rank == 2 && lbc.rank == 2) ? verdict::pass : verdict::undecided;
    rep.claims.push_back(r);
  }
  for (const auto& a : width_one_grid) {
    const certified_sign s = certify_sign(
        [&] { return determinant(width_one_attention(number_traits<mpfi_float>::from_string(a))); }, rs.certify_bits,
        rs.certify_max_bits, false);
    matrix<double> Xd(2, 3), wd(3, 1);
    Xd << 1, 0.5, -1, -0.5, 0.25, 2;
    wd << 1, 0.5, 0.25;
    const matrix<mpq_rational> qv = multiply(exact_of(Xd), exact_of(wd));
    const matrix<mpq_rational> B = multiply(qv, transpose(qv)) * number_traits<mpq_rational>::from_string(a);
    const auto xr = cross_checked_rank(rep, "A-width-one", "a=" + a, s.answer == truth::certainly_true ? 2 : 1,
                                       "det A in " + s.enclosure + " (MPFI " + std::to_string(s.bits) + " bits)",
                                       layer_rank(B, mask::none(), layer_object::attention));
    info.rank_w1[a] = xr.rank;
    info.src_w1[a] = xr.source;
    rep.claims.push_back(claim_from_sign("width-one-head-rank-2", "a width-one head (rank-1 scores) gives rank-2 attention",
                                         "a=" + a, s, "det A excludes 0", "enclosure must exclude 0 (escalating precision)"));
  }
  return info;
}

template <class T>
void evaluate(report::check_report& rep, const format_spec& fmt, const data& d, const exact_info& ex, const run_settings& rs) {
  const T e = eps<T>();
  const matrix<T> X = from_double_matrix<T>(d.X);
  const auto h1 = head<T>(d.Wq1, d.Wk1, d.Wv1), h2 = head<T>(d.Wq2, d.Wk2, d.Wv2);
  // (1) identical heads.
  const matrix<T> C = multi_head(X, {h1, h1});
  const matrix<T> H1 = C.leftCols(dh), H1b = C.rightCols(dh);
  {
    // Identity of representation (for intervals: the same ends), not a difference: an
    // interval minus itself is not [0, 0].
    const bool same = identical_entries(H1, H1b);
    report::claim_row r = make_row("identical-heads-identical-blocks", "identical heads give identical output blocks",
                                   "two identical heads", fmt.name, tier_of<T>);
    r.computed = same ? "identical" : "differ (max |diff| = " + str(max_abs_diff(H1, H1b)) + ")";
    r.expected = "identical";
    r.tolerance = "0";
    r.tolerance_rule = "exact identity of the computed blocks (deterministic code path)";
    r.result = same ? verdict::pass : verdict::fail;
    rep.claims.push_back(r);
  }
  rep.ranks.push_back(measure_rank("H1", "two identical heads", fmt, H1, ex.rank_H1, ex.src_H1, rs));
  rep.ranks.push_back(measure_rank("[H1,H1]", "two identical heads", fmt, C, ex.rank_H1,
                                   "structure: duplicated columns, rank = rank H1", rs));
  // (2) W_O = [W1; 0] discards head 2.
  matrix<T> WO = matrix<T>::Zero(2 * dh, dm);
  WO.topRows(dh) = from_double_matrix<T>(d.W1);
  const matrix<T> Y = multi_head(X, {h1, h2}, std::optional<matrix<T>>(WO));
  const matrix<T> Y1 = multiply(H1, from_double_matrix<T>(d.W1));
  const T scale = max_abs(Y1);
  rep.claims.push_back(claim_close("projection-discards-head", "concat(H1, H2) [W1; 0] = H1 W1 (head 2 discarded)",
                                   "two different heads", fmt, max_abs_diff(Y, Y1), T(0),
                                   T(T(4 * (n + dm + dh + 4)) * e * scale), false, "4(n+dm+dh+4) eps max|H1 W1|"));
  // (3) width-one head: numerical ranks against the certified rank 2.
  for (const auto& a : width_one_grid) {
    const matrix<T> A = width_one_attention(number_traits<T>::from_string(a));
    rep.ranks.push_back(measure_rank("A (width-one head)", "a=" + a, fmt, A, ex.rank_w1.at(a), ex.src_w1.at(a), rs));
  }
}

report::check_report run(const run_settings& rs) {
  report::check_report rep;
  const data d = make_data(rs.seed);
  const exact_info ex = exact_part(rep, d, rs);
  for_each_format(rs, [&]<class T>(const format_spec& f) { evaluate<T>(rep, f, d, ex, rs); });
  return rep;
}

}  // namespace

check_entry make_multi_head() {
  return {"multi-head", "Heads are not independent certificates", "§9", "proofs/P07-multi-head.md", error_model, run};
}

}  // namespace attncert::checks
