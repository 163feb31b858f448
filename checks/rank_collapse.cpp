// checks/rank_collapse.cpp — pure attention loses rank doubly exponentially with depth
// (Y. Dong, J.-B. Cordonnier, A. Loukas, "Attention is not all you need: pure attention loses
// rank doubly exponentially with depth", 2021).
//
// Declared stacks on n = 4 tokens in d = 3: pure attention X_{l+1} = softmax(X_l W X_lᵀ) X_l V
// (no residual, no MLP) and the same layers with a residual path X_{l+1} = X_l + softmax(..) X_l V.
// Per layer the check measures r_l = ‖res(X_l)‖_F / ‖X_l‖_F, res(X) = X − 1x̄ᵀ (x̄ the column
// mean: the minimiser of ‖X − 1xᵀ‖_F), in every requested format, certifies the true values with
// MPFI enclosures (filter, then escalate), and shows the depth at which a format's measurement
// departs from the truth.  Everything is certified at the declared depths l = 0..7 only: the
// residual stack's ratio stays >= 1/10 there and keeps falling beyond (no depth-independent
// statement is made).  Proof: proofs/L3-rank-collapse.md.
#include <cmath>

#include "checks/literature.hpp"

namespace attncert::checks {
namespace {

constexpr int n = 4, d = 3, depth = 7;

const char* error_model =
    "Approx tier (first-order model): each layer adds absolute error <= 4(n+d+4) eps * ||X_l|| to X_{l+1} and "
    "the layer maps do not amplify the residual's error by more than a factor 2 (the certified ratios "
    "decrease), so the computed ratio r_l carries absolute error <= 8(l+1)(n+d+4) eps.  A layer's ratio is "
    "asserted (relative tolerance = that bound / r_l) only where this is <= 1/16, decided from the certified "
    "ratio before the format computes; deeper layers are SKIPPED rows that document the departure.  "
    "Enclosure tier: the whole stack in MPFI, escalating from --certify-bits to --certify-max-bits until "
    "every ratio has relative width <= 2^-20.";

struct stack {
  std::string name;
  bool residual;
};
const std::vector<stack> stacks = {{"pure attention", false}, {"with residual", true}};

// Declared dyadic weights and input.
const std::vector<std::string> X0 = {"1", "0.5", "-1", "-0.5", "1.25", "0.75", "0.25", "-1", "0.5", "1.5", "0.25", "-0.25"};
const std::vector<std::string> Wqk = {"0.5", "0.25", "0", "-0.25", "0.75", "0.25", "0", "0.5", "-0.5"};
const std::vector<std::string> Wv = {"1", "0.5", "0", "0", "1", "0.25", "0.25", "0", "1"};
const std::vector<std::string> Wv_res = {"0.25", "0.125", "0", "0", "0.25", "0", "0.125", "0", "0.25"};

// r = ‖X − 1x̄ᵀ‖_F / ‖X‖_F in T.
template <class T>
T ratio(const matrix<T>& X) {
  using std::sqrt;
  using boost::multiprecision::sqrt;
  T num(0), den(0);
  for (Eigen::Index k = 0; k < X.cols(); ++k) {
    T mean(0);
    for (Eigen::Index i = 0; i < X.rows(); ++i) mean += X(i, k);
    mean = mean / T(static_cast<int>(X.rows()));
    for (Eigen::Index i = 0; i < X.rows(); ++i) {
      const T r = X(i, k) - mean;
      num += r * r;
      den += X(i, k) * X(i, k);
    }
  }
  return sqrt(T(num / den));
}

// X_0 .. X_depth of one stack, in T.
template <class T>
std::vector<matrix<T>> run_stack(const stack& s, const run_settings& rs) {
  const matrix<T> W = from_strings<T>(d, d, Wqk), V = from_strings<T>(d, d, s.residual ? Wv_res : Wv);
  std::vector<matrix<T>> out = {from_strings<T>(n, d, X0)};
  for (int l = 0; l < depth; ++l) {
    const matrix<T>& X = out.back();
    const matrix<T> S = multiply(multiply(X, W), transpose(X));
    matrix<T> A = masked_softmax(S);
    // Testing hook (run_settings::fault), format-level only: a uniform factor would leave the
    // scale-invariant ratio unchanged, so the fault multiplies row 0 of every attention matrix.
    if (rs.fault != 0 && tier_of<T> != tier::enclosure)
      for (Eigen::Index j = 0; j < A.cols(); ++j) A(0, j) = A(0, j) * (T(1) + number_traits<T>::from_double(rs.fault));
    matrix<T> Y = multiply(multiply(A, X), V);
    if (s.residual) Y = residual(X, Y);
    out.push_back(Y);
  }
  return out;
}

struct certified_layer {
  bool decided = false;
  unsigned bits = 0;
  std::string enclosure;
  double approx = 0;       // midpoint, binary64 (for tolerances and notes)
  std::string mid;         // midpoint with the deciding precision's digits (what a format is compared with)
  int mid_digits = 0;      // its significant digits: rounding it costs <= 10^(1 − mid_digits) relative
  std::string rel_width;   // (hi − lo)/lo of the deciding enclosure, rounded up
  double log2_value = 0;   // log2 of the midpoint (the value may be below binary64's range)
  std::size_t rank_lo = 0; // certified rank lower bound of X_l
  unsigned rank_bits = 0;
  std::string rank_witness;
};

// log2 of a positive mpfr value (safe far outside binary64's range).
double log2_of(const mpfr_float& x) {
  long e = 0;
  const double m = mpfr_get_d_2exp(&e, x.backend().data(), MPFR_RNDN);
  return std::log2(std::abs(m)) + static_cast<double>(e);
}

std::vector<certified_layer> certify_stack(const stack& s, const run_settings& rs) {
  std::vector<certified_layer> out(depth + 1);
  const precision_schedule schedule{rs.certify_bits, rs.certify_max_bits};
  ziv_escalate(schedule, [&](unsigned bits) {
    precision_guard g(bits);
    const auto Xs = run_stack<mpfi_float>(s, rs);
    bool all = true;
    for (int l = 0; l <= depth; ++l) {
      certified_layer& c = out[static_cast<std::size_t>(l)];
      if (c.decided) continue;
      const mpfi_float r = ratio(Xs[static_cast<std::size_t>(l)]);
      const bool ok = lower_of(r) > 0 && (upper_of(r) - lower_of(r)) <= ldexp(lower_of(r), -20);
      c.bits = g.bits();
      c.enclosure = number_traits<mpfi_float>::to_string(r, 10);
      if (ok) {
        c.decided = true;
        c.approx = approx_mid(r).convert_to<double>();
        c.mid_digits = static_cast<int>(g.bits() * 0.30103) + 2;
        c.mid = approx_mid(r).str(c.mid_digits, std::ios_base::scientific);
        mpfr_float w = (upper_of(r) - lower_of(r)) / lower_of(r);
        w = w * mpfr_float(1.0 + std::ldexp(1.0, -20));  // covers the rounding of this quotient and its printing
        c.rel_width = decimal_up(w, 8);  // an upper bound: printed rounded up
        c.log2_value = log2_of(approx_mid(r));
      }
      all = all && c.decided;
    }
    return all ? ziv_decided(0) : ziv_more(0);  // every layer's ratio enclosed tightly
  });
  // Certified rank of X_l (a nonzero d×d minor; its size falls like r_l^2), escalated
  // separately: the deepest layers need more bits than their ratio.
  ziv_escalate(schedule, [&](unsigned bits) {
    precision_guard g(bits);
    const auto Xs = run_stack<mpfi_float>(s, rs);
    bool all = true;
    for (int l = 0; l <= depth; ++l) {
      certified_layer& c = out[static_cast<std::size_t>(l)];
      if (c.rank_lo == static_cast<std::size_t>(d)) continue;
      const auto lb = certified_rank_lower_bound(Xs[static_cast<std::size_t>(l)]);
      c.rank_lo = lb.rank;
      c.rank_bits = g.bits();
      c.rank_witness = lb.rank == 0 ? "" : number_traits<mpfi_float>::to_string(lb.minor, 4);
      all = all && c.rank_lo == static_cast<std::size_t>(d);
    }
    return all ? ziv_decided(0) : ziv_more(0);  // every layer's rank certified full
  });
  return out;
}

std::string layer_name(const stack& s, int l) { return s.name + ", layer " + std::to_string(l); }

template <class T>
void evaluate(report::check_report& rep, const format_spec& fmt, const std::vector<std::vector<certified_layer>>& cert,
              const run_settings& rs) {
  const double log2_eps = 1.0 - static_cast<double>(number_traits<T>::bits());
  for (std::size_t si = 0; si < stacks.size(); ++si) {
    const stack& s = stacks[si];
    const auto Xs = run_stack<T>(s, rs);
    int predicted = -1, measured = -1;
    for (int l = 0; l <= depth; ++l) {
      const certified_layer& c = cert[si][static_cast<std::size_t>(l)];
      const std::string inst = layer_name(s, l);
      const T r = ratio(Xs[static_cast<std::size_t>(l)]);
      if (!c.decided) {
        rep.claims.push_back(claim_skipped("ratio", "||res(X_l)||_F / ||X_l||_F = certified value", inst, fmt, tier_of<T>,
                                           "the enclosure did not decide this layer"));
        continue;
      }
      // Tolerance (relative) from the error model and the certified value, before comparing.
      const double abs_bound_log2 = std::log2(8.0 * (l + 1) * (n + d + 4)) + log2_eps;
      const double rel_log2 = abs_bound_log2 - c.log2_value;
      // Measured departure: relative error > 1/16 (log-space, safe below binary64's range).
      const double rd = number_traits<T>::to_double(r);
      const bool departs = !(rd > 0) ? true : std::abs(std::log2(rd) - c.log2_value) > std::log2(17.0 / 16);
      if (departs && measured < 0) measured = l;
      if (rel_log2 > -4) {  // > 1/16
        if (predicted < 0) predicted = l;
        report::claim_row row = claim_skipped(
            "ratio", "||res(X_l)||_F / ||X_l||_F = certified value", inst, fmt, tier_of<T>,
            "not asserted: error model bound 2^" + std::to_string(static_cast<long>(std::ceil(rel_log2))) +
                " relative exceeds 1/16. Departure: " + fmt.name + " measures " + str(r) + ", certified " + c.enclosure);
        row.computed = str(r);
        row.expected = c.enclosure;
        rep.claims.push_back(row);
        continue;
      }
      const T truth_value = number_traits<T>::from_string(c.mid);
      const T tol = T(T(8 * (l + 1) * (n + d + 4)) * eps<T>() / truth_value) + number_traits<T>::from_string(c.rel_width) +
                    number_traits<T>::from_string("1e-" + std::to_string(c.mid_digits - 1));
      report::claim_row row = claim_close("ratio", "||res(X_l)||_F / ||X_l||_F = certified value", inst, fmt, r, truth_value,
                                          tol, true,
                                          "8(l+1)(n+d+4) eps / r_l + relative width of the certified enclosure + "
                                          "rounding of its printed midpoint");
      row.expected = str(truth_value) + " (certified " + c.enclosure + ")";
      rep.claims.push_back(row);
    }
    // Depth at which the measurement departs (a measurement, reported with the model's
    // prediction; skipped: nothing is asserted about it).
    report::claim_row dep = claim_skipped("departure-depth", "first layer whose measured ratio is off by > 1/16",
                                          s.name, fmt, tier_of<T>,
                                          "measured: " + (measured < 0 ? std::string("none up to depth ") + std::to_string(depth)
                                                                       : "layer " + std::to_string(measured)) +
                                              "; error model predicts: " +
                                              (predicted < 0 ? std::string("none") : "layer " + std::to_string(predicted)));
    dep.computed = measured < 0 ? "none" : std::to_string(measured);
    dep.expected = predicted < 0 ? "none" : std::to_string(predicted);
    rep.claims.push_back(dep);
    // Numerical rank of X_l against its certified rank (3 = d while the residual is nonzero).
    for (int l = 0; l <= depth; ++l) {
      const certified_layer& c = cert[si][static_cast<std::size_t>(l)];
      if (c.rank_lo != static_cast<std::size_t>(d)) continue;
      rep.ranks.push_back(measure_rank("X_l", layer_name(s, l), fmt, Xs[static_cast<std::size_t>(l)], d,
                                       "certified 3x3 minor " + c.rank_witness + " (MPFI " + std::to_string(c.rank_bits) +
                                           " bits); rank <= d = 3",
                                       rs));
    }
  }
}

// Exact tier: rank X₀ over ℚ, and r₀² = ‖res(X₀)‖²/‖X₀‖² as a rational, which must lie in the
// square of the certified enclosure of r₀ (a cross-check of the two tiers).
void exact_part(report::check_report& rep, const run_settings& rs) {
  using Q = mpq_rational;
  const matrix<Q> X = from_strings<Q>(n, d, X0);
  const std::size_t rk = rank(X);
  rep.claims.push_back(claim_exact("input-rank", "rank X_0 = 3 over Q", "X_0", std::to_string(rk), "3", rk == 3,
                                   "rank over Q by elimination"));
  Q num(0), den(0);
  for (int k = 0; k < d; ++k) {
    Q mean(0);
    for (int i = 0; i < n; ++i) mean += X(i, k);
    mean /= n;
    for (int i = 0; i < n; ++i) {
      num += (X(i, k) - mean) * (X(i, k) - mean);
      den += X(i, k) * X(i, k);
    }
  }
  const Q r2 = num / den;
  precision_guard g(rs.certify_bits);
  const mpfi_float r = ratio(from_strings<mpfi_float>(n, d, X0));
  const mpfi_float sq = r * r;
  const bool inside = mpfr_cmp_q(lower_of(sq).backend().data(), r2.backend().data()) <= 0 &&
                      mpfr_cmp_q(upper_of(sq).backend().data(), r2.backend().data()) >= 0;
  rep.claims.push_back(claim_exact("layer0-ratio-exact", "r_0^2 (exact rational) lies in the certified enclosure of r_0^2",
                                   "X_0", r2.str(), number_traits<mpfi_float>::to_string(sq, 20), inside,
                                   "rational vs MPFI enclosure at " + std::to_string(g.bits()) + " bits"));
}

report::check_report run(const run_settings& rs) {
  report::check_report rep;
  exact_part(rep, rs);
  std::vector<std::vector<certified_layer>> cert;
  for (const auto& s : stacks) cert.push_back(certify_stack(s, rs));
  for (std::size_t si = 0; si < stacks.size(); ++si) {
    const stack& s = stacks[si];
    const auto& c = cert[si];
    for (int l = 0; l <= depth; ++l) {
      const certified_layer& cl = c[static_cast<std::size_t>(l)];
      report::claim_row r = make_row("ratio-certified", "||res(X_l)||_F / ||X_l||_F enclosed to relative 2^-20",
                                     layer_name(s, l), "mpfi" + std::to_string(cl.bits), tier::enclosure);
      r.computed = cl.enclosure;
      r.expected = "relative width <= 2^-20";
      r.tolerance = "0";
      r.tolerance_rule = "filter, then escalate: decided at " + std::to_string(cl.bits) + " bits";
      r.result = cl.decided ? verdict::pass : verdict::undecided;
      rep.claims.push_back(r);
    }
    auto all_decided = [&] {
      for (const auto& x : c) if (!x.decided) return false;
      return true;
    };
    if (!s.residual) {
      // Collapse: strictly decreasing, faster than squaring from layer 2 on, and below
      // 10^-300 at the last layer (log2 comparisons on certified values of relative width
      // <= 2^-20 carry a margin of 2^-19 relative: the verdicts below need far more).
      for (int l = 0; l < depth; ++l) {
        const auto& a = c[static_cast<std::size_t>(l)];
        const auto& b = c[static_cast<std::size_t>(l + 1)];
        report::claim_row r = make_row("collapse-monotone", "r_{l+1} < r_l (pure attention)", layer_name(s, l + 1),
                                       "mpfi" + std::to_string(b.bits), tier::enclosure);
        r.computed = b.enclosure;
        r.expected = "< " + a.enclosure;
        r.tolerance = "0";
        r.tolerance_rule = "certified enclosures (relative width <= 2^-20) separated by more than their widths";
        r.result = !(a.decided && b.decided) ? verdict::undecided
                   : b.log2_value < a.log2_value - 1e-4 ? verdict::pass
                   : b.log2_value > a.log2_value + 1e-4 ? verdict::fail
                                                        : verdict::undecided;
        rep.claims.push_back(r);
      }
      for (int l = 2; l < depth; ++l) {
        const auto& a = c[static_cast<std::size_t>(l)];
        const auto& b = c[static_cast<std::size_t>(l + 1)];
        report::claim_row r = make_row("collapse-doubly-exponential", "r_{l+1} <= r_l^2 (pure attention, l >= 2)",
                                       layer_name(s, l + 1), "mpfi" + std::to_string(b.bits), tier::enclosure);
        r.computed = "log2 r_{l+1} = " + std::to_string(b.log2_value);
        r.expected = "<= 2 log2 r_l = " + std::to_string(2 * a.log2_value);
        r.tolerance = "0";
        r.tolerance_rule = "certified enclosures; margin must exceed 2^-19 relative";
        r.result = !(a.decided && b.decided) ? verdict::undecided
                   : b.log2_value < 2 * a.log2_value - 1e-4 ? verdict::pass
                   : b.log2_value > 2 * a.log2_value + 1e-4 ? verdict::fail
                                                            : verdict::undecided;
        rep.claims.push_back(r);
      }
      (void)all_decided;
    } else {
      // With the residual path: r_l >= 1/10 at the DECLARED depths l = 0..depth, certified.  Only
      // that: these weights keep lowering r_l beyond (about 0.098 at layer 12, 0.011 at layer 20, by
      // mpmath in tests/checks/truths_mpmath.py), so no depth-independent "prevents collapse" is
      // claimed (proofs/L3-rank-collapse.md).
      bool ok = true;
      double worst = 1;
      for (const auto& x : c) {
        ok = ok && x.decided && x.approx >= 0.1 * (1 + std::ldexp(1.0, -19));
        worst = std::min(worst, x.approx);
      }
      const std::string upto = "l = 0.." + std::to_string(depth);
      report::claim_row r = make_row("residual-ratio-to-depth-" + std::to_string(depth),
                                     "r_l >= 1/10 for " + upto + " (residual path; the declared depths only, not a "
                                     "depth-independent statement: deeper layers are not certified)",
                                     s.name, "mpfi" + std::to_string(c.back().bits), tier::enclosure);
      r.computed = "min over " + upto + " of r_l ~ " + std::to_string(worst);
      r.expected = ">= 0.1 for " + upto;
      r.tolerance = "0";
      r.tolerance_rule = "certified enclosures (relative width <= 2^-20) at " + upto;
      r.note = "evidence: the certified r_l at " + upto + " only; r_l keeps falling beyond the declared depth";
      r.result = !all_decided() ? verdict::undecided : ok ? verdict::pass : verdict::fail;
      rep.claims.push_back(r);
      // Negative control: "the residual stack collapses like the pure one: r_L <= 10^-3".
      report::claim_row k = make_row("residual-collapses", "the residual stack collapses by L = " + std::to_string(depth) +
                                                               ": r_L <= 10^-3", s.name,
                                     "mpfi" + std::to_string(c.back().bits), tier::enclosure);
      k.computed = c.back().enclosure;
      k.expected = "<= 1e-3";
      k.tolerance = "0";
      k.tolerance_rule = "certified enclosure of r_L";
      k.result = !c.back().decided ? verdict::undecided : c.back().approx <= 1e-3 ? verdict::pass : verdict::fail;
      rep.claims.push_back(negative_control(k));
    }
  }
  for_each_format(rs, [&]<class T>(const format_spec& f) { evaluate<T>(rep, f, cert, rs); });
  return rep;
}

}  // namespace

check_entry make_rank_collapse() {
  return {"rank-collapse", "Pure attention loses rank doubly exponentially (Dong, Cordonnier, Loukas 2021)", "§10",
          "proofs/L3-rank-collapse.md", error_model, run};
}

}  // namespace attncert::checks
