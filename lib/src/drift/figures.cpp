// lib/src/drift/figures.cpp — the data and parameters of the README's figures (drift/figures.hpp).
#include "attncert/drift/figures.hpp"

#include <charconv>
#include <cmath>
#include <optional>
#include <sstream>

#include "attncert/deadline.hpp"
#include "attncert/error.hpp"
#include "attncert/field.hpp"
#include "attncert/drift/recipe.hpp"
#include "attncert/linalg/exact.hpp"
#include "attncert/number/decimal.hpp"
#include "attncert/number/precision_guard.hpp"

namespace attncert {

namespace {

// Shortest decimal that reads back as the same binary64 (std::to_chars).
std::string n17(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

// Ends of an enclosure in a data file: 17 significant digits rounded outward (decimal.hpp),
// so that the printed band still contains the exact value.
std::string encl_lo(double x) { return decimal_down(x, 17, decimal_layout::general); }
std::string encl_hi(double x) { return decimal_up(x, 17, decimal_layout::general); }

// A gnuplot string literal (single quotes: no escapes but '' for a quote).
std::string gp_string(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// A gnuplot array of strings or of numbers.
std::string gp_array(const std::string& name, const std::vector<std::string>& items) {
  std::string s = "array " + name + "[" + std::to_string(items.size()) + "] = [";
  for (std::size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
  return s + "]\n";
}

// Polls the budget and the interruption from the sweeps (deadline.hpp).
void poll_budget(std::size_t, std::size_t) { check_deadline(); }

// A sweep of a figure must be complete: run_drift stops at the budget with a PARTIAL result,
// which a figure does not draw.
drift_result complete_sweep(const drift_request& r) {
  drift_result res = run_drift(r);
  if (res.partial || res.bisection_stopped) throw time_limit_reached("a sweep of the figures stopped at the time limit");
  return res;
}

// A sweep of the two-token family in fp64 under numpy's policy, polling the budget (figures 1 and 2).
drift_request fp64_numpy_sweep() {
  drift_request r;
  r.recipes = parse_recipes("fp64");
  r.policies = parse_policies("numpy");
  r.progress = poll_budget;
  return r;
}

// The colour and point type of recipe i (cycling through eight).
const char* const recipe_colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"};
const int recipe_points[] = {7, 5, 9, 11, 13, 4, 6, 8};

// The exact rank over Q of the object recipe rc forms on `in`: every formed entry is a binary number
// (binary16 … binary64, or MPFR at N bits), hence exact in Q, so the rank is decided by exact
// elimination (tier exact).  Nothing when the recipe cannot form it (overflow).  For the figures'
// small matrices only (the cost grows as n^3 rational operations).
std::optional<std::size_t> formed_exact_rank(const recipe& rc, const recipe_input& in) {
  matrix<mpq_rational> Q;
  if (rc.type != recipe::kind::mpfr) {
    const auto M = approx_formed_object(rc, in);  // binary64 numbers: exact for every recipe but mpfrN
    if (!M) return std::nullopt;
    Q = from_double_matrix<mpq_rational>(*M);
  } else {
    precision_guard g(rc.result.requested_bits);
    matrix<mpfr_float> M;
    try {
      M = recipe_form<mpfr_float, mpfr_float, mpfr_float, mpfr_float, mpfr_float>(in);
    } catch (const input_error&) {
      return std::nullopt;
    }
    Q.resize(M.rows(), M.cols());
    for (Eigen::Index i = 0; i < M.rows(); ++i)
      for (Eigen::Index j = 0; j < M.cols(); ++j) {
        if (!mpfr_number_p(M(i, j).backend().data())) return std::nullopt;
        mpfr_get_q(Q(i, j).backend().data(), M(i, j).backend().data());
      }
  }
  return rank(Q);
}

// Data for the smallest-singular-value figure: one block per recipe, then the band.  With
// `decide_zeros` (the figures' 2×2 family), each recipe's formed matrix gets its exact rank over Q:
// where it is rank-deficient its σ_min is exactly 0, whatever the SVD printed, so the σ column is
// NaN and the recipe's "exact zero" column is 1 (drawn apart, at the bottom); otherwise the SVD's
// σ_min (NaN for a computed 0 or an unformed recipe).
std::string sigma_min_data(const drift_request& r, const drift_result& res, bool decide_zeros) {
  std::ostringstream os;
  os << "# a  sigma_min_enclosure_lo  sigma_min_enclosure_hi  then per recipe: sigma_min (NaN: zero or not formed)";
  if (decide_zeros) os << "; then per recipe: 1 where the formed matrix is rank-deficient over Q (sigma_min = 0 exactly)";
  os << "\n# recipes:";
  for (const auto& rc : r.recipes) os << " " << rc.name;
  os << "\n";
  for (const auto& p : res.points) {
    check_deadline();  // the exact ranks below: figures --max-seconds, and the interruption
    os << n17(p.a) << " " << encl_lo(p.smin_lo_d) << " " << encl_hi(p.smin_hi_d);
    std::vector<int> zero(p.recipes.size(), 0);
    if (decide_zeros) {
      const recipe_input in = drift_instance(r, p.a);
      for (std::size_t i = 0; i < p.recipes.size(); ++i) {
        const auto k = p.recipes[i].formed ? formed_exact_rank(r.recipes[i], in) : std::nullopt;
        zero[i] = k && *k < static_cast<std::size_t>(std::min(in.Q.rows(), in.K.rows())) ? 1 : 0;
      }
    }
    for (std::size_t i = 0; i < p.recipes.size(); ++i) {
      const auto& m = p.recipes[i];
      os << " " << (m.formed && m.sigma_min > 0 && !zero[i] ? n17(m.sigma_min) : std::string("NaN"));
    }
    if (decide_zeros)
      for (int z : zero) os << " " << z;
    os << "\n";
  }
  return os.str();
}

}  // namespace

figure sigma_min_plot(const drift_request& r, const drift_result& res, const std::string& stem, const std::string& data_name,
                      const std::string& title, bool decide_zeros) {
  figure f;
  f.stem = stem;
  f.script = "sigma-min";
  f.data.push_back({data_name, sigma_min_data(r, res, decide_zeros)});
  // Exact zeros are drawn apart, at the bottom: recipe i at zeros_at / 1.6^i.
  const double zeros_at = decide_zeros ? 1e-22 : 0;
  std::vector<std::string> names, colors, points, zero_y;
  for (std::size_t i = 0; i < r.recipes.size(); ++i) {
    names.push_back(gp_string(r.recipes[i].name));
    colors.push_back(gp_string(recipe_colors[i % 8]));
    points.push_back(std::to_string(recipe_points[i % 8]));
    zero_y.push_back(n17(zeros_at / std::pow(1.6, static_cast<double>(i))));
  }
  std::ostringstream p;
  p << "plot_title = " << gp_string(title) << "\ndata_file = " << gp_string(data_name) << "\nnrec = " << r.recipes.size()
    << "\n" << gp_array("recipe", names) << gp_array("color", colors) << gp_array("point", points)
    << "zeros_at = " << n17(zeros_at) << "\nzeros_low = " << n17(zeros_at / 10) << "\nzeros_label_y = " << n17(zeros_at * 3)
    << "\n" << gp_array("zero_y", zero_y);
  f.params = p.str();
  return f;
}

figure contrast_figure() {
  drift_request r = fp64_numpy_sweep();
  const recipe f32 = parse_recipe("fp32"), f64 = parse_recipe("fp64");
  std::ostringstream exact, pts;
  exact << "# a  tanh(a) enclosure lo  hi  (exact contrast eigenvalue = det A, P01)\n";
  pts << "# a  eigenvalue_fp32 det_fp32 eigenvalue_fp64 det_fp64  (A formed by the recipe; A00-A01 and det in its format)\n";
  for (int panel = 0; panel < 2; ++panel) {
    r.log = panel == 1;
    r.from = panel == 0 ? 0.0 : 1e-12;
    r.to = panel == 0 ? 3.0 : 1.0;
    r.points = panel == 0 ? 301 : 241;
    const drift_result res = complete_sweep(r);
    for (const auto& p : res.points) exact << n17(p.a) << " " << encl_lo(p.smin_lo_d) << " " << encl_hi(p.smin_hi_d) << "\n";
    exact << "\n\n";
    const int np = panel == 0 ? 31 : 49;
    for (int i = 0; i < np; ++i) {
      const double t = static_cast<double>(i) / (np - 1);
      const double a = panel == 0 ? 3.0 * t : 1e-12 * std::pow(1e12, t);
      const auto c32 = two_token_contrast(f32, a), c64 = two_token_contrast(f64, a);
      pts << n17(a) << " " << n17(c32.first) << " " << n17(c32.second) << " " << n17(c64.first) << " " << n17(c64.second) << "\n";
    }
    pts << "\n\n";
  }
  figure f;
  f.stem = f.script = "fig1-two-token-contrast";
  f.width = 1200;
  f.height = 520;
  f.data = {{"fig1-two-token-contrast.exact.dat", exact.str()}, {"fig1-two-token-contrast.points.dat", pts.str()}};
  return f;
}

figure saturation_figure() {
  drift_request r = fp64_numpy_sweep();
  r.from = 0;
  r.to = 4;
  r.points = 401;
  const drift_result res = complete_sweep(r);
  std::ostringstream os;
  os << "# a  tanh(a) (midpoint of its certified enclosure)  1 - tanh(a)^2 (from that midpoint, binary64)\n";
  for (const auto& p : res.points) {
    const double t = (p.smin_lo_d + p.smin_hi_d) / 2;
    os << n17(p.a) << " " << n17(t) << " " << n17(1 - t * t) << "\n";
  }
  figure f;
  f.stem = f.script = "fig2-saturation";
  f.width = 900;
  f.height = 520;
  f.data = {{"fig2-saturation.dat", os.str()}};
  return f;
}

figure drift_map_figure() {
  figure f;
  f.stem = f.script = "fig3-drift-map";
  f.width = 1300;
  f.height = 620;
  std::vector<std::string> titles, files, froms, tos, rows, tics;
  for (int panel = 0; panel < 2; ++panel) {
    drift_request r;
    r.family = panel == 0 ? drift_family::two_token : drift_family::causal;
    r.recipes = parse_recipes("fp16,bf16,fp16-fp32acc,bf16-fp32acc,fp32,fp64,mpfr256");
    r.policies = parse_policies("numpy,relative:1e-3,absolute:1e-6");
    r.log = true;
    r.from = panel == 0 ? 1e-20 : 1e-2;
    r.to = panel == 0 ? 1e2 : 1e3;
    r.points = panel == 0 ? 89 : 81;
    r.enclosures = false;
    r.resolution = 1e-6;
    r.progress = poll_budget;
    const drift_result res = complete_sweep(r);
    const std::string data = panel == 0 ? "fig3-drift-map.two-token.dat" : "fig3-drift-map.causal.dat";
    std::ostringstream os, ytics;
    os << "# row  from  to  policy_index   (bisected divergence intervals; rows = recipe x policy)\n";
    ytics << "(";
    for (std::size_t k = 0; k < res.divergence.size(); ++k) {
      const auto& d = res.divergence[k];
      const double y = static_cast<double>(res.divergence.size() - 1 - k);
      ytics << (k ? ", " : "") << "'" << d.recipe << "  " << d.policy << "' " << y;
      for (const auto& [a, b] : d.intervals)
        os << y << " " << n17(a) << " " << n17(b) << " " << (k % r.policies.size()) << "\n";
    }
    ytics << ")";
    if (res.divergence.empty() || os.str().find('\n') == os.str().size() - 1) os << "-1 1 1 0\n";
    f.data.push_back({data, os.str()});
    titles.push_back(gp_string(panel == 0 ? "two-token: S = a qk^T, attention" : "causal: S = -a I, causal mask (n = 4), attention"));
    files.push_back(gp_string(data));
    froms.push_back(n17(r.from));
    tos.push_back(n17(r.to));
    rows.push_back(std::to_string(res.divergence.size()));
    tics.push_back(gp_string(ytics.str()));
  }
  f.params = gp_array("panel_title", titles) + gp_array("panel_data", files) + gp_array("panel_from", froms) +
             gp_array("panel_to", tos) + gp_array("panel_rows", rows) + gp_array("panel_ytics", tics);
  return f;
}

figure sigma_min_figure() {
  drift_request r;
  r.recipes = parse_recipes("mpfr256,fp64,fp32,bf16-fp32acc,fp16");
  r.policies = parse_policies("numpy");
  r.progress = poll_budget;
  r.log = true;
  r.from = 1e-20;
  r.to = 10;
  r.points = 85;
  const drift_result res = complete_sweep(r);
  // Which points are exact zeros is decided from the exact rank over Q of each formed matrix (not from
  // the SVD's value: an SVD of an exactly rank-1 matrix prints noise such as 1.7e-17 in fp64).
  return sigma_min_plot(r, res, "fig4-sigma-min", "fig4-sigma-min.dat",
                        "Figure 4. Two-token family: smallest singular value of A per recipe (exact zeros: bottom row)", true);
}

figures_request build_figures_request(const figures_spec& s) {
  const std::string& f = s.formats;
  if (f != "png" && f != "svg" && f != "png,svg" && f != "svg,png")
    throw input_error(field("formats") + " must be png, svg or png,svg (got '" + one_line(f, 60) + "')");
  if (!(s.max_seconds >= 0) || s.max_seconds > 1e7) throw input_error(field("max_seconds") + " must be in [0, 1e7] (0: none)");
  figures_request r;
  for (const char* e : {"png", "svg"})
    if (("," + f + ",").find(std::string(",") + e + ",") != std::string::npos) r.formats.push_back(e);
  r.max_seconds = s.max_seconds;
  return r;
}

}  // namespace attncert
