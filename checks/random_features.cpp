// checks/random_features.cpp — random-feature attention (Choromanski et al., "Rethinking
// Attention with Performers", 2020): exp(xᵀy) = E_ω[exp(ωᵀx − ‖x‖²/2) exp(ωᵀy − ‖y‖²/2)],
// ω ~ N(0, I); the mean squared errors of the positive and trigonometric estimators with m
// features; and the article's output bound (§11) on the resulting approximate attention,
// certified by the oracle.  Proof: proofs/P13-random-features.md.
#include <array>
#include <random>

#include "attncert/grading/grading.hpp"
#include "attncert/number/traits.hpp"
#include "checks/common.hpp"

namespace attncert::checks {
namespace {

constexpr int d = 4, m = 16, reps = 6000;
constexpr double z_crit = 5.0;  // Monte Carlo acceptance: |estimate - closed form| <= 5 standard errors

const char* error_model =
    "Monte Carlo (approx tier, binary64): R = 6000 independent m = 16-feature estimators, seeded; a closed form "
    "is accepted when it lies within 5 standard errors of the sample mean (false rejection probability "
    "< 6e-7 under a normal approximation). Closed forms: evaluated in each format with about 12 operations "
    "and two exponentials, relative error <= 32 eps, against a 640-bit MPFI enclosure. Inequality between "
    "the two estimators' MSEs: MPFI enclosure with escalation. Output bound on Performer attention: the "
    "oracle's rigorous row check (certified, undecided or refuted per row).";

struct pair_instance {
  std::string name;
  std::array<double, d> x, y;
};

// Declared instances (dyadic): kernel value near 1, larger (x.y > 0) and smaller (x.y < 0).
std::vector<pair_instance> instances() {
  return {{"x.y=0", {0.5, -0.25, 0.25, 0}, {0.25, 0.5, 0, -0.25}},
          {"x.y>0", {0.5, 0.25, -0.25, 0.25}, {0.5, 0.5, -0.25, 0}},
          {"x.y<0", {0.5, 0.25, -0.25, 0.25}, {-0.5, -0.25, 0.25, 0.125}}};
}

template <class T>
struct closed_forms {
  T sm, mse_pos, mse_trig;
};

// The closed forms in T (x, y exact dyadics).
template <class T>
closed_forms<T> closed(const pair_instance& p) {
  using std::exp;
  T xy(0), s2(0), d2(0);
  for (int a = 0; a < d; ++a) {
    xy += T(p.x[a]) * T(p.y[a]);
    s2 += (T(p.x[a]) + T(p.y[a])) * (T(p.x[a]) + T(p.y[a]));
    d2 += (T(p.x[a]) - T(p.y[a])) * (T(p.x[a]) - T(p.y[a]));
  }
  closed_forms<T> c;
  c.sm = exp(xy);
  c.mse_pos = exp(s2) * c.sm * c.sm * (T(1) - exp(T(-s2))) / T(m);
  const T t = T(1) - exp(T(-d2));
  c.mse_trig = exp(s2) / (c.sm * c.sm) * t * t / T(2 * m);
  return c;
}

struct mc_result {
  double mean_est, se_est, mse, se_mse;
};

// R estimators with m features each; positive or trigonometric.
mc_result monte_carlo(const pair_instance& p, bool positive, std::mt19937_64& g, double sm) {
  std::normal_distribution<double> N(0, 1);
  double nx = 0, ny = 0;
  for (int a = 0; a < d; ++a) {
    nx += p.x[a] * p.x[a];
    ny += p.y[a] * p.y[a];
  }
  double s1 = 0, s2 = 0, q1 = 0, q2 = 0;
  for (int r = 0; r < reps; ++r) {
    double est = 0;
    for (int f = 0; f < m; ++f) {
      double wx = 0, wy = 0;
      for (int a = 0; a < d; ++a) {
        const double w = N(g);
        wx += w * p.x[a];
        wy += w * p.y[a];
      }
      est += positive ? std::exp(wx - nx / 2) * std::exp(wy - ny / 2) : std::exp((nx + ny) / 2) * std::cos(wx - wy);
    }
    est /= m;
    const double e2 = (est - sm) * (est - sm);
    s1 += est;
    s2 += est * est;
    q1 += e2;
    q2 += e2 * e2;
  }
  const double R = reps;
  mc_result out;
  out.mean_est = s1 / R;
  out.se_est = std::sqrt(std::max(0.0, s2 / R - out.mean_est * out.mean_est) / (R - 1));
  out.mse = q1 / R;
  out.se_mse = std::sqrt(std::max(0.0, q2 / R - out.mse * out.mse) / (R - 1));
  return out;
}

report::claim_row mc_claim(const std::string& claim, const std::string& statement, const std::string& inst, double estimate,
                           double se, double closed_value, bool expect_inside, double fault) {
  report::claim_row r = make_row(claim, statement, inst, "binary64", tier::approx);
  const double target = closed_value * (1 + fault);
  const double dev = std::fabs(estimate - target);
  r.computed = str(estimate);
  r.expected = (expect_inside ? "" : "outside ") + str(target) + " +- " + str(z_crit * se);
  r.abs_error = str(dev);
  r.tolerance = str(z_crit * se);
  r.tolerance_rule = "statistical: 5 standard errors of the Monte Carlo mean (R = 6000, m = 16)";
  const bool inside = dev <= z_crit * se;
  r.result = inside == expect_inside ? verdict::pass : verdict::fail;
  r.note = "deviation " + str(dev / se) + " standard errors";
  return r;
}

void performer_output_bound(report::check_report& rep, const run_settings& rs) {
  // Q, K, V dyadic (n = 6, d = 4, dv = 3); exact attention softmax(Q K^T) (scale 1); Performer's
  // positive random features with 64 features approximate it; the oracle checks §11's bound.
  constexpr int n = 6, dv = 3, feats = 64;
  dyadic_source src(rs.seed ^ 0x9EFu);
  oracle::oracle_request req;
  req.Q.n = req.K.n = req.V.n = n;
  req.Q.d = req.K.d = d;
  req.V.d = dv;
  for (int i = 0; i < n * d; ++i) req.Q.values.push_back(src.next(-2, 2));
  for (int i = 0; i < n * d; ++i) req.K.values.push_back(src.next(-2, 2));
  for (int i = 0; i < n * dv; ++i) req.V.values.push_back(src.next(-8, 8));
  req.scale.inv_sqrt_d = false;
  req.scale.rational = attncert::number_traits<attncert::mpq_rational>::from_string("1");
  req.threads = 1;
  std::normal_distribution<double> N(0, 1);
  std::vector<double> W(feats * d);
  for (auto& w : W) w = N(src.engine());
  auto features = [&](const double* x) {
    double nx = 0;
    for (int a = 0; a < d; ++a) nx += x[a] * x[a];
    std::vector<double> f(feats);
    for (int r = 0; r < feats; ++r) {
      double wx = 0;
      for (int a = 0; a < d; ++a) wx += W[r * d + a] * x[a];
      f[r] = std::exp(wx - nx / 2) / std::sqrt(double(feats));
    }
    return f;
  };
  std::vector<double> Ahat(n * n);
  for (int i = 0; i < n; ++i) {
    const auto fq = features(req.Q.values.data() + i * d);
    double den = 0;
    for (int j = 0; j < n; ++j) {
      const auto fk = features(req.K.values.data() + j * d);
      double s = 0;
      for (int r = 0; r < feats; ++r) s += fq[r] * fk[r];
      Ahat[i * n + j] = s;
      den += s;
    }
    for (int j = 0; j < n; ++j) Ahat[i * n + j] /= den;
  }
  const grading::attention_grade g = grading::grade_attention(req, Ahat);
  report::claim_row r = make_row("performer-output-bound",
                                 "||((Ahat-A)V)_i|| <= ||Ahat_i - A_i||_1 max_j ||v_j|| for Performer attention (every row)",
                                 "n=6, d=4, 64 positive features", "oracle (rigorous)", tier::enclosure);
  r.computed = std::to_string(g.bound_certified) + "/" + std::to_string(g.rows) + " rows certified";
  r.expected = std::to_string(g.rows) + "/" + std::to_string(g.rows);
  r.tolerance = "0";
  r.tolerance_rule = "rigorous upper bound of the left side <= rigorous lower bound of the right side";
  r.result = g.bound_refuted > 0 ? verdict::fail : (g.bound_certified == g.rows ? verdict::pass : verdict::undecided);
  r.note = "max row-L1 attention error of the Performer approximation <= " + decimal_up(g.max_row_l1, digits_for<double>());
  rep.claims.push_back(r);
}

report::check_report run(const run_settings& rs) {
  report::check_report rep;
  std::mt19937_64 g(rs.seed ^ 0x9E1u);
  for (const auto& p : instances()) {
    closed_forms<mpfi_float> enc;
    {
      precision_guard pg(640);  // reference for every format up to mpfr512
      enc = closed<mpfi_float>(p);
    }
    const double sm = number_traits<mpfi_float>::to_double(enc.sm);
    const double mse_pos = number_traits<mpfi_float>::to_double(enc.mse_pos);
    const double mse_trig = number_traits<mpfi_float>::to_double(enc.mse_trig);
    const mc_result pos = monte_carlo(p, true, g, sm), trig = monte_carlo(p, false, g, sm);
    rep.claims.push_back(mc_claim("positive-unbiased", "E[positive estimator] = exp(x.y)", p.name, pos.mean_est, pos.se_est,
                                  sm, true, rs.fault));
    rep.claims.push_back(mc_claim("positive-mse", "MSE(positive, m) = e^{|x+y|^2} SM^2 (1 - e^{-|x+y|^2}) / m", p.name,
                                  pos.mse, pos.se_mse, mse_pos, true, rs.fault));
    rep.claims.push_back(mc_claim("trig-unbiased", "E[trigonometric estimator] = exp(x.y)", p.name, trig.mean_est,
                                  trig.se_est, sm, true, rs.fault));
    rep.claims.push_back(mc_claim("trig-mse", "MSE(trig, m) = e^{|x+y|^2} SM^-2 (1 - e^{-|x-y|^2})^2 / (2m)", p.name,
                                  trig.mse, trig.se_mse, mse_trig, true, rs.fault));
    if (p.name == "x.y>0") {
      // Negative control: the positive MSE with |x - y| in place of |x + y| is rejected.
      double d2 = 0;
      for (int a = 0; a < d; ++a) d2 += (p.x[a] - p.y[a]) * (p.x[a] - p.y[a]);
      const double swapped = std::exp(d2) * sm * sm * (1 - std::exp(-d2)) / m;
      rep.claims.push_back(mc_claim("control-swapped-norm-rejected",
                                    "negative control: the MSE formula with |x-y| for |x+y| is refuted by Monte Carlo",
                                    p.name, pos.mse, pos.se_mse, swapped, false, 0.0));
    }
    if (p.name == "x.y<0") {
      // Inequality with enclosures: for a small kernel value the trigonometric estimator is worse.
      const certified_sign s = certify_sign(
          [&]() {
            const auto c = closed<mpfi_float>(p);
            return mpfi_float(c.mse_trig - c.mse_pos);
          },
          rs.certify_bits, rs.certify_max_bits, true);
      rep.claims.push_back(claim_from_sign("positive-beats-trig", "MSE(trig) > MSE(positive) when x.y < 0", p.name, s,
                                           "> 0", "certified: the enclosure of MSE(trig) - MSE(pos) is positive"));
    }
    // The closed forms in each format against the 640-bit enclosure.
    for_each_format(rs, [&]<class T>(const format_spec& fmt) {
      if constexpr (std::is_same_v<T, mpfi_float>) {
        rep.claims.push_back(claim_skipped("closed-form-mse", "closed-form MSE in this format", p.name, fmt, tier::enclosure,
                                           "the 640-bit enclosure is the reference"));
      } else {
        const closed_forms<T> c = closed<T>(p);
        T ref;
        if constexpr (std::is_same_v<T, mpfr_float>) ref = approx_mid(enc.mse_pos);
        else ref = T(mse_pos);
        T got = c.mse_pos;
        if (rs.fault != 0) got = got * (T(1) + number_traits<T>::from_double(rs.fault));
        rep.claims.push_back(claim_close<T>("closed-form-mse", "closed-form positive-feature MSE", p.name, fmt, got, ref,
                                            T(32) * eps<T>(), true, "32 eps relative (about 12 roundings, 2 exp)"));
      }
    });
  }
  performer_output_bound(rep, rs);
  return rep;
}

}  // namespace

check_entry make_random_features() {
  return {"random-features", "Random-feature attention: unbiased estimators, their MSE, and the output bound",
          "literature: Choromanski et al. 2020", "proofs/P13-random-features.md", error_model, run};
}

}  // namespace attncert::checks
