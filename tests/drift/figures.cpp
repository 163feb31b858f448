// tests/drift/figures.cpp — the figures' data and parameters (drift/figures.hpp).
#define BOOST_TEST_MODULE drift_figures
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <sstream>
#include <string>

#include "../support.hpp"
#include "attncert/drift/figures.hpp"

using namespace attncert;

namespace {

const figure_file& file_named(const figure& f, const std::string& name) {
  for (const auto& d : f.data)
    if (d.name == name) return d;
  BOOST_FAIL("no data file " << name);
  return f.data.front();
}

}  // namespace

BOOST_AUTO_TEST_CASE(saturation_data_is_tanh_and_its_derivative) {
  const figure f = saturation_figure();
  BOOST_TEST(f.script == "fig2-saturation");
  BOOST_TEST(f.params.empty());
  std::istringstream in(file_named(f, "fig2-saturation.dat").content);
  std::string line;
  std::size_t rows = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    double a = 0, t = 0, dt = 0;
    ls >> a >> t >> dt;
    BOOST_TEST(std::fabs(t - std::tanh(a)) <= 1e-15, "a = " << a);
    BOOST_TEST(std::fabs(dt - (1 - t * t)) <= 1e-15);
    ++rows;
  }
  BOOST_TEST(rows == 401u);
}

BOOST_AUTO_TEST_CASE(sigma_min_parameters_name_every_recipe) {
  drift_request r;
  r.recipes = parse_recipes("fp64,fp32,fp16");
  r.policies = parse_policies("numpy");
  r.log = true;
  r.from = 1e-20;
  r.to = 1;
  r.points = 9;
  const drift_result res = run_drift(r);
  const figure f = sigma_min_plot(r, res, "plot", "s.dat", "it's a title", true);
  BOOST_TEST(f.script == "sigma-min");
  BOOST_TEST(f.data.size() == 1u);
  // a quote in a title is doubled in gnuplot's single-quoted string
  BOOST_TEST(f.params.find("plot_title = 'it''s a title'") != std::string::npos, f.params);
  BOOST_TEST(f.params.find("nrec = 3\n") != std::string::npos);
  BOOST_TEST(f.params.find("array recipe[3] = ['fp64', 'fp32', 'fp16']") != std::string::npos);
  BOOST_TEST(f.params.find("array zero_y[3] = [1e-22, 6.25e-23, 3.906249999999999e-23]") != std::string::npos, f.params);
  // with exact zeros each row ends with one 0/1 flag per recipe: 3 + 3 + 3 columns; at a = 1e-20 the
  // fp64 matrix of the two-token family is exactly rank-deficient (its σ_min is exactly 0)
  std::istringstream in(f.data[0].content);
  std::string line;
  while (std::getline(in, line) && line[0] == '#') {
  }
  std::istringstream ls(line);
  std::vector<std::string> cols;
  for (std::string c; ls >> c;) cols.push_back(c);
  BOOST_TEST_REQUIRE(cols.size() == 9u, line);
  BOOST_TEST(cols[0] == "1e-20");
  BOOST_TEST(cols[3] == "NaN");
  BOOST_TEST(cols[6] == "1");
  const figure g = sigma_min_plot(r, res, "plot", "s.dat", "t", false);
  BOOST_TEST(g.params.find("zeros_at = 0\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(drift_map_parameters_describe_both_panels) {
  const figure f = drift_map_figure();
  BOOST_TEST(f.data.size() == 2u);
  for (const char* name : {"panel_title", "panel_data", "panel_from", "panel_to", "panel_rows", "panel_ytics"})
    BOOST_TEST(f.params.find(std::string("array ") + name + "[2] = [") != std::string::npos, name);
  // 7 recipes x 3 policies: 21 rows per panel
  BOOST_TEST(f.params.find("array panel_rows[2] = [21, 21]") != std::string::npos, f.params);
  BOOST_TEST(f.params.find("array panel_from[2] = [1e-20, 0.01]") != std::string::npos);
}

// The figures call's spec: png before svg whatever the order given; bad formats and budgets named.
BOOST_AUTO_TEST_CASE(figures_spec_is_validated_once) {
  figures_spec s;
  BOOST_TEST((build_figures_request(s).formats == std::vector<std::string>{"png", "svg"}));
  s.formats = "svg,png";
  BOOST_TEST((build_figures_request(s).formats == std::vector<std::string>{"png", "svg"}));
  s.formats = "svg";
  BOOST_TEST((build_figures_request(s).formats == std::vector<std::string>{"svg"}));
  for (const std::string bad : {"gif", "", "png,", "png,png", "png,svg,png"}) {
    s.formats = bad;
    BOOST_TEST(input_error_of([&] { build_figures_request(s); }).find("--formats must be png, svg or png,svg") == 0u, bad);
  }
  s.formats = "png";
  s.max_seconds = -1;
  BOOST_TEST(input_error_of([&] { build_figures_request(s); }).find("--max-seconds must be in [0, 1e7]") == 0u);
  s.max_seconds = 2.5;
  BOOST_TEST(build_figures_request(s).max_seconds == 2.5);
}
