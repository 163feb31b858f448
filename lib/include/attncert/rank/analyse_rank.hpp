// attncert/rank/analyse_rank.hpp — the analysis behind `attncert rank`: the certified rank of one
// object of an attention layer, certified enclosures of its singular values, and its numerical
// rank in every format × policy.  The result is typed (`rank_analysis`); report/rank.hpp
// renders it.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attncert/attention/mask.hpp"
#include "attncert/linalg/certified_svd.hpp"
#include "attncert/rank/exact_rank.hpp"
#include "attncert/rank/policy.hpp"

namespace attncert {

/// What to analyse.  Scores are either given (S) or formed as scale·QKᵀ.  The scale is an
/// exact rational, or 1/√d (d = Q's width) when `inv_sqrt_d` is set.
struct rank_request {
  std::optional<matrix<mpq_rational>> S, Q, K, V, X;
  std::optional<mpq_rational> scale;  ///< rational scale for QKᵀ (ignored with S)
  bool inv_sqrt_d = false;            ///< scale 1/√d
  mask M = mask::none();
  layer_object object = layer_object::attention;
  std::vector<format_spec> formats;
  std::vector<rank_policy> policies;
  unsigned start_bits = 128, max_bits = 4096;  ///< singular-value enclosures escalate in between
  /// Relative width asked of every singular value certified > 0 (0: no requirement).  A wider
  /// one counts as undecided and escalates where the MPFI path is the right tool.
  double sigma_rel_width = 0;
  /// The formats were named by the user: mpfrN numerical ranks run at every size.  Otherwise an
  /// mpfrN format is left out above `mpfr_svd_max_dim` rows or columns, with a time estimate.
  bool formats_explicit = false;
  long mpfr_svd_max_dim = 256;
  /// The MPFI singular-value path (Jacobi in MPFR, then Rump's bound) runs when the binary64 path
  /// is unavailable or undecided, up to this many rows and columns; above, undecided stays
  /// UNDECIDED (never the whole large matrix in MPFR).
  long mpfi_svd_max_dim = 128;
  /// Above mpfi_svd_max_dim, a square object escalates its undecided trailing singular values on
  /// a deflated subspace (linalg/deflated_svd.hpp) through the same precision schedule, taking at
  /// most this many of them (0: never; they stay UNDECIDED).
  std::size_t deflation_max_k = 64;
  /// Time budget (seconds) of that escalation: a precision is not started when the previous one's
  /// time, times 3 (the estimate for twice the bits), would take the escalation past it (0: no
  /// budget; --max-seconds still applies).
  double deflation_seconds = 120;
  /// Threads of the deflation's MPFR products (number/parallel.hpp: the same results as one).
  unsigned threads = 1;
  /// Stop after this many seconds (0: no limit): what is unfinished is reported as such.
  double max_seconds = 0;
  /// Called with a short line at each stage (for a progress display); may be empty.
  std::function<void(const std::string&)> progress;
  std::uint64_t seed = 20261129;
  nlohmann::json inputs;  ///< description of the inputs (file names, shapes), echoed in the report
};

/// One numerical-rank measurement: the matrix formed in `format`, thresholded by `policy`
/// (rank/numerical.hpp).  Tier: approx.
struct numerical_rank_entry {
  std::string format, policy;
  std::size_t rank = 0;
  std::string threshold;  ///< 17 significant digits in the SVD's type; "0" for an empty matrix
  bool diverges = false;  ///< rank outside the exact [lo, hi]
  /// How many of the EXACT singular values this policy's rule counts, with the threshold taken from
  /// the exact σ₁ and this format's ε (tier: enclosure, from the certified singular values):
  /// [exact_lo, exact_hi], decided when equal.  The numerical rank above is the same rule applied
  /// to the SVD of the matrix formed in the format.
  std::size_t exact_lo = 0, exact_hi = 0;
};

/// Everything `attncert rank` reports.
struct rank_analysis {
  // ---- what was analysed (settings that shape the answer) ----
  layer_object object = layer_object::attention;
  long rows = 0, cols = 0;           ///< shape of the object
  std::string mask;                  ///< mask::describe()
  std::string scale;                 ///< "scores given", "1/sqrt(d)" or the rational scale
  std::string algebraic_factor;      ///< c of S = c·B ("1" or "1/sqrt(d)" when d is not a square)
  std::vector<format_spec> formats;
  std::vector<rank_policy> policies;
  unsigned start_bits = 0, max_bits = 0;
  std::uint64_t seed = 0;
  nlohmann::json inputs;
  // ---- exact tier ----
  rank_interval exact;               ///< [lo, hi] with witnesses (transcendence method, P08)
  // ---- enclosure tier ----
  /// Enclosures of the exact singular values (decreasing) at the precision the escalation
  /// stopped at (`singular_values.bits`).
  singular_value_enclosures singular_values;
  /// The escalation decided: as many singular values certified > 0 as exact.lo.  false: the
  /// cap max_bits was reached first (the enclosures are still valid, only less tight).
  bool singular_values_decided = false;
  unsigned singular_value_steps = 0;  ///< precisions tried
  /// How the enclosures were computed: "binary64" (LAPACK + residual bound, proofs/P16),
  /// "binary64+deflated" (the trailing ones then escalated on a deflated subspace up to
  /// singular_values.bits, P16 part D) or "mpfi" (Jacobi in MPFR + Rump's bound at
  /// singular_values.bits); "none" when not run.
  std::string singular_value_method = "none";
  /// Largest (hi − lo)/lo over the singular values certified > 0 (0 when there are none).
  double singular_value_max_rel_width = 0;
  /// Notes for the reader: formats left out (with the estimate), stages not run in time.
  std::vector<std::string> notes;
  /// The run stopped at max_seconds: the parts named in `notes` were not computed.
  bool partial = false;
  /// Seconds per stage, in order ("exact rank", "singular values", "numerical ranks").
  std::vector<std::pair<std::string, double>> stage_seconds;
  // ---- approx tier ----
  std::vector<numerical_rank_entry> numerical;  ///< format-major, policy-minor (request order)
  std::size_t divergences = 0;                  ///< entries with diverges
};

/// Throws input_error (one line, fields named with field()) for what analyse_rank cannot analyse: neither
/// S nor Q and K, Q and K of different widths, a mask of the wrong shape or on the scores, an output or
/// residual without V (and X), V or X of the wrong shape, a fully masked row.  analyse_rank calls it first;
/// build_rank_request (rank/spec.hpp) too.
void validate(const rank_request& req);

/// Run the analysis.  The singular-value enclosures escalate through ziv_escalate
/// (number/ziv.hpp) from start_bits, doubling, up to max_bits.
/// Errors (input_error): inconsistent shapes, fully masked rows, an enclosure format among the
/// numerical formats, precision limits.
/// Guarantee: the exact rank lies in exact.[lo, hi]; each exact singular value lies in its
/// enclosure.  The numerical ranks are measurements (approx tier).
rank_analysis analyse_rank(const rank_request& req);

}  // namespace attncert
