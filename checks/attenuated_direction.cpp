// checks/attenuated_direction.cpp — does the task's contrast lie in an attenuated direction of A (§5; issue 33)?
//
// A contrast c (a direction in value space over the keys: values v and v + t·c differ by t·A·c at the output)
// passes a head with gain g = ‖Ac‖/‖c‖.  A numerical rank at threshold τ keeps the singular directions with
// σ ≥ τ; whatever share of c lies in the others is discarded.  Since ‖Ac‖² = Σ σ_k² γ_k² (γ_k the
// coordinates of c/‖c‖ on the right singular vectors), the share of c's energy in kept directions is at most
// (g/τ)²: g < τ certifies that the contrast lives (mostly) where the threshold cuts.  For float32's NumPy
// policy τ = σ₁·n·ε₃₂ with 1 ≤ σ₁ ≤ √(max column sum) (A is row-stochastic).  Proof:
// proofs/L6-attenuated-direction.md.
#include "checks/common.hpp"

namespace attncert::checks {
namespace {

const char* error_model =
    "The gain g = |Ac|/|c| is enclosed in MPFI (A the certified softmax of exact scores, c exact). In a format T the "
    "computed softmax carries relative error <= (n+3) eps per entry (P02), so each (Ac)_i is within (2n+4) eps |c|_inf "
    "(row sums 1), and the squared gain g^2 = |Ac|^2/|c|^2 in the format is within (6n^2 + 9n + 1) eps |c|_inf^2/|c|^2, "
    "absolute (L6).";

struct instance {
  std::string head;        ///< the head (its scores) the contrast is evaluated on
  std::string name;
  matrix<mpq_rational> S;  ///< exact scores
  std::vector<mpq_rational> c;
  bool attenuated;  ///< declared before computing: below float32's threshold (true) or above it
};

mpq_rational q(long a, long b = 1) { return mpq_rational(a, b); }

std::vector<instance> instances() {
  std::vector<instance> out;
  // The two-token family S = a [[1, -1], [-1, 1]]: A's singular vectors are (1, 1) (sigma 1) and (1, -1) (tanh a).
  for (const auto& [a, name] : {std::pair{q(1, 1000000000), std::string("two-token a=1e-9")}, {q(1), std::string("two-token a=1")}}) {
    matrix<mpq_rational> S(2, 2);
    S << a, -a, -a, a;
    out.push_back({name, name + ", c = (1, -1)", S, {q(1), q(-1)}, a < 1});
    out.push_back({name, name + ", c = (1, 1)", S, {q(1), q(1)}, false});
  }
  // Three tokens, two keys whose scores differ by 2^-30 in every row: their contrast is attenuated; a third key's is not.
  matrix<mpq_rational> S(3, 3);
  const mpq_rational t = q(1, 1073741824);
  S << 0, t, 1, 1, 1 + t, 0, 2, 2 + t, q(1, 2);
  const std::string head = "three tokens, keys 0 and 1 within 2^-30";
  out.push_back({head, head + ", c = e0 - e1", S, {q(1), q(-1), q(0)}, true});
  out.push_back({head, head + ", c = e0 - e2", S, {q(1), q(0), q(-1)}, false});
  return out;
}

matrix<mpfi_float> enclose_attention(const matrix<mpq_rational>& S) {
  return masked_softmax(from_rational_matrix<mpfi_float>(S), mask::none());
}

struct gain_parts {
  mpfi_float g2, sigma1_hi2;  ///< the squared gain; an upper bound of sigma_1^2 (the largest column sum)
};

gain_parts enclose_gain(const instance& in) {
  const matrix<mpfi_float> A = enclose_attention(in.S);
  mpfi_float num(0), den(0), colmax(0);
  for (Eigen::Index i = 0; i < A.rows(); ++i) {
    mpfi_float r(0);
    for (Eigen::Index j = 0; j < A.cols(); ++j) r += A(i, j) * from_rational<mpfi_float>(in.c[static_cast<std::size_t>(j)]);
    num += r * r;
  }
  for (const auto& x : in.c) den += from_rational<mpfi_float>(x) * from_rational<mpfi_float>(x);
  for (Eigen::Index j = 0; j < A.cols(); ++j) {
    mpfi_float s(0);
    for (Eigen::Index i = 0; i < A.rows(); ++i) s += A(i, j);
    colmax = max_of(colmax, s);
  }
  return {mpfi_float(num / den), colmax};
}

// The enclosure claims of one instance: the gain (against its closed form on the two-token family), the
// float32 threshold side declared beforehand, and for an attenuated contrast the share of its energy a float32
// numerical rank discards (>= 99 %).
// Returns whether the float32 side came out as declared (certified).
bool enclosure_part(report::check_report& rep, const instance& in, const run_settings& rs) {
  const mpfr_float e32 = std::ldexp(1.0, -23);  // float32's eps, the NumPy policy's
  const long n = static_cast<long>(in.S.rows());
  const mpfi_float tau_lo = mpfi_float(n) * mpfi_float(e32);  // tau32 >= n eps32 (sigma1 >= 1)
  certified_sign g_text = certify_sign([&] { return enclose_gain(in).g2; }, rs.certify_bits, rs.certify_max_bits, true);
  rep.claims.push_back(claim_from_sign("contrast-gain", "g^2 = |Ac|^2/|c|^2 > 0 (the contrast reaches the output)", in.name,
                                       g_text, "> 0", "MPFI enclosure of the squared gain, escalated until its sign is decided"));
  if (in.attenuated) {
    const certified_sign below = certify_sign(
        [&] { return mpfi_float(tau_lo * tau_lo - enclose_gain(in).g2); }, rs.certify_bits, rs.certify_max_bits, true);
    rep.claims.push_back(claim_from_sign("below-float32-threshold", "g < n eps32 <= tau32 = sigma1 n eps32 (flagged)", in.name,
                                         below, "flagged",
                                         "computed: the margin (n eps32)^2 - g^2, certified > 0 (sigma1 >= 1 for row-stochastic A)"));
    const certified_sign share = certify_sign(
        [&] {
          return mpfi_float(mpfi_float(1) - enclose_gain(in).g2 / (tau_lo * tau_lo) - mpfi_float(99) / 100);
        },
        rs.certify_bits, rs.certify_max_bits, true);
    const bool as_declared = below.answer == truth::certainly_true;
    rep.claims.push_back(claim_from_sign("energy-discarded", "at least 99% of |c|^2 lies in directions with sigma < tau32",
                                         in.name, share, "margin > 0",
                                         "L6: kept share <= (g/tau)^2 <= (g/(n eps32))^2; computed: the margin 1 - (g/(n eps32))^2 - 0.99"));
    return as_declared;
  } else {
    const certified_sign above = certify_sign(
        [&] {
          const gain_parts p = enclose_gain(in);
          return mpfi_float(p.g2 - p.sigma1_hi2 * tau_lo * tau_lo);
        },
        rs.certify_bits, rs.certify_max_bits, true);
    rep.claims.push_back(claim_from_sign("above-float32-threshold", "g > sqrt(max col sum) n eps32 >= tau32 (not flagged)",
                                         in.name, above, "not flagged",
                                         "computed: the margin g^2 - (max col sum)(n eps32)^2, certified > 0"));
    return above.answer == truth::certainly_true;
  }
}

// §7, paired tasks: on one head, a task whose contrast the head loses beside a control whose contrast it transmits,
// each outcome certified by enclosure_part.
void paired_tasks(report::check_report& rep, const std::vector<instance>& ins, const std::vector<bool>& certified) {
  for (std::size_t t = 0; t < ins.size(); ++t) {
    if (!ins[t].attenuated) continue;
    for (std::size_t c = 0; c < ins.size(); ++c) {
      if (ins[c].head != ins[t].head || ins[c].attenuated) continue;
      const bool ok = certified[t] && certified[c];
      const std::string task = ins[t].name.substr(ins[t].head.size() + 2), control = ins[c].name.substr(ins[c].head.size() + 2);
      rep.claims.push_back(claim_exact("paired-tasks", "one head: the task's contrast is lost, the control's transmitted", ins[t].head,
                                       ok ? "task " + task + ": lost (discarded by float32's rank); control " + control + ": transmitted"
                                          : "not both certified",
                                       "task lost, control transmitted", ok,
                                       "the certified sides of float32's threshold above (below-/above-float32-threshold)"));
    }
  }
}

// In a format: the gain computed from the format's softmax is within the error model of the certified gain.
template <class T>
void evaluate(report::check_report& rep, const format_spec& fmt, const instance& in, const run_settings& rs) {
  const Eigen::Index n = in.S.rows();
  const matrix<T> A = attention_matrix(from_rational_matrix<T>(in.S), mask::none(), rs);
  T num(0), den(0), cmax(0);
  for (Eigen::Index i = 0; i < n; ++i) {
    T r(0);
    for (Eigen::Index j = 0; j < n; ++j) r += A(i, j) * from_rational<T>(in.c[static_cast<std::size_t>(j)]);
    num += r * r;
  }
  for (const auto& x : in.c) {
    den += from_rational<T>(x) * from_rational<T>(x);
    cmax = max_of(cmax, abs_of(from_rational<T>(x)));
  }
  const T g2 = T(num / den);
  const certified_value truth = certify_value([&] { return enclose_gain(in).g2; }, rs.certify_bits, rs.certify_max_bits,
                                              certify_width_for<T>());
  const T tol = T(T(T(static_cast<int>(6 * n * n + 9 * n + 1)) * cmax * cmax / den) * eps<T>());
  const T expected = from_rational<T>(exact_rational_of(approx_mid(truth.enclosure)));
  rep.claims.push_back(claim_close("gain-in-format", "g^2 = |Ac|^2/|c|^2 computed in the format", in.name, fmt, g2, expected,
                                   tol, false, "(6n^2 + 9n + 1) eps |c|_inf^2/|c|^2"));
}

report::check_report run(const run_settings& rs) {
  report::check_report rep;
  const auto ins = instances();
  std::vector<bool> certified;
  for (const auto& in : ins) certified.push_back(enclosure_part(rep, in, rs));
  paired_tasks(rep, ins, certified);
  for_each_format(rs, [&]<class T>(const format_spec& f) {
    for (const auto& in : ins) evaluate<T>(rep, f, in, rs);
  });
  return rep;
}

}  // namespace

check_entry make_attenuated_direction() {
  return {"attenuated-direction", "Does the task's contrast lie in a direction the numerical rank discards?", "§5",
          "proofs/L6-attenuated-direction.md", error_model, run};
}

}  // namespace attncert::checks
