// checks/permutation_symmetry.cpp — without positional information attention is permutation equivariant;
// positions break the symmetry (§2, Yun et al.; issue 33).
//
// For a permutation matrix P and tokens X (n × d): Q = XW_Q, K = XW_K, V = XW_V give
// S(PX) = P S(X) Pᵀ and V(PX) = P V(X) exactly, and the row softmax commutes with permuting a row's
// entries, so A(PX) = P A(X) Pᵀ and O(PX) = P O(X).  A causal mask, an added positional encoding
// (X + E) or a concatenated one ([X | E]) are tied to positions, not tokens: the identity fails, and a
// certified witness (two disjoint enclosures) shows it on an instance.  Moving the encoding with the
// tokens (P(X + E)) restores it.  Proof: proofs/L5-permutation-symmetry.md.
#include "checks/common.hpp"

namespace attncert::checks {
namespace {

const char* error_model =
    "Scores and values are compared exactly over Q (dyadic inputs, scale 1/2). The attention of both sides is "
    "enclosed in MPFI; equal real numbers give overlapping enclosures, and two disjoint enclosures certify that "
    "the values differ (a witness). In a format T each side's softmax entry carries relative error <= (n+3) eps "
    "(summation order differs: a permuted row is summed in another order), so the two sides differ by <= "
    "2(n+3) eps relative.";

constexpr Eigen::Index n = 6, d = 4, de = 2;

struct layer {
  matrix<mpq_rational> WQ, WK, WV;
};

// The permutation i -> pi[i] as the matrix P with (PX)_i = X_{pi[i]}.
const std::vector<Eigen::Index> pi = {3, 0, 5, 1, 4, 2};

template <class T>
matrix<T> permute_rows(const matrix<T>& X) {
  matrix<T> Y(X.rows(), X.cols());
  for (Eigen::Index i = 0; i < X.rows(); ++i) Y.row(i) = X.row(pi[static_cast<std::size_t>(i)]);
  return Y;
}

// P M Pᵀ: (P M Pᵀ)_ij = M_{pi[i], pi[j]}.
template <class T>
matrix<T> conjugate(const matrix<T>& M) {
  matrix<T> Y(M.rows(), M.cols());
  for (Eigen::Index i = 0; i < M.rows(); ++i)
    for (Eigen::Index j = 0; j < M.cols(); ++j) Y(i, j) = M(pi[static_cast<std::size_t>(i)], pi[static_cast<std::size_t>(j)]);
  return Y;
}

// S = (1/2) (X W_Q)(X W_K)ᵀ and V = X W_V, exactly.
matrix<mpq_rational> scores_of(const matrix<mpq_rational>& X, const layer& L) {
  const matrix<mpq_rational> Q = multiply(X, L.WQ), K = multiply(X, L.WK);
  matrix<mpq_rational> S = multiply(Q, matrix<mpq_rational>(K.transpose()));
  for (Eigen::Index i = 0; i < S.rows(); ++i)
    for (Eigen::Index j = 0; j < S.cols(); ++j) S(i, j) /= 2;
  return S;
}

// The instance, by formulas (so an independent test rebuilds it exactly; proofs/L5):
//   X_ij = ((3i + 5j + 1) mod 7 - 3) / 4,   (W_Q)_ij = ((2i + 3j + 1) mod 5 - 2) / 2,
//   (W_K)_ij = ((i + 4j + 2) mod 5 - 2) / 2,   (W_V)_ij = ((3i + j) mod 5 - 2) / 2,
//   E_ic = ((i (c + 1) + 2c) mod 5 - 2) / 8 (a fixed rational positional encoding).
matrix<mpq_rational> by_formula(Eigen::Index rows, Eigen::Index cols, long a, long b, long c, long m, long off, long den) {
  matrix<mpq_rational> M(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j) M(i, j) = mpq_rational((a * i + b * j + c) % m - off, den);
  return M;
}
matrix<mpq_rational> encoding(Eigen::Index cols) {
  matrix<mpq_rational> E(n, cols);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index c = 0; c < cols; ++c) E(i, c) = mpq_rational((i * (c + 1) + 2 * c) % 5 - 2, 8);
  return E;
}
layer layer_of(Eigen::Index rows) {
  return {by_formula(rows, d, 2, 3, 1, 5, 2, 2), by_formula(rows, d, 1, 4, 2, 5, 2, 2), by_formula(rows, d, 3, 1, 0, 5, 2, 2)};
}

matrix<mpq_rational> hconcat(const matrix<mpq_rational>& A, const matrix<mpq_rational>& B) {
  matrix<mpq_rational> C(A.rows(), A.cols() + B.cols());
  C << A, B;
  return C;
}

// The first entry where the enclosures of a and b are disjoint, with both intervals; "" when none is.
std::string disjoint_witness(const matrix<mpfi_float>& a, const matrix<mpfi_float>& b) {
  for (Eigen::Index i = 0; i < a.rows(); ++i)
    for (Eigen::Index j = 0; j < a.cols(); ++j)
      if (upper_of(a(i, j)) < lower_of(b(i, j)) || upper_of(b(i, j)) < lower_of(a(i, j)))
        return "(" + std::to_string(i) + ", " + std::to_string(j) + "): " + number_traits<mpfi_float>::to_string(a(i, j), 12) +
               " vs " + number_traits<mpfi_float>::to_string(b(i, j), 12);
  return "";
}

// Do the enclosures of a and b overlap at every entry (what equal real numbers give)?
bool all_overlap(const matrix<mpfi_float>& a, const matrix<mpfi_float>& b) {
  for (Eigen::Index i = 0; i < a.rows(); ++i)
    for (Eigen::Index j = 0; j < a.cols(); ++j)
      if (upper_of(a(i, j)) < lower_of(b(i, j)) || upper_of(b(i, j)) < lower_of(a(i, j))) return false;
  return true;
}

matrix<mpfi_float> enclose_attention(const matrix<mpq_rational>& S, const mask& M) {
  matrix<mpfi_float> Si(S.rows(), S.cols());
  for (Eigen::Index i = 0; i < S.rows(); ++i)
    for (Eigen::Index j = 0; j < S.cols(); ++j) Si(i, j) = from_rational<mpfi_float>(S(i, j));
  return masked_softmax(Si, M);
}

// Exact: the scores and values move with the tokens; the attention and output enclosures agree.
void equivariance_part(report::check_report& rep, const matrix<mpq_rational>& X, const layer& L, const std::string& inst,
                       const run_settings& rs) {
  const matrix<mpq_rational> PX = permute_rows(X);
  const matrix<mpq_rational> S = scores_of(X, L), SP = scores_of(PX, L);
  const bool s_eq = SP == conjugate(S);
  rep.claims.push_back(claim_exact("scores-equivariant", "S(PX) = P S(X) P^T", inst, s_eq ? "equal over Q" : "differ",
                                   "equal over Q", s_eq, "exact rational products, scale 1/2"));
  const matrix<mpq_rational> V = multiply(X, L.WV), VP = multiply(PX, L.WV);
  const bool v_eq = VP == permute_rows(V);
  rep.claims.push_back(claim_exact("values-equivariant", "V(PX) = P V(X)", inst, v_eq ? "equal over Q" : "differ",
                                   "equal over Q", v_eq, "exact rational products"));
  precision_guard g(rs.certify_bits);
  const matrix<mpfi_float> A = enclose_attention(S, mask::none()), AP = enclose_attention(SP, mask::none());
  const matrix<mpfi_float> Vi = from_rational_matrix<mpfi_float>(V), VPi = from_rational_matrix<mpfi_float>(VP);
  const bool a_ok = s_eq && all_overlap(AP, conjugate(A));
  rep.claims.push_back(claim_exact("attention-equivariant", "A(PX) = P A(X) P^T", inst,
                                   a_ok ? "scores equal over Q; enclosures overlap at every entry" : "not shown",
                                   "equal", a_ok,
                                   "L5: the row softmax of a permuted row is the permuted row softmax; MPFI at " +
                                       std::to_string(g.bits()) + " bits as a consistency check"));
  const bool o_ok = s_eq && v_eq && all_overlap(multiply(AP, VPi), permute_rows(multiply(A, Vi)));
  rep.claims.push_back(claim_exact("output-equivariant", "O(PX) = A(PX) V(PX) = P O(X)", inst,
                                   o_ok ? "equal (scores and values equal over Q); enclosures overlap" : "not shown", "equal",
                                   o_ok, "L5; MPFI at " + std::to_string(g.bits()) + " bits as a consistency check"));
}

// Certified: a causal mask, an added and a concatenated encoding break the symmetry (a disjoint witness
// each); the encoding moved with the tokens keeps it (exact scores).
void breaking_part(report::check_report& rep, const matrix<mpq_rational>& X, const layer& L, const layer& Lcat,
                   const run_settings& rs) {
  precision_guard g(rs.certify_bits);
  const matrix<mpq_rational> PX = permute_rows(X), E = encoding(d), Ec = encoding(de);
  auto witness_claim = [&](const std::string& id, const std::string& statement, const std::string& inst,
                           const matrix<mpfi_float>& lhs, const matrix<mpfi_float>& rhs) {
    const std::string w = disjoint_witness(lhs, rhs);
    rep.claims.push_back(claim_exact(id, statement, inst, w.empty() ? "no disjoint entry found" : "differ at " + w,
                                     "a certified difference", !w.empty(),
                                     "MPFI enclosures at " + std::to_string(g.bits()) + " bits, disjoint at the entry named"));
  };
  witness_claim("causal-breaks", "A_causal(PX) != P A_causal(X) P^T", "causal mask, no encoding",
                enclose_attention(scores_of(PX, L), mask::causal()),
                conjugate(enclose_attention(scores_of(X, L), mask::causal())));
  const matrix<mpq_rational> XE = X + E, PXE = PX + E;
  witness_claim("added-encoding-breaks", "A(PX + E) != P A(X + E) P^T", "added E (n x 4, eighths)",
                enclose_attention(scores_of(PXE, L), mask::none()), conjugate(enclose_attention(scores_of(XE, L), mask::none())));
  witness_claim("concatenated-encoding-breaks", "A([PX | E]) != P A([X | E]) P^T", "concatenated E (n x 2)",
                enclose_attention(scores_of(hconcat(PX, Ec), Lcat), mask::none()),
                conjugate(enclose_attention(scores_of(hconcat(X, Ec), Lcat), mask::none())));
  const bool moved = scores_of(permute_rows(XE), L) == conjugate(scores_of(XE, L));
  rep.claims.push_back(claim_exact("encoding-moved-along", "S(P(X + E)) = P S(X + E) P^T", "E permuted with the tokens",
                                   moved ? "equal over Q" : "differ", "equal over Q", moved,
                                   "exact: the symmetry breaks because E stays at its positions"));
}

// In a format: both sides evaluated in T agree within the error model, and how many entries are bitwise equal.
// The entry of A_T(PX) farthest (relatively) from its certified value, as a claim: the format computes the
// attention of the permuted tokens within (n+3) eps of the truth (P02's model).
template <class T>
report::claim_row against_truth(const matrix<T>& AP, const matrix<mpq_rational>& SP, const format_spec& fmt,
                                const run_settings& rs) {
  certified_value worst_truth;
  T worst_value(0);
  mpfr_float worst_rel(-1);
  std::string at;
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j) {
      const certified_value cv = certify_value([&] { return mpfi_float(enclose_attention(SP, mask::none())(i, j)); },
                                               rs.certify_bits, rs.certify_max_bits, certify_width_for<T>());
      precision_guard g(cv.bits + 64);
      const mpfr_float mid = approx_mid(cv.enclosure);
      const mpfr_float rel = abs(mpfr_float(from_rational<mpfr_float>(exact_rational_of(AP(i, j))) - mid)) / abs(mid);
      if (rel > worst_rel) {
        worst_rel = rel;
        worst_truth = cv;
        worst_value = AP(i, j);
        at = "(" + std::to_string(i) + ", " + std::to_string(j) + ")";
      }
    }
  return claim_certified("permuted-attention-in-format", "A(PX) in the format equals the exact A(PX)",
                         "the entry farthest from the truth, " + at, fmt, worst_value, worst_truth,
                         mpfr_float(mpfr_float((n + 3)) * mpfr_float(number_traits<T>::to_double(eps<T>()))),
                         "(n+3) eps (P02's softmax model)");
}

template <class T>
void evaluate(report::check_report& rep, const format_spec& fmt, const matrix<double>& X, const layer& L,
              const run_settings& rs) {
  const matrix<T> Xt = from_double_matrix<T>(X), PXt = permute_rows(Xt);
  const matrix<T> WQ = from_rational_matrix<T>(L.WQ), WK = from_rational_matrix<T>(L.WK);
  auto attention_of = [&](const matrix<T>& Z) {
    const matrix<T> Q = multiply(Z, WQ), K = multiply(Z, WK);
    matrix<T> S = multiply(Q, matrix<T>(K.transpose()));
    for (Eigen::Index i = 0; i < S.rows(); ++i)
      for (Eigen::Index j = 0; j < S.cols(); ++j) S(i, j) = S(i, j) / T(2);
    return attention_matrix(S, mask::none(), rs);
  };
  const matrix<T> AP = attention_of(PXt), PA = conjugate(attention_of(Xt));
  std::size_t same = 0;
  T worst(0);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j) {
      if (identical_entries(matrix<T>(AP.block(i, j, 1, 1)), matrix<T>(PA.block(i, j, 1, 1)))) ++same;
      worst = max_of(worst, abs_of(T((AP(i, j) - PA(i, j)) / PA(i, j))));
    }
  rep.claims.push_back(claim_close("attention-equivariant-in-format", "A(PX) = P A(X) P^T evaluated in the format",
                                   "no encoding; " + std::to_string(same) + " of " + std::to_string(n * n) +
                                       " entries bitwise equal",
                                   fmt, worst, T(0), T(T(2 * (n + 3)) * eps<T>()), false,
                                   "2(n+3) eps (the worst relative difference of the two sides)"));
  rep.claims.push_back(against_truth(AP, scores_of(permute_rows(exact_of(X)), L), fmt, rs));
}

report::check_report run(const run_settings& rs) {
  report::check_report rep;
  const matrix<mpq_rational> X = by_formula(n, d, 3, 5, 1, 7, 3, 4);
  const layer L = layer_of(d), Lcat = layer_of(d + de);
  equivariance_part(rep, X, L, "n = 6, d = 4, pi = (3 0 5 1 4 2)", rs);
  breaking_part(rep, X, L, Lcat, rs);
  const matrix<double> Xd = from_rational_matrix<double>(X);  // exact: quarters
  for_each_format(rs, [&]<class T>(const format_spec& f) { evaluate<T>(rep, f, Xd, L, rs); });
  return rep;
}

}  // namespace

check_entry make_permutation_symmetry() {
  return {"permutation-symmetry", "Without positions attention is permutation equivariant; positions break it",
          "§2 (Yun et al.)", "proofs/L5-permutation-symmetry.md", error_model, run};
}

}  // namespace attncert::checks
