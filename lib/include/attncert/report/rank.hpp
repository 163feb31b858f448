// attncert/report/rank.hpp — `attncert rank`: the certified rank of one object of an
// attention layer next to its numerical rank in every format × policy.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "attncert/attention/mask.hpp"
#include "attncert/rank/exact_rank.hpp"
#include "attncert/rank/policy.hpp"

namespace attncert {

/// What to analyse.  Scores are either given (S) or formed as scale·QKᵀ.  The scale is an
/// exact rational, or 1/√d (d = Q's width) when `inv_sqrt_d` is set.
struct rank_request {
  std::optional<matrix<mpq_rational>> S, Q, K, V, X;
  std::optional<mpq_rational> scale;  ///< rational scale for QKᵀ (ignored with S)
  bool inv_sqrt_d = false;            ///< scale 1/√d
  mask M = mask::none();
  layer_object object = layer_object::attention;
  std::vector<format_spec> formats;
  std::vector<rank_policy> policies;
  unsigned start_bits = 128, max_bits = 4096;  ///< singular-value enclosures escalate in between
  std::uint64_t seed = 20261129;
  nlohmann::json inputs;  ///< description of the inputs (file names, shapes), echoed in the report
};

/// Run the analysis and return the JSON report: tool, version, command, inputs, settings,
/// exact_rank {lo, hi, lo_witness, hi_witness}, singular_values [{lo, hi}] (decimal
/// strings; enclosures of the exact values), singular_values_bits, numerical [{format,
/// policy, rank, threshold, diverges}] (diverges: rank outside [lo, hi]), summary.
/// Errors (input_error): inconsistent shapes, fully masked rows, non-finite scores in a
/// format (overflow), precision limits.
nlohmann::json rank_report(const rank_request& req, const std::string& command);

/// Human-readable rendering of a rank report.
void write_rank_text(std::ostream& os, const nlohmann::json& report);

}  // namespace attncert
