#include "attncert/drift/sweep.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "attncert/attention/binary64_enclosure.hpp"
#include "attncert/deadline.hpp"
#include "attncert/field.hpp"
#include "attncert/linalg/certified_svd.hpp"
#include "attncert/linalg/fast_svd.hpp"
#include "attncert/linalg/spectra.hpp"
#include "attncert/number/decimal.hpp"
#include "attncert/number/ziv.hpp"
#include "attncert/rank/numerical.hpp"

namespace attncert {

drift_family parse_drift_family(const std::string& s) {
  if (s == "two-token") return drift_family::two_token;
  if (s == "causal") return drift_family::causal;
  if (s == "identical-values") return drift_family::identical_values;
  if (s == "log-odds") return drift_family::log_odds;
  if (s == "random") return drift_family::random;
  throw input_error("unknown family '" + s + "' (expected two-token, causal, identical-values, log-odds or random)");
}

const char* to_string(drift_family f) {
  switch (f) {
    case drift_family::two_token: return "two-token";
    case drift_family::causal: return "causal";
    case drift_family::identical_values: return "identical-values";
    case drift_family::log_odds: return "log-odds";
    default: return "random";
  }
}

namespace {

long default_n(const drift_request& r) {
  switch (r.family) {
    case drift_family::two_token: return 2;
    case drift_family::log_odds: return r.n > 0 ? r.n : 3;
    default: return r.n > 0 ? r.n : 4;
  }
}
long default_d(const drift_request& r) {
  switch (r.family) {
    case drift_family::two_token:
    case drift_family::log_odds: return 1;
    case drift_family::causal: return default_n(r);
    default: return r.d > 0 ? r.d : 2;
  }
}

// Seeded dyadic entries k/4, k in [-8, 8]: exact in binary16, bfloat16 and wider.
matrix<double> dyadic(std::mt19937_64& g, long r, long c) {
  std::uniform_int_distribution<int> u(-8, 8);
  matrix<double> m(r, c);
  for (long i = 0; i < r; ++i)
    for (long j = 0; j < c; ++j) m(i, j) = u(g) / 4.0;
  return m;
}

// Shortest decimal that reads back as the same binary64 (std::to_chars).
std::string num17(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

// Decimal of an MPFR number rounded down / up (outward ends of an enclosure), 17
// significant digits (decimal.hpp).
std::string decimal(mpfr_srcptr x, bool up) { return up ? decimal_up(x, 16) : decimal_down(x, 16); }

bool two_token_fast(const drift_request& r) {
  return r.closed_forms && r.family == drift_family::two_token && r.object == layer_object::attention;
}

matrix<mpq_rational> exact_of(const matrix<double>& m) { return from_double_matrix<mpq_rational>(m); }

}  // namespace

void validate(const drift_request& r) {
  if (!std::isfinite(r.from) || !std::isfinite(r.to)) throw input_error(field("from") + " and " + field("to") + " must be finite numbers");
  if (!(r.from < r.to)) throw input_error(field("from") + " must be smaller than " + field("to"));
  if (r.points < 2 || r.points > 10000000) throw input_error(field("points") + " must be in [2, 10000000]");
  if (r.log && !(r.from > 0)) throw input_error(field("log") + " needs " + field("from") + " > 0");
  if (r.recipes.empty()) throw input_error("no recipe given");
  if (r.policies.empty()) throw input_error("no rank policy given");
  if (!(r.resolution > 0 && r.resolution < 0.5)) throw input_error(field("resolution") + " must be in (0, 0.5)");
  if (r.object != layer_object::attention && r.object != layer_object::output)
    throw input_error(field("object") + " must be attention or output");
  if (r.n < 0 || r.n > drift_max_n || r.d < 0 || r.d > drift_max_n)
    throw input_error(field("n") + " and " + field("d") + " must be in [1, " + std::to_string(drift_max_n) + "]");
  if (r.family == drift_family::two_token && (r.n > 0 || r.d > 0))
    throw input_error("the two-token family has n = 2, d = 1: " + field("n") + "/" + field("d") + " do not apply");
  if (r.family == drift_family::log_odds && r.d > 0) throw input_error("the log-odds family has d = 1: " + field("d") + " does not apply");
  if (r.family == drift_family::causal && r.d > 0) throw input_error("the causal family has d = n: " + field("d") + " does not apply");
  if (r.start_bits < min_precision_bits || r.start_bits > r.max_bits || r.max_bits > max_precision_bits)
    throw input_error("enclosure precision must satisfy 24 <= start <= cap <= 2^20 bits");
  // Beyond 1e30 every exp(score difference) over- or underflows in the fixed formats, and the
  // exact side's enclosures would only hit their precision cap.
  for (double a : {r.from, r.to})
    if (std::fabs(a) > 1e30) throw input_error("|a| = " + num17(std::fabs(a)) + " is outside the supported range |a| <= 1e30");
  for (std::size_t i = 0; i < r.grid.size(); ++i)
    if (!(r.grid[i] >= r.from && r.grid[i] <= r.to) || (i > 0 && !(r.grid[i] > r.grid[i - 1])))
      throw input_error("an explicit grid must be strictly increasing within [" + field("from") + ", " + field("to") + "]");
}

recipe_input drift_instance(const drift_request& r, double a) {
  recipe_input in;
  in.scale = a;
  in.object = r.object;
  const long n = default_n(r), d = default_d(r);
  std::mt19937_64 g(r.seed);
  switch (r.family) {
    case drift_family::two_token:
      in.Q = matrix<double>(2, 1);
      in.Q << 1, -1;
      in.K = in.Q;
      in.V = matrix<double>(2, 3);
      *in.V << 1, -0.5, 2, -1, 0.5, -2;  // contrast values (v, -v) of checks/two_token.cpp
      break;
    case drift_family::causal:
      in.Q = -matrix<double>::Identity(n, n);
      in.K = matrix<double>::Identity(n, n);  // S = -a I: the diagonal lies a below the row maximum 0
      in.M = mask::causal();
      in.V = dyadic(g, n, n);
      break;
    case drift_family::log_odds:
      in.Q = matrix<double>(n, 1);
      for (long i = 0; i < n; ++i) in.Q(i, 0) = static_cast<double>(i + 1);
      in.K = in.Q;  // S = a q qᵀ, q = (1, ..., n): rank-one scores, full-rank attention (P05)
      in.V = dyadic(g, n, n);
      break;
    case drift_family::identical_values: {
      in.Q = dyadic(g, n, d);
      in.K = dyadic(g, n, d);
      in.V = matrix<double>(n, 3);
      for (long i = 0; i < n; ++i) in.V->row(i) << 1, -0.5, 2;  // every value row the same v
      break;
    }
    default:
      in.Q = dyadic(g, n, d);
      in.K = dyadic(g, n, d);
      in.V = dyadic(g, n, d);
  }
  return in;
}

nlohmann::json drift_family_description(const drift_request& r) {
  const recipe_input in = drift_instance(r, 1.0);
  auto rows = [](const matrix<double>& m) {
    nlohmann::json j = nlohmann::json::array();
    for (Eigen::Index i = 0; i < m.rows(); ++i) {
      nlohmann::json row = nlohmann::json::array();
      for (Eigen::Index k = 0; k < m.cols(); ++k) row.push_back(m(i, k));
      j.push_back(row);
    }
    return j;
  };
  nlohmann::json j = {{"family", to_string(r.family)},
                      {"scores", "S = a * Q K^T"},
                      {"mask", in.M.describe()},
                      {"object", to_string(r.object)},
                      {"Q", rows(in.Q)},
                      {"K", rows(in.K)}};
  if (r.object == layer_object::output) j["V"] = rows(*in.V);
  if (r.family == drift_family::random || r.family == drift_family::identical_values ||
      (r.object == layer_object::output && (r.family == drift_family::causal || r.family == drift_family::log_odds)))
    j["seed"] = r.seed;
  return j;
}

drift_exact drift_exact_rank(const drift_request& r, double a) {
  drift_exact e;
  if (two_token_fast(r)) {
    // P01: det A = tanh a; rank 2 iff a != 0.
    e.lo = e.hi = a == 0 ? 1 : 2;
    e.closed_form = true;
    return e;
  }
  const recipe_input in = drift_instance(r, a);
  std::optional<matrix<mpq_rational>> V;
  if (in.V) V = exact_of(*in.V);
  rank_options opt;
  opt.seed = r.seed;
  const matrix<mpq_rational> Qx = exact_of(in.Q), Kx = exact_of(in.K);
  rank_interval ri;
  if (default_n(r) > drift_mpfi_max_n) {
    // Above drift_mpfi_max_n: from the factors (P08 "Scores in factored form"), the n×n rational
    // scores never formed; the same layer and the same guarantee as the path below.
    score_factors F;
    F.Q = &Qx;
    F.K = &Kx;
    F.scale = mpq_rational(a);
    ri = layer_rank_from_factors(F, in.M, r.object, V, std::nullopt, opt);
  } else {
    ri = layer_rank(multiply(matrix<mpq_rational>(Qx * mpq_rational(a)), transpose(Kx)), in.M, r.object, V, std::nullopt,
                    opt);
  }
  e.lo = ri.lo;
  e.hi = ri.hi;
  return e;
}

recipe_measurement measure_recipe(const recipe& rc, const recipe_input& in, const std::vector<rank_policy>& policies,
                                  const drift_exact& ex) {
  recipe_measurement m;
  with_recipe(rc, [&]<class In, class Acc, class Sm, class OAcc, class Out>() {
    matrix<Out> M;
    try {
      M = recipe_form<In, Acc, Sm, OAcc, Out>(in);
    } catch (const input_error& e) {
      m.formed = false;
      m.failure = e.what();
    }
    if (m.formed)
      for (Eigen::Index i = 0; i < M.size(); ++i)
        if (!detail::is_finite_value(M(i))) {
          m.formed = false;
          m.failure = "non-finite entry in the formed matrix (overflow)";
          break;
        }
    if (!m.formed) {
      m.diverges = true;
      m.diverges_by_policy.assign(policies.size(), true);
      m.ranks.assign(policies.size(), 0);
      return;
    }
    // The one numerical-rank measurement (rank/numerical.hpp): ε of the result format; the
    // SVD in the result format, binary32 for the 16-bit ones.
    const auto nm = approx_numerical_rank(M, rc.result, policies, ex.lo, ex.hi);
    using S = typename decltype(nm.sigma)::value_type;
    m.svd = svd_label(rc.result);
    m.ranks = nm.ranks;
    m.diverges_by_policy = nm.diverges;
    m.diverges = nm.any_diverges;
    if (!nm.sigma.empty()) {
      m.sigma_max = number_traits<S>::to_double(nm.sigma.front());
      m.sigma_min = number_traits<S>::to_double(nm.sigma.back());
      m.condition_number = number_traits<S>::to_double(approx_condition_number(nm.sigma));
      if constexpr (std::is_same_v<S, mpfr_float>) m.sigma_min_text = number_traits<S>::to_string(nm.sigma.back(), 17);
    }
  });
  return m;
}

namespace {

void write_enclosures(const singular_value_enclosures& sv, drift_point& p);

// The certified singular values of the point's object by the binary64 path: the object enclosed
// in midpoint-radius form (attention/binary64_enclosure.hpp), then certified_singular_values_binary64.
// a = 0: the scores are exactly 0.  An object the binary64 path cannot enclose (a score bound that
// overflows) gets [0, +inf] for every σ: nothing is claimed.
singular_value_enclosures binary64_singular_values(const drift_request& r, const recipe_input& in, double a) {
  try {
    binary64_enclosure S;
    if (a == 0) {
      S.mid = matrix<double>::Zero(in.Q.rows(), in.K.rows());
      S.rad = S.mid;
    } else {
      score_scale c;
      c.rational = mpq_rational(a);
      S = enclose_scores_binary64(in.Q, in.K, c);
    }
    binary64_enclosure X = enclose_attention_binary64(S, in.M);
    if (r.object == layer_object::output) X = enclose_product_binary64(X, *in.V);
    return certified_singular_values_binary64(X);
  } catch (const input_error&) {
    singular_value_enclosures none;
    none.bits = 53;
    const std::size_t k = static_cast<std::size_t>(std::min(in.Q.rows(), in.K.rows()));
    precision_guard g(53);
    none.sigma.resize(k);
    for (auto& x : none.sigma) mpfi_interv_d(x.backend().data(), 0.0, std::numeric_limits<double>::infinity());
    return none;
  }
}

// Enclosures of σ_min and of σ₁/σ_min at one point.
void enclose(const drift_request& r, double a, drift_point& p) {
  if (two_token_fast(r)) {
    // σ = {1, tanh|a|} (P01); tanh|a| ≤ 1, so σ_min = tanh|a|, cond = 1/tanh|a|.
    mpfr_t x, lo, hi, t;
    mpfr_inits2(64, x, lo, hi, t, static_cast<mpfr_ptr>(nullptr));
    mpfr_set_d(x, std::fabs(a), MPFR_RNDN);  // exact
    mpfr_tanh(lo, x, MPFR_RNDD);
    mpfr_tanh(hi, x, MPFR_RNDU);
    p.smin_lo = decimal(lo, false);
    p.smin_hi = decimal(hi, true);
    p.smin_lo_d = double_down(lo);
    p.smin_hi_d = double_up(hi);
    if (mpfr_sgn(lo) > 0) {
      mpfr_ui_div(t, 1, hi, MPFR_RNDD);
      p.cond_lo = decimal(t, false);
      mpfr_ui_div(t, 1, lo, MPFR_RNDU);
      p.cond_hi = decimal(t, true);
    } else {
      p.cond_lo = "1";  // σ₁/σ_min ≥ 1 always; σ_min = 0 at a = 0
      p.cond_hi = "inf";
    }
    p.enclosure_bits = 64;
    mpfr_clears(x, lo, hi, t, static_cast<mpfr_ptr>(nullptr));
    return;
  }
  const recipe_input in = drift_instance(r, a);
  if (default_n(r) > drift_mpfi_max_n) {
    // Above drift_mpfi_max_n: the binary64 filter alone (linalg/fast_svd.hpp, proofs/P16): one
    // dgesdd and a rigorous residual bound.  Sound whatever it decides; when fewer σ than the
    // exact rank's lo come out certified positive, σ_min's lower end is 0 and cond is "inf".
    write_enclosures(binary64_singular_values(r, in, a), p);
    return;
  }
  // Ziv (number/ziv.hpp): escalate until as many singular values are certified > 0 as the
  // exact rank's lower bound, or the cap.
  const auto out = ziv_escalate(precision_schedule{r.start_bits, r.max_bits}, [&](unsigned bits) {
    precision_guard g(bits);
    const matrix<mpfi_float> Q = from_double_matrix<mpfi_float>(in.Q), K = from_double_matrix<mpfi_float>(in.K);
    const mpfi_float s = number_traits<mpfi_float>::from_double(a);
    matrix<mpfi_float> S = multiply(Q, transpose(K));
    for (Eigen::Index i = 0; i < S.size(); ++i) S(i) = s * S(i);
    matrix<mpfi_float> X = masked_softmax(S, in.M);
    if (r.object == layer_object::output) X = multiply(X, from_double_matrix<mpfi_float>(*in.V));
    singular_value_enclosures sv = certified_singular_values(X);
    sv.bits = g.bits();
    const bool decided = sv.certified_positive >= p.exact.lo;
    return ziv_step<singular_value_enclosures>{std::move(sv), decided};
  });
  write_enclosures(out.value, p);
}

// The point's σ_min and condition-number enclosures from the certified singular values.
void write_enclosures(const singular_value_enclosures& sv, drift_point& p) {
  p.enclosure_bits = sv.bits;
  if (sv.sigma.empty()) return;
  precision_guard g(sv.bits);
  const mpfi_float& smin = sv.sigma.back();
  const mpfr_float slo = lower_of(smin), shi = upper_of(smin);
  p.smin_lo = decimal(slo.backend().data(), false);
  p.smin_hi = decimal(shi.backend().data(), true);
  p.smin_lo_d = double_down(slo);
  p.smin_hi_d = double_up(shi);
  const mpfr_float s1hi = upper_of(sv.sigma.front()), s1lo = lower_of(sv.sigma.front());
  mpfr_float t;
  mpfr_div(t.backend().data(), s1lo.backend().data(), shi.backend().data(), MPFR_RNDD);
  p.cond_lo = shi > 0 ? decimal(t.backend().data(), false) : "inf";
  if (slo > 0) {
    mpfr_div(t.backend().data(), s1hi.backend().data(), slo.backend().data(), MPFR_RNDU);
    p.cond_hi = decimal(t.backend().data(), true);
  } else {
    p.cond_hi = "inf";
  }
}

double midpoint(double lo, double hi, bool log) {
  if (log && lo > 0 && hi > 0) {
    const double m = std::sqrt(lo) * std::sqrt(hi);
    if (m > std::min(lo, hi) && m < std::max(lo, hi)) return m;
  }
  return lo + (hi - lo) / 2;
}

bool close_enough(double x, double y, const drift_request& r) {
  const double lo = std::min(x, y), hi = std::max(x, y);
  if (r.log) return hi <= lo * (1 + r.resolution);
  return hi - lo <= r.resolution * (r.to - r.from);
}

// Bisect between `quiet` (not diverging) and `loud` (diverging) with the predicate `diverges_at`;
// returns the diverging end.
template <class Pred>
double bisect(const drift_request& r, Pred&& diverges_at, double quiet, double loud, std::size_t& evals, bool& stopped) {
  while (!close_enough(quiet, loud, r)) {
    const double m = midpoint(quiet, loud, r.log);
    if (m == quiet || m == loud) break;  // adjacent binary64 numbers
    ++evals;
    try {
      if (stopped || deadline_passed()) throw time_limit_reached("bisection");
      if (diverges_at(m)) loud = m;
      else quiet = m;
    } catch (const time_limit_reached&) {
      stopped = true;  // past --max-seconds: the end is the last point seen diverging, not bisected further
      break;
    }
  }
  return loud;
}

// Does the caller's diagnostic d on recipe rc diverge at a?
bool diagnostic_diverges_at(const drift_request& r, const recipe& rc, const user_diagnostic& d, double a) {
  const drift_exact ex = drift_exact_rank(r, a);
  const auto M = approx_formed_object(rc, drift_instance(r, a));
  if (!M) return true;
  const std::size_t k = d.rank(*M, rc);
  return k < ex.lo || k > ex.hi;
}

// The caller's diagnostics on the object recipe rc formed (m.diverges updated).
void measure_diagnostics(const drift_request& r, const recipe& rc, const recipe_input& in, const drift_exact& ex,
                         recipe_measurement& m) {
  if (r.diagnostics.empty()) return;
  const auto M = m.formed ? approx_formed_object(rc, in) : std::nullopt;
  for (const auto& d : r.diagnostics) {
    const std::size_t k = M ? d.rank(*M, rc) : 0;
    const bool div = !M || k < ex.lo || k > ex.hi;
    m.diagnostic_ranks.push_back(k);
    m.diagnostic_diverges.push_back(div);
    m.diverges = m.diverges || div;
  }
}

// The divergence intervals of one status column (grid point i -> diverges?), ends bisected with `pred`.
template <class Status, class Pred>
void divergence_intervals(const drift_request& r, drift_result& res, Status&& status, Pred&& pred, drift_intervals& di) {
  const std::size_t N = res.points.size();
  for (std::size_t i = 0; i < N;) {
    if (!status(i)) {
      ++i;
      continue;
    }
    double start = res.grid[i];
    if (i > 0) start = bisect(r, pred, res.grid[i - 1], res.grid[i], di.bisection_evaluations, res.bisection_stopped);
    std::size_t j = i;
    while (j + 1 < N && status(j + 1)) ++j;
    double end = res.grid[j];
    if (j + 1 < N) end = bisect(r, pred, res.grid[j + 1], res.grid[j], di.bisection_evaluations, res.bisection_stopped);
    di.intervals.emplace_back(start, end);
    i = j + 1;
  }
}

}  // namespace

bool drift_uses_closed_form(const drift_request& r) { return two_token_fast(r); }

bool drift_uses_binary64_enclosures(const drift_request& r) { return !two_token_fast(r) && default_n(r) > drift_mpfi_max_n; }

std::string drift_resolution_rule(const drift_request& r) {
  return r.log ? "bisection until hi/lo <= 1 + resolution (geometric midpoints)"
               : "bisection until |hi - lo| <= resolution * (to - from)";
}

std::string drift_svd_label(const recipe& rc) { return svd_label(rc.result); }

bool drift_diverges_at(const drift_request& r, const recipe& rc, const rank_policy& p, double a) {
  const drift_exact ex = drift_exact_rank(r, a);
  return measure_recipe(rc, drift_instance(r, a), {p}, ex).diverges;
}

std::optional<matrix<double>> approx_formed_object(const recipe& rc, const recipe_input& in) {
  return with_recipe(rc, [&]<class In, class Acc, class Sm, class OAcc, class Out>() -> std::optional<matrix<double>> {
    matrix<Out> M;
    try {
      M = recipe_form<In, Acc, Sm, OAcc, Out>(in);
    } catch (const input_error&) {
      return std::nullopt;
    }
    matrix<double> D(M.rows(), M.cols());
    for (Eigen::Index i = 0; i < M.rows(); ++i)
      for (Eigen::Index j = 0; j < M.cols(); ++j) {
        if (!detail::is_finite_value(M(i, j))) return std::nullopt;
        D(i, j) = number_traits<Out>::to_double(M(i, j));
      }
    return D;
  });
}

std::pair<double, double> two_token_contrast(const recipe& rc, double a) {
  drift_request r;
  recipe_input in = drift_instance(r, a);
  return with_recipe(rc, [&]<class In, class Acc, class Sm, class OAcc, class Out>() {
    const matrix<Out> A = recipe_form<In, Acc, Sm, OAcc, Out>(in);
    const Out lambda = A(0, 0) - A(0, 1);
    const Out det = A(0, 0) * A(1, 1) - A(0, 1) * A(1, 0);
    return std::pair<double, double>(number_traits<Out>::to_double(lambda), number_traits<Out>::to_double(det));
  });
}

std::vector<double> drift_grid(const drift_request& r) {
  if (!r.grid.empty()) return r.grid;
  std::vector<double> g(r.points);
  const double n1 = static_cast<double>(r.points - 1);
  for (std::size_t i = 0; i < r.points; ++i) {
    const double t = static_cast<double>(i) / n1;
    // Log grids interpolate the decimal exponent, so decades land on 10^k exactly.
    g[i] = r.log ? std::pow(10.0, std::log10(r.from) + (std::log10(r.to) - std::log10(r.from)) * t)
                 : r.from + (r.to - r.from) * t;
  }
  g.front() = r.from;
  g.back() = r.to;
  for (std::size_t i = 1; i < g.size(); ++i)  // strictly increasing, whatever pow rounds to
    if (!(g[i] > g[i - 1])) g[i] = std::nextafter(g[i - 1], r.to);
  return g;
}

drift_result run_drift(const drift_request& r) {
  validate(r);
  drift_result res;
  res.grid = drift_grid(r);
  res.points.reserve(res.grid.size());
  // The instance does not depend on a except through the scale: build it once.
  recipe_input in = drift_instance(r, 0.0);
  res.points_planned = res.grid.size();
  deadline_scope budget(r.max_seconds);  // the sweep's budget (deadline.hpp): points, then bisection
  {
    for (std::size_t i = 0; i < res.grid.size(); ++i) {
      drift_point p;
      try {
        check_deadline();  // one poll per point, and more inside (escalation steps, products, softmax rows)
        p.a = res.grid[i];
        p.exact = drift_exact_rank(r, p.a);
        if (r.enclosures) enclose(r, p.a, p);
        in.scale = p.a;
        p.recipes.reserve(r.recipes.size());
        for (const auto& rc : r.recipes) {
          p.recipes.push_back(measure_recipe(rc, in, r.policies, p.exact));
          measure_diagnostics(r, rc, in, p.exact, p.recipes.back());
          p.diverges = p.diverges || p.recipes.back().diverges;
        }
      } catch (const time_limit_reached&) {
        res.partial = true;  // the point under way is dropped: every reported point is complete
        break;
      }
      res.points.push_back(std::move(p));
      if (r.progress && (i % 64 == 63 || i + 1 == res.grid.size())) r.progress(i + 1, res.grid.size());
    }
  }
  if (res.partial) {
    if (res.points.size() < 2)
      throw time_limit_reached(field("max_seconds") + " " + std::to_string(r.max_seconds) + " passed before two grid points were computed (" +
                               std::to_string(res.points.size()) + " of " + std::to_string(res.points_planned) + ")");
    const std::size_t done = res.points.size();
    res.not_computed.push_back({res.grid[done], res.grid.back(), res.grid.size() - done});
    res.grid.resize(done);
  }
  for (std::size_t ri = 0; ri < r.recipes.size(); ++ri) {
    const recipe& rc = r.recipes[ri];
    for (std::size_t pi = 0; pi < r.policies.size(); ++pi) {
      drift_intervals di;
      di.recipe = rc.name;
      di.policy = r.policies[pi].name();
      divergence_intervals(
          r, res, [&](std::size_t i) { return res.points[i].recipes[ri].diverges_by_policy[pi]; },
          [&](double a) { return drift_diverges_at(r, rc, r.policies[pi], a); }, di);
      res.divergence.push_back(std::move(di));
    }
    for (std::size_t k = 0; k < r.diagnostics.size(); ++k) {
      drift_intervals di;
      di.recipe = rc.name;
      di.policy = "diagnostic:" + r.diagnostics[k].name;
      divergence_intervals(
          r, res, [&](std::size_t i) { return res.points[i].recipes[ri].diagnostic_diverges[k]; },
          [&](double a) { return diagnostic_diverges_at(r, rc, r.diagnostics[k], a); }, di);
      res.divergence.push_back(std::move(di));
    }
  }
  return res;
}

}  // namespace attncert
