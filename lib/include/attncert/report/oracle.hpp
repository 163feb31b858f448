// attncert/report/oracle.hpp — the report of `attncert oracle`: the JSON report (one data
// model) and its text rendering.  (Tensors from .npy arrays: oracle/request.hpp.)
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "attncert/oracle/grading.hpp"
#include "attncert/io/npy.hpp"
#include "attncert/oracle/request.hpp"

namespace attncert::oracle {

/// Everything the report shows.
struct oracle_report_input {
  std::string command;
  nlohmann::json inputs;    ///< description of the input files
  nlohmann::json settings;  ///< every setting that shapes the answer
  const oracle_result* result = nullptr;
  std::vector<candidate_grade> candidates;
  std::vector<std::string> candidate_files;
  std::optional<attention_grade> attention;
  std::optional<double> max_ulp;  ///< --max-ulp, if given
  nlohmann::json reference;       ///< where the reference was written (or null)
  nlohmann::json lse_file;        ///< where the LSE was written (or null)
  double seconds = 0;
};

/// The JSON report: tool, version, command, inputs, settings, guarantee, summary (elements,
/// correctly_rounded, faithful_only, decided_by{...}, ...), candidates[], comparison (two
/// candidates: max_ulp(c1) <= 2 max_ulp(c2)), attention (with --attention-candidate),
/// faithful_only_elements (first 100 indices), verdict {exit_code, reasons}.
nlohmann::json oracle_report(const oracle_report_input& in);

/// Exit code the report implies: 1 if a candidate exceeds --max-ulp (or has NaN/Inf where
/// the truth is finite, when --max-ulp is given) or the output bound is refuted; else 0.
int oracle_exit_code(const nlohmann::json& report);

/// Human-readable rendering of oracle_report().
void write_oracle_text(std::ostream& os, const nlohmann::json& report);

}  // namespace attncert::oracle
