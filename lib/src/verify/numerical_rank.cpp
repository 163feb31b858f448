// Numerical-rank certificates.
// Re-forms the matrix the recipe computes with this file's own evaluator (binary64 and binary32
// in hardware with libm's exp, as the recipe specifies; binary16 and bfloat16 with MPFR rounding
// every operation to the format's precision and exponent range), then re-derives the rank from
// eigenvalue counts of the Gram matrix: characteristic polynomial by Faddeev–LeVerrier over ℚ,
// Descartes' rule after an exact Taylor shift (exact for real-rooted polynomials).
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "checker.hpp"

namespace attncert::verify::checker {

namespace {

enum class fmt { f64, f32, f16, bf16 };  // binary64, binary32, binary16, bfloat16
int precision_bits(fmt f) { return f == fmt::f64 ? 53 : f == fmt::f32 ? 24 : f == fmt::f16 ? 11 : 8; }

// x (exact) rounded to nearest even in a 16-bit format, via MPFR's IEEE emulation.
double round_to_16_bit_format(fmt f, mpfr_t x) {
  const int p = precision_bits(f);
  const long emin = f == fmt::f16 ? -14 : -126, emax = f == fmt::f16 ? 15 : 127;
  const mpfr_exp_t old_min = mpfr_get_emin(), old_max = mpfr_get_emax();
  mpfr_set_emin(emin - p + 2);  // MPFR exponents: x = 0.1b... × 2^e
  mpfr_set_emax(emax + 1);
  mpfr_t y;
  mpfr_init2(y, p);
  int inex = mpfr_set(y, x, MPFR_RNDN);
  inex = mpfr_check_range(y, inex, MPFR_RNDN);
  mpfr_subnormalize(y, inex, MPFR_RNDN);
  const double r = mpfr_get_d(y, MPFR_RNDN);
  mpfr_clear(y);
  mpfr_set_emin(old_min);
  mpfr_set_emax(old_max);
  return r;
}
enum class op { add, sub, mul, div, exp, conv };
double recipe_operation(fmt f, op o, double a, double b = 0) {
  if (f == fmt::f64) {
    switch (o) {
      case op::add: return a + b;
      case op::sub: return a - b;
      case op::mul: return a * b;
      case op::div: return a / b;
      case op::exp: return std::exp(a);
      default: return a;
    }
  }
  if (f == fmt::f32) {
    const float x = static_cast<float>(a), y = static_cast<float>(b);
    switch (o) {
      case op::add: return x + y;
      case op::sub: return x - y;
      case op::mul: return x * y;
      case op::div: return x / y;
      case op::exp: return std::exp(x);
      default: return x;
    }
  }
  mpfr_t x, y;
  mpfr_init2(x, 2200);  // exact for sums, differences and products of two binary64 numbers
  mpfr_init2(y, 64);
  mpfr_set_d(x, a, MPFR_RNDN);
  mpfr_set_d(y, b, MPFR_RNDN);
  double r = 0;
  switch (o) {
    case op::add: mpfr_add(x, x, y, MPFR_RNDN); break;
    case op::sub: mpfr_sub(x, x, y, MPFR_RNDN); break;
    case op::mul: mpfr_mul(x, x, y, MPFR_RNDN); break;
    case op::div:  // at 2200 bits, then one rounding to the format: a quotient of two format numbers that is a
                   // rounding midpoint (<= 12 bits) is exact at 2200 bits, so no double rounding can occur
      mpfr_div_d(x, x, b, MPFR_RNDN);
      break;
    case op::exp:  // e^a (a != 0) is transcendental, never a midpoint: rounding at 2200 bits first is harmless
      mpfr_set_d(y, a, MPFR_RNDN);
      mpfr_exp(x, y, MPFR_RNDN);
      break;
    default: break;
  }
  r = round_to_16_bit_format(f, x);
  mpfr_clear(x);
  mpfr_clear(y);
  return r;
}

Q exact_rational(double d) {
  Q r;
  mpq_set_d(r.backend().data(), d);
  return r;
}
double as_double(const Q& v, const std::string& where) {
  const double d = v.convert_to<double>();
  if (!std::isfinite(d) || exact_rational(d) != v) throw malformed(where + ": not a binary64 number");
  return d;
}
using double_matrix = std::vector<std::vector<double>>;
double_matrix binary64_matrix(const nlohmann::json& j, const std::string& where) {
  const qmatrix m = rational_matrix(j, where);
  double_matrix d(m.size(), std::vector<double>(m[0].size()));
  for (std::size_t i = 0; i < m.size(); ++i)
    for (std::size_t k = 0; k < m[i].size(); ++k) d[i][k] = as_double(m[i][k], where);
  return d;
}

// eigenvalues of the symmetric rational G strictly above t, with multiplicity
std::size_t eigenvalues_above(const qmatrix& G, const Q& t) {
  const std::size_t n = G.size();
  qmatrix A = G;
  for (std::size_t i = 0; i < n; ++i) A[i][i] -= t;
  // Faddeev–LeVerrier: chi(x) = x^n + c_{n-1} x^{n-1} + ... + c_0
  std::vector<Q> c(n + 1);
  c[n] = 1;
  qmatrix Mk(n, std::vector<Q>(n));  // M_0 = 0
  for (std::size_t k = 1; k <= n; ++k) {
    poll();
    qmatrix AM(n, std::vector<Q>(n));
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        poll();
        Q v = 0;
        for (std::size_t l = 0; l < n; ++l) v += A[i][l] * Mk[l][j];
        AM[i][j] = v;
      }
    // M_k = A M_{k-1} + c_{n-k+1} I
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) Mk[i][j] = AM[i][j] + (i == j ? c[n - k + 1] : Q(0));
    Q tr = 0;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t l = 0; l < n; ++l) tr += A[i][l] * Mk[l][i];
    c[n - k] = -tr / Q(static_cast<long>(k));
  }
  // all roots real: sign changes of the coefficients = number of positive roots
  std::size_t changes = 0;
  int last = 0;
  for (const Q& v : c) {
    const int sg = v > 0 ? 1 : v < 0 ? -1 : 0;
    if (sg == 0) continue;
    if (last != 0 && sg != last) ++changes;
    last = sg;
  }
  return changes;
}

// policy text -> (alpha, beta) with threshold max(alpha sigma_1, beta), strict
bool policy_coefficients(const std::string& text, long m, long n, int p, Q& alpha, Q& beta) {
  const Q eps = Q(1) / Q(Z(1) << (p - 1));
  const Q big(std::max(m, n));
  std::vector<std::string> parts;
  std::size_t s = 0;
  for (std::size_t i = 0; i <= text.size(); ++i)
    if (i == text.size() || text[i] == ':') {
      parts.push_back(text.substr(s, i - s));
      s = i + 1;
    }
  auto param = [&](std::size_t k) {  // the binary64 nearest the decimal, as the prover's policy parser reads it
    const char* b = parts[k].c_str();
    char* end = nullptr;
    const double v = parts[k].empty() || std::isspace(static_cast<unsigned char>(*b)) ? NAN : std::strtod(b, &end);
    if (!std::isfinite(v) || end != b + parts[k].size()) throw malformed("/claim/policy: bad parameter '" + shown(parts[k]) + "'");
    return exact_rational(v);
  };
  if (parts[0] == "numpy" && parts.size() == 1) alpha = big * eps, beta = 0;
  else if (parts[0] == "lapack" && parts.size() <= 2) alpha = parts.size() == 2 ? param(1) : eps, beta = 0;
  else if (parts[0] == "torch" && parts.size() <= 3) {
    beta = parts.size() == 3 ? param(2) : Q(0);
    const bool rtol_given = parts.size() >= 2 && parts[1] != "default";
    alpha = rtol_given ? param(1) : (beta > 0 && parts.size() == 3 ? Q(0) : big * eps);
  } else if (parts[0] == "absolute" && parts.size() == 2) alpha = 0, beta = param(1);
  else if (parts[0] == "relative" && parts.size() == 2) alpha = param(1), beta = 0;
  else return false;
  return true;
}

// The formats of a recipe's stages: inputs, score accumulation, softmax, output accumulation, result.
struct recipe_formats {
  fmt inputs, scores, softmax, output, result;
};

recipe_formats formats_of_recipe(const std::string& recipe) {
  if (recipe == "fp64") return {fmt::f64, fmt::f64, fmt::f64, fmt::f64, fmt::f64};
  if (recipe == "fp32") return {fmt::f32, fmt::f32, fmt::f32, fmt::f32, fmt::f32};
  if (recipe == "fp16") return {fmt::f16, fmt::f16, fmt::f16, fmt::f16, fmt::f16};
  if (recipe == "bf16") return {fmt::bf16, fmt::bf16, fmt::bf16, fmt::bf16, fmt::bf16};
  if (recipe == "fp16-fp32acc") return {fmt::f16, fmt::f32, fmt::f32, fmt::f32, fmt::f16};
  if (recipe == "bf16-fp32acc") return {fmt::bf16, fmt::f32, fmt::f32, fmt::f32, fmt::bf16};
  throw malformed("/claim/recipe: fp64, fp32, fp16, bf16, fp16-fp32acc or bf16-fp32acc");
}

double convert(fmt f, double x) { return recipe_operation(f, op::conv, x); }

// S = scale · Q Kᵀ in the accumulation format (inputs rounded to the input format first).
double_matrix recipe_scores(const double_matrix& Qm, const double_matrix& Km, double scale, const recipe_formats& rf) {
  const std::size_t nq = Qm.size(), nk = Km.size(), d = Qm[0].size();
  const fmt acc = rf.scores, st = rf.inputs;
  const double sc = convert(acc, scale);
  double_matrix S(nq, std::vector<double>(nk));
  for (std::size_t i = 0; i < nq; ++i)
    for (std::size_t j = 0; j < nk; ++j) {
      poll();
      double s = 0;
      for (std::size_t k = 0; k < d; ++k)
        s = recipe_operation(acc, op::add, s, recipe_operation(acc, op::mul, convert(acc, convert(st, Qm[i][k])), convert(acc, convert(st, Km[j][k]))));
      S[i][j] = recipe_operation(acc, op::mul, sc, s);
    }
  return S;
}

// The row softmax of S (max-shifted, masked entries 0) in the softmax format.
double_matrix recipe_softmax(const double_matrix& S, const std::string& mk, fmt sm) {
  const std::size_t nq = S.size(), nk = S[0].size();
  double_matrix A(nq, std::vector<double>(nk, 0.0));
  for (std::size_t i = 0; i < nq; ++i) {
    poll();
    double shift = 0;
    bool any = false;
    for (std::size_t j = 0; j < nk; ++j)
      if (mk == "none" || j <= i) {
        const double x = convert(sm, S[i][j]);
        shift = any ? std::max(shift, x) : x;
        any = true;
      }
    if (!any) throw malformed("/claim/mask: a fully masked row");
    double z = 0;
    for (std::size_t j = 0; j < nk; ++j)
      if (mk == "none" || j <= i) {
        A[i][j] = recipe_operation(sm, op::exp, recipe_operation(sm, op::sub, convert(sm, S[i][j]), shift));
        z = recipe_operation(sm, op::add, z, A[i][j]);
      }
    for (std::size_t j = 0; j < nk; ++j)
      if (mk == "none" || j <= i) A[i][j] = recipe_operation(sm, op::div, A[i][j], z);
  }
  return A;
}

// A V in the output accumulation format (V rounded to the input format first).
double_matrix recipe_output(const double_matrix& A, const double_matrix& Vm, const recipe_formats& rf) {
  const std::size_t nq = A.size(), nk = Vm.size();
  const fmt oacc = rf.output, st = rf.inputs;
  double_matrix O(nq, std::vector<double>(Vm[0].size()));
  for (std::size_t i = 0; i < nq; ++i)
    for (std::size_t c = 0; c < Vm[0].size(); ++c) {
      poll();
      double s = 0;
      for (std::size_t k = 0; k < nk; ++k)
        s = recipe_operation(oacc, op::add, s, recipe_operation(oacc, op::mul, convert(oacc, A[i][k]), convert(oacc, convert(st, Vm[k][c]))));
      O[i][c] = s;
    }
  return O;
}

// The matrix the claim's recipe forms (scores, attention or output), exact, in the result format.
qmatrix form_recipe_matrix(const nlohmann::json& cl, const recipe_formats& rf) {
  const double_matrix Qm = binary64_matrix(field(cl, "Q", "/claim"), "/claim/Q"), Km = binary64_matrix(field(cl, "K", "/claim"), "/claim/K");
  const double scale = as_double(exact_number(field(cl, "scale", "/claim"), "/claim/scale"), "/claim/scale");
  const std::string object = field(cl, "object", "/claim").get<std::string>();
  const std::string mk = field(cl, "mask", "/claim").get<std::string>();
  if (mk != "none" && mk != "causal") throw malformed("/claim/mask: none or causal");
  if (Km[0].size() != Qm[0].size()) throw malformed("/claim/K: width differs from Q");
  double_matrix out = recipe_scores(Qm, Km, scale, rf);
  if (object != "scores") {
    out = recipe_softmax(out, mk, rf.softmax);
    if (object == "output") {
      const double_matrix Vm = binary64_matrix(field(cl, "V", "/claim"), "/claim/V");
      if (Vm.size() != Km.size()) throw malformed("/claim/V: one row per key");
      out = recipe_output(out, Vm, rf);
    } else if (object != "attention") {
      throw malformed("/claim/object: scores, attention or output");
    }
  }
  const std::size_t m = out.size(), n = out[0].size();
  qmatrix Mh(m, std::vector<Q>(n));
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      const double v = convert(rf.result, out[i][j]);
      if (!std::isfinite(v)) throw invalid("the recipe forms a non-finite entry");
      Mh[i][j] = exact_rational(v);
    }
  return Mh;
}

// The Gram matrix of Mh on its smaller side (same nonzero singular values squared).
qmatrix gram_matrix(const qmatrix& Mh) {
  const std::size_t m = Mh.size(), n = Mh[0].size();
  const bool rows = m <= n;
  const std::size_t g = rows ? m : n;
  qmatrix G(g, std::vector<Q>(g));
  for (std::size_t a = 0; a < g; ++a)
    for (std::size_t b = 0; b < g; ++b) {
      poll();
      Q v = 0;
      for (std::size_t k = 0; k < (rows ? n : m); ++k) v += rows ? Mh[a][k] * Mh[b][k] : Mh[k][a] * Mh[k][b];
      G[a][b] = v;
    }
  return G;
}

// The numerical rank under the threshold max(alpha σ₁, beta): σ₁² in the stated (l, u], and the
// count of eigenvalues of G above the threshold's enclosure decided.
std::size_t rank_above_threshold(const nlohmann::json& nrj, const qmatrix& G, const Q& alpha, const Q& beta) {
  if (eigenvalues_above(G, 0) == 0) return 0;
  const Q l = exact_number(field(nrj, "sigma1_squared_above", "/numerical_rank"), "/numerical_rank/sigma1_squared_above");
  const Q u = exact_number(field(nrj, "sigma1_squared_at_most", "/numerical_rank"), "/numerical_rank/sigma1_squared_at_most");
  check(eigenvalues_above(G, l) >= 1 && eigenvalues_above(G, u) == 0, "/numerical_rank: sigma_1^2 is not in (l, u]");
  const Q tlo = std::max(Q(alpha * alpha * l), Q(beta * beta)), thi = std::max(Q(alpha * alpha * u), Q(beta * beta));
  const std::size_t rank = eigenvalues_above(G, tlo);
  check(eigenvalues_above(G, thi) == rank, "/numerical_rank: the threshold's enclosure does not decide the rank");
  return rank;
}

}  // namespace

void verify_numerical_rank(const nlohmann::json& cert, const nlohmann::json& cl, const note_fn& note) {
  const std::string recipe = field(cl, "recipe", "/claim").get<std::string>();
  if (cl.contains("point")) (void)exact_number(cl["point"], "/claim/point");  // informational, but an exact number
  const recipe_formats rf = formats_of_recipe(recipe);
  const qmatrix Mh = form_recipe_matrix(cl, rf);
  const std::string object = field(cl, "object", "/claim").get<std::string>();
  const std::size_t m = Mh.size(), n = Mh[0].size();
  const nlohmann::json& nrj = field(cert, "numerical_rank", "");
  check(rational_matrix(field(nrj, "formed", "/numerical_rank"), "/numerical_rank/formed") == Mh,
        "/numerical_rank/formed: differs from the matrix re-formed by the recipe");
  note("re-formed the " + object + " with recipe " + recipe + " (own evaluator): equal to the certificate's matrix");
  Q alpha, beta;
  if (!policy_coefficients(field(cl, "policy", "/claim").get<std::string>(), static_cast<long>(m), static_cast<long>(n), precision_bits(rf.result), alpha, beta))
    throw malformed("/claim/policy: numpy, lapack[:R], torch[:R[:A]], absolute:T or relative:T");
  check(exact_number(field(nrj, "alpha", "/numerical_rank"), "/numerical_rank/alpha") == alpha &&
            exact_number(field(nrj, "beta", "/numerical_rank"), "/numerical_rank/beta") == beta,
        "/numerical_rank: alpha, beta differ from the policy's");
  const std::size_t rank = rank_above_threshold(nrj, gram_matrix(Mh), alpha, beta);
  check(integer<std::size_t>(field(nrj, "rank", "/numerical_rank"), "/numerical_rank/rank") == rank, "/numerical_rank/rank: the re-derived rank is " + std::to_string(rank));
  const std::string rel = field(cl, "relation", "/claim").get<std::string>();
  const std::size_t value = integer<std::size_t>(field(cl, "value", "/claim"), "/claim/value");
  const bool ok = rel == "=" ? rank == value : rel == "<=" ? rank <= value : rel == ">=" ? rank >= value : throw malformed("/claim/relation");
  if (!ok)
    check(integer<std::size_t>(field(field(cert, "counterexample", ""), "numerical_rank", "/counterexample"), "/counterexample/numerical_rank") == rank,
          "/counterexample/numerical_rank: the re-derived rank is " + std::to_string(rank));
  else
    check(!cert.contains("counterexample"), "/counterexample: present although the claim holds");
  const std::string verdict = ok ? "CERTIFIED" : "REFUTED";
  check(field(cert, "verdict", "").get<std::string>() == verdict, "/verdict: the re-derived verdict is " + verdict);
  note("numerical rank " + std::to_string(rank) + " re-derived from eigenvalue counts of the Gram matrix (Faddeev-LeVerrier, "
       "Descartes); verdict re-derived: " + verdict);
}

}  // namespace attncert::verify::checker
