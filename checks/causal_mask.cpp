// checks/causal_mask.cpp — masks introduce support and topology (§8).
//
// A causal masked softmax with finite diagonal scores is lower-triangular with a positive
// diagonal, so det A = Π A_ii > 0 and A has full rank — even when the scores have a
// low-dimensional factorization, and even when the diagonal is astronomically small.
// Instances: random scores; diagonal 50 below the row maximum (A_ii ≈ e^-50/i, tiny in
// binary64, 0 in binary16); diagonal 800 below (e^-800 underflows binary64 to 0: the
// numerical rank must then diverge from the exact rank).  Proof: proofs/P03-causal-full-rank.md.
#include "checks/common.hpp"

namespace attncert::checks {
namespace {

constexpr int n = 4;

const char* error_model =
    "Each softmax entry has relative error <= (n+3) eps (n-1 additions in the normalizer, one exp, one "
    "division); row sums are within 2(n+3) eps of 1. Masked entries are exact zeros (they are never "
    "computed). The closed form A_ii = 1/(1 + i*exp(delta)) has <= 4 rounded operations. det is compared "
    "relatively with the product of the diagonal (cofactor expansion, n rounded products). An "
    "underflowed value is exact zero on both sides and then agrees exactly.";

struct instance {
  std::string name;
  matrix<double> S;  // dyadic entries: exact in every format
  int delta;         // > 0: S_ij = 0 (j < i), S_ii = −delta; 0: random scores
};

std::vector<instance> instances(std::uint64_t seed) {
  std::vector<instance> out;
  dyadic_source src(seed ^ 0xC4u);
  out.push_back({"random", src.matrix_of(n, n), 0});
  for (int delta : {50, 800}) {
    matrix<double> S = matrix<double>::Zero(n, n);
    for (int i = 0; i < n; ++i) S(i, i) = -delta;
    // Future entries carry large scores that the mask must remove before normalization.
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) S(i, j) = 1000;
    out.push_back({"diagonal-" + std::to_string(delta) + "-below-max", S, delta});
  }
  return out;
}

template <class T>
T diagonal_closed_form(int i, int delta) {
  using std::exp;
  if (i == 0) return T(1);
  return T(1) / (T(1) + T(i) * exp(T(delta)));
}

template <class T>
T product_of_diagonal(const matrix<T>& A) {
  T p(1);
  for (Eigen::Index i = 0; i < A.rows(); ++i) p *= A(i, i);
  return p;
}

template <class T>
T det_of(const matrix<T>& A) {
  return cofactor_determinant(A);
}

struct exact_info {
  std::size_t rank = 0;
  std::string source;
};

exact_info exact_part(report::check_report& rep, const instance& in, const run_settings& rs) {
  // Enclosure tier: every diagonal entry certainly > 0 ⇒ det = Π A_ii > 0 ⇒ rank n.
  exact_info info;
  unsigned bits = 0;
  bool all_positive = true;
  std::string worst;
  for (int i = 0; i < n; ++i) {
    const certified_sign s = certify_sign(
        [&] { return masked_softmax(from_double_matrix<mpfi_float>(in.S), mask::causal())(i, i); }, rs.certify_bits,
        rs.certify_max_bits, true);
    bits = std::max(bits, s.bits);
    if (s.answer != truth::certainly_true) all_positive = false;
    if (i == n - 1) worst = s.enclosure;
  }
  // Lower-triangular support: checked on the enclosure (entries above the diagonal are
  // exactly [0, 0]).
  bool triangular = true;
  {
    precision_guard g(rs.certify_bits);
    const matrix<mpfi_float> A = masked_softmax(from_double_matrix<mpfi_float>(in.S), mask::causal());
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j)
        if (!(lower_of(A(i, j)) == 0 && upper_of(A(i, j)) == 0)) triangular = false;
  }
  const auto xr = cross_checked_rank(rep, "A", in.name, n, "lower-triangular with every A_ii > 0 (P03)",
                                     layer_rank(exact_of(in.S), mask::causal(), layer_object::attention));
  info.rank = xr.rank;
  info.source = xr.source;
  report::claim_row r = make_row("full-rank", "causal A is lower-triangular with every A_ii > 0, so det A > 0", in.name,
                                 "mpfi" + std::to_string(bits), tier::enclosure);
  r.computed = "A_nn in " + worst;
  r.expected = "> 0 for every i";
  r.tolerance = "0";
  r.tolerance_rule = "enclosure: each whole interval must be > 0; entries above the diagonal exactly 0";
  r.result = all_positive && triangular ? verdict::pass : verdict::undecided;
  rep.claims.push_back(r);
  return info;
}

template <class T>
void evaluate(report::check_report& rep, const format_spec& fmt, const instance& in, const exact_info& ex,
              const run_settings& rs) {
  const T e = eps<T>();
  const matrix<T> S = from_double_matrix<T>(in.S);
  const matrix<T> A = attention_matrix(S, mask::causal(), rs);
  rep.claims.push_back(claim_close("rows-sum-to-1", "each row of A sums to 1 (mask applied before normalization)", in.name,
                                   fmt, max_row_sum_error(A), T(0), T(T(2 * (n + 3)) * e), false, "2(n+3) eps"));
  T above(0);
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) above = max_of(above, abs_of(A(i, j)));
  rep.claims.push_back(claim_close("lower-triangular", "A_ij = 0 exactly for j > i", in.name, fmt, above, T(0), T(0), false,
                                   "0 (masked entries are never computed)"));
  if (in.delta > 0) {
    for (int i = 1; i < n; ++i)
      rep.claims.push_back(claim_close("diagonal-closed-form", "A_ii = 1/(1 + i*exp(delta))", in.name + ",i=" + std::to_string(i),
                                       fmt, A(i, i), diagonal_closed_form<T>(i, in.delta), T(T(2 * (n + 5)) * e), true,
                                       "2(n+5) eps"));
  }
  const T det = det_of(A);
  const T prod = product_of_diagonal(A);
  rep.claims.push_back(claim_close("det-is-diagonal-product", "det A = prod A_ii", in.name, fmt, det, prod,
                                   T(T(4 * n) * e), true, "4n eps (cofactor expansion: exact zeros above the diagonal)"));
  rep.ranks.push_back(measure_rank("A", in.name, fmt, A, ex.rank, ex.source, rs.policies));
}

report::check_report run(const run_settings& rs) {
  report::check_report rep;
  const auto ins = instances(rs.seed);
  std::vector<exact_info> ex;
  for (const auto& in : ins) ex.push_back(exact_part(rep, in, rs));
  for_each_format(rs, [&]<class T>(const format_spec& f) {
    for (std::size_t k = 0; k < ins.size(); ++k) evaluate<T>(rep, f, ins[k], ex[k], rs);
  });
  return rep;
}

}  // namespace

check_entry make_causal_mask() {
  return {"causal-mask", "A causal mask with finite diagonal gives full rank", "§8", "proofs/P03-causal-full-rank.md",
          error_model, run};
}

}  // namespace attncert::checks
