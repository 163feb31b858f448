// lib/src/report/oracle.cpp — the report of `attncert oracle` (JSON and text).
#include "attncert/report/oracle.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "attncert/error.hpp"
#include "attncert/field.hpp"
#include "attncert/number/decimal.hpp"

namespace attncert::report {

using namespace attncert::oracle;

using namespace grading;

namespace {

// Numbers that need more than 17 digits are not needed here: every figure is a binary64
// value, printed with 17 significant digits (round-trips); non-finite values as strings.
nlohmann::json num(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

std::string fmt(double x, int prec = 4) {
  std::ostringstream os;
  os << std::setprecision(prec) << x;
  return os.str();
}

// How the LSE of each row was decided.
nlohmann::json lse_summary(const oracle_result& r, const nlohmann::json& file) {
  std::size_t dd = 0, mpfi = 0, faithful = 0, policy = 0, ieee = 0;
  for (auto h : r.lse_how) {
    if (h == decided_by::double_double) ++dd;
    else if (h == decided_by::mpfi) ++mpfi;
    else if (h == decided_by::faithful_only) ++faithful;
    else if (h == decided_by::exact_policy) ++policy;
    else if (h == decided_by::ieee_nonfinite) ++ieee;
  }
  return {{"target", to_string(r.lse_target)},
          {"file", file},
          {"decided_by", {{"fast_path", dd}, {"mpfi", mpfi}, {"faithful_at_cap", faithful}, {"empty_row", policy},
                          {"ieee_nonfinite", ieee}}}};
}

nlohmann::json index_json(const std::array<std::size_t, 4>& i, std::size_t rank) {
  nlohmann::json a = nlohmann::json::array();
  for (std::size_t q = 0; q < rank; ++q) a.push_back(i[q]);
  return a;
}

// ---- grading -------------------------------------------------------------------------------------

nlohmann::json rule_settings_json(const rule_settings& s) {
  nlohmann::json j = {{"rule", to_string(s.rule)}};
  switch (s.rule) {
    case grading_rule::ulp: j["max_ulp"] = s.max_ulp ? num(*s.max_ulp) : nlohmann::json(nullptr); break;
    case grading_rule::flash:
      j["k"] = num(s.flash_k);
      j["atol"] = num(s.atol.value_or(0.0));
      break;
    case grading_rule::torch_sdpa: j["fudge"] = num(s.fudge); break;
    case grading_rule::assert_close:
      j["atol"] = s.atol ? num(*s.atol) : nlohmann::json("default of the dtype");
      j["rtol"] = s.rtol ? num(*s.rtol) : nlohmann::json("default of the dtype");
      break;
  }
  return j;
}

const char* observed_is(grading_rule r) {
  switch (r) {
    case grading_rule::ulp: return "the largest error in ulps of the target at the exact value";
    case grading_rule::flash: return "max |c - o|; threshold = k * max |b - o| + atol";
    case grading_rule::torch_sdpa:
    case grading_rule::assert_close:
      return "|c - o| at the decisive element (the largest |c - o| / (atol + rtol |o|)); threshold = atol + rtol |o| there";
  }
  return "?";
}

nlohmann::json verdict_json(const rule_verdict& v, std::size_t rank) {
  nlohmann::json j = {{"rule", to_string(v.rule)}};
  if (!v.graded) {
    j["verdict"] = "none";
    j["note"] = "no " + field("max_ulp") + ": errors reported, no verdict";
    return j;
  }
  j["verdict"] = v.pass ? "pass" : "fail";
  j["observed"] = num(v.observed);
  j["threshold"] = num(v.threshold);
  j["margin"] = num(v.margin);
  j["ratio"] = num(v.ratio);
  j["observed_is"] = observed_is(v.rule);
  j["index"] = v.has_at ? index_json(v.at, rank) : nlohmann::json(nullptr);
  j["violations"] = v.violations;
  j["nonfinite_where_truth_finite"] = v.nonfinite;
  switch (v.rule) {
    case grading_rule::ulp: j["max_ulp"] = num(v.threshold); break;
    case grading_rule::flash:
      j["k"] = num(v.k);
      j["atol"] = num(v.atol);
      j["k_needed"] = num(v.k_needed);
      break;
    case grading_rule::torch_sdpa:
      j["fudge"] = num(v.fudge);
      j["fudge_needed"] = num(v.fudge_needed);
      [[fallthrough]];
    case grading_rule::assert_close:
      j["atol"] = num(v.atol);
      j["rtol"] = num(v.rtol);
      j["default_atol"] = num(v.defaults.atol);
      j["default_rtol"] = num(v.defaults.rtol);
      break;
  }
  if (rule_needs_baseline(v.rule)) {
    j["baseline_max_abs_error"] = num(v.baseline_max_abs);
    j["baseline_max_rel_error"] = num(v.baseline_max_rel);
    j["baseline_nonfinite_where_truth_finite"] = v.baseline_nonfinite;
  }
  if (!v.pass) j["reason"] = v.reason;
  return j;
}

// One graded array: the existing fields (name, file, elements, compared, max_ulp, mean_ulp,
// max_abs_error, max_rel_error, beyond_ulps, nonfinite_where_truth_finite, worst), the errors
// side by side with the index of each maximum, and the rule's verdict.
nlohmann::json grade_json(const candidate_grade& g, const std::string& file) {
  const std::size_t rank = g.index_rank;
  nlohmann::json beyond;
  for (std::size_t q = 0; q < ulp_thresholds.size(); ++q) beyond[fmt(ulp_thresholds[q])] = g.beyond[q];
  nlohmann::json j = {{"name", g.name},
                      {"file", file},
                      {"elements", g.elements},
                      {"compared", g.compared},
                      {"skipped", g.skipped},
                      {"max_ulp", num(g.max_ulp)},
                      {"mean_ulp", num(g.mean_ulp)},
                      {"max_abs_error", num(g.max_abs)},
                      {"max_rel_error", num(g.max_rel)},
                      {"beyond_ulps", beyond},
                      {"nonfinite_where_truth_finite", g.nonfinite_where_finite},
                      {"fully_masked", {{"field", g.policy_field}, {"compared", g.policy_compared}, {"mismatched", g.policy_mismatch}}}};
  if (g.policy_mismatch)  // the first element of a fully masked row that is not the declared value
    j["fully_masked"]["first"] = {{"index", index_json(g.policy_worst, rank)}, {"declared", num(g.policy_expected)},
                                  {"value", num(g.policy_value)}};
  const nlohmann::json none(nullptr);
  j["index_order"] = !g.index_order.empty() ? g.index_order : rank == 4 ? "b,h,i,k" : "b,h,i";
  j["errors"] = {
      {"abs", {{"max", num(g.max_abs)}, {"index", g.compared ? index_json(g.worst_abs, rank) : none}}},
      {"rel", {{"max", num(g.max_rel)}, {"index", g.has_worst_rel ? index_json(g.worst_rel, rank) : none}}},
      {"ulp", {{"max", num(g.max_ulp)}, {"mean", num(g.mean_ulp)}, {"index", g.has_worst ? index_json(g.worst, rank) : none}}}};
  if (g.has_worst)
    j["worst"] = {{rank == 4 ? "index_bhik" : "index_bhi", index_json(g.worst, rank)},
                  {"truth_approx", num(g.worst_truth)},
                  {"reference", num(g.worst_reference)},
                  {"value", num(g.worst_value)}};
  j["rule"] = verdict_json(g.rule, rank);
  if (g.rule.rule == grading_rule::ulp && g.rule.graded) j["within_max_ulp"] = g.rule.pass;
  return j;
}

nlohmann::json rerun_json(const rerun_spread& s, const std::string& file, const candidate_grade& first) {
  return {{"file", file},
          {"of", first.name},
          {"elements", s.elements},
          {"differing", s.differing},
          {"differing_is", "values differ (NaN equals NaN, -0 equals +0)"},
          {"nonfinite_differing", s.nonfinite_differing},
          {"max_abs_difference", num(s.max_abs)},
          {"max_ulp_difference", num(s.max_ulp)},
          {"max_ulp_difference_is", "max |c1 - c2| / ulp(o), ulps of the target at the exact value"},
          {"index", s.has_worst ? index_json(s.worst, s.index_rank) : nlohmann::json(nullptr)},
          {"first_run_error", {{"max_abs_error", num(first.max_abs)}, {"max_ulp", num(first.max_ulp)}}}};
}

// The grading part of the report: settings.grading, grading, baseline, candidates, lse, rerun.
void add_grading(nlohmann::json& j, const oracle_report_input& in) {
  j["settings"]["grading"] = rule_settings_json(in.rules);
  j["grading"] = {{"rule", to_string(in.rules.rule)},
                  {"statement", rule_statement(in.rules.rule)},
                  {"source", rule_source(in.rules.rule)},
                  {"truth", "o = the exact value of each element (the oracle's enclosure t_hi + t_lo), not the rounded reference; "
                            "c = candidate, b = baseline"},
                  {"arithmetic", "binary64 (approx tier): each figure within a relative 2^-50"},
                  {"nonfinite", "NaN/Inf in a candidate where the truth is finite fails every rule"}};
  if (in.baseline) j["baseline"] = grade_json(*in.baseline, in.baseline_file);
  nlohmann::json cands = nlohmann::json::array();
  for (std::size_t c = 0; c < in.candidates.size(); ++c) {
    const auto& g = in.candidates[c];
    cands.push_back(grade_json(g, c < in.candidate_files.size() ? in.candidate_files[c] : g.name));
  }
  j["candidates"] = cands;
  if (in.lse_candidate) {
    nlohmann::json l = {{"target", to_string(in.result->lse_target)}, {"candidate", grade_json(*in.lse_candidate, in.lse_candidate_file)}};
    if (in.lse_baseline) l["baseline"] = grade_json(*in.lse_baseline, in.lse_baseline_file);
    for (auto it = l.begin(); it != l.end(); ++it) j["lse"][it.key()] = it.value();
  }
  if (in.rerun && !in.candidates.empty()) j["rerun"] = rerun_json(*in.rerun, in.rerun_file, in.candidates.front());
}

// ---- backward grading ----------------------------------------------------------------------------

nlohmann::json gradient_defaults_json(grading_rule r) {
  nlohmann::json d = nlohmann::json::object();
  if (r == grading_rule::flash)
    d = {{"k", num(flash_gradient_k)},
         {"k_source", "FlashAttention 2 tests/test_flash_attn.py test_flash_attn_output: "
                      "(dq - dq_ref).abs().max() <= 3 * (dq_pt - dq_ref).abs().max(), dk and dv the same"},
         {"overridden_by", field("flash_k")}};
  if (r == grading_rule::torch_sdpa) {
    nlohmann::json f;
    for (auto g : {gradient_kind::dq, gradient_kind::dk, gradient_kind::dv, gradient_kind::dbias, gradient_kind::dsink})
      f[to_string(g)] = num(sdpa_gradient_fudge(g));
    d = {{"fudge", f},
         {"fudge_source", "PyTorch test/test_transformers.py: dq 180, dk 16, dv 4 (test_flash_attention_vs_math_ref_grads, "
                          "fudge_factors); dbias 45 (grad_attn_mask, test_mem_efficient_attention_attn_mask_vs_math_ref_grads); "
                          "dsink 45 (attncert: a reduction of the same kind as a broadcast dbias; PyTorch has no sink)"},
         {"overridden_by", field("fudge")}};
  }
  return d;
}

nlohmann::json gradient_set_json(const gradient_set_grade& s, bool with_rule) {
  nlohmann::json grads = nlohmann::json::object();
  for (const auto& gg : s.gradients) {
    nlohmann::json j = grade_json(gg.grade, gg.file);
    if (with_rule) j["settings"] = rule_settings_json(gg.rules);
    else j.erase("rule");
    if (gg.rerun) j["rerun"] = rerun_json(*gg.rerun, gg.rerun_file, gg.grade);
    grads[to_string(gg.gradient)] = j;
  }
  nlohmann::json j = {{"name", s.name}, {"prefix", s.prefix}, {"gradients", grads}};
  if (with_rule) j["verdict"] = to_string(gradient_set_outcome(s));
  return j;
}

// The section 'backward_grading': the rule with its per-gradient defaults, the baseline's
// gradients, and each kernel's.
void add_backward_grading(nlohmann::json& j, const oracle_report_input& in) {
  if (in.gradient_candidates.empty()) return;
  const grading_rule r = in.rules.rule;
  nlohmann::json b = {{"rule", to_string(r)},
                      {"statement", rule_statement(r)},
                      {"source", rule_source(r)},
                      {"defaults", gradient_defaults_json(r)},
                      {"truth", "o = the exact gradient of the exact forward (the backward's enclosure hi + lo), not the "
                                "rounded reference; c = candidate, b = baseline; indices in the oracle's internal layout"}};
  if (in.gradient_baseline) b["baseline"] = gradient_set_json(*in.gradient_baseline, false);
  nlohmann::json cands = nlohmann::json::array();
  for (const auto& c : in.gradient_candidates) cands.push_back(gradient_set_json(c, true));
  b["candidates"] = cands;
  if (!in.gradient_rerun_prefix.empty()) b["rerun_prefix"] = in.gradient_rerun_prefix;
  j["backward_grading"] = b;
}

}  // namespace

nlohmann::json candidate_grade_json(const candidate_grade& g) { return grade_json(g, ""); }

namespace {

// The summary counts, with the rows left undecided past --max-seconds (the first ten as (b, h, i)).
nlohmann::json summary_json(const oracle_report_input& in) {
  const oracle_result& r = *in.result;
  nlohmann::json decided = {{"double_double", r.by_double_double}};
  for (const auto& [bits, count] : r.by_mpfi) decided["mpfi_" + std::to_string(bits)] = count;
  if (r.faithful_only) decided["faithful_at_cap"] = r.faithful_only;
  nlohmann::json j = {{"elements", r.elements},
                      {"correctly_rounded", r.correctly_rounded},
                      {"faithful_only", r.faithful_only},
                      {"empty_row_policy", r.exact_policy},
                      {"ieee_nonfinite", r.ieee_nonfinite},
                      {"decided_by", decided},
                      {"rows", r.B * r.H * r.nq},
                      {"rows_escalated", r.rows_escalated},
                      {"rows_fast_path_declined", r.fast_path_rows_failed},
                      {"empty_rows", r.empty_rows},
                      {"fast_path_vectorized", r.fast_kernel_vectorized},
                      {"seconds", in.seconds}};
  if (r.padding_rows) j["padding_rows"] = r.padding_rows;
  j["partial"] = r.undecided_rows > 0;
  if (r.undecided_rows) {
    // Which rows: the first few (b, h, i); all of them are NaN in the reference.
    nlohmann::json first = nlohmann::json::array();
    for (std::size_t e = 0; e < r.how.size() && first.size() < 10; e += r.dv)
      if (r.how[e] == decided_by::undecided) {
        const std::size_t row = e / r.dv;
        first.push_back({row / (r.H * r.nq), (row / r.nq) % r.H, row % r.nq});
      }
    j["undecided_rows"] = r.undecided_rows;
    j["undecided_rows_first"] = first;
    j["undecided"] = "rows not computed within " + field("max_seconds") + ": NaN in the reference, not graded";
  }
  return j;
}

// FlashAttention's acceptance test between two candidates (grading::compare_candidates).
void add_comparison(nlohmann::json& j, const oracle_report_input& in) {
  if (!in.verdict.comparison) return;
  const candidate_comparison& c = *in.verdict.comparison;
  j["comparison"] = {{"rule", "max error of candidate 1 <= 2 x max error of candidate 2 (FlashAttention's acceptance test)"},
                     {"candidate", c.candidate},
                     {"baseline", c.baseline},
                     {"candidate_max_ulp", num(c.candidate_max_ulp)},
                     {"baseline_max_ulp", num(c.baseline_max_ulp)},
                     {"ratio", c.ratio ? num(*c.ratio) : nlohmann::json(nullptr)},
                     {"verdict", c.pass ? "pass" : "fail"}};
}

// The attention candidate's row errors and the article's output bound (section 11).
void add_attention(nlohmann::json& j, const oracle_report_input& in) {
  if (!in.attention) return;
  const auto& g = *in.attention;
  nlohmann::json rows = nlohmann::json::array();
  for (double x : g.row_l1) rows.push_back(num(x));
  j["attention"] = {{"rows", g.rows},
                    {"max_row_l1_error", num(g.max_row_l1)},
                    {"max_row_l1_error_is", "an upper bound: the largest upper end of the per-row enclosures"},
                    {"row_l1_error", rows},
                    {"row_l1_error_is", "per row, the midpoint of a rigorous enclosure (approx, not a bound)"},
                    {"output_bound",
                     {{"statement", "||((A_hat - A) V)_i||_2 <= ||A_hat_i - A_i||_1 * max_j ||v_j||_2 (article section 11)"},
                      {"certified", g.bound_certified},
                      {"undecided", g.bound_undecided},
                      {"refuted", g.bound_refuted},
                      {"rows_skipped", g.rows_skipped}}}};
}

// The verdict grading decided (grading::decide_oracle_verdict): its exit status and reasons.
void add_verdict(nlohmann::json& j, const oracle_report_input& in) {
  j["verdict"] = {{"exit_code", in.verdict.exit_status()}, {"reasons", in.verdict.reasons}};
}

}  // namespace

nlohmann::json oracle_report(const oracle_report_input& in) {
  const oracle_result& r = *in.result;
  nlohmann::json j;
  j["tool"] = "attncert";
  j["version"] = ATTNCERT_VERSION;
  j["command"] = in.command;
  j["inputs"] = in.inputs;
  j["settings"] = in.settings;
  j["guarantee"] =
      "Each correctly_rounded element of the reference is the exact value of softmax(s*Q*K^T + mask)*V, computed from "
      "the exact input values, rounded to nearest (ties to even) in the target format. A faithful_only element is one "
      "of the two target numbers adjacent to the exact value. The sign of a zero result is not certified.";
  j["summary"] = summary_json(in);
  if (r.has_lse) j["lse"] = lse_summary(r, in.lse_file);
  j["output_shape"] = {r.B, r.H, r.nq, r.dv};
  if (in.backward) {
    const backward_result& g = *in.backward;
    nlohmann::json by = nlohmann::json::object();
    by["double_double"] = g.double_double;
    for (const auto& [bits, count] : g.by_mpfi) by["mpfi_" + std::to_string(bits)] = count;
    if (g.faithful_only) by["faithful_at_cap"] = g.faithful_only;
    nlohmann::json shapes = {{"dq", g.dq.shape}, {"dk", g.dk.shape}, {"dv", g.dv.shape}};
    if (g.has_dbias) shapes["dbias"] = g.dbias.shape;
    if (g.has_dsink) shapes["dsink"] = g.dsink.shape;
    j["backward"] = {{"guarantee", "each correctly_rounded gradient element is the exact derivative of the exact forward "
                                   "(proofs/P15-oracle-backward.md), rounded to nearest (ties to even) in the target format"},
                     {"elements", g.elements},
                     {"correctly_rounded", g.correctly_rounded},
                     {"faithful_only", g.faithful_only},
                     {"exact_zeros", g.exact_zeros},
                     {"decided_by", by},
                     {"escalation", {{"fast_path", g.fast_path},
                                     {"keys_escalated", g.keys_escalated},
                                     {"rows_escalated", g.rows_escalated},
                                     {"units_escalated", g.units_escalated},
                                     {"units_fast_path_declined", g.units_declined},
                                     {"mpfi_passes", g.passes}}},
                     {"internal_shapes", shapes},
                     {"files", in.gradient_files},
                     {"seconds", in.backward_seconds}};
  } else if (!in.backward_not_computed.empty()) {
    j["backward"] = {{"computed", false}, {"not_computed", in.backward_not_computed}, {"seconds", in.backward_seconds}};
  }
  j["reference"] = in.reference;
  nlohmann::json faithful = nlohmann::json::array();
  for (std::size_t e = 0; e < r.how.size() && faithful.size() < 100; ++e)
    if (r.how[e] == decided_by::faithful_only) {
      const std::size_t k = e % r.dv, i = (e / r.dv) % r.nq, h = (e / (r.dv * r.nq)) % r.H, b = e / (r.dv * r.nq * r.H);
      faithful.push_back({b, h, i, k});
    }
  j["faithful_only_elements"] = faithful;

  add_grading(j, in);
  add_backward_grading(j, in);
  add_comparison(j, in);
  add_attention(j, in);
  add_verdict(j, in);
  return j;
}

namespace {

std::string g4(const nlohmann::json& x) { return x.is_number() ? fmt(x.get<double>(), 4) : x.get<std::string>(); }

// "rule flash: PASS  max |c - o| 6.2e-07 <= threshold 6.4e-07 (k 2 x max |b - o| 3.2e-07 + atol 0); margin ..., ratio ..."
void write_verdict_text(std::ostream& os, const nlohmann::json& v) {
  const std::string rule = v.at("rule").get<std::string>();
  os << "    rule " << rule << ": ";
  const std::string verdict = v.at("verdict").get<std::string>();
  if (verdict == "none") {
    os << "no verdict (no " << field("max_ulp") << ")\n";
    return;
  }
  os << (verdict == "pass" ? "PASS" : "FAIL") << "  ";
  const std::string at = v.at("index").is_null() ? "" : " at " + v.at("index").dump();
  if (rule == "ulp") {
    os << "max " << g4(v.at("observed")) << " ulp vs " << field("max_ulp") << " " << g4(v.at("threshold"));
  } else if (rule == "flash") {
    os << "max |c - o| " << g4(v.at("observed")) << " vs " << g4(v.at("k")) << " x max |b - o| "
       << g4(v.at("baseline_max_abs_error")) << " + atol " << g4(v.at("atol")) << " = " << g4(v.at("threshold"));
  } else {
    os << "|c - o| <= atol " << g4(v.at("atol")) << " + rtol " << g4(v.at("rtol")) << " |o|";
    if (rule == "torch-sdpa") os << " (fudge " << g4(v.at("fudge")) << ")";
    os << "; decisive element |c - o| " << g4(v.at("observed")) << " vs " << g4(v.at("threshold"));
  }
  os << at << "; margin " << g4(v.at("margin")) << ", ratio " << g4(v.at("ratio"));
  if (rule == "flash") os << "; k needed " << g4(v.at("k_needed"));
  if (rule == "torch-sdpa") os << "; fudge needed " << g4(v.at("fudge_needed"));
  if (v.at("violations").get<std::size_t>()) os << "; " << v.at("violations") << " elements over";
  if (v.at("nonfinite_where_truth_finite").get<std::size_t>()) os << "; NaN/Inf where finite: " << v.at("nonfinite_where_truth_finite");
  os << "\n";
}

// A graded array: the errors (abs, rel, ulp side by side, each with its index), the counts, the rule.
void write_grade_text(std::ostream& os, const std::string& label, const nlohmann::json& c, bool with_rule) {
  os << label << " " << c.at("name").get<std::string>() << " (" << c.at("file").get<std::string>() << "): max "
     << g4(c.at("max_ulp")) << " ulp, mean " << g4(c.at("mean_ulp")) << " ulp, max abs error " << g4(c.at("max_abs_error"))
     << ", max rel error " << g4(c.at("max_rel_error")) << "\n";
  const auto& e = c.at("errors");
  std::string order = c.at("index_order").get<std::string>();
  for (std::size_t p = order.find(','); p != std::string::npos; p = order.find(',', p + 2)) order.replace(p, 1, ", ");
  os << "    worst at (" << order << "): abs "
     << e.at("abs").at("index").dump() << ", rel " << e.at("rel").at("index").dump() << ", ulp " << e.at("ulp").at("index").dump()
     << "\n    elements beyond";
  for (double t : ulp_thresholds) os << " " << fmt(t) << " ulp: " << c.at("beyond_ulps").at(fmt(t));
  os << "; NaN/Inf where finite: " << c.at("nonfinite_where_truth_finite");
  if (c.at("skipped").get<std::size_t>()) os << "; not graded (no enclosed truth): " << c.at("skipped");
  os << "\n";
  if (c.contains("fully_masked") && c.at("fully_masked").contains("first")) {  // a fully masked row not as declared
    const auto& fm = c.at("fully_masked");
    const auto& f = fm.at("first");
    os << "    fully masked rows: " << fm.at("mismatched") << " of " << fm.at("compared") << " elements differ from "
       << field(fm.at("field").get<std::string>()) << " " << g4(f.at("declared")) << "; the first at (" << order << ") " << f.at("index").dump()
       << ": " << g4(f.at("value")) << "\n";
  }
  if (with_rule) write_verdict_text(os, c.at("rule"));
}

// "rerun of c1 (file): 3 of 512 elements differ; max |c1 - c2| ... ; error of c1 from the truth: ..."
void write_rerun_text(std::ostream& os, const std::string& label, const nlohmann::json& r) {
  const std::string of = r.at("of").get<std::string>();
  os << label << " (" << r.at("file").get<std::string>() << "): " << r.at("differing") << " of " << r.at("elements")
     << " elements differ";
  if (r.at("nonfinite_differing").get<std::size_t>()) os << " (" << r.at("nonfinite_differing") << " NaN/Inf)";
  os << "; max |c1 - c2| " << g4(r.at("max_abs_difference")) << " = " << g4(r.at("max_ulp_difference")) << " ulp at the truth";
  if (!r.at("index").is_null()) os << " at " << r.at("index").dump();
  const auto& f = r.at("first_run_error");
  os << "; error of " << of << " from the truth: max abs " << g4(f.at("max_abs_error")) << ", max " << g4(f.at("max_ulp"))
     << " ulp\n";
}

void write_grading_text(std::ostream& os, const nlohmann::json& j) {
  if (j.at("candidates").empty() && !(j.contains("lse") && j.at("lse").contains("candidate"))) return;
  const auto& gr = j.at("grading");
  os << "grading rule " << gr.at("rule").get<std::string>() << " (" << gr.at("source").get<std::string>()
     << "): " << gr.at("statement").get<std::string>() << "; o = the exact value, computed in binary64\n";
  if (j.contains("baseline")) write_grade_text(os, "baseline", j.at("baseline"), false);
  for (const auto& c : j.at("candidates")) write_grade_text(os, "candidate", c, true);
  if (j.contains("lse")) {
    const auto& l = j.at("lse");
    if (l.contains("baseline")) write_grade_text(os, "LSE baseline", l.at("baseline"), false);
    if (l.contains("candidate")) write_grade_text(os, "LSE candidate", l.at("candidate"), true);
  }
  if (j.contains("rerun")) write_rerun_text(os, "rerun of " + j.at("rerun").at("of").get<std::string>(), j.at("rerun"));
}

const char* const gradient_order[] = {"dq", "dk", "dv", "dbias", "dsink"};

// The section 'backward_grading': the rule, the baseline's gradients, each kernel's gradients with
// their verdicts and (first kernel) their rerun spreads.
void write_backward_grading_text(std::ostream& os, const nlohmann::json& j) {
  if (!j.contains("backward_grading")) return;
  const auto& b = j.at("backward_grading");
  os << "backward grading rule " << b.at("rule").get<std::string>() << " (" << b.at("source").get<std::string>()
     << "): " << b.at("statement").get<std::string>() << "; o = the exact gradient, computed in binary64\n";
  const auto& d = b.at("defaults");
  if (d.contains("k")) os << "  k = " << g4(d.at("k")) << " for the gradients (" << d.at("k_source").get<std::string>() << ")\n";
  if (d.contains("fudge")) {
    os << "  fudge per gradient:";
    for (const char* g : gradient_order) os << " " << g << " " << g4(d.at("fudge").at(g));
    os << " (" << d.at("fudge_source").get<std::string>() << ")\n";
  }
  auto write_set = [&](const std::string& label, const nlohmann::json& set, bool with_rule) {
    const auto& gr = set.at("gradients");
    for (const char* g : gradient_order) {
      if (!gr.contains(g)) continue;
      const auto& c = gr.at(g);
      write_grade_text(os, label, c, with_rule);
      if (c.contains("rerun")) write_rerun_text(os, "    rerun", c.at("rerun"));
    }
  };
  if (b.contains("baseline")) write_set("gradient baseline", b.at("baseline"), false);
  for (const auto& c : b.at("candidates")) write_set("gradient candidate", c, true);
}

}  // namespace

void write_oracle_text(std::ostream& os, const nlohmann::json& j) {
  const auto& s = j.at("summary");
  const auto& st = j.at("settings");
  os << "attncert oracle — certified reference for softmax(s·QKᵀ + mask)·V\n";
  std::string masks = "?";
  if (st.contains("mask")) {
    const auto& m = st.at("mask");
    if (m.is_string()) masks = m.get<std::string>();
    else if (m.is_array()) {
      masks.clear();
      for (const auto& x : m) masks += (masks.empty() ? "" : " + ") + x.get<std::string>();
    }
  }
  os << "  target " << st.value("target", "?") << ", scale " << st.value("scale", "?") << ", mask " << masks
     << ", output shape (b, h, n_q, d_v) = " << j.at("output_shape").dump() << "\n";
  if (st.contains("variant")) os << "  variant " << st.at("variant").dump() << "\n";
  os << "  elements " << s.at("elements") << ": correctly rounded " << s.at("correctly_rounded") << ", faithful only "
     << s.at("faithful_only");
  if (s.at("empty_row_policy").get<std::size_t>()) os << ", empty-row policy " << s.at("empty_row_policy");
  if (s.at("ieee_nonfinite").get<std::size_t>()) os << ", IEEE (non-finite inputs, not certified) " << s.at("ieee_nonfinite");
  os << "\n  decided by:";
  for (auto it = s.at("decided_by").begin(); it != s.at("decided_by").end(); ++it) os << " " << it.key() << " " << it.value();
  os << "\n  rows " << s.at("rows") << " (escalated " << s.at("rows_escalated") << ", fast path declined "
     << s.at("rows_fast_path_declined") << "), " << fmt(s.at("seconds").get<double>(), 3) << " s\n";
  if (s.contains("undecided_rows"))
    os << "PARTIAL: " << s.at("undecided_rows") << " rows not computed within " << field("max_seconds") << " (NaN in the reference, not "
       << "graded); the first (b, h, i): " << s.at("undecided_rows_first").dump() << "\n";
  if (!j.at("reference").is_null()) os << "  reference written to " << j.at("reference").value("file", "?") << "\n";
  if (j.contains("backward") && j.at("backward").contains("not_computed")) {
    os << "backward: not computed (see below)\n";
  } else if (j.contains("backward")) {
    const auto& b = j.at("backward");
    os << "backward: " << b.at("elements") << " gradient elements: correctly rounded " << b.at("correctly_rounded")
       << ", faithful only " << b.at("faithful_only") << ", exact zeros " << b.at("exact_zeros") << "; decided by:";
    for (auto it = b.at("decided_by").begin(); it != b.at("decided_by").end(); ++it) os << " " << it.key() << " " << it.value();
    const auto& esc = b.at("escalation");
    os << "\n  escalated to MPFI: keys " << esc.at("keys_escalated") << " (dK/dV columns), rows " << esc.at("rows_escalated")
       << " (dq alone), (batch, kv head) units "
       << esc.at("units_escalated") << " (fast path declined " << esc.at("units_fast_path_declined") << "); "
       << fmt(b.at("seconds").get<double>(), 3) << " s\n";
    for (auto it = b.at("files").begin(); it != b.at("files").end(); ++it)
      os << "  " << it.key() << " written to " << it.value().value("file", "?") << "\n";
  }
  write_grading_text(os, j);
  write_backward_grading_text(os, j);
  if (j.contains("comparison")) {
    const auto& c = j.at("comparison");
    os << "comparison: " << c.at("candidate").get<std::string>() << " max " << g4(c.at("candidate_max_ulp")) << " ulp vs "
       << c.at("baseline").get<std::string>() << " max " << g4(c.at("baseline_max_ulp")) << " ulp: "
       << c.at("verdict").get<std::string>() << " (" << c.at("rule").get<std::string>() << ")\n";
  }
  if (j.contains("attention")) {
    const auto& a = j.at("attention");
    const auto& b = a.at("output_bound");
    // max_row_l1_error is an upper bound: shown rounded up (decimal.hpp), never to nearest.
    const auto& m = a.at("max_row_l1_error");
    os << "attention candidate: max row-L1 error <= "
       << (m.is_number() ? decimal_up(m.get<double>(), 4, decimal_layout::general) : m.get<std::string>())
       << "; output bound certified on "
       << b.at("certified") << " of " << a.at("rows") << " rows (undecided " << b.at("undecided") << ", refuted "
       << b.at("refuted") << ", skipped " << b.at("rows_skipped") << ")\n";
  }
  const char* word = j.at("verdict").at("exit_code").get<int>() == 3 ? "UNDECIDED: " : "FAIL: ";
  for (const auto& r : j.at("verdict").at("reasons")) os << word << r.get<std::string>() << "\n";
}

}  // namespace attncert::report
