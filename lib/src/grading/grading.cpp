// lib/src/grading/grading.cpp — grading other implementations against the oracle: a
// candidate's errors from the exact values, the published test-suite rules, the run-to-run
// spread, and a candidate attention matrix against the output bound of the article (§11).
// See attncert/grading/grading.hpp.
#include <gmp.h>
#include <mpfi.h>
#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "attncert/error.hpp"
#include "attncert/field.hpp"
#include "attncert/grading/grading.hpp"
#include "attncert/number/double_double.hpp"
#include "attncert/number/emulated.hpp"
#include "attncert/number/traits.hpp"
#include "attncert/oracle/fast_row.hpp"
#include "attncert/oracle/oracle.hpp"

namespace attncert::grading {

using namespace oracle;

namespace {
constexpr double inf = std::numeric_limits<double>::infinity();
// A binary64 figure in messages: 4 significant digits.
std::string fmt_g(double x) {
  std::ostringstream os;
  os.precision(4);
  os << x;
  return os.str();
}
}  // namespace

// ---- the truth a graded array is compared with --------------------------------------------------

bool truth_view::enclosed(std::size_t e) const {
  if (!absent.empty() && absent[e]) return false;
  if (how != nullptr && (*how)[e] == decided_by::exact_policy) return false;  // judged by equality (approx_errors)
  return std::isfinite((*rad)[e]) && std::isfinite((*hi)[e]);
}

std::array<std::size_t, 4> truth_view::index(std::size_t e) const {
  std::array<std::size_t, 4> ix{};
  for (std::size_t q = rank; q-- > 0;) {
    ix[q] = e % shape[q];
    e /= shape[q];
  }
  return ix;
}

namespace {
void check_view(const truth_view& v) {
  if (v.rank < 1 || v.rank > 4) throw internal_error("grading: the " + v.what + " has rank " + std::to_string(v.rank));
  std::size_t n = 1;
  for (std::size_t q = 0; q < v.rank; ++q) n *= v.shape[q];
  if (v.hi->size() != n || v.lo->size() != n || v.rad->size() != n || v.reference->size() != n)
    throw internal_error("oracle result: the " + v.what + " enclosure has " + std::to_string(v.hi->size()) +
                         " elements, its shape says " + std::to_string(n));
}

// The index names of a gradient (gradient_truth's table).
std::string gradient_index_order(const std::string& what, std::size_t rank) {
  if (what == "dq" && rank == 4) return "b,h,i,k";
  if ((what == "dk" || what == "dv") && rank == 4) return "b,h_kv,j,k";
  if (what == "dbias" && rank == 4) return "b,h,i,j";
  if (what == "dsink" && rank == 1) return "h";
  std::string o;
  for (std::size_t q = 0; q < rank; ++q) o += (q ? ",d" : "d") + std::to_string(q);
  return o;
}
}  // namespace

truth_view output_truth(const oracle_result& r, target_format t) {
  truth_view v;
  v.hi = &r.t_hi;
  v.lo = &r.t_lo;
  v.rad = &r.t_rad;
  v.reference = &r.reference;
  v.target = t;
  v.shape = {r.B, r.H, r.nq, r.dv};
  v.rank = 4;
  v.what = "output";
  v.index_order = "b,h,i,k";
  v.how = &r.how;
  v.policy_field = "empty_rows";
  check_view(v);
  return v;
}

truth_view lse_truth(const oracle_result& r) {
  if (!r.has_lse) throw input_error("the oracle computed no LSE for this request: an LSE candidate cannot be graded");
  truth_view v;
  v.hi = &r.lse_hi;
  v.lo = &r.lse_lo;
  v.rad = &r.lse_rad;
  v.reference = &r.lse_reference;
  v.target = r.lse_target;
  v.shape = {r.B, r.H, r.nq, 1};
  v.rank = 3;
  v.what = "LSE";
  v.index_order = "b,h,i";
  v.how = &r.lse_how;
  v.policy_field = "empty_lse";
  check_view(v);
  return v;
}

truth_view gradient_truth(const gradient_tensor& g, target_format t, std::string what) {
  truth_view v;
  v.hi = &g.hi;
  v.lo = &g.lo;
  v.rad = &g.rad;
  v.reference = &g.reference;
  v.target = t;
  v.rank = g.shape.size();
  v.what = std::move(what);
  if (v.rank < 1 || v.rank > 4) throw internal_error("grading: the " + v.what + " has rank " + std::to_string(v.rank));
  std::copy(g.shape.begin(), g.shape.end(), v.shape.begin());
  v.index_order = gradient_index_order(v.what, v.rank);
  check_view(v);
  return v;
}

void skip_absent_rows(truth_view& v, const output_layout& lay) {
  const std::size_t rows = lay.B * lay.H * lay.nq;
  if (v.rank != 4 || v.shape[0] != lay.B || v.shape[1] != lay.H || v.shape[2] != lay.nq || v.shape[3] != lay.dv)
    throw internal_error("grading: the " + v.what + " does not have the layout's shape");
  for (std::size_t r = 0; r < rows; ++r) {
    if (lay.output_row(r) != output_layout::none) continue;
    if (v.absent.empty()) v.absent.assign(v.size(), 0);  // only layouts with padding rows get a mask
    std::fill(v.absent.begin() + static_cast<std::ptrdiff_t>(r * lay.dv),
              v.absent.begin() + static_cast<std::ptrdiff_t>((r + 1) * lay.dv), std::uint8_t{1});
  }
}

// ---- grading rules ------------------------------------------------------------------------------

grading_rule parse_grading_rule(const std::string& s) {
  if (s == "ulp") return grading_rule::ulp;
  if (s == "flash") return grading_rule::flash;
  if (s == "torch-sdpa" || s == "torch_sdpa") return grading_rule::torch_sdpa;
  if (s == "assert-close" || s == "assert_close") return grading_rule::assert_close;
  throw input_error("unknown grading rule '" + s + "' (expected ulp, flash, torch-sdpa or assert-close)");
}

std::string to_string(grading_rule r) {
  switch (r) {
    case grading_rule::ulp: return "ulp";
    case grading_rule::flash: return "flash";
    case grading_rule::torch_sdpa: return "torch-sdpa";
    case grading_rule::assert_close: return "assert-close";
  }
  return "?";
}

std::string rule_statement(grading_rule r) {
  switch (r) {
    case grading_rule::ulp: return "max |c - o| / ulp(o) <= max_ulp";
    case grading_rule::flash: return "max |c - o| <= k * max |b - o| + atol";
    case grading_rule::torch_sdpa:
      return "|c - o| <= atol + rtol * |o| elementwise, atol = F * max(max |b - o|, default_atol), "
             "rtol = F * max(max |b - o| / |o|, default_rtol)";
    case grading_rule::assert_close: return "|c - o| <= atol + rtol * |o| elementwise";
  }
  return "?";
}

std::string rule_source(grading_rule r) {
  switch (r) {
    case grading_rule::ulp: return "attncert (" + field("max_ulp") + ")";
    case grading_rule::flash: return "FlashAttention tests/test_flash_attn.py (test_flash_attn_output)";
    case grading_rule::torch_sdpa: return "PyTorch test/test_transformers.py (get_tolerances; assertEqual)";
    case grading_rule::assert_close: return "torch.testing.assert_close (torch/testing/_comparison.py)";
  }
  return "?";
}

// torch/testing/_comparison.py, _DTYPE_PRECISIONS ({dtype: (rtol, atol)}); checked against
// PyTorch 1.13's own table (Debian's python3-torch).
tolerances assert_close_defaults(target_format t) {
  switch (t) {
    case target_format::binary64: return {1e-7, 1e-7};
    case target_format::binary32: return {1.3e-6, 1e-5};
    case target_format::binary16: return {1e-3, 1e-5};
    case target_format::bfloat16: return {1.6e-2, 1e-5};
  }
  return {0, 0};
}

// PyTorch test/test_transformers.py:
//   default_atol = {torch.float16: 1e-3, torch.bfloat16: 1e-3, torch.float32: 1e-5}
//   default_rtol = {torch.float16: 1e-3, torch.bfloat16: 1.6e-2, torch.float32: 1.3e-6}
// (no float64 entry: the SDPA tests run float64 only as the reference; we take assert_close's).
tolerances sdpa_defaults(target_format t) {
  switch (t) {
    case target_format::binary64: return assert_close_defaults(t);
    case target_format::binary32: return {1.3e-6, 1e-5};
    case target_format::binary16: return {1e-3, 1e-3};
    case target_format::bfloat16: return {1.6e-2, 1e-3};
  }
  return {0, 0};
}

void validate_rule_settings(const rule_settings& s) {
  auto check = [](double x, const char* name) {
    if (!(x >= 0) || !std::isfinite(x))
      throw input_error(field(name) + " must be a finite number >= 0 (got " + fmt_g(x) + ")");
  };
  if (s.max_ulp) check(*s.max_ulp, "max_ulp");
  check(s.flash_k, "flash_k");
  check(s.fudge, "fudge");
  if (s.atol) check(*s.atol, "atol");
  if (s.rtol) check(*s.rtol, "rtol");
}

bool rule_needs_baseline(grading_rule r) { return r == grading_rule::flash || r == grading_rule::torch_sdpa; }

// ---- the rules applied to the gradients ----------------------------------------------------------

std::string to_string(gradient_kind g) {
  switch (g) {
    case gradient_kind::dq: return "dq";
    case gradient_kind::dk: return "dk";
    case gradient_kind::dv: return "dv";
    case gradient_kind::dbias: return "dbias";
    case gradient_kind::dsink: return "dsink";
  }
  return "?";
}

// The values and their sources are in grading.hpp (sdpa_gradient_fudge).
double sdpa_gradient_fudge(gradient_kind g) {
  switch (g) {
    case gradient_kind::dq: return 180;
    case gradient_kind::dk: return 16;
    case gradient_kind::dv: return 4;
    case gradient_kind::dbias: return 45;
    case gradient_kind::dsink: return 45;
  }
  return 0;
}

rule_settings gradient_rule_settings(rule_settings s, gradient_kind g, bool flash_k_given, bool fudge_given) {
  if (!flash_k_given) s.flash_k = flash_gradient_k;
  if (!fudge_given) s.fudge = sdpa_gradient_fudge(g);
  return s;
}

// ---- grading candidates ------------------------------------------------------------------------

namespace {

// The ulp of the target format at the exact value o = hi + lo.  hi is o rounded to binary64, so when
// hi is a power of two and lo has the opposite sign, o lies in the binade below hi and its ulp is the
// smaller one (a candidate one target ulp below 1 is about 1 ulp from o = 1 - 2^-60, not 0.5);
// nextafter(hi, 0) lies in that binade then, and in hi's own binade otherwise.
double ulp_of_truth(double hi, double lo, target_format t) noexcept {
  const bool below = hi != 0 && lo != 0 && std::signbit(lo) != std::signbit(hi);
  return target_ulp(below ? std::nextafter(hi, 0.0) : hi, t);
}

// Calls f(e, d, abs_o, ulp) for every element with an enclosed truth and a finite candidate:
// d = |c - o| computed as |(c - t_hi) - t_lo| (exact when c and t_hi are within a factor 2:
// Sterbenz), |o| as |t_hi|, ulp = ulp_of_truth.
template <class F>
void for_each_compared(const truth_view& t, const std::vector<double>& c, F&& f) {
  for (std::size_t e = 0; e < c.size(); ++e) {
    if (!t.enclosed(e) || !std::isfinite(c[e])) continue;
    const double hi = (*t.hi)[e], lo = (*t.lo)[e];
    f(e, std::fabs((c[e] - hi) - lo), std::fabs(hi), ulp_of_truth(hi, lo, t.target));
  }
}

void check_size(const truth_view& t, const std::vector<double>& c, const std::string& name) {
  if (c.size() != t.size())
    throw input_error(name + " has " + std::to_string(c.size()) + " elements, the " + t.what + " has " +
                      std::to_string(t.size()));
}

}  // namespace

candidate_grade approx_errors(const truth_view& t, const std::vector<double>& c, const std::string& name) {
  check_size(t, c, "candidate '" + name + "'");
  candidate_grade g;
  g.name = name;
  g.elements = c.size();
  g.index_rank = t.rank;
  g.index_order = t.index_order;
  g.policy_field = t.policy_field;
  for (std::size_t e = 0; e < c.size(); ++e) {
    if (t.how != nullptr && (*t.how)[e] == decided_by::exact_policy && (t.absent.empty() || !t.absent[e])) {
      ++g.policy_compared;
      const double want = (*t.reference)[e];
      if (want == c[e] || (std::isnan(want) && std::isnan(c[e]))) continue;
      if (g.policy_mismatch++ == 0) {
        g.policy_worst = t.index(e);
        g.policy_expected = want;
        g.policy_value = c[e];
      }
    } else if (!t.enclosed(e)) {
      ++g.skipped;
    } else if (!std::isfinite(c[e])) {
      ++g.nonfinite_where_finite;
    }
  }
  double sum_ulp = 0;
  bool has_abs = false;
  for_each_compared(t, c, [&](std::size_t e, double d, double abs_o, double ulp) {
    ++g.compared;
    const double eu = d / ulp;
    sum_ulp += eu;
    if (!has_abs || d > g.max_abs) {
      has_abs = true;
      g.max_abs = d;
      g.worst_abs = t.index(e);
    }
    if (abs_o != 0 && (!g.has_worst_rel || d / abs_o > g.max_rel)) {
      g.has_worst_rel = true;
      g.max_rel = d / abs_o;
      g.worst_rel = t.index(e);
    }
    for (std::size_t q = 0; q < ulp_thresholds.size(); ++q)
      if (eu > ulp_thresholds[q]) ++g.beyond[q];
    if (!g.has_worst || eu > g.max_ulp) {
      g.has_worst = true;
      g.max_ulp = eu;
      g.worst = t.index(e);
      g.worst_truth = (*t.hi)[e] + (*t.lo)[e];
      g.worst_reference = (*t.reference)[e];
      g.worst_value = c[e];
    }
  });
  g.mean_ulp = g.compared ? sum_ulp / static_cast<double>(g.compared) : 0.0;
  return g;
}

candidate_grade grade_candidate(const oracle_result& r, const std::vector<double>& c, target_format t,
                                const std::string& name) {
  return approx_errors(output_truth(r, t), c, name);
}

namespace {

constexpr double pytorch_rtol_guard = 1e30;  // get_tolerances(): "if rtol > 1e30: rtol = default_rtol"

// observed / threshold, with 0/0 = 0 and x/0 = +inf.
double ratio_of(double observed, double threshold) {
  if (observed == 0) return 0;
  return threshold > 0 ? observed / threshold : std::numeric_limits<double>::infinity();
}

void set_ratio(rule_verdict& v) {
  v.margin = v.threshold - v.observed;
  v.ratio = ratio_of(v.observed, v.threshold);
}

// The baseline's errors as test_transformers.py get_atol / get_rtol measure them (from the exact
// value): max |b - o|, and max |b - o| / |o| where 0/0 counts as default_rtol (nan_to_num(nan=
// default_rtol)) and x/0 as the largest binary64 number (nan_to_num's posinf for a float64 truth).
void measure_baseline(const truth_view& t, const std::vector<double>& b, double default_rtol, rule_verdict& v) {
  check_size(t, b, "the baseline");
  for (std::size_t e = 0; e < b.size(); ++e)
    if (t.enclosed(e) && !std::isfinite(b[e])) ++v.baseline_nonfinite;
  for_each_compared(t, b, [&](std::size_t, double d, double abs_o, double) {
    v.baseline_max_abs = std::max(v.baseline_max_abs, d);
    const double rel = abs_o != 0 ? d / abs_o : (d == 0 ? default_rtol : std::numeric_limits<double>::max());
    v.baseline_max_rel = std::max(v.baseline_max_rel, std::min(rel, std::numeric_limits<double>::max()));
  });
}

// |c - o| <= atol + rtol |o| elementwise: the decisive element is the one with the largest ratio.
void judge_elementwise(const truth_view& t, const std::vector<double>& c, rule_verdict& v) {
  double worst = -1;
  for_each_compared(t, c, [&](std::size_t e, double d, double abs_o, double) {
    const double tol = v.atol + v.rtol * abs_o;
    if (!(d <= tol)) ++v.violations;
    const double q = ratio_of(d, tol);
    if (q > worst) {
      worst = q;
      v.observed = d;
      v.threshold = tol;
      v.at = t.index(e);
      v.has_at = true;
    }
  });
  set_ratio(v);
  v.pass = v.violations == 0;
}

void judge_ulp(const candidate_grade& g, const rule_settings& s, const truth_view& t, const std::vector<double>& c,
               rule_verdict& v) {
  if (!s.max_ulp) return;  // no bound, no verdict
  v.graded = true;
  v.observed = g.max_ulp;
  v.threshold = *s.max_ulp;
  v.at = g.worst;
  v.has_at = g.has_worst;
  for_each_compared(t, c, [&](std::size_t, double d, double, double ulp) {
    if (d / ulp > *s.max_ulp) ++v.violations;
  });
  set_ratio(v);
  v.pass = v.violations == 0;
  if (!v.pass)
    v.reason = "max error " + fmt_g(v.observed) + " ulps exceeds " + field("max_ulp") + " " + fmt_g(v.threshold) + " (" +
               std::to_string(v.violations) + " elements over it)";
}

void judge_flash(const candidate_grade& g, const rule_settings& s, const truth_view& t, const std::vector<double>& c,
                 rule_verdict& v) {
  v.graded = true;
  v.k = s.flash_k;
  v.atol = s.atol.value_or(0.0);
  v.observed = g.max_abs;
  v.threshold = v.k * v.baseline_max_abs + v.atol;
  v.at = g.worst_abs;
  v.has_at = g.compared > 0;
  set_ratio(v);
  const double excess = std::max(0.0, v.observed - v.atol);
  v.k_needed = excess == 0 ? 0.0 : (v.baseline_max_abs > 0 ? excess / v.baseline_max_abs : std::numeric_limits<double>::infinity());
  for_each_compared(t, c, [&](std::size_t, double d, double, double) {
    if (!(d <= v.threshold)) ++v.violations;
  });
  v.pass = v.baseline_nonfinite == 0 && v.observed <= v.threshold;
  if (v.baseline_nonfinite == 0 && !v.pass)
    v.reason = "max |c - o| = " + fmt_g(v.observed) + " exceeds " + fmt_g(v.k) + " x max |b - o| (" +
               fmt_g(v.baseline_max_abs) + ") + " + fmt_g(v.atol) + " = " + fmt_g(v.threshold) + " (k needed " +
               fmt_g(v.k_needed) + ")";
}

// Incremental form of fudge_needed_for: f1 = max d/(A + R|o|), f2 = max (d - default_rtol |o|)/A.
struct fudge_bounds {
  double A, R, default_rtol, f1 = 0, f2 = 0;
  void add(double d, double abs_o) {
    f1 = std::max(f1, d / (A + R * abs_o));
    f2 = std::max(f2, (d - default_rtol * abs_o) / A);
  }
  double needed() const {
    if (std::isinf(R)) return std::max(f2, 0.0);  // every F > 0 has F·R > 1e30: rtol is the default
    const double cap = pytorch_rtol_guard / R;  // F·R > 1e30 from here on
    if (f1 <= cap) return f1;
    return f2 > cap ? f2 : std::nextafter(cap, std::numeric_limits<double>::infinity());
  }
};

void judge_torch_sdpa(const truth_view& t, const std::vector<double>& c, const rule_settings& s, rule_verdict& v) {
  v.graded = true;
  v.defaults = sdpa_defaults(t.target);
  v.fudge = s.fudge;
  const double A = std::max(v.baseline_max_abs, v.defaults.atol), R = std::max(v.baseline_max_rel, v.defaults.rtol);
  v.atol = v.fudge * A;
  v.rtol = v.fudge * R;
  if (v.rtol > pytorch_rtol_guard) v.rtol = v.defaults.rtol;
  judge_elementwise(t, c, v);
  fudge_bounds fb{A, R, v.defaults.rtol};
  for_each_compared(t, c, [&](std::size_t, double d, double abs_o, double) { fb.add(d, abs_o); });
  v.fudge_needed = fb.needed();
  if (v.baseline_nonfinite) v.pass = false;
  if (!v.pass && v.baseline_nonfinite == 0)
    v.reason = std::to_string(v.violations) + " elements over atol + rtol |o| (atol " + fmt_g(v.atol) + ", rtol " +
               fmt_g(v.rtol) + " from fudge " + fmt_g(v.fudge) + "); worst |c - o| = " + fmt_g(v.observed) +
               " against " + fmt_g(v.threshold) + " (fudge needed " + fmt_g(v.fudge_needed) + ")";
}

void judge_assert_close(const truth_view& t, const std::vector<double>& c, const rule_settings& s, rule_verdict& v) {
  v.graded = true;
  v.defaults = assert_close_defaults(t.target);
  v.atol = s.atol.value_or(v.defaults.atol);
  v.rtol = s.rtol.value_or(v.defaults.rtol);
  judge_elementwise(t, c, v);
  if (!v.pass)
    v.reason = std::to_string(v.violations) + " elements over atol + rtol |o| (atol " + fmt_g(v.atol) + ", rtol " +
               fmt_g(v.rtol) + "); worst |c - o| = " + fmt_g(v.observed) + " against " + fmt_g(v.threshold);
}

}  // namespace

double fudge_needed_for(const std::vector<double>& d, const std::vector<double>& abs_o, double A, double R,
                        double default_rtol) {
  if (d.size() != abs_o.size()) throw internal_error("fudge_needed_for: sizes differ");
  fudge_bounds fb{A, R, default_rtol};
  for (std::size_t e = 0; e < d.size(); ++e) fb.add(d[e], abs_o[e]);
  return fb.needed();
}

candidate_grade approx_grade(const truth_view& t, const std::vector<double>& c, const std::vector<double>* baseline,
                             const rule_settings& s, const std::string& name) {
  validate_rule_settings(s);
  if (rule_needs_baseline(s.rule) && baseline == nullptr)
    throw input_error(field("rule") + " " + to_string(s.rule) + " compares with a baseline: give " + field("baseline") +
                      " B.npy");
  candidate_grade g = approx_errors(t, c, name);
  rule_verdict& v = g.rule;
  v.rule = s.rule;
  v.nonfinite = g.nonfinite_where_finite;
  if (rule_needs_baseline(s.rule)) measure_baseline(t, *baseline, sdpa_defaults(t.target).rtol, v);
  switch (s.rule) {
    case grading_rule::ulp: judge_ulp(g, s, t, c, v); break;
    case grading_rule::flash: judge_flash(g, s, t, c, v); break;
    case grading_rule::torch_sdpa: judge_torch_sdpa(t, c, s, v); break;
    case grading_rule::assert_close: judge_assert_close(t, c, s, v); break;
  }
  if (!v.graded) return g;
  if (v.baseline_nonfinite) {
    v.pass = false;
    v.reason = "the baseline has " + std::to_string(v.baseline_nonfinite) +
               " NaN/Inf where the truth is finite: no threshold (as upstream, a NaN tolerance fails)";
  }
  if (v.nonfinite) {
    v.pass = false;
    v.reason = std::to_string(v.nonfinite) + " NaN/Inf where the truth is finite" + (v.reason.empty() ? "" : "; " + v.reason);
  }
  if (g.policy_mismatch) {
    v.pass = false;
    v.reason = std::to_string(g.policy_mismatch) + " of " + std::to_string(g.policy_compared) + " elements of fully masked rows are not " +
               field(g.policy_field) + "'s " + fmt_g(g.policy_expected) + ", the declared value of a row without keys" +
               (v.reason.empty() ? "" : "; " + v.reason);
  }
  return g;
}

// ---- run-to-run spread ---------------------------------------------------------------------------

rerun_spread approx_rerun_spread(const truth_view& t, const std::vector<double>& c1, const std::vector<double>& c2) {
  check_size(t, c1, "the first run");
  check_size(t, c2, "the second run (" + field("rerun") + ")");
  rerun_spread s;
  s.elements = c1.size();
  s.index_rank = t.rank;
  s.index_order = t.index_order;
  for (std::size_t e = 0; e < c1.size(); ++e) {
    const double a = c1[e], b = c2[e];
    if (a == b || (std::isnan(a) && std::isnan(b))) continue;
    ++s.differing;
    if (!std::isfinite(a) || !std::isfinite(b)) {
      ++s.nonfinite_differing;
      continue;
    }
    const double d = std::fabs(a - b);
    if (!s.has_worst || d > s.max_abs) {
      s.has_worst = true;
      s.max_abs = d;
      s.worst = t.index(e);
    }
    if (t.enclosed(e)) s.max_ulp = std::max(s.max_ulp, d / ulp_of_truth((*t.hi)[e], (*t.lo)[e], t.target));
  }
  return s;
}

// ---- attention candidates ------------------------------------------------------------------------

namespace {
// Outward-rounded interval arithmetic in binary64: a rounded sum or product is moved one ulp
// outward only when it is inexact (the exact error comes from TwoSum / an fma), so exact
// operations (e.g. 1 - 1) keep point intervals.
struct outward_interval {
  double lo, hi;
};
inline double dn(double x) { return std::nextafter(x, -inf); }
inline double up(double x) { return std::nextafter(x, inf); }
inline double sum_dn(double a, double b) {
  const dd s = two_sum(a, b);
  return s.lo < 0 ? dn(s.hi) : s.hi;
}
inline double sum_up(double a, double b) {
  const dd s = two_sum(a, b);
  return s.lo > 0 ? up(s.hi) : s.hi;
}
inline double prod_dn(double a, double b) {
  const double p = a * b;
  if (std::fabs(p) < 0x1p-960) return p == 0 && (a == 0 || b == 0) ? 0.0 : dn(p);
  const double e = std::fma(a, b, -p);
  return e < 0 ? dn(p) : p;
}
inline double prod_up(double a, double b) {
  const double p = a * b;
  if (std::fabs(p) < 0x1p-960) return p == 0 && (a == 0 || b == 0) ? 0.0 : up(p);
  const double e = std::fma(a, b, -p);
  return e > 0 ? up(p) : p;
}
inline outward_interval isub(outward_interval a, outward_interval b) { return {sum_dn(a.lo, -b.hi), sum_up(a.hi, -b.lo)}; }
inline outward_interval iadd(outward_interval a, outward_interval b) { return {sum_dn(a.lo, b.lo), sum_up(a.hi, b.hi)}; }
inline outward_interval imul_d(outward_interval a, double v) {
  const double x1 = prod_dn(a.lo, v), x2 = prod_dn(a.hi, v), y1 = prod_up(a.lo, v), y2 = prod_up(a.hi, v);
  return {std::min(x1, x2), std::max(y1, y2)};
}
inline outward_interval iabs(outward_interval a) {
  if (a.lo >= 0) return a;
  if (a.hi <= 0) return {-a.hi, -a.lo};
  return {0.0, std::max(-a.lo, a.hi)};
}
}  // namespace

attention_grade grade_attention(const oracle_request& req, const std::vector<double>& A_hat) {
  const auto& Q = req.Q;
  const auto& K = req.K;
  const auto& V = req.V;
  const std::size_t B = Q.B, H = Q.H, nq = Q.n, nk = K.n, d = Q.d, dv = V.d;
  if (A_hat.size() != B * H * nq * nk)
    throw input_error("attention candidate has " + std::to_string(A_hat.size()) + " elements, expected B*H*n_q*n_k = " +
                      std::to_string(B * H * nq * nk));
  for (double a : A_hat)
    if (!std::isfinite(a)) throw input_error("attention candidate contains NaN or Inf");
  const oracle::scale_ball sv = oracle::scale_binary64(req.scale, d);
  attention_grade g;
  const std::size_t rows = B * H * nq;
  g.rows = rows;
  g.row_l1.assign(rows, std::numeric_limits<double>::quiet_NaN());
  g.lhs_upper.assign(rows, std::numeric_limits<double>::quiet_NaN());
  g.rhs_lower.assign(rows, std::numeric_limits<double>::quiet_NaN());
  std::vector<double> KT(d * nk);
  oracle::detail::row_workspace ws;
  std::vector<std::uint8_t> allowed(nk);
  std::vector<double> ohi(dv), olo(dv), orad(dv);
  std::vector<outward_interval> acc(dv);
  for (std::size_t bh = 0; bh < B * H; ++bh) {
    const double* Kh = K.values.data() + bh * nk * d;
    const double* Vh = V.values.data() + bh * nk * dv;
    for (std::size_t j = 0; j < nk; ++j)
      for (std::size_t l = 0; l < d; ++l) KT[l * nk + j] = Kh[j * d + l];
    const std::size_t b = bh / H, h = bh % H;
    // max_j ||v_j||_2^2 over all keys of the head, bounded below and above
    double vmax_sq_hi = 0, vmax_sq_lo = 0;
    for (std::size_t j = 0; j < nk; ++j) {
      double n2lo = 0, n2hi = 0;
      for (std::size_t k = 0; k < dv; ++k) {
        const double v = Vh[j * dv + k];
        n2lo = sum_dn(n2lo, prod_dn(v, v));
        n2hi = sum_up(n2hi, prod_up(v, v));
      }
      vmax_sq_lo = std::max(vmax_sq_lo, n2lo);
      vmax_sq_hi = std::max(vmax_sq_hi, n2hi);
    }
    for (std::size_t i = 0; i < nq; ++i) {
      const std::size_t r = bh * nq + i;
      for (std::size_t j = 0; j < nk; ++j)
        allowed[j] = req.mask == mask_kind::causal ? j <= i
                     : req.mask == mask_kind::explicit_mask ? req.M.at(b, h, i, j)
                                                            : 1;
      const double* q = Q.values.data() + r * d;
      oracle::detail::row_inputs in{q, Kh, KT.data(), Vh, allowed.data(), nk, d, dv, sv.hi, sv.lo, sv.rad};
      if (!std::isfinite(sv.rad) || !oracle::detail::fast_row(in, ws, ohi.data(), olo.data(), orad.data())) {
        ++g.rows_skipped;
        continue;
      }
      // The weights and their sum as intervals: w_j in w (1 ± rho), W in [Wlo, Whi].
      const double rho = ws.rho, Wlo = ws.W_lo_bound, Whi = ws.W_hi_bound;
      const double* ah = A_hat.data() + r * nk;
      outward_interval l1{0, 0};
      for (auto& a : acc) a = {0, 0};
      const std::size_t n_allowed = static_cast<std::size_t>(std::count(allowed.begin(), allowed.end(), 1));
      for (std::size_t j = 0; j < nk; ++j) {
        outward_interval A{0, 0};
        if (allowed[j] && j < ws.w_hi.size()) {
          const double w = ws.w_hi[j];
          if (n_allowed == 1) {
            A = {1.0, 1.0};  // a single attended key: A_ij = 1 exactly
          } else if (w == 0.0 && ws.under > 0) {
            A = {0, up(0x1p-1019 / Wlo)};
          } else {
            const double wl = dn(dn(w + ws.w_lo[j]) * dn(1 - rho)), wu = up(up(w + ws.w_lo[j]) * up(1 + rho));
            A = {dn(wl / Whi), up(wu / Wlo)};
          }
        }
        const outward_interval diff = isub(outward_interval{ah[j], ah[j]}, A);
        l1 = iadd(l1, iabs(diff));
        if (diff.lo == 0 && diff.hi == 0) continue;
        for (std::size_t k = 0; k < dv; ++k) acc[k] = iadd(acc[k], imul_d(diff, Vh[j * dv + k]));
      }
      double lhs2_hi = 0, lhs2_lo = 0;
      for (std::size_t k = 0; k < dv; ++k) {
        const outward_interval a = iabs(acc[k]);
        lhs2_hi = sum_up(lhs2_hi, prod_up(a.hi, a.hi));
        lhs2_lo = sum_dn(lhs2_lo, prod_dn(a.lo, a.lo));
      }
      const double lhs_hi = lhs2_hi == 0 ? 0.0 : up(std::sqrt(lhs2_hi)), lhs_lo = dn(std::sqrt(lhs2_lo));
      const double rhs_lo = prod_dn(l1.lo, dn(std::sqrt(vmax_sq_lo))), rhs_hi = prod_up(l1.hi, up(std::sqrt(vmax_sq_hi)));
      g.row_l1[r] = 0.5 * (l1.lo + l1.hi);
      g.max_row_l1 = std::max(g.max_row_l1, l1.hi);
      g.lhs_upper[r] = lhs_hi;
      g.rhs_lower[r] = rhs_lo;
      if (lhs_hi <= rhs_lo) ++g.bound_certified;
      else if (lhs_lo > rhs_hi) ++g.bound_refuted;
      else ++g.bound_undecided;
    }
  }
  return g;
}

// ---- the verdict of an oracle call ----------------------------------------------------------------

std::string to_string(outcome o) {
  switch (o) {
    case outcome::none: return "none";
    case outcome::pass: return "pass";
    case outcome::fail: return "fail";
    case outcome::undecided: return "undecided";
  }
  return "?";
}

int exit_status(outcome o) {
  switch (o) {
    case outcome::fail: return 1;
    case outcome::undecided: return 3;
    case outcome::none:
    case outcome::pass: return 0;
  }
  return 1;
}

outcome gradient_set_outcome(const gradient_set_grade& s) {
  outcome o = outcome::none;
  for (const auto& gg : s.gradients) {
    const rule_verdict& v = gg.grade.rule;
    if (!v.graded) continue;
    if (!v.pass) return outcome::fail;
    o = outcome::pass;
  }
  return o;
}

std::optional<candidate_comparison> compare_candidates(const std::vector<candidate_grade>& candidates) {
  if (candidates.size() < 2) return std::nullopt;
  const auto& a = candidates[0];
  const auto& b = candidates[1];
  candidate_comparison c;
  c.candidate = a.name;
  c.baseline = b.name;
  c.candidate_max_ulp = a.max_ulp;
  c.baseline_max_ulp = b.max_ulp;
  if (b.max_ulp > 0) c.ratio = a.max_ulp / b.max_ulp;
  c.pass = a.nonfinite_where_finite == 0 && a.max_ulp <= 2 * b.max_ulp;
  return c;
}

oracle_verdict decide_oracle_verdict(const graded_call& call) {
  if (call.result == nullptr) throw internal_error("decide_oracle_verdict: no oracle result");
  oracle_verdict v;
  std::vector<std::string>& reasons = v.reasons;
  bool judged = false;
  if (call.candidates)
    for (const auto& g : *call.candidates) {
      judged = judged || g.rule.graded;
      if (g.rule.graded && !g.rule.pass)
        reasons.push_back("candidate " + g.name + " fails " + field("rule") + " " + to_string(g.rule.rule) + ": " +
                          g.rule.reason);
    }
  if (call.lse_candidate) {
    const rule_verdict& r = call.lse_candidate->rule;
    judged = judged || r.graded;
    if (r.graded && !r.pass) reasons.push_back("LSE candidate fails " + field("rule") + " " + to_string(r.rule) + ": " + r.reason);
  }
  if (call.gradient_candidates)
    for (const auto& s : *call.gradient_candidates)
      for (const auto& gg : s.gradients) {
        const rule_verdict& r = gg.grade.rule;
        judged = judged || r.graded;
        if (r.graded && !r.pass)
          reasons.push_back("gradient candidate " + s.name + " " + to_string(gg.gradient) + " fails " + field("rule") + " " +
                            to_string(r.rule) + ": " + r.reason);
      }
  if (call.attention) {
    judged = true;
    if (call.attention->bound_refuted)
      reasons.push_back("the output bound was refuted on " + std::to_string(call.attention->bound_refuted) + " rows");
  }
  if (call.candidates) v.comparison = compare_candidates(*call.candidates);
  if (!reasons.empty()) {
    v.result = outcome::fail;
    return v;
  }
  v.result = judged ? outcome::pass : outcome::none;
  if (call.result->undecided_rows) {
    v.result = outcome::undecided;  // nothing failed, but not everything was computed
    reasons.push_back(std::to_string(call.result->undecided_rows) + " rows undecided: not computed within " +
                      field("max_seconds"));
  }
  if (!call.backward_not_computed.empty()) {
    v.result = outcome::undecided;
    reasons.push_back(call.backward_not_computed);
  }
  return v;
}

}  // namespace attncert::grading
