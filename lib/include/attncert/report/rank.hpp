// attncert/report/rank.hpp — renderings of `attncert rank` (rank/analyse_rank.hpp): the
// certified rank of one object of an attention layer next to its numerical rank in every
// format × policy.  Computes nothing.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "attncert/rank/analyse_rank.hpp"

namespace attncert::report {

/// The JSON report: tool, version, command, inputs, settings, exact_rank {lo, hi,
/// lo_witness, hi_witness}, singular_values [{lo, hi}] (decimal strings, rounded outward:
/// they still enclose the exact values), singular_values_bits,
/// singular_values_certified_positive, numerical [{format, policy, rank, threshold,
/// diverges}] (diverges: rank outside [lo, hi]), summary.
nlohmann::json to_json(const rank_analysis& a, const std::string& command);

/// Human-readable rendering (the first 12 singular values; the rest in JSON).
void write_rank_text(std::ostream& os, const rank_analysis& a);

}  // namespace attncert::report
