// checks/residual.cpp — residual paths change the object being studied (§10).
//
// An attention branch with identical values has rank(AV) = 1 (AV = 1vᵀ for any
// row-stochastic A); adding a full-rank X gives X + AV = X + 1vᵀ, of full rank here.
// Proof: proofs/P06-residual.md.
#include "checks/common.hpp"

namespace attncert::checks {
namespace {

constexpr int n = 4;

const char* error_model =
    "AV entries differ from v_k by <= (3n+6) eps |v_k| (see identical-values); X + AV adds one rounding: "
    "absolute tolerance (3n+8) eps (|x| + |v|)max. Full rank of X + AV is decided exactly over Q "
    "(X + 1v^T) and through the softmax code path by an MPFI determinant enclosure.";

struct data {
  matrix<double> S, X, V;
};

data make_data(std::uint64_t seed) {
  dyadic_source src(seed ^ 0x5Eu);
  data d;
  d.S = src.matrix_of(n, n);
  d.X = matrix<double>::Identity(n, n) * 2 + src.matrix_of(n, n, -2, 2);
  d.V.resize(n, n);
  const double v[n] = {0.5, -1.0, 0.25, 1.5};
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < n; ++k) d.V(i, k) = v[k];
  return d;
}

struct exact_info {
  std::size_t rank_X = 0, rank_R = 0;
  std::string src_R, src_AV;
};

exact_info exact_part(report::check_report& rep, const data& d, const run_settings& rs) {
  exact_info info;
  const matrix<mpq_rational> X = from_double_matrix<mpq_rational>(d.X), V = from_double_matrix<mpq_rational>(d.V);
  const matrix<mpq_rational> R = X + V;  // X + 1 vᵀ (V has identical rows)
  info.rank_X = rank(X);
  const std::size_t rR = rank(R);
  rep.claims.push_back(claim_exact("residual-full-rank", "rank(X + 1 v^T) = n although rank(AV) = 1", "random X",
                                   "rank X = " + std::to_string(info.rank_X) + ", rank(X + 1v^T) = " + std::to_string(rR),
                                   "rank X + 1v^T = 4", rR == static_cast<std::size_t>(n), "ranks over Q"));
  const certified_sign s = certify_sign(
      [&] {
        const matrix<mpfi_float> A = masked_softmax(from_double_matrix<mpfi_float>(d.S));
        return determinant(residual(from_double_matrix<mpfi_float>(d.X), multiply(A, from_double_matrix<mpfi_float>(d.V))));
      },
      rs.certify_bits, rs.certify_max_bits, false);
  const auto xr = cross_checked_rank(rep, "X+AV", "random X", rR, "rank over Q of X + 1 v^T (P06)",
                                     layer_rank(exact_of(d.S), mask::none(), layer_object::residual, V, X));
  info.rank_R = xr.rank;
  info.src_R = xr.source + "; MPFI det through the softmax: " + s.enclosure;
  info.src_AV = cross_checked_rank(rep, "AV", "random X", 1, "AV = 1 v^T (P02)",
                                   layer_rank(exact_of(d.S), mask::none(), layer_object::output, V)).source;
  rep.claims.push_back(claim_from_sign("residual-det-nonzero", "det(X + softmax(S) V) != 0 through the attention code path",
                                       "random X", s, "excludes 0", "enclosure must exclude 0 (escalating precision)"));
  return info;
}

template <class T>
void evaluate(report::check_report& rep, const format_spec& fmt, const data& d, const exact_info& ex, const run_settings& rs) {
  const T e = eps<T>();
  const matrix<T> X = from_double_matrix<T>(d.X), V = from_double_matrix<T>(d.V);
  const matrix<T> A = attention_matrix(from_double_matrix<T>(d.S), mask::none(), rs);
  const matrix<T> AV = multiply(A, V);
  const matrix<T> R = residual(X, AV);
  const matrix<T> expected = X + V;
  const T scale = max_abs(X) + max_abs(V);
  rep.claims.push_back(claim_close("residual-equals-X-plus-1v", "X + AV = X + 1 v^T", "random X", fmt,
                                   max_abs_diff(R, expected), T(0), T(T(3 * n + 8) * e * scale), false,
                                   "(3n+8) eps (max|X| + max|v|)"));
  rep.ranks.push_back(measure_rank("AV", "random X", fmt, AV, 1, ex.src_AV, rs));
  rep.ranks.push_back(measure_rank("X", "random X", fmt, X, ex.rank_X, "exact elimination over Q", rs));
  rep.ranks.push_back(measure_rank("X+AV", "random X", fmt, R, ex.rank_R, ex.src_R, rs));
}

report::check_report run(const run_settings& rs) {
  report::check_report rep;
  const data d = make_data(rs.seed);
  const exact_info ex = exact_part(rep, d, rs);
  for_each_format(rs, [&]<class T>(const format_spec& f) { evaluate<T>(rep, f, d, ex, rs); });
  return rep;
}

}  // namespace

check_entry make_residual() {
  return {"residual", "A residual path restores the rank an attention branch removes", "§10", "proofs/P06-residual.md",
          error_model, run};
}

}  // namespace attncert::checks
