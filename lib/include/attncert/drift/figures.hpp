// attncert/drift/figures.hpp — the data of the README's figures (`attncert figures`) and of
// `attncert drift --plot`: computed here, from the same sweeps as `attncert drift`; drawn by the
// command line with gnuplot scripts that are files of its own (tools/attncert/figures/<stem>.gp).
//
// A figure is its data files and its parameters: gnuplot commands (variables, arrays) that the
// script loads before it draws, so that the script itself is fixed text.  Every number is written
// as the shortest decimal that reads back as the same binary64, and the ends of an enclosure are
// rounded outward (number/decimal.hpp), so a drawn band still contains the exact value.
// The sweeps poll deadline.hpp (a budget, an interruption); a sweep stopped by the budget throws
// time_limit_reached: a figure is complete or absent, never partial.
#pragma once

#include <string>
#include <vector>

#include "attncert/drift/sweep.hpp"

namespace attncert {

/// One file of a figure.
struct figure_file {
  std::string name, content;
};

/// A figure: its data files, its parameters (written as `<stem>.params.gp`, loaded by the script
/// `<stem>.gp`) and its size in pixels.
struct figure {
  std::string stem, script;  ///< the image's stem ("fig1-two-token-contrast") and the script's name ("sigma-min")
  int width = 900, height = 560;
  std::vector<figure_file> data;
  std::string params;
};

/// Figure 1: the two-token family's contrast eigenvalue and det A, exact (P01) and formed in fp32 / fp64.
figure contrast_figure();
/// Figure 2: tanh a and its derivative 1 - tanh² a.
figure saturation_figure();
/// Figure 3: the drift map (where a numerical rank differs from the certified rank) of the two-token
/// and causal families, per recipe x policy.
figure drift_map_figure();
/// Figure 4: the two-token family's smallest singular value per recipe against its certified enclosure;
/// a formed matrix that is rank-deficient over Q (its exact rank, not its SVD) is drawn as an exact zero.
figure sigma_min_figure();

/// The smallest singular values of a sweep per recipe against the certified enclosure, drawn by the
/// script "sigma-min" into `<stem>.<ext>`: the figure of `attncert drift --plot`, and figure 4 with
/// `decide_zeros` (each formed matrix's exact rank over Q decides whether its σ_min is exactly 0).
figure sigma_min_plot(const drift_request& r, const drift_result& res, const std::string& stem, const std::string& data_name,
                      const std::string& title, bool decide_zeros);

/// What a figures call says: the image formats ("png", "svg" or "png,svg", either order) and the
/// budget of the whole rendering (in [0, 1e7]; 0: none).
struct figures_spec {
  std::string formats = "png,svg";
  double max_seconds = 0;
};

/// The formats to render ("png" before "svg"), and the budget.
struct figures_request {
  std::vector<std::string> formats;
  double max_seconds = 0;
};

/// The request of `s`.  Errors (input_error, one line, naming the field): formats other than png, svg
/// or both; max_seconds out of range.
figures_request build_figures_request(const figures_spec& s);

}  // namespace attncert
