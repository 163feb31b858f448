// attncert/oracle/grading.hpp — grading other implementations' outputs against the oracle's
// exact values: errors in ulps / absolute / relative, and a candidate attention matrix against
// the article's output bound (§11).
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "attncert/oracle/oracle.hpp"

namespace attncert::oracle {

// ---- grading candidates ------------------------------------------------------------------------

/// Thresholds (in ulps of the target) counted by the candidate report.
inline constexpr std::array<double, 5> ulp_thresholds{0.5, 1, 2, 4, 16};

struct candidate_grade {
  std::string name;
  std::size_t elements = 0;
  double max_ulp = 0, mean_ulp = 0, max_abs = 0, max_rel = 0;
  std::array<std::size_t, ulp_thresholds.size()> beyond{};  ///< elements with error > threshold ulps
  std::size_t nonfinite_where_finite = 0;  ///< NaN/Inf in the candidate where the truth is finite
  std::size_t compared = 0;                ///< elements with a finite truth and a finite candidate
  std::array<std::size_t, 4> worst{};      ///< (b, h, i, k) of the largest ulp error
  bool has_worst = false;
};

/// Grades candidate values (same layout as the result) against the exact values.  Errors are
/// measured from the exact value o (not from the rounded reference): ulp error |c - o| / ulp(o)
/// with ulp of the target format at o; computed in binary64 from the enclosure, so each
/// reported figure has a relative error below 2^-50 (approx tier, documented).  Elements whose
/// truth is not finite or not enclosed (empty rows with policy nan, ieee_nonfinite) are skipped.
candidate_grade grade_candidate(const oracle_result& r, const std::vector<double>& c, target_format t,
                                const std::string& name);

/// Per-row results of an attention-probability candidate Â (shape (B, H, nq, nk)).
struct attention_grade {
  std::vector<double> row_l1;      ///< ‖Âᵢ − Aᵢ‖₁ per row: the midpoint of a rigorous enclosure (approx)
  std::vector<double> lhs_upper;   ///< upper bound of ‖((Â − A)V)ᵢ‖₂
  std::vector<double> rhs_lower;   ///< lower bound of ‖Âᵢ − Aᵢ‖₁ · maxⱼ‖vⱼ‖₂
  std::size_t rows = 0, bound_certified = 0, bound_undecided = 0, bound_refuted = 0, rows_skipped = 0;
  double max_row_l1 = 0;           ///< the largest upper end of those enclosures
};

/// Checks the output bound of the article (§11) per row for the candidate attention Â:
/// ‖((Â − A)V)ᵢ‖₂ <= ‖Âᵢ − Aᵢ‖₁ · maxⱼ‖vⱼ‖₂ (max over all keys j of the row's head).
/// certified: upper(LHS) <= lower(RHS) with rigorous bounds; refuted: lower(LHS) > upper(RHS)
/// (impossible mathematically, so it would reveal a bug); undecided otherwise.
attention_grade grade_attention(const oracle_request& req, const std::vector<double>& A_hat);

}  // namespace attncert::oracle
