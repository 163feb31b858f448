// tools/attncert/drift_command.cpp — `attncert drift` (a sweep of the numerical rank against
// the certified exact rank) and `attncert figures` (the README's figures).  Thin: parse,
// call lib (report/drift.hpp, attention/recipe.hpp), write data, run gnuplot.
//
// Figures are rendered by gnuplot (Debian gnuplot-nox; pngcairo and svg terminals) from data
// files written here; the data come from the same functions as `attncert drift` and the
// checks (recipe_form → masked_softmax; the closed-form enclosures of P01).  The data files
// and gnuplot scripts are kept next to the images.
#include "drift_command.hpp"

#include "cli_common.hpp"
#include "cli_options.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "attncert/deadline.hpp"
#include "attncert/io/atomic_file.hpp"
#include "attncert/linalg/exact.hpp"
#include "attncert/number/decimal.hpp"
#include "attncert/drift/spec.hpp"
#include "attncert/drift/sweep.hpp"
#include "attncert/report/drift.hpp"

namespace attncert::cli {

namespace fs = std::filesystem;

namespace {

// Shortest decimal that reads back as the same binary64 (std::to_chars).
std::string n17(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

// A new file in a directory staged (or scratch) by the command's output transaction.  Polls the
// interruption and the budget (figures --max-seconds; without a deadline_scope there is none).
void write_file(const fs::path& p, const std::string& content) {
  check_deadline();
  io::write_new_file(p, content);
}

// Polls the interruption and the budget from the sweeps of `figures` (no progress line: figures
// shows steps).
void poll_budget(std::size_t, std::size_t) { check_deadline(); }

// A sweep of `figures` must be complete: run_drift stops at the budget (deadline.hpp) with a
// PARTIAL result, which figures does not draw.
drift_result complete_sweep(const drift_request& r) {
  drift_result res = run_drift(r);
  if (res.partial || res.bisection_stopped) throw time_limit_reached("a sweep of the figures stopped at the time limit");
  return res;
}

// Run `gnuplot script` with the working directory `dir`; throws input_error with gnuplot's
// first error line when it fails or is missing.
void run_gnuplot(const fs::path& where, const std::string& script) {
  const fs::path dir = fs::absolute(where);
  const fs::path log = dir / (script + ".log");
  const pid_t pid = ::fork();
  if (pid < 0) throw input_error("cannot start gnuplot (fork failed)");
  if (pid == 0) {
    if (::chdir(dir.c_str()) != 0) ::_exit(126);
    if (!std::freopen(log.c_str(), "w", stderr)) ::_exit(126);
    if (!std::freopen("/dev/null", "w", stdout)) ::_exit(126);
    ::execlp("gnuplot", "gnuplot", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Wait, polling the budget and the interruption every 10 ms: past either, gnuplot is ended.
  int status = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) break;
    if (w == 0 && (deadline_passed() || interrupt_requested())) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    ::usleep(10000);
  }
  check_deadline();  // a terminal's SIGINT reaches gnuplot too: report the interruption (or the budget), not gnuplot
  std::string first;
  {
    std::ifstream in(log);
    std::string line;
    while (std::getline(in, line))
      if (line.find("rror") != std::string::npos) {
        first = line;
        break;
      }
  }
  std::error_code ec;
  fs::remove(log, ec);
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 127)
    throw input_error("gnuplot not found: install gnuplot-nox (Debian) to render figures");
  if (WEXITSTATUS(status) == 126) throw input_error("cannot run gnuplot in '" + dir.string() + "'");
  if (WEXITSTATUS(status) != 0)
    throw input_error("gnuplot failed on " + script + ": " + (first.empty() ? std::string("see the script") : first));
}

// The terminal line and output name for one image format.
std::string terminal(const std::string& ext, int w, int h) {
  if (ext == "png")
    return "set terminal pngcairo enhanced size " + std::to_string(w) + "," + std::to_string(h) +
           " font 'DejaVu Sans,11' background rgb 'white'";
  return "set terminal svg enhanced size " + std::to_string(w) + "," + std::to_string(h) +
         " font 'DejaVu Sans,11' background rgb 'white'";
}

const char* recipe_styles[] = {"lc rgb '#d62728' pt 7", "lc rgb '#1f77b4' pt 5", "lc rgb '#2ca02c' pt 9",
                               "lc rgb '#9467bd' pt 11", "lc rgb '#ff7f0e' pt 13", "lc rgb '#8c564b' pt 4",
                               "lc rgb '#17becf' pt 6", "lc rgb '#7f7f7f' pt 8"};

// Ends of an enclosure in a data file: 17 significant digits rounded outward (decimal.hpp),
// so that the printed band still contains the exact value.
std::string encl_lo(double x) { return decimal_down(x, 17, decimal_layout::general); }
std::string encl_hi(double x) { return decimal_up(x, 17, decimal_layout::general); }

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
std::string sigma_min_data(const drift_request& r, const drift_result& res, bool decide_zeros = false) {
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

// `zeros_at`: the y at which exact zeros are drawn (decide_zeros data), 0 for none.
std::string sigma_min_script(const drift_request& r, const std::string& data, const std::string& title,
                             double zeros_at = 0) {
  std::ostringstream gp;
  gp << "set title \"" << title << "\"\n"
     << "set logscale xy\nset format x '10^{%L}'\nset format y '10^{%L}'\n"
     << "set xlabel 'score scale a'\nset ylabel 'smallest singular value'\n"
     << "set key left top box opaque\nset grid\nset datafile missing 'NaN'\n";
  if (zeros_at > 0)
    gp << "set yrange [" << n17(zeros_at / 10) << ":*]\n"
       << "set label 'exact 0 (formed matrix rank-deficient over Q)' at graph 0.99, first " << n17(zeros_at * 3)
       << " right font ',9'\n";
  gp << "plot '" << data << "' using 1:2:3 with filledcurves lc rgb '#bbbbbb' title 'certified enclosure (exact {/Symbol s}_{min})', \\\n"
     << "     '' using 1:(sqrt($2*$3)) with lines lc rgb 'black' lw 1 notitle";
  for (std::size_t i = 0; i < r.recipes.size(); ++i)
    gp << ", \\\n     '' using 1:" << (4 + i) << " with points " << recipe_styles[i % 8] << " ps 0.8 title '"
       << r.recipes[i].name << "'";
  if (zeros_at > 0)
    for (std::size_t i = 0; i < r.recipes.size(); ++i)
      gp << ", \\\n     '' using 1:($" << (4 + r.recipes.size() + i) << " > 0 ? " << n17(zeros_at) << " / "
         << n17(std::pow(1.6, static_cast<double>(i))) << " : NaN) with points " << recipe_styles[i % 8]
         << " ps 0.5 notitle";
  gp << "\n";
  return gp.str();
}

// Render `body` (a gnuplot script without terminal/output) to every requested extension.
void render(const fs::path& dir, const std::string& stem, const std::string& body, const std::vector<std::string>& exts,
            int w, int h) {
  for (const auto& ext : exts) {
    const std::string script = stem + "." + ext + ".gp";
    write_file(dir / script, terminal(ext, w, h) + "\nset output '" + stem + "." + ext + "'\n" + body + "unset output\n");
    run_gnuplot(dir, script);
  }
}

struct drift_args {
  std::string family = "two-token", param = "a", recipes = "fp16,bf16-fp32acc,fp32,fp64,mpfr256",
              policies = "numpy,absolute:1e-6,relative:1e-3", object, format = "text", out, plot;
  double from = 0, to = 1, resolution = 1e-9, max_seconds = 0;
  std::size_t points = 101;
  bool log = false, no_enclosures = false, per_point = false;
  std::uint64_t seed = 20261129;
  long n = 0, d = 0;
  unsigned max_bits = 4096;
};

struct figures_args {
  std::string out, formats = "png,svg", format = "text";
  double max_seconds = 0;
};

// Figure 1: contrast eigenvalue and determinant of the two-token family.
void figure1(const fs::path& dir, const std::vector<std::string>& exts) {
  drift_request r;
  r.recipes = parse_recipes("fp64");
  r.policies = parse_policies("numpy");
  r.progress = poll_budget;
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
  write_file(dir / "fig1-two-token-contrast.exact.dat", exact.str());
  write_file(dir / "fig1-two-token-contrast.points.dat", pts.str());
  std::ostringstream gp;
  gp << "set multiplot layout 1,2 title 'Figure 1. Two-token family S = a qk^T: contrast eigenvalue and det A (both tanh a)'\n"
     << "set datafile missing 'NaN'\nset grid\nset key right bottom box opaque\n"
     << "set title 'linear scales'\nset xlabel 'score scale a'\nset ylabel 'contrast eigenvalue, det A'\nset yrange [0:1.05]\n"
     << "plot 'fig1-two-token-contrast.exact.dat' index 0 using 1:(($2+$3)/2) with lines lc rgb 'black' lw 2 title 'exact tanh a (certified)', \\\n"
     << "     'fig1-two-token-contrast.points.dat' index 0 using 1:4 with points lc rgb '#1f77b4' pt 6 ps 1.2 title 'eigenvalue, fp64', \\\n"
     << "     '' index 0 using 1:5 with points lc rgb '#1f77b4' pt 2 ps 0.8 title 'det, fp64', \\\n"
     << "     '' index 0 using 1:2 with points lc rgb '#d62728' pt 7 ps 0.5 title 'eigenvalue, fp32', \\\n"
     << "     '' index 0 using 1:3 with points lc rgb '#d62728' pt 1 ps 0.8 title 'det, fp32'\n"
     << "set key left top box opaque\nset logscale xy\nset format x '10^{%L}'\nset format y '10^{%L}'\nset yrange [1e-13:2]\n"
     << "set title 'near a = 0 (log scales; a computed 0 is not drawn)'\n"
     << "plot 'fig1-two-token-contrast.exact.dat' index 1 using 1:(($2+$3)/2) with lines lc rgb 'black' lw 2 title 'exact tanh a (certified)', \\\n"
     << "     'fig1-two-token-contrast.points.dat' index 1 using 1:($4>0?$4:NaN) with points lc rgb '#1f77b4' pt 6 ps 1.2 title 'eigenvalue, fp64', \\\n"
     << "     '' index 1 using 1:($5>0?$5:NaN) with points lc rgb '#1f77b4' pt 2 ps 0.8 title 'det, fp64', \\\n"
     << "     '' index 1 using 1:($2>0?$2:NaN) with points lc rgb '#d62728' pt 7 ps 0.5 title 'eigenvalue, fp32', \\\n"
     << "     '' index 1 using 1:($3>0?$3:NaN) with points lc rgb '#d62728' pt 1 ps 0.8 title 'det, fp32'\n"
     << "unset multiplot\n";
  render(dir, "fig1-two-token-contrast", gp.str(), exts, 1200, 520);
}

// Figure 2: tanh a and its derivative 1 − tanh² a on one axis.
void figure2(const fs::path& dir, const std::vector<std::string>& exts) {
  drift_request r;
  r.recipes = parse_recipes("fp64");
  r.policies = parse_policies("numpy");
  r.progress = poll_budget;
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
  write_file(dir / "fig2-saturation.dat", os.str());
  const std::string gp =
      "set title 'Figure 2. Contrast transmission and its sensitivity to the score scale (two-token family)'\n"
      "set xlabel 'score scale a (dimensionless)'\nset ylabel 'dimensionless'\nset grid\nset yrange [0:1.05]\n"
      "set key center right box opaque\n"
      "plot 'fig2-saturation.dat' using 1:2 with lines lw 2 lc rgb '#1f77b4' title 'contrast transmission tanh a', \\\n"
      "     '' using 1:3 with lines lw 2 dt 2 lc rgb '#d62728' title 'its derivative d/da tanh a = 1 - tanh^2 a'\n";
  render(dir, "fig2-saturation", gp, exts, 900, 520);
}

// Figure 3: drift map, two-token and causal families.
void figure3(const fs::path& dir, const std::vector<std::string>& exts) {
  const std::string recipes = "fp16,bf16,fp16-fp32acc,bf16-fp32acc,fp32,fp64,mpfr256";
  const std::string policies = "numpy,relative:1e-3,absolute:1e-6";
  std::ostringstream gp;
  gp << "set multiplot layout 1,2 title 'Figure 3. Drift map: where numerical rank != certified exact rank (bars), per recipe x policy'\n";
  for (int panel = 0; panel < 2; ++panel) {
    drift_request r;
    r.family = panel == 0 ? drift_family::two_token : drift_family::causal;
    r.recipes = parse_recipes(recipes);
    r.policies = parse_policies(policies);
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
    ytics << "set ytics (";
    for (std::size_t k = 0; k < res.divergence.size(); ++k) {
      const auto& d = res.divergence[k];
      const double y = static_cast<double>(res.divergence.size() - 1 - k);
      ytics << (k ? ", " : "") << "'" << d.recipe << "  " << d.policy << "' " << y;
      for (const auto& [a, b] : d.intervals)
        os << y << " " << n17(a) << " " << n17(b) << " " << (k % r.policies.size()) << "\n";
    }
    ytics << ") font ',9'\n";
    if (res.divergence.empty() || os.str().find('\n') == os.str().size() - 1) os << "-1 1 1 0\n";
    write_file(dir / data, os.str());
    gp << "set title '" << (panel == 0 ? "two-token: S = a qk^T, attention" : "causal: S = -a I, causal mask (n = 4), attention")
       << "'\nset logscale x\nset format x '10^{%L}'\nset xrange [" << n17(r.from) << ":" << n17(r.to) << "]\n"
       << "set yrange [-1:" << res.divergence.size() << "]\n" << ytics.str()
       << "set xlabel 'score scale a'\nset grid x\nset key off\nset lmargin 30\n"
       << "plot '" << data << "' using 2:1:($3-$2):(0):($4) with vectors nohead lw 7 lc variable\n";
  }
  gp << "unset multiplot\n";
  render(dir, "fig3-drift-map", gp.str(), exts, 1300, 620);
}

// Figure 4: smallest singular value per recipe against the certified enclosure.
void figure4(const fs::path& dir, const std::vector<std::string>& exts) {
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
  write_file(dir / "fig4-sigma-min.dat", sigma_min_data(r, res, true));
  render(dir, "fig4-sigma-min",
         sigma_min_script(r, "fig4-sigma-min.dat",
                          "Figure 4. Two-token family: smallest singular value of A per recipe (exact zeros: bottom row)",
                          1e-22),
         exts, 900, 560);
}

// The request from the options (the library validates it: build_drift_request in drift/spec.hpp).
drift_request make_drift_request(const drift_args& a) {
  drift_spec s;
  s.family = a.family;
  s.param = a.param;
  s.from = a.from;
  s.to = a.to;
  s.points = static_cast<long long>(a.points);
  s.log = a.log;
  s.recipes = a.recipes;
  s.policies = a.policies;
  s.object = a.object;
  s.seed = a.seed;
  if (a.n != 0) s.n = a.n;  // 0: not given (CLI11 refuses a given 0), the family's default
  if (a.d != 0) s.d = a.d;
  s.resolution = a.resolution;
  s.max_seconds = a.max_seconds;
  s.enclosures = !a.no_enclosures;
  s.max_precision = a.max_bits;
  drift_request r = build_drift_request(s);
  r.progress = progress_reporter("drift", "points", true);
  return r;
}

// Renders the smallest singular values to one image (gnuplot, in a scratch directory of the
// transaction) and stages it for `target`.
void stage_plot(io::output_transaction& tx, const std::string& target, const drift_request& r, const drift_result& res) {
  const std::string ext = fs::path(target).extension().string().substr(1);
  const fs::path scratch = tx.scratch_directory(target);
  write_file(scratch / "sigma-min.dat", sigma_min_data(r, res));
  const std::string title =
      std::string(to_string(r.family)) + " family (" + to_string(r.object) + "): smallest singular value per recipe";
  render(scratch, "plot", sigma_min_script(r, "sigma-min.dat", title), {ext}, 900, 560);
  std::ifstream in(scratch / ("plot." + ext), std::ios::binary);
  std::ostringstream image;
  image << in.rdbuf();
  if (!in || image.str().empty()) throw input_error("gnuplot wrote no image for '" + target + "'");
  tx.stage_file(target, image.str());
}

const CLI::Validator& plot_file() {
  static const CLI::Validator v(
      [](std::string& s) -> std::string {
        const std::string ext = fs::path(s).extension().string();
        if (ext != ".png" && ext != ".svg") return "needs a file name ending in .png or .svg";
        return writable_file()(s);
      },
      "FILE");
  return v;
}

void add_drift_options(CLI::App* drift, drift_args& a) {
  drift->add_option("--family", a.family, "two-token, causal, identical-values, log-odds or random")->capture_default_str();
  drift->add_option("--param", a.param, "The swept parameter (the score scale a)")->capture_default_str();
  drift->add_option("--from", a.from, "First parameter value")->required();
  drift->add_option("--to", a.to, "Last parameter value (> --from)")->required();
  drift->add_option("--points", a.points, "Number of grid points, in [2, 10000000]")
      ->check(non_negative_integer())
      ->check(CLI::Range(std::size_t{2}, std::size_t{10000000}))
      ->capture_default_str();
  drift->add_flag("--log", a.log, "Geometric grid (needs --from > 0)");
  drift->add_option("--recipes", a.recipes, "Comma-separated precision recipes")->capture_default_str();
  drift->add_option("--policies", a.policies, "Comma-separated numerical-rank policies")->capture_default_str();
  drift->add_option("--object", a.object, "attention or output (default: attention; output for identical-values)");
  add_seed_option(drift, a.seed, "Seed of the random families");
  drift->add_option("--n", a.n, "Tokens, in [1, 4096] (causal, log-odds, identical-values, random; default: the family's n).\n"
                    "Above 64 the exact side is the factored exact rank and the binary64 singular values")
      ->check(CLI::Range(1L, drift_max_n));
  drift->add_option("--d", a.d, "Head width, in [1, 4096] (identical-values, random; default: the family's d)")
      ->check(CLI::Range(1L, drift_max_n));
  drift->add_option("--resolution", a.resolution, "Bisection resolution, in (0, 0.5) (relative; see the report)")
      ->capture_default_str();
  drift->add_option("--max-seconds", a.max_seconds,
                    "Budget for the grid points, in [0, 1e7] (0: none): past it no point is started, and the report is\n"
                    "PARTIAL, covering the grid's first points (a bisection under way stops at the last point seen diverging)")
      ->check(cli::seconds_budget())
      ->capture_default_str();
  add_max_precision_option(drift, a.max_bits, 128, max_precision_bits, "Cap (bits) of the singular-value enclosures");
  drift->add_flag("--no-enclosures", a.no_enclosures, "Skip the certified singular-value enclosures");
  add_format_option(drift, a.format, {"text", "json", "csv"});
  drift->add_flag("--per-point", a.per_point,
                  "Also write every grid point (JSON: a columnar table; CSV: one row per point x recipe x policy)");
  add_out_option(drift, a.out);
  drift->add_option("--plot", a.plot, "Also render the smallest singular values to FILE.png or FILE.svg (gnuplot)")
      ->check(plot_file());
}

class commands_impl : public drift_commands {
 public:
  explicit commands_impl(CLI::App& app) {
    drift_ = app.add_subcommand("drift", "Sweep the score scale: numerical rank per recipe x policy against the certified exact rank.");
    drift_->footer(
        "For every a: the certified exact rank, a certified enclosure of the smallest singular value and of the\n"
        "condition number, and per recipe the numerical rank under each policy, its smallest singular value and\n"
        "condition number; `diverges` when a numerical rank differs from the exact rank.  Then, per recipe x policy,\n"
        "the a-intervals where it diverges, their ends located by bisection.\n"
        "Reports start with those intervals and a summary; the per-point data only with --per-point.\n"
        "Families: two-token (S = a qk^T, q = k = (1,-1)), causal (S = -aI, causal mask, n = 4),\n"
        "  identical-values (seeded Q, K; every value row equal; default object output),\n"
        "  log-odds (S = a qq^T, q = (1..n), n = 3), random (seeded Q, K, V; n = 4, d = 2).\n"
        "  --n / --d override those defaults where the family has them (two-token: neither; causal,\n"
        "  log-odds: --n only).\n"
        "Recipes: fp64, fp32, bf16-fp32acc, fp16-fp32acc, fp16, bf16, mpfrN.\n"
        "Examples:\n"
        "  attncert drift --family two-token --from 1e-20 --to 1 --points 81 --log --recipes fp32,fp64 --policies numpy\n"
        "  attncert drift --family causal --from 1 --to 1000 --points 61 --log --format json --out causal.json\n" +
        exit_codes_text({{exit_ok, "done (divergences are measurements, not failures)"}}));
    add_drift_options(drift_, da_);

    figures_ = app.add_subcommand("figures", "Render the README's figures (gnuplot) with their data and scripts into a directory.");
    figures_->footer(
        "The directory appears complete or not at all: it is filled under a temporary name beside it and\n"
        "renamed at the end (files of an existing directory are replaced one by one, each atomically).\n"
        "With --max-seconds, the whole rendering (sweeps, data, gnuplot) runs within that budget; past it nothing\n"
        "is written (the temporary directory is removed), one line on stderr says so, and the exit status is 3.\n" +
        exit_codes_text({{exit_ok, "done"}, {exit_undecided, "not rendered within --max-seconds (nothing written)"}}));
    figures_->add_option("--out", fa_.out, "Output directory (created if missing)")->required();
    figures_->add_option("--formats", fa_.formats, "png, svg or png,svg")->capture_default_str();
    add_format_option(figures_, fa_.format, {"text", "json"})
        ->description("What to print: text (nothing) or json (the files written)");
    figures_->add_option("--max-seconds", fa_.max_seconds,
                         "Budget of the whole rendering, in [0, 1e7] (0: none): past it nothing is written and the exit\n"
                         "status is 3 (the figures are complete or absent, never partial)")
        ->check(cli::seconds_budget())
        ->capture_default_str();
  }

  int run(const std::string& command) override {
    if (drift_->parsed()) return run_drift_command(command);
    if (figures_->parsed()) return run_figures_command(command);
    return -1;
  }

 private:
  int run_drift_command(const std::string& command) {
    const drift_request r = make_drift_request(da_);
    const drift_result res = run_drift(r);
    clear_progress();
    const drift_write_options wo{da_.per_point};
    std::ostringstream os;
    if (da_.format == "json") write_drift_json(os, r, res, command, wo);
    else if (da_.format == "csv") write_drift_csv(os, r, res, wo);
    else write_drift_text(os, r, res, wo);
    command_output out;
    out.report(da_.out, os.str());
    if (!da_.plot.empty()) stage_plot(out.files, da_.plot, r, res);
    out.commit();
    return 0;
  }

  int run_figures_command(const std::string& command) {
    std::vector<std::string> exts;
    for (const std::string& e : {std::string("png"), std::string("svg")})
      if (("," + fa_.formats + ",").find("," + e + ",") != std::string::npos) exts.push_back(e);
    if (exts.empty() || (fa_.formats != "png" && fa_.formats != "svg" && fa_.formats != "png,svg" && fa_.formats != "svg,png"))
      throw input_error("--formats must be png, svg or png,svg");
    if (!(fa_.max_seconds >= 0) || fa_.max_seconds > 1e7) throw input_error("--max-seconds must be in [0, 1e7] (0: none)");
    deadline_scope budget(fa_.max_seconds);  // one budget: the sweeps, the data, gnuplot and the commit
    try {
      return render_figures(command, exts);
    } catch (const time_limit_reached&) {
      // render_figures' output transaction has been rolled back: nothing was written
      clear_progress();
      std::ostringstream t;
      t << fa_.max_seconds;
      std::cerr << "attncert: the figures were not rendered within --max-seconds " << t.str() << " (nothing written)\n";
      return exit_undecided;
    }
  }

  // Renders into a staged directory and commits it; destroyed without commit (an error, an
  // interruption, the budget) the transaction removes it.
  int render_figures(const std::string& command, const std::vector<std::string>& exts) {
    command_output out;
    const fs::path dir = out.files.stage_directory(fa_.out);
    const bool tty = ::isatty(2);
    auto step = [&](const char* what) {
      if (tty) std::cerr << "\rfigures: " << what << "          " << std::flush;
    };
    step("1/4");
    figure1(dir, exts);
    step("2/4");
    figure2(dir, exts);
    step("3/4");
    figure3(dir, exts);
    step("4/4");
    figure4(dir, exts);
    clear_progress();
    if (fa_.format == "json") {
      std::vector<std::string> files;
      for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().filename().string());
      std::sort(files.begin(), files.end());
      nlohmann::json j = {{"tool", "attncert"}, {"version", ATTNCERT_VERSION}, {"command", command},
                          {"out", fa_.out},     {"formats", exts},            {"files", files}};
      if (fa_.max_seconds > 0) j["max_seconds"] = fa_.max_seconds;
      out.print(j.dump(2) + "\n");
    }
    check_deadline();  // the last poll: past it nothing is committed
    out.commit();
    return 0;
  }

  CLI::App* drift_ = nullptr;
  CLI::App* figures_ = nullptr;
  drift_args da_;
  figures_args fa_;
};

}  // namespace

std::unique_ptr<drift_commands> add_drift_commands(CLI::App& app) { return std::make_unique<commands_impl>(app); }

}  // namespace attncert::cli
