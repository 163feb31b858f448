// attncert/report/block.hpp — renderings of `attncert block-bound` (block/block_bound.hpp): JSON, text,
// Markdown, CSV and the figure (bound and measured error against depth).  Computes nothing but ratios of
// the result's numbers (rounded up: an upper bound of bound / measured error).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "attncert/block/block_bound.hpp"
#include "attncert/drift/figures.hpp"

namespace attncert::report {

/// tool, version, command, model, settings {tokens, width, heads, mlp_width, depth, norm, activation, eps,
/// seed, target_ratio}, approximations [{approximation, within_target, notes, stages [{block (1-based), stage,
/// measured_lo, measured_hi, bound_article, bound_direct, stage_bound, scale, ratio_article, ratio_direct,
/// ratio_stage}]}], seconds, summary {approximations, within_target}.  Ratios are bound / measured_lo rounded
/// up (null when measured_lo is 0).
nlohmann::json block_bound_json(const block::result& r, const std::string& command);
void write_block_bound_text(std::ostream& os, const block::result& r);
void write_block_bound_markdown(std::ostream& os, const block::result& r);
/// One row per approximation × block × stage, 17 significant digits.
void write_block_bound_csv(std::ostream& os, const block::result& r);

/// The figure: per approximation, the certified bound (article and direct local terms) and the measured
/// error at each block's output against depth, log scale (script tools/attncert/figures/block-bound.gp).
figure block_bound_figure(const block::result& r, const std::string& stem);

}  // namespace attncert::report
