// attncert/report/drift.hpp — renderings of `attncert drift` (drift/sweep.hpp): JSON, text
// and CSV of a typed drift_result.  Computes nothing.
//
// Every report starts with what a person came for: the divergence intervals per recipe ×
// policy and the summary.  Per-point data (one entry per grid point: exact rank, enclosures,
// numerical ranks per recipe × policy) come only with `per_point`, in a compact form:
//   JSON  "points": a columnar table — one array per column, index i = grid point i; per
//         recipe one object of columns (see write_drift_json);
//   CSV   one `point` row per grid point × recipe × policy (as before), after the
//         `divergence` rows;
//   text  one line per grid point and one per recipe, after the summary.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "attncert/drift/sweep.hpp"

namespace attncert::report {

struct drift_write_options {
  bool per_point = false;  ///< also write the per-point data (large: grid points × recipes × policies)
};

/// The report without per-point data: tool, version, command, inputs, settings, divergence
/// [{recipe, policy, intervals [[from, to], ...], bisection_evaluations}], summary {points,
/// diverging_points, intervals}.
nlohmann::json drift_json(const drift_request& req, const drift_result& res, const std::string& command);

/// drift_json(...).dump(2), plus with per_point a last member "points":
///   {"layout": ..., "a": [...], "exact_rank_lo": [...], "exact_rank_hi": [...],
///    "sigma_min_enclosure_lo"/"_hi", "condition_number_enclosure_lo"/"_hi" (decimal strings
///    rounded outward), "enclosure_bits" (these five only when enclosures were computed),
///    "diverges": [...],
///    "recipes": [{"recipe", "svd", "formed": [...], "failures": {"i": message, ...},
///                 "numerical_rank": {policy: [...] (null: not formed)},
///                 "sigma_min": [...], "condition_number": [...] (null: not formed; "inf"),
///                 "diverges": [...]}]}
void write_drift_json(std::ostream& os, const drift_request& req, const drift_result& res, const std::string& command,
                      const drift_write_options& opt = {});

/// Text: settings, divergence intervals, summary; with per_point the point table after them.
void write_drift_text(std::ostream& os, const drift_request& req, const drift_result& res,
                      const drift_write_options& opt = {});

/// CSV (17 significant digits): the header, one `divergence` row per interval, and with
/// per_point one `point` row per a × recipe × policy (policies in name order; `diverges` is
/// the recipe's at that point).
void write_drift_csv(std::ostream& os, const drift_request& req, const drift_result& res,
                     const drift_write_options& opt = {});

}  // namespace attncert::report
