// attncert/report/audit.hpp — renderings of an audit (audit/audit.hpp): the JSON contract and
// Markdown.  Computes nothing: each object's numbers are report/rank.hpp's rendering of the same
// rank_analysis (what `attncert rank` prints for that head).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "attncert/audit/audit.hpp"

namespace attncert::report {

/// The report, keys in this order: tool, version, command, spec (the parsed criteria), spec_text,
/// spec_sha256, spec_is_default, then controls [{name, object, statement, expected, exact_rank,
/// passed}], then layers [{name, kind, dtype, scale, mask_kind, shape, notes, heads: [{batch, head,
/// kv_head, objects: {NAME: {exact_rank, singular_values, numerical_ranks, ...}}, value_scale {lo, hi},
/// output_error {attention_l1_hi, bound_hi, allowance}, outcome, why}]}], partial, notes, summary
/// (outcome counts).
nlohmann::ordered_json audit_json(const audit::audit_result& r, const std::string& command);

/// The same as Markdown: the spec and its hash first, the controls, one table per layer.
std::string audit_markdown(const audit::audit_result& r, const std::string& command);

}  // namespace attncert::report
