// Renderings of block-bound.  Lower ends print rounded down, upper ends (bounds, ratios) rounded up.
#include "attncert/report/block.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "attncert/number/decimal.hpp"
#include "attncert/number/outward.hpp"

namespace attncert::report {

namespace {

// bound / measured_lo rounded up; NaN when the measured error is not certified > 0.
double ratio(double bound, double measured_lo) {
  if (!(measured_lo > 0)) return std::nan("");
  return next_up(bound / measured_lo);
}

nlohmann::json number_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

std::string lo3(double x) { return decimal_down(x, 3, decimal_layout::scientific); }
std::string hi3(double x) { return std::isfinite(x) ? decimal_up(x, 3, decimal_layout::scientific) : "inf"; }
std::string ratio_text(double x) { return std::isnan(x) ? "-" : (std::isfinite(x) ? decimal_up(x, 3, decimal_layout::general) + "x" : "inf"); }

void settings_line(std::ostream& os, const block::result& r) {
  os << r.tokens << " tokens, width " << r.width << ", " << r.heads << " heads, MLP width " << r.mlp_width << ", " << r.depth
     << " blocks, " << r.norm << " (eps " << r.eps << "), " << r.activation << ", causal";
}

const char* legend =
    "measured: max over tokens of ||x^ - x||_2 at the stage's output, enclosed [lo, hi] (both models in certified "
    "arithmetic).\nbound: a certified upper bound of it from the approximate model alone; article = the local term "
    "||A^_i - A_i||_1 max_j ||v_j||_2 + ||O^_i - A^_i v||_2 (section 11), direct = ||O^_i - (A v)_i||_2 certified; "
    "stage = this stage alone, from the measured error of its input.\nratio = bound / measured lo (rounded up).";

}  // namespace

nlohmann::json block_bound_json(const block::result& r, const std::string& command) {
  nlohmann::json j;
  j["tool"] = "attncert";
  j["version"] = ATTNCERT_VERSION;
  j["command"] = command;
  j["model"] = r.model_description;
  j["settings"] = {{"tokens", r.tokens}, {"width", r.width},   {"heads", r.heads}, {"mlp_width", r.mlp_width},
                   {"depth", r.depth},   {"norm", r.norm},     {"activation", r.activation}, {"eps", r.eps},
                   {"seed", r.seed},     {"target_ratio", r.target_ratio}, {"mask", "causal"},
                   {"scale", "1/sqrt(d_head)"}};
  std::size_t within = 0;
  for (const auto& a : r.approximations) {
    nlohmann::json aj{{"approximation", a.approx.name}, {"within_target", a.within_target}, {"notes", a.notes}};
    aj["stages"] = nlohmann::json::array();
    for (const auto& s : a.rows)
      aj["stages"].push_back({{"block", s.block + 1},
                              {"stage", s.stage},
                              {"measured_lo", s.measured_lo},
                              {"measured_hi", number_or_null(s.measured_hi)},
                              {"bound_article", number_or_null(s.bound_article)},
                              {"bound_direct", number_or_null(s.bound_direct)},
                              {"stage_bound", number_or_null(s.stage_bound)},
                              {"scale", s.scale},
                              {"ratio_article", number_or_null(ratio(s.bound_article, s.measured_lo))},
                              {"ratio_direct", number_or_null(ratio(s.bound_direct, s.measured_lo))},
                              {"ratio_stage", number_or_null(ratio(s.stage_bound, s.measured_lo))}});
    within += a.within_target ? 1 : 0;
    j["approximations"].push_back(aj);
  }
  j["seconds"] = r.seconds;
  j["summary"] = {{"approximations", r.approximations.size()}, {"within_target", within}};
  return j;
}

void write_block_bound_text(std::ostream& os, const block::result& r) {
  os << "attncert " << ATTNCERT_VERSION << " — the output bound through complete blocks\nmodel: " << r.model_description << "; ";
  settings_line(os, r);
  os << "\n" << legend << "\n";
  for (const auto& a : r.approximations) {
    os << "\n== " << a.approx.name << ": bound within " << r.target_ratio << "x of the measured error at every block output: "
       << (a.within_target ? "yes" : "NO") << "\n";
    os << std::left << std::setw(6) << "block" << std::setw(15) << "stage" << std::setw(24) << "measured [lo, hi]"
       << std::setw(11) << "article" << std::setw(11) << "direct" << std::setw(11) << "stage" << std::setw(10) << "ratio:art"
       << std::setw(10) << "direct" << "stage\n";
    for (const auto& s : a.rows)
      os << std::setw(6) << s.block + 1 << std::setw(15) << s.stage << std::setw(24)
         << ("[" + lo3(s.measured_lo) + ", " + hi3(s.measured_hi) + "]") << std::setw(11) << hi3(s.bound_article)
         << std::setw(11) << hi3(s.bound_direct) << std::setw(11) << hi3(s.stage_bound) << std::setw(10)
         << ratio_text(ratio(s.bound_article, s.measured_lo)) << std::setw(10) << ratio_text(ratio(s.bound_direct, s.measured_lo))
         << ratio_text(ratio(s.stage_bound, s.measured_lo)) << "\n";
    for (const auto& n : a.notes) os << "  not within " << r.target_ratio << "x: " << n << "\n";
  }
  std::size_t within = 0;
  for (const auto& a : r.approximations) within += a.within_target ? 1 : 0;
  os << "\nsummary: " << within << " of " << r.approximations.size() << " approximations within " << r.target_ratio
     << "x at every depth (" << std::fixed << std::setprecision(1) << r.seconds << " s)\n";
  os.unsetf(std::ios::fixed);
}

void write_block_bound_markdown(std::ostream& os, const block::result& r) {
  os << "# block-bound\n\nModel: " << r.model_description << "; ";
  settings_line(os, r);
  os << ".\n\n" << legend << "\n";
  for (const auto& a : r.approximations) {
    os << "\n## " << a.approx.name << " — within " << r.target_ratio << "x at every block output: "
       << (a.within_target ? "yes" : "**no**") << "\n\n";
    os << "| block | stage | measured lo | measured hi | bound (article) | bound (direct) | stage bound | ratio article | "
          "ratio direct | ratio stage |\n|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& s : a.rows)
      os << "| " << s.block + 1 << " | " << s.stage << " | " << lo3(s.measured_lo) << " | " << hi3(s.measured_hi) << " | "
         << hi3(s.bound_article) << " | " << hi3(s.bound_direct) << " | " << hi3(s.stage_bound) << " | "
         << ratio_text(ratio(s.bound_article, s.measured_lo)) << " | " << ratio_text(ratio(s.bound_direct, s.measured_lo))
         << " | " << ratio_text(ratio(s.stage_bound, s.measured_lo)) << " |\n";
    if (!a.notes.empty()) os << "\n";
    for (const auto& n : a.notes) os << "- not within " << r.target_ratio << "x: " << n << "\n";
  }
}

void write_block_bound_csv(std::ostream& os, const block::result& r) {
  os << "approximation,block,stage,measured_lo,measured_hi,bound_article,bound_direct,stage_bound,scale\n";
  for (const auto& a : r.approximations)
    for (const auto& s : a.rows)
      os << a.approx.name << "," << s.block + 1 << "," << s.stage << "," << decimal_down(s.measured_lo, 17) << ","
         << decimal_up(s.measured_hi, 17) << "," << decimal_up(s.bound_article, 17) << "," << decimal_up(s.bound_direct, 17)
         << "," << decimal_up(s.stage_bound, 17) << "," << decimal_up(s.scale, 17) << "\n";
}

figure block_bound_figure(const block::result& r, const std::string& stem) {
  figure f;
  f.stem = stem;
  f.script = "block-bound";
  std::ostringstream data, names;
  data << std::setprecision(17);
  // One gnuplot data block per approximation (separated by two blank lines): depth, measured lo, measured hi,
  // bound (article), bound (direct).  Infinite bounds are written as NaN (missing).
  for (const auto& a : r.approximations) {
    data << "# " << a.approx.name << "\n";
    for (const auto& s : a.rows) {
      if (s.stage != "block-out") continue;
      auto v = [](double x) { return std::isfinite(x) ? x : std::nan(""); };
      data << s.block + 1 << " " << s.measured_lo << " " << v(s.measured_hi) << " " << v(s.bound_article) << " "
           << v(s.bound_direct) << "\n";
    }
    data << "\n\n";
    names << (names.tellp() > 0 ? " " : "") << a.approx.name;
  }
  f.data.push_back({stem + ".dat", data.str()});
  std::ostringstream p;
  p << "data_file = '" << stem << ".dat'\nnapprox = " << r.approximations.size() << "\napprox_names = '" << names.str()
    << "'\nplot_title = 'certified bound and measured error at each block output (" << r.tokens << " tokens, width "
    << r.width << ")'\n";
  f.params = p.str();
  return f;
}

}  // namespace attncert::report
