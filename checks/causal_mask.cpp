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
    "computed). A_ii is compared relatively (2(n+5) eps) with its certified value 1/(1 + i*exp(delta)) (MPFI), "
    "where that value lies in the format's normal range; below it nothing is asserted and a departure is "
    "flagged DIVERGES. det (cofactor "
    "expansion) is compared relatively with the certified product of the diagonal, within (4n + 2n(n+5)) "
    "eps, likewise only in the normal range.";

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
    // Against the certified A_ii (MPFI), relative 2(n+5) eps where the error model holds: in the
    // format's normal range.  Below it (e^-800 in binary64, e^-50 in binary16) the relative error is
    // unbounded and nothing is asserted; the row shows the departure (DIVERGES when off).
    const mpfr_float me = ldexp(mpfr_float(1), 1 - static_cast<int>(number_traits<T>::bits() ? number_traits<T>::bits() : 64));
    for (int i = 1; i < n; ++i) {
      const certified_value c = certify_value(
          [&] { return mpfi_float(1 / (1 + i * exp(mpfi_float(in.delta)))); }, rs.certify_bits, rs.certify_max_bits,
          certify_width_for<T>());
      mpfr_float lo;
      {
        precision_guard g(c.bits);
        lo = lower_of(c.enclosure);
      }
      const long min_exp = number_traits<T>::min_normal_exponent();  // smallest normal 2^min_exp
      const bool normal = mpfr_get_exp(lo.backend().data()) - 1 >= min_exp;
      rep.claims.push_back(claim_certified("diagonal-closed-form", "A_ii = 1/(1 + i*exp(delta))",
                                           in.name + ",i=" + std::to_string(i), fmt, A(i, i), c,
                                           normal ? mpfr_float(2 * (n + 5) * me) : mpfr_float(1),
                                           normal ? "2(n+5) eps" : "unbounded: the true A_ii lies below the format's normal range"));
    }
  }
  // det A against the certified product of the diagonal (MPFI softmax), never against the product
  // computed (and possibly underflowed) in the same format; asserted in the format's normal range.
  const T det = det_of(A);
  {
    const certified_value c = certify_value(
        [&] {
          const matrix<mpfi_float> Ai = masked_softmax(from_double_matrix<mpfi_float>(in.S), mask::causal());
          mpfi_float p(1);
          for (int i = 0; i < n; ++i) p *= Ai(i, i);
          return p;
        },
        rs.certify_bits, rs.certify_max_bits, certify_width_for<T>());
    mpfr_float lo;
    {
      precision_guard g(c.bits);
      lo = lower_of(c.enclosure);
    }
    const mpfr_float me = ldexp(mpfr_float(1), 1 - static_cast<int>(number_traits<T>::bits() ? number_traits<T>::bits() : 64));
    const bool normal = mpfr_get_exp(lo.backend().data()) - 1 >= number_traits<T>::min_normal_exponent();
    rep.claims.push_back(claim_certified("det-is-diagonal-product", "det A = prod A_ii", in.name, fmt, det, c,
                                         normal ? mpfr_float((4 * n + 2 * n * (n + 5)) * me) : mpfr_float(1),
                                         normal ? "(4n + 2n(n+5)) eps (cofactor expansion of a triangular A; each A_ii "
                                                  "within 2(n+5) eps)"
                                                : "unbounded: the true det lies below the format's normal range"));
  }
  rep.ranks.push_back(measure_rank("A", in.name, fmt, A, ex.rank, ex.source, rs));
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
