// attncert/report/oracle.hpp — the report of `attncert oracle`: the JSON report (one data
// model) and its text rendering.  (Tensors from .npy arrays: oracle/request.hpp.)
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "attncert/grading/grading.hpp"
#include "attncert/oracle/backward.hpp"
#include "attncert/io/npy.hpp"
#include "attncert/oracle/request.hpp"

namespace attncert::report {

/// Everything the report shows.  Grades carry their rule's verdict (grading/grading.hpp:
/// approx_grade) and `verdict` the call's (grading::decide_oracle_verdict on these grades); the
/// report renders them and computes nothing.
struct oracle_report_input {
  std::string command;
  nlohmann::json inputs;    ///< description of the input files
  nlohmann::json settings;  ///< every setting that shapes the answer (the rule's are added from `rules`)
  const oracle::oracle_result* result = nullptr;
  std::vector<grading::candidate_grade> candidates;
  std::vector<std::string> candidate_files;
  std::optional<grading::attention_grade> attention;
  grading::rule_settings rules;                           ///< --rule and its settings
  std::optional<grading::candidate_grade> baseline;       ///< --baseline: its own errors from the truth
  std::string baseline_file;
  std::optional<grading::candidate_grade> lse_candidate;  ///< --candidate-lse, graded by the same rule
  std::string lse_candidate_file;
  std::optional<grading::candidate_grade> lse_baseline;   ///< --baseline-lse
  std::string lse_baseline_file;
  std::optional<grading::rerun_spread> rerun;             ///< --rerun: spread between two runs of candidate 1
  std::string rerun_file;
  nlohmann::json reference;       ///< where the reference was written (or null)
  nlohmann::json lse_file;        ///< where the LSE was written (or null)
  const oracle::backward_result* backward = nullptr;  ///< --grad-out: the certified gradients (or null)
  nlohmann::json gradient_files;  ///< {"dq": {"file", "dtype", "shape"}, ...} as written
  std::vector<grading::gradient_set_grade> gradient_candidates;  ///< --candidate-grads, graded
  std::optional<grading::gradient_set_grade> gradient_baseline;  ///< --baseline-grads: their own errors
  std::string gradient_rerun_prefix;                             ///< --rerun-grads (spreads in gradient_candidates[0])
  double backward_seconds = 0;
  /// Non-empty when a backward was asked for and not computed within the budget: why (the report's
  /// backward section says so, and the exit code is 3 unless something failed).
  std::string backward_not_computed;
  double seconds = 0;
  /// The verdict grading decided (grading::decide_oracle_verdict): the report's 'verdict' and
  /// 'comparison', and the FAIL / UNDECIDED lines of the text.
  grading::oracle_verdict verdict;
};

/// The JSON report: tool, version, command, inputs, settings (with settings.grading), guarantee,
/// grading (the rule, its source, what the truth is), summary (elements, correctly_rounded,
/// faithful_only, decided_by{...}, ...), baseline, candidates[] (errors abs / rel / ulp with the
/// index of each maximum, beyond_ulps, rule {verdict, observed, threshold, margin, ratio, ...}),
/// lse {candidate, baseline}, rerun, backward {elements, correctly_rounded, exact_zeros, decided_by, files},
/// backward_grading {rule, statement, source, defaults, baseline {prefix, gradients {dq: ...}},
/// candidates [{name, prefix, verdict, gradients {dq: {the candidate's fields, settings, rerun}}}]},
/// comparison (two candidates: max_ulp(c1) <= 2 max_ulp(c2)),
/// attention (with --attention-candidate), faithful_only_elements (first 100 indices),
/// verdict {exit_code, reasons}.
nlohmann::json oracle_report(const oracle_report_input& in);

/// One graded array as the report writes it (name, elements, errors abs / rel / ulp with their indices,
/// beyond_ulps, worst, rule {verdict, observed, threshold, margin, ...}): for callers that grade in
/// process (the Python layer).
nlohmann::json candidate_grade_json(const grading::candidate_grade& g);

/// Human-readable rendering of oracle_report().
void write_oracle_text(std::ostream& os, const nlohmann::json& report);

}  // namespace attncert::report
