// Interval binary64 arithmetic and the block's midpoint-radius operations (enclosure tier), and the
// approximate attention kernels (approx_).  Arithmetic: round to nearest; every computed endpoint is
// moved outward by one ulp (next_up / next_down), which covers that operation's rounding error, subnormal
// results included.  proofs/L7-block-bound.md, part A.
#include "ops.hpp"

#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "attncert/error.hpp"
#include "attncert/attention/binary64_enclosure.hpp"
#include "attncert/number/double_double.hpp"
#include "attncert/number/emulated.hpp"
#include "attncert/number/interval.hpp"
#include "attncert/number/outward.hpp"

namespace attncert::block::detail {

namespace {

constexpr auto up = next_up;
constexpr auto down = next_down;
constexpr double inf = std::numeric_limits<double>::infinity();

double min4(double a, double b, double c, double d) { return std::min(std::min(a, b), std::min(c, d)); }
double max4(double a, double b, double c, double d) { return std::max(std::max(a, b), std::max(c, d)); }

// e^x for one binary64 x: lower and upper bounds (exp_with_bound: |e^x − z| ≤ B·|z|).
double exp_lower(double x) {
  if (x < -708.0) return 0.0;
  if (x > 709.0) throw input_error("an exponential in the block overflows binary64 (argument above 709)");
  const dd_with_error z = exp_with_bound(dd{x, 0.0});
  const double B = z.rel_error_bound;
  if (!(B <= 0x1p-40)) return 0.0;  // nothing known: 0 is a lower bound
  return std::max(0.0, down(down(z.value.hi + z.value.lo) * down(1.0 - B)));
}
double exp_upper(double x) {
  if (x < -708.0) return 0x1p-1020;  // e^x < e^-708 < 2^-1020
  if (x > 709.0) throw input_error("an exponential in the block overflows binary64 (argument above 709)");
  const dd_with_error z = exp_with_bound(dd{x, 0.0});
  const double B = z.rel_error_bound;
  if (!(B <= 0x1p-40)) throw input_error("the certified exponential does not apply (floating-point environment)");
  return up(up(z.value.hi + z.value.lo) * up(1.0 + B));
}

// tanh u = 1 − 2/(e^{2u} + 1), increasing; |tanh u| > 1 − 2^-53 once |2u| > 700.
double tanh_lower(double u) {
  if (2 * u > 700) return down(1.0);
  if (2 * u < -700) return -1.0;
  return std::max(-1.0, down(1.0 - up(2.0 / down(exp_lower(2 * u) + 1.0))));
}
double tanh_upper(double u) {
  if (2 * u > 700) return 1.0;
  if (2 * u < -700) return up(-1.0);
  return std::min(1.0, up(1.0 - down(2.0 / up(exp_upper(2 * u) + 1.0))));
}

// σ(x) = 1/(1 + e^{−x}), increasing; σ(x) < e^x < 2^-1000 for x < −700.
double sigmoid_lower(double x) {
  if (-x > 700) return 0.0;
  return down(1.0 / up(1.0 + exp_upper(-x)));
}
double sigmoid_upper(double x) {
  if (-x > 700) return 0x1p-1000;
  if (-x < -700) return 1.0;
  return std::min(1.0, up(1.0 / down(1.0 + exp_lower(-x))));
}

// Enclosures of GELU's constants √(2/π) and 0.044715 (MPFR, directed roundings).
struct gelu_constants {
  ival k, a;
  gelu_constants() {
    mpfr_t x;
    mpfr_init2(x, 128);
    for (int dir = 0; dir < 2; ++dir) {
      const mpfr_rnd_t r = dir == 0 ? MPFR_RNDD : MPFR_RNDU, opp = dir == 0 ? MPFR_RNDU : MPFR_RNDD;
      mpfr_const_pi(x, opp);          // π rounded against the direction
      mpfr_ui_div(x, 2, x, r);        // 2/π rounded with it
      mpfr_sqrt(x, x, r);
      (dir == 0 ? k.lo : k.hi) = mpfr_get_d(x, r);
      mpfr_set_str(x, "0.044715", 10, r);
      (dir == 0 ? a.lo : a.hi) = mpfr_get_d(x, r);
    }
    mpfr_clear(x);
  }
};
const gelu_constants& gelu_c() {
  static const gelu_constants c;
  return c;
}

// The GELU argument k(x + a x³), an interval.
ival gelu_argument(ival x) {
  const auto& c = gelu_c();
  return mul(c.k, add(x, mul(c.a, mul(sqr(x), x))));
}

// φ' on an interval (not subdivided).
ival derivative_of(const std::string& name, ival x) {
  const ival one{1, 1}, half{0.5, 0.5};
  if (name == "relu") return x.hi <= 0 ? ival{0, 0} : (x.lo > 0 ? one : ival{0, 1});
  if (name == "silu") {  // σ(x)(1 + x(1 − σ(x)))
    const ival s = sigmoid_of(x);
    return mul(s, add(one, mul(x, sub(one, s))));
  }
  // GELU (tanh form): 0.5(1 + t) + 0.5·x·(1 − t²)·k·(1 + 3a x²),  t = tanh(k(x + a x³))
  const auto& c = gelu_c();
  const ival t = tanh_of(gelu_argument(x));
  const ival inner = add(one, mul(mul(ival{3, 3}, c.a), sqr(x)));
  return add(mul(half, add(one, t)), mul(mul(mul(half, x), sub(one, sqr(t))), mul(c.k, inner)));
}

}  // namespace

ival add(ival a, ival b) { return {down(a.lo + b.lo), up(a.hi + b.hi)}; }
ival sub(ival a, ival b) { return {down(a.lo - b.hi), up(a.hi - b.lo)}; }
ival mul(ival a, ival b) {
  const double p = a.lo * b.lo, q = a.lo * b.hi, r = a.hi * b.lo, s = a.hi * b.hi;
  return {down(min4(p, q, r, s)), up(max4(p, q, r, s))};
}
ival div(ival a, ival b) {
  if (!(b.lo > 0 || b.hi < 0)) throw input_error("a divisor's enclosure contains 0");
  const double p = a.lo / b.lo, q = a.lo / b.hi, r = a.hi / b.lo, s = a.hi / b.hi;
  return {down(min4(p, q, r, s)), up(max4(p, q, r, s))};
}
ival sqr(ival a) {
  if (a.lo >= 0) return {std::max(0.0, down(a.lo * a.lo)), up(a.hi * a.hi)};
  if (a.hi <= 0) return {std::max(0.0, down(a.hi * a.hi)), up(a.lo * a.lo)};
  return {0.0, up(std::max(a.lo * a.lo, a.hi * a.hi))};
}
ival sqrt_of(ival a) { return {std::max(0.0, down(std::sqrt(std::max(a.lo, 0.0)))), up(std::sqrt(std::max(a.hi, 0.0)))}; }
ival exp_of(ival a) { return {exp_lower(a.lo), exp_upper(a.hi)}; }
ival tanh_of(ival a) { return {tanh_lower(a.lo), tanh_upper(a.hi)}; }
ival sigmoid_of(ival a) { return {sigmoid_lower(a.lo), sigmoid_upper(a.hi)}; }

ival activation_of(const std::string& name, ival x) {
  if (name == "relu") return {std::max(0.0, x.lo), std::max(0.0, x.hi)};
  if (name == "silu") return mul(x, sigmoid_of(x));
  if (name != "gelu_tanh") throw input_error("unknown activation '" + name + "' (gelu_tanh, silu, relu)");
  return mul(mul(ival{0.5, 0.5}, x), add(ival{1, 1}, tanh_of(gelu_argument(x))));
}

namespace {

// sup |φ'| on a fixed cover of ℝ, computed once per activation: pieces of width 1/4 over [−16, 16], then
// [16, 32], [2^k, 2^{k+1}] up to 2^20 (mirrored for negatives), where interval evaluation of φ' is nearly
// sharp (φ' is within about 2^{k+1}e^{−2^k} of 0 or 1 there); beyond ±2^20 the bound 1 + 2^-40 (|φ'| or
// |φ' − 1| is below 2^20·e^{−2^19} there: proofs/L7, part D).
struct derivative_table {
  std::vector<double> cuts;  // increasing; piece p is [cuts[p], cuts[p + 1]]
  std::vector<double> sup;   // per piece; the two unbounded tails are the first and the last
  explicit derivative_table(const std::string& name) {
    cuts.push_back(-inf);
    for (double c = -0x1p20; c <= -32; c /= 2) cuts.push_back(c);
    for (int k = -64; k <= 64; ++k) cuts.push_back(k * 0.25);
    for (double c = 32; c <= 0x1p20; c *= 2) cuts.push_back(c);
    cuts.push_back(inf);
    for (std::size_t p = 0; p + 1 < cuts.size(); ++p) {
      if (p == 0 || p + 2 == cuts.size()) {
        sup.push_back(1 + 0x1p-40);
        continue;
      }
      const ival d = derivative_of(name, ival{cuts[p], cuts[p + 1]});
      sup.push_back(std::max(std::fabs(d.lo), std::fabs(d.hi)));
    }
  }
  // The maximum over the pieces that [lo, hi] meets (they cover it).
  double over(double lo, double hi) const {
    auto p = static_cast<std::size_t>(std::upper_bound(cuts.begin(), cuts.end(), lo) - cuts.begin()) - 1;
    double m = 0;
    for (; p + 1 < cuts.size() && cuts[p] <= hi; ++p) m = std::max(m, sup[p]);
    return m;
  }
};

const derivative_table& table_of(const std::string& name) {
  static const derivative_table gelu("gelu_tanh"), silu("silu");
  return name == "silu" ? silu : gelu;
}

}  // namespace

double activation_derivative_sup(const std::string& name, ival x) {
  if (name == "relu") return x.hi <= 0 ? 0.0 : 1.0;
  if (std::isnan(x.lo) || std::isnan(x.hi)) return inf;
  // Narrow intervals: evaluated directly (sharper than the table's pieces).
  if (x.hi - x.lo <= 0.25) {
    const ival d = derivative_of(name, x);
    return std::max(std::fabs(d.lo), std::fabs(d.hi));
  }
  return table_of(name).over(x.lo, x.hi);
}

ival entry(const mr& x, Eigen::Index i, Eigen::Index j) {
  const double m = x.mid(i, j), r = x.rad.size() ? x.rad(i, j) : 0.0;
  return r == 0 ? ival{m, m} : ival{down(m - r), up(m + r)};
}

void set_entry(mr& x, Eigen::Index i, Eigen::Index j, ival v) {
  const double m = 0.5 * v.lo + 0.5 * v.hi;
  const double r = std::max(up(v.hi - m), up(m - v.lo));
  if (!std::isfinite(m) || !std::isfinite(r)) throw input_error("a value of the block overflows binary64");
  x.mid(i, j) = m;
  x.rad(i, j) = r;
}

mr affine(const matrix<double>& x, const matrix<double>& W, const std::vector<double>& b) {
  mr y = enclose_product_binary64(mr{x, matrix<double>()}, W);
  if (y.rad.size() == 0) y.rad = matrix<double>::Zero(y.mid.rows(), y.mid.cols());
  if (b.empty()) return y;
  matrix<double> B(y.mid.rows(), y.mid.cols());
  for (Eigen::Index j = 0; j < B.cols(); ++j) B.col(j).setConstant(b[static_cast<std::size_t>(j)]);
  return enclose_sum_binary64(B, y);
}

std::vector<double> row_radius(const mr& x) {
  std::vector<double> out(static_cast<std::size_t>(x.mid.rows()), 0.0);
  if (x.rad.size() == 0) return out;
  for (Eigen::Index i = 0; i < x.rad.rows(); ++i) {
    double s = 0;
    for (Eigen::Index j = 0; j < x.rad.cols(); ++j) s = up(s + up(x.rad(i, j) * x.rad(i, j)));
    out[static_cast<std::size_t>(i)] = up(std::sqrt(s));
  }
  return out;
}

norm_enclosure enclose_norm(const matrix<double>& xm, const norm_params& p, bool rms, double eps) {
  const mr x{xm, matrix<double>()};
  const Eigen::Index n = xm.rows(), E = xm.cols();
  norm_enclosure out{mr{matrix<double>(n, E), matrix<double>(n, E)}, std::vector<double>(static_cast<std::size_t>(n))};
  const ival width{static_cast<double>(E), static_cast<double>(E)}, e{eps, eps};
  std::vector<ival> c(static_cast<std::size_t>(E));
  for (Eigen::Index i = 0; i < n; ++i) {
    ival mean{0, 0};
    if (!rms) {
      ival s{0, 0};
      for (Eigen::Index k = 0; k < E; ++k) s = add(s, entry(x, i, k));
      mean = div(s, width);
    }
    ival ss{0, 0};
    for (Eigen::Index k = 0; k < E; ++k) {
      c[static_cast<std::size_t>(k)] = rms ? entry(x, i, k) : sub(entry(x, i, k), mean);
      ss = add(ss, sqr(c[static_cast<std::size_t>(k)]));
    }
    out.centred_lo[static_cast<std::size_t>(i)] = sqrt_of(ss).lo;
    const ival den = sqrt_of(add(div(ss, width), e));  // ≥ √eps > 0
    for (Eigen::Index k = 0; k < E; ++k) {
      const auto kk = static_cast<std::size_t>(k);
      const double g = p.gamma[kk], b = p.beta.empty() ? 0.0 : p.beta[kk];
      set_entry(out.y, i, k, add(mul(ival{g, g}, div(c[kk], den)), ival{b, b}));
    }
  }
  return out;
}

ival inv_sqrt(std::size_t d) {
  mpfr_t x;
  mpfr_init2(x, 64);
  ival r;
  mpfr_set_ui(x, static_cast<unsigned long>(d), MPFR_RNDN);  // exact
  mpfr_rec_sqrt(x, x, MPFR_RNDD);
  r.lo = mpfr_get_d(x, MPFR_RNDD);
  mpfr_set_ui(x, static_cast<unsigned long>(d), MPFR_RNDN);
  mpfr_rec_sqrt(x, x, MPFR_RNDU);
  r.hi = mpfr_get_d(x, MPFR_RNDU);
  mpfr_clear(x);
  return r;
}

double spectral_norm_up(const matrix<double>& W) {
  // ‖W‖₂ ≤ ‖W‖_F always; the certified largest singular value is usually much smaller.
  double f = 0;
  for (Eigen::Index i = 0; i < W.size(); ++i) f = up(f + up(W.data()[i] * W.data()[i]));
  double best = up(std::sqrt(f));
  if (W.size() == 0) return 0;
  const auto s = certified_singular_values_binary64(binary64_enclosure{W, matrix<double>::Zero(W.rows(), W.cols())});
  if (!s.sigma.empty()) {
    const double hi = mpfr_get_d(upper_of(s.sigma[0]).backend().data(), MPFR_RNDU);
    if (std::isfinite(hi)) best = std::min(best, hi);
  }
  return best;
}

double row_norm_hi(const matrix<double>& x, Eigen::Index i) {
  double s = 0;
  for (Eigen::Index k = 0; k < x.cols(); ++k) s = up(s + up(x(i, k) * x(i, k)));
  return up(std::sqrt(s));
}

ival row_distance(const matrix<double>& a, const matrix<double>& b, Eigen::Index i) {
  double lo = 0, hi = 0;
  for (Eigen::Index k = 0; k < a.cols(); ++k) {
    const double d = std::fabs(a(i, k) - b(i, k));  // within half an ulp of |a − b|
    const double h = up(d), l = std::max(0.0, down(d));
    hi = up(hi + up(h * h));
    lo = std::max(0.0, down(lo + down(l * l)));
  }
  return {std::max(0.0, down(std::sqrt(lo))), up(std::sqrt(hi))};
}

}  // namespace attncert::block::detail
