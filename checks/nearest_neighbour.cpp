// checks/nearest_neighbour.cpp — rank versus heads on the nearest-neighbour target
// (N. Amsel, G. Yehudai, J. Bruna, "On the Benefits of Rank in Attention Layers", 2024).
//
// Tokens x₁..x_N and a query y on the unit sphere; target f(X, y) = x_{i*}, i* = argmax ⟨y, xᵢ⟩.
// (1) The full-rank head W_QK = cI with identity values: for N = 2 its error is exactly
//     ‖x₁ − x₂‖/(1 + e^{cδ}); for any N it is at most 2(N − 1)e^{−cδ} (δ: top score minus the
//     next).  Certified by enclosures with escalation for c = 1 … 10⁴ (at c = 10⁴ the error is
//     ~10^−868: binary64 underflows to 0 and a naive softmax overflows — documented, not
//     asserted, where the error model says the format cannot resolve it).
// (2) Rank deficiency is an obstruction: Σ rank Q_h < d gives u with Q_h u = 0 for every head,
//     the heads agree on u and −u while the targets differ, so the worst-case error is at
//     least ‖x_{i+} − x_{i−}‖/2.  Exact over ℚ; negative control: "a rank-1 head is within 0.1".
// (3) MSE of the full-rank head over the paper's two-point distribution (d = 3) by certified
//     quadrature, against its closed form, and seeded Monte-Carlo estimates for rank-1 heads.
// Proof: proofs/L1-nearest-neighbour.md.
#include <array>
#include <cmath>
#include <random>

#include "checks/literature.hpp"

namespace attncert::checks {

// ---- library part (also called by tests/checks/literature.cpp) ---------------------------
namespace nn {

matrix<mpq_rational> kernel_witness(const matrix<mpq_rational>& Q, const matrix<mpq_rational>& direction) {
  // direction is d×1.  Solve (QQᵀ) z = Q·direction exactly, then u = direction − Qᵀz.
  const matrix<mpq_rational> G = multiply(Q, transpose(Q));
  if (rank(G) != static_cast<std::size_t>(Q.rows())) throw input_error("kernel_witness: Q must have full row rank");
  matrix<mpq_rational> M(G.rows(), G.cols() + 1);
  M << G, multiply(Q, direction);
  const Eigen::Index r = G.rows();
  for (Eigen::Index c = 0; c < r; ++c) {  // Gauss–Jordan, G nonsingular
    Eigen::Index piv = c;
    while (M(piv, c) == 0) ++piv;
    M.row(piv).swap(M.row(c));
    const mpq_rational p = M(c, c);
    for (Eigen::Index j = 0; j < M.cols(); ++j) M(c, j) /= p;
    for (Eigen::Index i = 0; i < r; ++i) {
      if (i == c || M(i, c) == 0) continue;
      const mpq_rational f = M(i, c);
      for (Eigen::Index j = 0; j < M.cols(); ++j) M(i, j) -= f * M(c, j);
    }
  }
  const matrix<mpq_rational> z = M.rightCols(1);
  return direction - multiply(transpose(Q), z);
}

mpfi_float mse_quadrature(const mpfi_float& c, int panels, int d) {
  using boost::multiprecision::exp;
  using boost::multiprecision::sqrt;
  if (d < 3 || d % 2 == 0) throw input_error("mse_quadrature: d must be odd and >= 3");
  const int kw = (d - 3) / 2;
  auto f = [](const mpfi_float& s) {  // σ(−s)² = 1/(1 + e^s)²
    const mpfi_float q = mpfi_float(1) / (mpfi_float(1) + exp(s));
    return mpfi_float(q * q);
  };
  const mpfi_float S = sqrt(mpfi_float(2)) * c;
  auto w = [&](const mpfi_float& s) {  // (1 − (s/S)²)^kw
    const mpfi_float t = s / S;
    const mpfi_float b = mpfi_float(1) - t * t;
    mpfi_float r(1);
    for (int k = 0; k < kw; ++k) r *= b;
    return r;
  };
  mpq_rational Z(1);  // ∫₀¹ (1 − t²)^kw dt = Π_{j ≤ kw} 2j/(2j + 1)
  for (int j = 1; j <= kw; ++j) Z *= mpq_rational(2 * j, 2 * j + 1);
  const bool cut = certainly_le(mpfi_float(64), S) == truth::certainly_true;
  const mpfi_float end = cut ? mpfi_float(64) : S;
  const mpfi_float h = end / mpfi_float(panels);
  mpfi_float lo(0), hi(0);
  mpfi_float a(0), fa = f(a), wa = w(a);
  for (int k = 0; k < panels; ++k) {
    const mpfi_float b = h * mpfi_float(k + 1);
    const mpfi_float fb = f(b), wb = w(b);
    const mpfi_float fm = f(mpfi_float(h * (mpfi_float(k) + mpfi_float(0.5))));
    // Convexity on s ≥ 0: h f(mid) ≤ ∫_a^b f ≤ h (f(a) + f(b))/2; w decreasing, ≥ 0 on [0, S].
    lo += wb * (h * fm);
    hi += wa * (h * (fa + fb) / mpfi_float(2));
    fa = fb;
    wa = wb;
  }
  mpfi_float integral = hull_of(mpfi_float(lower_of(lo)), mpfi_float(upper_of(hi)));
  if (cut) {  // tail ∫_{64}^{S} σ(−s)² w ds ∈ [0, ∫_{64}^∞ e^{−2s} ds] = [0, e^{−128}/2]
    const mpfi_float tail = exp(mpfi_float(-128)) / mpfi_float(2);
    integral = hull_of(mpfi_float(lower_of(integral)), mpfi_float(upper_of(mpfi_float(integral + tail))));
  }
  // MSE = (1/Z) ∫₀¹ 2σ(−√2ct)² w(t) dt = (1/Z)(2/(√2c)) ∫₀^{√2c} σ(−s)² w(s/S) ds.
  return mpfi_float(2) / S * integral / from_rational<mpfi_float>(Z);
}

std::pair<double, double> approx_mse_monte_carlo(double c, const double* q, const double* k, int samples,
                                                 std::uint64_t seed, int d) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  double sum = 0, sum2 = 0;
  std::vector<double> y(static_cast<std::size_t>(d));
  for (int s = 0; s < samples; ++s) {
    double ny = 0;
    for (double& v : y) { v = g(gen); ny += v * v; }
    ny = std::sqrt(ny);
    for (double& v : y) v /= ny;
    // Scores of x₁ = e₁ and x₂ = e₂.
    double s1, s2;
    if (q == nullptr) {
      s1 = c * y[0];
      s2 = c * y[1];
    } else {
      double yq = 0;
      for (int i = 0; i < d; ++i) yq += y[static_cast<std::size_t>(i)] * q[i];
      s1 = c * yq * k[0];
      s2 = c * yq * k[1];
    }
    // Target: x₁ if y₁ > y₂.  Error² = ‖out − x*‖² = 2 p_wrong², p_wrong = σ(s_wrong − s_right).
    const double margin = y[0] > y[1] ? s1 - s2 : s2 - s1;
    const double pw = 1.0 / (1.0 + std::exp(margin));
    const double e2 = 2 * pw * pw;
    sum += e2;
    sum2 += e2 * e2;
  }
  const double mean = sum / samples;
  const double var = (sum2 / samples - mean * mean) * samples / (samples - 1.0);
  return {mean, std::sqrt(var > 0 ? var / samples : 0.0)};
}

}  // namespace nn

namespace {

// Σ x² over a rational matrix (exact).
mpq_rational sqnorm(const matrix<mpq_rational>& m) {
  mpq_rational s(0);
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) s += m(i, j) * m(i, j);
  return s;
}

const char* error_model =
    "Approx tier: scores c*<y,x_i> and the gap carry absolute error <= c(2d+4) eps each, so p_wrong (and the "
    "closed form) carry relative error <= (c(4d+8) + 4N + 16) eps; forming out - x* cancels against 1, adding "
    "absolute error <= 2d(N+2) eps.  Claims are asserted in a format only where the resulting relative "
    "tolerance (c(4d+8) + 4N + 16) eps + 2d(N+2) eps / err is <= 1/16 and err >= 2^(emin+4) (decided from the "
    "declared instance before computing); elsewhere the row is SKIPPED and documents the divergence (the "
    "computed value next to the enclosure).  Enclosure tier: MPFI with escalation from --certify-bits to "
    "--certify-max-bits.  Exact tier: rationals.  Monte Carlo: seeded, 5 standard errors, asserted only where "
    ">= 1000 samples are expected in the region where the error is non-negligible.";

const std::vector<std::string> c_grid = {"1", "10", "100", "1000", "10000"};

struct instance {
  std::string name;
  Eigen::Index N, d;
  std::vector<std::string> X, y;  // decimals, row-major
};

const std::vector<instance>& instances() {
  static const std::vector<instance> v = {
      {"two-tokens d=4", 2, 4, {"1", "0", "0", "0", "0", "1", "0", "0"}, {"0.6", "0.8", "0", "0"}},
      {"four-tokens d=3", 4, 3, {"1", "0", "0", "0.6", "0.8", "0", "0", "0.6", "0.8", "0.8", "0", "0.6"}, {"0.8", "0.6", "0"}},
  };
  return v;
}

// Exact facts about an instance: i*, gap δ, unit norms.
struct exact_facts {
  Eigen::Index istar = 0;
  mpq_rational gap;
  bool unit = true;
};

exact_facts facts(const instance& in) {
  const auto X = from_strings<mpq_rational>(in.N, in.d, in.X);
  const auto y = from_strings<mpq_rational>(1, in.d, in.y);
  const matrix<mpq_rational> g = multiply(y, transpose(X));
  exact_facts f;
  for (Eigen::Index i = 1; i < in.N; ++i)
    if (g(0, i) > g(0, f.istar)) f.istar = i;
  bool first = true;
  for (Eigen::Index i = 0; i < in.N; ++i) {
    if (i == f.istar) continue;
    const mpq_rational gi = g(0, f.istar) - g(0, i);
    if (first || gi < f.gap) f.gap = gi;
    first = false;
  }
  for (Eigen::Index i = 0; i < in.N; ++i) f.unit = f.unit && sqnorm(matrix<mpq_rational>(X.row(i))) == 1;
  f.unit = f.unit && sqnorm(y) == 1;
  return f;
}

// log of the true error of the full-rank head (binary64, used only to decide in which
// formats a claim is asserted; exact formula: err = e^{−cδ}‖Σ_{j≠*} w_j(x_j − x*)‖/(1 + e^{−cδ}Σw_j)
// with w_j = e^{−(c(g*−g_j) − cδ)} ≤ 1).
double approx_log_error(const instance& in, Eigen::Index istar, double c) {
  const auto X = from_strings<double>(in.N, in.d, in.X);
  const auto y = from_strings<double>(1, in.d, in.y);
  const matrix<double> g = y * X.transpose();
  double m = INFINITY;
  for (Eigen::Index j = 0; j < in.N; ++j)
    if (j != istar) m = std::min(m, c * (g(0, istar) - g(0, j)));
  Eigen::RowVectorXd v = Eigen::RowVectorXd::Zero(in.d);
  double sw = 0;
  for (Eigen::Index j = 0; j < in.N; ++j) {
    if (j == istar) continue;
    const double w = std::exp(-(c * (g(0, istar) - g(0, j)) - m));
    v += w * (X.row(j) - X.row(istar));
    sw += w;
  }
  return -m + std::log(v.norm()) - std::log1p(std::exp(-m) * sw);
}

// The full-rank head evaluated in T: error ‖head(X, y) − x*‖, gap, closed form (N = 2), bound.
template <class T>
struct head_eval {
  T err, gap, closed, bound;
};

template <class T>
head_eval<T> evaluate_head(const instance& in, const T& c, Eigen::Index istar, double fault) {
  using std::exp;
  using boost::multiprecision::exp;
  const matrix<T> X = from_strings<T>(in.N, in.d, in.X);
  const matrix<T> y = from_strings<T>(1, in.d, in.y);
  const matrix<T> g = multiply(y, transpose(X));
  matrix<T> S = g;
  for (Eigen::Index j = 0; j < in.N; ++j) S(0, j) = c * g(0, j);
  matrix<T> A = masked_softmax(S);
  if (fault != 0)
    for (Eigen::Index j = 0; j < in.N; ++j) A(0, j) = A(0, j) * (T(1) + number_traits<T>::from_double(fault));
  const matrix<T> out = multiply(A, X);
  matrix<T> diff(1, in.d);
  for (Eigen::Index k = 0; k < in.d; ++k) diff(0, k) = out(0, k) - X(istar, k);
  head_eval<T> r;
  r.err = norm2(diff);
  bool first = true;
  for (Eigen::Index j = 0; j < in.N; ++j) {
    if (j == istar) continue;
    r.gap = first ? g(0, j) : max_of(r.gap, g(0, j));
    first = false;
  }
  r.gap = g(0, istar) - r.gap;
  if (in.N == 2) {
    matrix<T> dx(1, in.d);
    for (Eigen::Index k = 0; k < in.d; ++k) dx(0, k) = X(0, k) - X(1, k);
    r.closed = norm2(dx) / (T(1) + exp(T(c * r.gap)));
  }
  r.bound = T(2 * (in.N - 1)) * exp(T(-(c * r.gap)));
  return r;
}

// A naive softmax (no max shift), as a plain implementation would write it: reported only.
template <class T>
std::string naive_error(const instance& in, const T& c, Eigen::Index istar) {
  using std::exp;
  using boost::multiprecision::exp;
  const matrix<T> X = from_strings<T>(in.N, in.d, in.X);
  const matrix<T> y = from_strings<T>(1, in.d, in.y);
  const matrix<T> g = multiply(y, transpose(X));
  T z(0);
  std::vector<T> e;
  for (Eigen::Index j = 0; j < in.N; ++j) {
    e.push_back(exp(T(c * g(0, j))));
    z += e.back();
  }
  matrix<T> diff(1, in.d);
  for (Eigen::Index k = 0; k < in.d; ++k) {
    T o(0);
    for (Eigen::Index j = 0; j < in.N; ++j) o += e[static_cast<std::size_t>(j)] / z * X(j, k);
    diff(0, k) = o - X(istar, k);
  }
  return str(norm2(diff));
}

// ---- (1) full-rank head ------------------------------------------------------------------

struct certified_value {
  std::string err;  // enclosure of the true error
};

void enclosure_full_rank(report::check_report& rep, const instance& in, const exact_facts& fx, const std::string& cs,
                         const run_settings& rs, std::map<std::string, std::string>& truth_out) {
  const std::string inst = in.name + ", c=" + cs;
  auto eval = [&] { return evaluate_head(in, number_traits<mpfi_float>::from_string(cs), fx.istar, rs.fault); };
  const escalation eb = escalate(
      [&] {
        const auto h = eval();
        return std::vector<mpfi_float>{mpfi_float(h.bound - h.err), h.err, h.bound};
      },
      rs.certify_bits, rs.certify_max_bits);
  truth_out[inst] = eb.shown.at(1);
  rep.claims.push_back(claim_escalated("error-bound", "||head(X,y) - x*|| <= 2(N-1) exp(-c delta)", inst, eb,
                                       "err in " + eb.shown.at(1), "<= bound in " + eb.shown.at(2),
                                       "enclosure of bound - err must be > 0"));
  if (in.N == 2) {
    const escalation ef = escalate(
        [&] {
          const auto h = eval();
          const mpfi_float tol = h.closed * mpfi_float(std::ldexp(1.0, -30));
          return std::vector<mpfi_float>{mpfi_float(tol - abs_of(mpfi_float(h.err - h.closed))), h.err, h.closed};
        },
        rs.certify_bits, rs.certify_max_bits);
    rep.claims.push_back(claim_escalated("error-closed-form", "||head(X,y) - x*|| = ||x1 - x2|| / (1 + exp(c delta))",
                                         inst, ef, "err in " + ef.shown.at(1), "closed form in " + ef.shown.at(2),
                                         "|err - closed| <= 2^-30 closed, certainly"));
  }
}

template <class T>
void approx_full_rank(report::check_report& rep, const format_spec& fmt, const instance& in, const exact_facts& fx,
                      const run_settings& rs, const std::map<std::string, std::string>& truths) {
  const double ln2 = std::log(2.0);
  const double log_eps = (1.0 - static_cast<double>(number_traits<T>::bits())) * ln2;
  const double log_min = (static_cast<double>(number_traits<T>::min_normal_exponent()) + 4) * ln2;
  const double N = static_cast<double>(in.N), d = static_cast<double>(in.d);
  for (const auto& cs : c_grid) {
    const std::string inst = in.name + ", c=" + cs;
    const double c = std::stod(cs);
    // Tolerance and assertion domain, from the declared instance only.
    const double log_err = approx_log_error(in, fx.istar, c);
    const double lin = (c * (4 * d + 8) + 4 * N + 16) * std::exp(log_eps);
    const double canc = std::exp(std::log(2 * d * (N + 2)) + log_eps - log_err);
    const double tol_rel = lin + canc;
    const bool asserted = tol_rel <= 1.0 / 16 && log_err >= log_min;
    const T cT = number_traits<T>::from_string(cs);
    const auto h = evaluate_head(in, cT, fx.istar, rs.fault);
    if (!asserted) {
      const std::string why = "not asserted in " + fmt.name + ": true err ~ 10^" +
                              std::to_string(static_cast<long>(std::floor(log_err / std::log(10.0)))) +
                              (log_err < log_min ? " is below the format's normal range" : "") +
                              (tol_rel > 1.0 / 16 ? " and the rounding bound exceeds 1/16 relative" : "") +
                              ". Divergence: " + fmt.name + " computes err = " + str(h.err) + " (naive softmax: " +
                              naive_error(in, cT, fx.istar) + "); the enclosure gives " + truths.at(inst);
      report::claim_row r = claim_skipped("error-bound", "||head(X,y) - x*|| <= 2(N-1) exp(-c delta)", inst, fmt,
                                          tier_of<T>, why);
      r.computed = str(h.err);
      r.expected = truths.at(inst);
      rep.claims.push_back(r);
      if (in.N == 2) {
        report::claim_row r2 = r;
        r2.claim = "error-closed-form";
        r2.statement = "||head(X,y) - x*|| = ||x1 - x2|| / (1 + exp(c delta))";
        rep.claims.push_back(r2);
      }
      continue;
    }
    const T tol = number_traits<T>::from_double(tol_rel);
    const std::string rule = "(c(4d+8) + 4N + 16) eps + 2d(N+2) eps / err = " + std::to_string(tol_rel);
    rep.claims.push_back(claim_le("error-bound", "||head(X,y) - x*|| <= 2(N-1) exp(-c delta)", inst, fmt, h.err, h.bound,
                                  T(tol * h.bound), rule + " times the bound"));
    if (in.N == 2)
      rep.claims.push_back(claim_close("error-closed-form", "||head(X,y) - x*|| = ||x1 - x2|| / (1 + exp(c delta))", inst,
                                       fmt, h.err, h.closed, tol, true, rule));
  }
}

// ---- (2) rank-deficiency obstruction -----------------------------------------------------

struct witness_heads {
  std::string name;
  std::vector<std::vector<std::string>> Q, K;  // each 1×3 (rank-1 query/key maps)
  std::string value_scale;                     // V_h = value_scale · I
};

const std::vector<std::string> wX = {"0", "0.6", "0.8", "0", "0.6", "-0.8"};  // x₁, x₂ (d = 3)

const witness_heads two_heads = {"heads Q1=e1^T, Q2=e2^T", {{"1", "0", "0"}, {"0", "1", "0"}},
                                 {{"0.5", "1", "-0.25"}, {"-1", "0.5", "2"}}, "0.5"};
const witness_heads one_head = {"one rank-1 head Q1=e1^T", {{"1", "0", "0"}}, {{"0.5", "1", "-0.25"}}, "1"};

// Output of the summed heads for query q (d×1), in T: Σ_h softmax((Q_h q)(K_h x_j))_j · V_h x_j.
template <class T>
matrix<T> heads_output(const witness_heads& H, const matrix<T>& X, const matrix<T>& q) {
  matrix<T> out = matrix<T>::Zero(1, X.cols());
  for (std::size_t h = 0; h < H.Q.size(); ++h) {
    const matrix<T> Qh = from_strings<T>(1, 3, H.Q[h]), Kh = from_strings<T>(1, 3, H.K[h]);
    const T qq = multiply(Qh, q)(0, 0);
    matrix<T> S(1, X.rows());
    for (Eigen::Index j = 0; j < X.rows(); ++j) S(0, j) = qq * multiply(Kh, matrix<T>(transpose(matrix<T>(X.row(j)))))(0, 0);
    const T v = number_traits<T>::from_string(H.value_scale);
    matrix<T> A;
    if constexpr (std::is_same_v<T, mpq_rational>) {
      // Exact: every score must be exactly 0 (the witness), and then the softmax is uniform.
      for (Eigen::Index j = 0; j < X.rows(); ++j)
        if (S(0, j) != 0) throw input_error("heads_output<mpq_rational>: nonzero score, softmax not rational");
      A = matrix<T>::Constant(1, X.rows(), T(1) / T(static_cast<int>(X.rows())));
    } else {
      A = masked_softmax(S);
    }
    for (Eigen::Index k = 0; k < X.cols(); ++k) {
      T o(0);
      for (Eigen::Index j = 0; j < X.rows(); ++j) o += A(0, j) * (v * X(j, k));
      out(0, k) += o;
    }
  }
  return out;
}

struct witness_result {
  matrix<mpq_rational> u;
  Eigen::Index iplus = 0, iminus = 0;
};

witness_result exact_obstruction(report::check_report& rep, const witness_heads& H, bool control) {
  using Q = mpq_rational;
  const auto X = from_strings<Q>(2, 3, wX);
  matrix<Q> Qs(static_cast<Eigen::Index>(H.Q.size()), 3);
  for (std::size_t h = 0; h < H.Q.size(); ++h) Qs.row(static_cast<Eigen::Index>(h)) = from_strings<Q>(1, 3, H.Q[h]);
  const std::size_t rq = rank(Qs);
  const std::string inst = H.name + ", x1=(0,0.6,0.8), x2=(0,0.6,-0.8)";
  witness_result w;
  w.u = nn::kernel_witness(Qs, matrix<Q>(transpose(matrix<Q>(X.row(0) - X.row(1)))));
  const matrix<Q> Qu = multiply(Qs, w.u);
  const bool zero = sqnorm(Qu) == 0, nonzero_u = sqnorm(w.u) != 0;
  if (!control)
    rep.claims.push_back(claim_exact("witness-in-kernel", "sum of rank Q_h < d and Q_h u = 0 for every head, u != 0", inst,
                                     "sum rank = " + std::to_string(rq) + ", u = (" + w.u(0, 0).str() + ", " +
                                         w.u(1, 0).str() + ", " + w.u(2, 0).str() + "), Q u " + (zero ? "= 0" : "!= 0"),
                                     "sum rank < 3, Q u = 0, u != 0", rq < 3 && zero && nonzero_u,
                                     "rank over Q by elimination; u = projection of x1 - x2 onto ker Q"));
  // Targets for ±u and the heads' outputs there (scores exactly 0 ⇒ uniform weights).
  const matrix<Q> s = multiply(X, w.u);  // ⟨x_i, u⟩
  w.iplus = s(0, 0) >= s(1, 0) ? 0 : 1;
  w.iminus = 1 - w.iplus;
  const matrix<Q> op = heads_output(H, X, w.u), om = heads_output(H, X, matrix<Q>(-w.u));
  const Q ep = sqnorm(matrix<Q>(op - X.row(w.iplus))), em = sqnorm(matrix<Q>(om - X.row(w.iminus)));
  const Q worst = ep > em ? ep : em;
  const Q lb = sqnorm(matrix<Q>(X.row(w.iplus) - X.row(w.iminus))) / 4;
  const bool same = sqnorm(matrix<Q>(op - om)) == 0;
  if (!control) {
    rep.claims.push_back(claim_exact("heads-agree-at-plus-minus-u", "every head gives the same output for u and -u", inst,
                                     same ? "equal" : "differ", "equal", same && s(0, 0) != s(1, 0),
                                     "rational outputs (scores exactly 0: uniform softmax)"));
    rep.claims.push_back(claim_exact("worst-case-error-lower-bound",
                                     "max(err(u), err(-u))^2 >= ||x_{i+} - x_{i-}||^2 / 4", inst,
                                     "max err^2 = " + worst.str(), ">= " + lb.str(), worst >= lb, "squares over Q"));
    rep.claims.push_back(claim_exact("bound-value", "the obstruction's bound ||x_{i+} - x_{i-}||/2 is 0.8 on this instance",
                                     inst, "bound^2 = " + lb.str(), "0.64 = 16/25", lb == Q(16, 25), "squares over Q"));
  } else {
    // The statement "this head approximates the target within 0.1 on the witness
    // instance" means max(err(u), err(−u)) <= 0.1: exactly false here.
    report::claim_row r = claim_exact("rank1-within-0.1", "a rank-1 head approximates the target within 0.1 on the witness instance",
                                      inst, "max err^2 = " + worst.str(), "<= 0.01", worst <= Q(1, 100),
                                      "squares over Q at the witness queries u, -u");
    rep.claims.push_back(negative_control(r));
  }
  return w;
}

template <class T>
void approx_obstruction(report::check_report& rep, const format_spec& fmt, const witness_result& w) {
  const T e = eps<T>();
  const matrix<T> X = from_strings<T>(2, 3, wX);
  const matrix<T> u = from_rational_matrix<T>(w.u);
  const matrix<T> op = heads_output(two_heads, X, u), om = heads_output(two_heads, X, matrix<T>(-u));
  const std::string inst = two_heads.name;
  {
    const bool same = identical_entries(op, om);
    report::claim_row r = make_row("heads-agree-at-plus-minus-u", "every head gives the same output for u and -u", inst,
                                   fmt.name, tier_of<T>);
    r.computed = same ? "identical" : "differ (max |diff| = " + str(max_abs_diff(op, om)) + ")";
    r.expected = "identical";
    r.tolerance = "0";
    r.tolerance_rule = "scores Q_h u are exact zeros in every format: identical code path";
    r.result = same ? verdict::pass : verdict::fail;
    rep.claims.push_back(r);
  }
  matrix<T> dp(1, 3), dm(1, 3), dx(1, 3);
  for (int k = 0; k < 3; ++k) {
    dp(0, k) = op(0, k) - X(w.iplus, k);
    dm(0, k) = om(0, k) - X(w.iminus, k);
    dx(0, k) = X(w.iplus, k) - X(w.iminus, k);
  }
  const T worst = max_of(norm2(dp), norm2(dm));
  const T lb = norm2(dx) / T(2);
  rep.claims.push_back(claim_le("worst-case-error-lower-bound", "||x_{i+} - x_{i-}||/2 <= max(err(u), err(-u))", inst,
                                fmt, lb, worst, T(T(32) * e * lb), "32 eps * bound (norms of 3-vectors, sums of 2 heads)"));
}

// Full-rank contrast: W = cI, c = 10, on the witness queries ±u/‖u‖ — certainly within 0.1.
void enclosure_full_rank_contrast(report::check_report& rep, const witness_result& w, const run_settings& rs) {
  const escalation e = escalate(
      [&] {
        using boost::multiprecision::sqrt;
        const matrix<mpfi_float> X = from_strings<mpfi_float>(2, 3, wX);
        matrix<mpfi_float> u = from_rational_matrix<mpfi_float>(w.u);
        const mpfi_float nu = norm2(u);
        for (int k = 0; k < 3; ++k) u(k, 0) = u(k, 0) / nu;
        mpfi_float worst(0);
        for (int sgn : {1, -1}) {
          matrix<mpfi_float> S(1, 2);
          for (int j = 0; j < 2; ++j) S(0, j) = mpfi_float(10) * mpfi_float(sgn) * multiply(matrix<mpfi_float>(X.row(j)), u)(0, 0);
          matrix<mpfi_float> A = masked_softmax(S);
          if (rs.fault != 0)
            for (int j = 0; j < 2; ++j) A(0, j) = A(0, j) * (mpfi_float(1) + mpfi_float(rs.fault));
          const matrix<mpfi_float> out = multiply(A, X);
          const Eigen::Index tgt = sgn > 0 ? w.iplus : w.iminus;
          matrix<mpfi_float> d(1, 3);
          for (int k = 0; k < 3; ++k) d(0, k) = out(0, k) - X(tgt, k);
          worst = max_of(worst, norm2(d));
        }
        return std::vector<mpfi_float>{mpfi_float(mpfi_float(1) / mpfi_float(10) - worst), worst};
      },
      rs.certify_bits, rs.certify_max_bits);
  rep.claims.push_back(claim_escalated("full-rank-head-within-0.1",
                                       "the full-rank head W = 10 I is within 0.1 at the witness queries u, -u",
                                       "x1=(0,0.6,0.8), x2=(0,0.6,-0.8)", e, "max err in " + e.shown.at(1), "<= 0.1",
                                       "enclosure of 0.1 - max err must be > 0"));
}

// ---- (3) mean squared error over the two-point distribution ------------------------------

constexpr int mse_panels = 2048;
constexpr int mc_samples = 20000;

void mse_part(report::check_report& rep, const run_settings& rs) {
  std::vector<mpfi_float> quads;
  precision_guard g(rs.certify_bits);
  const std::string bits = std::to_string(g.bits());
  for (const auto& cs : c_grid) {
    const mpfi_float c = number_traits<mpfi_float>::from_string(cs);
    const mpfi_float q = nn::mse_quadrature(c, mse_panels);
    const mpfi_float cf = nn::mse_closed_form(c);
    quads.push_back(q);
    report::claim_row r = make_row("mse-closed-form", "MSE(c) = (sqrt2/c)(ln2 - 1/2 - ln(1+e^{-sqrt2 c}) + 1/(1+e^{sqrt2 c}))",
                                   "d=3, c=" + cs, "mpfi" + bits, tier::enclosure);
    r.computed = "quadrature " + number_traits<mpfi_float>::to_string(q, 12);
    r.expected = "closed form " + number_traits<mpfi_float>::to_string(cf, 12);
    r.tolerance = "0";
    r.tolerance_rule = "certified quadrature (" + std::to_string(mse_panels) +
                       " panels, midpoint <= integral <= trapezoid by convexity) must contain the closed-form enclosure";
    const bool inside = lower_of(q) <= lower_of(cf) && upper_of(cf) <= upper_of(q);
    const bool disjoint = upper_of(cf) < lower_of(q) || upper_of(q) < lower_of(cf);
    r.result = inside ? verdict::pass : disjoint ? verdict::fail : verdict::undecided;
    r.note = "relative width of the quadrature enclosure " +
             number_traits<mpfr_float>::to_string(mpfr_float((upper_of(q) - lower_of(q)) / upper_of(q)), 3);
    rep.claims.push_back(r);
  }
  for (std::size_t i = 0; i + 1 < quads.size(); ++i) {
    report::claim_row r = make_row("mse-decreasing", "MSE(c) decreases in c", "d=3, c=" + c_grid[i] + " -> " + c_grid[i + 1],
                                   "mpfi" + bits, tier::enclosure);
    r.computed = number_traits<mpfi_float>::to_string(quads[i + 1], 12);
    r.expected = "< " + number_traits<mpfi_float>::to_string(quads[i], 12);
    r.tolerance = "0";
    r.tolerance_rule = "certified: upper end of MSE(c') below lower end of MSE(c)";
    r.result = upper_of(quads[i + 1]) < lower_of(quads[i]) ? verdict::pass
               : lower_of(quads[i + 1]) >= upper_of(quads[i]) ? verdict::fail
                                                              : verdict::undecided;
    rep.claims.push_back(r);
  }
  // Monte Carlo (approx tier, binary64, seeded): the full-rank head and three random rank-1
  // heads W = c q kᵀ (q, k uniform unit vectors).
  const std::string b64 = "binary64";
  std::mt19937_64 gen(rs.seed ^ 0x4E4Eu);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<std::array<double, 6>> heads;
  for (int h = 0; h < 3; ++h) {
    std::array<double, 6> a{};
    for (double& v : a) v = nd(gen);
    for (int o : {0, 3}) {
      const double n = std::sqrt(a[o] * a[o] + a[o + 1] * a[o + 1] + a[o + 2] * a[o + 2]);
      for (int k = 0; k < 3; ++k) a[o + k] /= n;
    }
    heads.push_back(a);
  }
  for (std::size_t ci = 0; ci < c_grid.size(); ++ci) {
    const double c = std::stod(c_grid[ci]);
    const mpfi_float& q = quads[ci];
    // The certified MSE as binary64 ends rounded outward: L <= MSE <= U.
    const double L = double_down(lower_of(q)), U = double_up(upper_of(q));
    const std::uint64_t s0 = rs.seed ^ (0xC0FFEEu + ci);
    const auto [m, se] = nn::approx_mse_monte_carlo(c, nullptr, nullptr, mc_samples, s0);
    // The squared error of W = cI is non-negligible only for |t| < 4/(sqrt2 c), a region of
    // probability min(1, 4/(sqrt2 c)); with fewer than 1000 expected samples there the mean is
    // dominated by a few rare events and 5 standard errors mean nothing.  Decided from c and
    // the sample count, before sampling.
    const double expected_hits = mc_samples * std::min(1.0, 4 / (std::sqrt(2.0) * c));
    if (expected_hits < 1000) {
      report::claim_row r = claim_skipped("mse-monte-carlo-full-rank",
                                          "seeded Monte-Carlo MSE of W = cI agrees with the certified MSE",
                                          "d=3, c=" + c_grid[ci] + ", seed " + std::to_string(s0), parse_format(b64), tier::approx,
                                          "not asserted: " + std::to_string(static_cast<long>(expected_hits)) +
                                              " expected samples (< 1000) where the error is non-negligible (rare-event "
                                              "regime, normal approximation invalid); estimate " + str(m) + " +- " + str(se));
      r.computed = str(m) + " +- " + str(se);
      r.expected = "in [" + decimal_down(L, digits_for<double>()) + ", " + decimal_up(U, digits_for<double>()) + "]";
      rep.claims.push_back(r);
    } else {
      report::claim_row r = make_row("mse-monte-carlo-full-rank", "seeded Monte-Carlo MSE of W = cI agrees with the certified MSE",
                                     "d=3, c=" + c_grid[ci] + ", seed " + std::to_string(s0), b64, tier::approx);
      const double dist = m < L ? L - m : m > U ? m - U : 0.0;
      r.computed = str(m) + " +- " + str(se) + " (" + std::to_string(mc_samples) + " samples)";
      r.expected = "in [" + decimal_down(L, digits_for<double>()) + ", " + decimal_up(U, digits_for<double>()) + "]";
      r.abs_error = str(dist);
      r.tolerance = str(5 * se);
      r.tolerance_rule = "statistical: distance to the enclosure <= 5 standard errors";
      r.result = dist <= 5 * se ? verdict::pass : verdict::fail;
      rep.claims.push_back(r);
    }
    for (std::size_t h = 0; h < heads.size(); ++h) {
      const auto [mh, seh] = nn::approx_mse_monte_carlo(c, heads[h].data(), heads[h].data() + 3, mc_samples, s0 + 7 * (h + 1));
      report::claim_row rr = make_row("mse-rank-one-not-better",
                                      "a rank-1 head W = c q k^T (unit q, k) has MSE >= the full-rank head's",
                                      "d=3, c=" + c_grid[ci] + ", random head " + std::to_string(h), b64, tier::approx);
      rr.computed = str(mh) + " +- " + str(seh);
      rr.expected = ">= " + decimal_down(L, digits_for<double>());
      rr.abs_error = str(L - mh);
      rr.tolerance = str(5 * seh);
      rr.tolerance_rule = "statistical: L - MC mean <= 5 standard errors";
      rr.result = L - mh <= 5 * seh ? verdict::pass : verdict::fail;
      rep.claims.push_back(rr);
    }
  }

  // d = 5 (t has density ∝ 1 − t²): no closed form used; first-order enclosure (w varies per
  // panel), its Monte-Carlo estimate next to it under the same assertion rule.
  std::vector<mpfi_float> q5;
  for (std::size_t ci = 0; ci < c_grid.size(); ++ci) {
    q5.push_back(nn::mse_quadrature(number_traits<mpfi_float>::from_string(c_grid[ci]), mse_panels, 5));
    const double c = std::stod(c_grid[ci]);
    const double L = double_down(lower_of(q5.back())), U = double_up(upper_of(q5.back()));  // L <= MSE <= U
    const std::uint64_t s0 = rs.seed ^ (0xD5D5u + ci);
    const auto [m, se] = nn::approx_mse_monte_carlo(c, nullptr, nullptr, mc_samples, s0, 5);
    const std::string inst = "d=5, c=" + c_grid[ci] + ", seed " + std::to_string(s0);
    const std::string statement = "seeded Monte-Carlo MSE of W = cI agrees with the certified MSE";
    // The density of t at 0 is 1/Z = 3/2 for d = 5: expected samples in |t| < 4/(sqrt2 c).
    const double expected_hits = mc_samples * std::min(1.0, 1.5 * 4 / (std::sqrt(2.0) * c));
    report::claim_row r = expected_hits < 1000
                              ? claim_skipped("mse-monte-carlo-full-rank", statement, inst, parse_format(b64), tier::approx,
                                              "not asserted: " + std::to_string(static_cast<long>(expected_hits)) +
                                                  " expected samples (< 1000) where the error is non-negligible")
                              : make_row("mse-monte-carlo-full-rank", statement, inst, b64, tier::approx);
    const double dist = m < L ? L - m : m > U ? m - U : 0.0;
    r.computed = str(m) + " +- " + str(se) + " (" + std::to_string(mc_samples) + " samples)";
    r.expected = "in [" + decimal_down(L, digits_for<double>()) + ", " + decimal_up(U, digits_for<double>()) + "] (certified quadrature, " + std::to_string(mse_panels) + " panels)";
    if (r.result != verdict::skipped) {
      r.abs_error = str(dist);
      r.tolerance = str(5 * se);
      r.tolerance_rule = "statistical: distance to the enclosure <= 5 standard errors";
      r.result = dist <= 5 * se ? verdict::pass : verdict::fail;
    }
    rep.claims.push_back(r);
  }
  for (std::size_t i = 0; i + 1 < q5.size(); ++i) {
    report::claim_row r = make_row("mse-decreasing", "MSE(c) decreases in c", "d=5, c=" + c_grid[i] + " -> " + c_grid[i + 1],
                                   "mpfi" + bits, tier::enclosure);
    r.computed = number_traits<mpfi_float>::to_string(q5[i + 1], 12);
    r.expected = "< " + number_traits<mpfi_float>::to_string(q5[i], 12);
    r.tolerance = "0";
    r.tolerance_rule = "certified: upper end of MSE(c') below lower end of MSE(c)";
    r.result = upper_of(q5[i + 1]) < lower_of(q5[i]) ? verdict::pass
               : lower_of(q5[i + 1]) >= upper_of(q5[i]) ? verdict::fail
                                                        : verdict::undecided;
    rep.claims.push_back(r);
  }
}

report::check_report run(const run_settings& rs) {
  report::check_report rep;
  std::map<std::string, std::string> truths;
  std::vector<exact_facts> fx;
  for (const auto& in : instances()) {
    fx.push_back(facts(in));
    rep.claims.push_back(claim_exact("instance-on-unit-sphere", "tokens and query have norm 1; gap delta > 0", in.name,
                                     "delta = " + fx.back().gap.str() + ", i* = " + std::to_string(fx.back().istar + 1),
                                     "unit norms, delta > 0", fx.back().unit && fx.back().gap > 0, "rationals"));
    for (const auto& cs : c_grid) enclosure_full_rank(rep, in, fx.back(), cs, rs, truths);
  }
  const witness_result w = exact_obstruction(rep, two_heads, false);
  exact_obstruction(rep, one_head, true);
  enclosure_full_rank_contrast(rep, w, rs);
  mse_part(rep, rs);
  for_each_format(rs, [&]<class T>(const format_spec& f) {
    for (std::size_t i = 0; i < instances().size(); ++i) approx_full_rank<T>(rep, f, instances()[i], fx[i], rs, truths);
    approx_obstruction<T>(rep, f, w);
  });
  return rep;
}

}  // namespace

check_entry make_nearest_neighbour() {
  return {"nearest-neighbour", "Rank versus heads on the nearest-neighbour target (Amsel, Yehudai, Bruna 2024)", "§9",
          "proofs/L1-nearest-neighbour.md", error_model, run};
}

}  // namespace attncert::checks
