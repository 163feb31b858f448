// attncert/report/audit.hpp — renderings of an audit (audit/audit.hpp): the JSON contract and
// Markdown.  Computes nothing: each object's numbers are report/rank.hpp's rendering of the same
// rank_analysis (what `attncert rank` prints for that head).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attncert/audit/audit.hpp"

namespace attncert::report {

/// The report, keys in this order: tool, version, command, spec (the parsed criteria), spec_text,
/// spec_sha256, spec_is_default, then controls [{name, object, statement, expected, exact_rank,
/// passed}], then layers [{name, kind, dtype, scale, mask_kind, shape, notes, heads: [{batch, head,
/// kv_head, objects: {NAME: {exact_rank, singular_values, numerical_ranks, ...}}, value_scale {lo, hi},
/// output_error {attention_l1_hi, bound_hi, allowance}, outcome, why}]}], partial, notes, summary
/// (outcome counts).
nlohmann::ordered_json audit_json(const audit::audit_result& r, const std::string& command);

/// The report (audit_json's object) as Markdown: the spec and its hash first, the controls, one table per
/// layer, the multi-head and residual objects, the target contrast.  Draws what the JSON holds.
std::string audit_markdown(const nlohmann::ordered_json& report);

/// One report of audits of parts of a capture (attncert.distributed: one call per unit) under the same
/// spec: the first part's header and controls, every part's layers in order, the outcome counts summed.
/// internal_error when the parts' specs or controls differ (they cannot, from one spec).
nlohmann::ordered_json merge_audit_json(const std::vector<nlohmann::ordered_json>& parts, const std::string& command);

/// The report (audit_json's object) as one self-contained HTML page: the spec and its hash, the controls,
/// then figures as inline SVG (no script, nothing fetched): the outcome per layer × head (ids
/// fig-outcomes), exact against numerical rank per format (fig-ranks-FORMAT), each head's certified
/// singular-value bands with the declared thresholds (class spectrum, the first 64 heads), the numerical
/// rank across formats (class drift), and the tables.  Draws what the JSON holds; computes nothing.
std::string audit_html(const nlohmann::ordered_json& report);

/// The colour of an outcome class in audit_html's figures (#rrggbb).
const char* outcome_color(const std::string& outcome);

}  // namespace attncert::report
