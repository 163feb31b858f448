// attncert/report/model.hpp — the one data model of a tolerance report.  Checks fill it;
// writers (writers.hpp) render it as text, JSON, Markdown or CSV.  Numbers are kept as
// decimal strings (exact or with enough digits to round-trip), never re-rounded by writers.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attncert/number/traits.hpp"

namespace attncert::report {

/// One claim evaluated in one format (or in the exact / enclosure tier).
struct claim_row {
  std::string claim;           ///< stable claim id within the check, e.g. "det-equals-tanh"
  std::string statement;       ///< the claim in words, e.g. "det A = tanh a"
  std::string instance;        ///< which declared instance, e.g. "a=1e-20"
  std::string format;          ///< "binary64", "mpfr256", "exact", "mpfi128", ...
  std::string tier;            ///< "exact" | "enclosure" | "approx"
  std::string expected;        ///< closed form evaluated in the same format
  std::string computed;        ///< value produced by the attention code path
  std::string abs_error;       ///< |computed − expected|
  std::string rel_error;       ///< |computed − expected| / |expected| ("inf" if expected = 0 ≠ computed)
  std::string tolerance;       ///< the bound, fixed before computing, as a number
  std::string tolerance_rule;  ///< how it was derived, e.g. "absolute 8*eps (cancellation in p^2-(1-p)^2)"
  verdict result = verdict::fail;
  std::string note;            ///< e.g. why a claim is skipped in this format
};

/// One numerical-rank measurement under one policy.
struct numerical_rank {
  std::string policy;     ///< canonical policy name
  std::string threshold;  ///< the threshold value used
  std::size_t rank = 0;
};

/// Exact rank of one object of one instance, next to its numerical ranks in one format.
struct rank_row {
  std::string object;             ///< "S", "A", "AV", "X+AV", "concat", ...
  std::string instance;
  std::string format;             ///< format the matrix was formed in
  std::string svd_type;           ///< arithmetic of the SVD (binary32 for 16-bit formats)
  std::size_t rows = 0, cols = 0;
  std::size_t exact_rank = 0;
  std::string exact_rank_source;  ///< the witness, e.g. "analytic: det A = tanh a > 0" or "exact elimination over Q"
  std::vector<numerical_rank> numerical;
  std::vector<std::string> singular_values;  ///< decreasing
  std::string condition_number;
  std::string stable_rank;        ///< ‖A‖_F² / ‖A‖₂² from the same singular values
  std::string effective_rank;     ///< exp(entropy of σᵢ/Σσ) (Roy & Vetterli)
  bool diverges = false;          ///< some numerical rank != exact_rank (a measurement, not a failure)
  /// The smallest singular value of the matrix as formed (exact in Q), certified: "0" when the
  /// formed matrix is rank-deficient over Q, else an enclosure "[lo, hi]"; empty when not computed.
  std::string sigma_min_certified;
  std::string sigma_min_certified_how;  ///< how it was decided (exact rank over Q, or Rump's enclosure at N bits)
  std::string sigma_min_tolerance;      ///< the declared tolerance of the measured σ_min against it
  /// The measured σ_min lies outside that tolerance of the certified value (a measurement, not a
  /// failure; flagged "DIVERGES (sigma_min)").
  bool sigma_min_diverges = false;
};

/// Everything one check produced.
struct check_report {
  std::string id;         ///< stable id, e.g. "two-token"
  std::string title;
  std::string section;    ///< article section, e.g. "§4–6"
  std::string proof;      ///< proofs/... file backing the claims
  std::string error_model;  ///< the stated error model from which tolerances derive
  std::vector<claim_row> claims;
  std::vector<rank_row> ranks;
  /// The check did not finish within the command's budget (--max-seconds): its one claim row is
  /// "not-computed" (undecided), and the report is PARTIAL.
  bool not_computed = false;
};

/// Totals over a report.
struct summary {
  std::size_t claims = 0, pass = 0, fail = 0, undecided = 0, skipped = 0;
  std::size_t rank_rows = 0, divergences = 0;
  std::size_t sigma_min_divergences = 0;  ///< rank rows whose σ_min is off its certified value
  std::size_t not_computed = 0;  ///< checks not finished within the budget (each one undecided claim)
};

/// A whole report.
struct document {
  std::string tool = "attncert";
  std::string version;
  std::string command;             ///< the command line that produced it
  nlohmann::json settings;         ///< every setting that shapes the answer
  std::vector<check_report> checks;

  /// Counts claims by verdict (skipped claims are not in `claims`) and divergences.
  summary totals() const {
    summary s;
    for (const auto& c : checks) {
      if (c.not_computed) ++s.not_computed;
      for (const auto& r : c.claims) {
        switch (r.result) {
          case verdict::pass: ++s.pass; ++s.claims; break;
          case verdict::fail: ++s.fail; ++s.claims; break;
          case verdict::undecided: ++s.undecided; ++s.claims; break;
          case verdict::skipped: ++s.skipped; break;
        }
      }
      for (const auto& r : c.ranks) {
        ++s.rank_rows;
        if (r.diverges) ++s.divergences;
        if (r.sigma_min_diverges) ++s.sigma_min_divergences;
      }
    }
    return s;
  }
};

}  // namespace attncert::report
