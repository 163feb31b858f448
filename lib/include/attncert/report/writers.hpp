// attncert/report/writers.hpp — render a report::document as text, JSON, Markdown or CSV.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "attncert/report/model.hpp"

namespace attncert::report {

enum class output_format { text, json, md, csv };

/// Parse "text" | "json" | "md" | "csv" (input_error otherwise).
output_format parse_output_format(const std::string& s);

/// The JSON form: top level keys tool, version, command, settings, checks, summary.  Each
/// check: id, title, section, proof, error_model, claims[], ranks[]; a rank entry has
/// exact_rank, exact_rank_source, numerical[{policy, threshold, rank}], diverges (bool).
/// summary: integers claims, pass, fail, undecided, skipped, rank_rows, divergences.
nlohmann::json to_json(const document& doc);

/// How much the text report shows.  JSON, Markdown and CSV always carry every claim.
struct write_options {
  /// false: a one-screen summary — per check its claims by verdict (pass, fail, undecided,
  /// skipped) and its divergences, the claims that failed or are undecided (the first ten),
  /// then the totals.  true: the settings and every claim and rank row, check by check, then
  /// the same summary.
  bool verbose = false;
};

void write_text(std::ostream& os, const document& doc, const write_options& opt = {});
void write_json(std::ostream& os, const document& doc);
void write_markdown(std::ostream& os, const document& doc);
/// CSV: one row per claim and one per (rank row, policy), with a `kind` column.
void write_csv(std::ostream& os, const document& doc);

void write(std::ostream& os, const document& doc, output_format f, const write_options& opt = {});

}  // namespace attncert::report
