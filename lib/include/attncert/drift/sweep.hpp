// attncert/drift/sweep.hpp — `attncert drift`: where a numerical rank leaves the exact rank,
// swept over the score scale a, per precision recipe × rank policy (article §5, §12).
//
// For each parameter value a of a family, the report holds
//   * the certified exact rank [lo, hi] of the object (exact tier),
//   * a certified enclosure of its smallest singular value and of its condition number
//     (enclosure tier),
//   * per recipe: the matrix formed by the recipe (attention/recipe.hpp), its numerical rank
//     under every policy, its smallest singular value and condition number (approx tier),
//   * `diverges`: some numerical rank lies outside [lo, hi] (or the recipe overflowed).
// Then, per recipe × policy, the parameter intervals where the measurement diverges; every
// end that lies between two grid points is located by bisection (see `resolution`).
//
// How the exact side is certified:
//   two-token, object attention — closed form (proofs/P01-two-token.md): A(a) is symmetric
//     with eigenvalues 1 and tanh a, so rank A = 2 for a ≠ 0 and 1 for a = 0, and the
//     singular values are 1 and tanh|a|; tanh|a| is enclosed by MPFR's directed roundings
//     (mpfr_tanh rounded down and up at 64 bits).  This is the fast path of long sweeps; a
//     test cross-checks it against the general path.
//   every other family/object — the transcendence method (layer_rank, proofs/P08) on the
//     exact rational scores a·QKᵀ (a is a binary64 number, hence rational), and Rump's
//     certified singular values (linalg/certified_svd.hpp) of the object enclosed in MPFI,
//     escalating the precision from start_bits, doubling up to max_bits, until as many
//     singular values are certified positive as the exact rank's lower bound; above
//     drift_mpfi_max_n (below), from the factors and by the binary64 path instead.
//
// Divergence intervals: the grid decides where each recipe × policy diverges; between two
// adjacent grid points of different status the switch is located by bisection (geometric
// midpoints on a log sweep) until |hi − lo| ≤ resolution·|to − from| (linear sweep) or
// hi/lo ≤ 1 + resolution (log sweep).  A reported interval [from, to] has diverging ends
// (both were evaluated and diverge); the non-diverging neighbour of each bisected end lies
// within the resolution.  Assumption, stated in the report: the status changes at most once
// between two adjacent grid points (a denser grid tests it).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attncert/drift/recipe.hpp"
#include "attncert/rank/policy.hpp"

namespace attncert {

enum class drift_family { two_token, causal, identical_values, log_odds, random };
/// "two-token", "causal", "identical-values", "log-odds", "random" (input_error otherwise).
drift_family parse_drift_family(const std::string& s);
const char* to_string(drift_family f);

/// A caller's own numerical-rank diagnostic (e.g. numpy.linalg.matrix_rank, from Python): called with the
/// object each recipe formed (as binary64 numbers: exact for every recipe but mpfrN, whose entries are
/// rounded to nearest) and the recipe (its result format says what the numbers are: the caller may
/// hand its tool an array of that dtype), it returns a rank.  Measured like a policy: it diverges where
/// the rank lies outside the exact [lo, hi].  Tier: approx (a measurement of the caller's tool).  May
/// throw; the sweep then stops with that exception.
struct user_diagnostic {
  std::string name;
  std::function<std::size_t(const matrix<double>&, const recipe&)> rank;
};

/// The largest n (and d) a family takes.
inline constexpr long drift_max_n = 4096;
/// Up to this n the exact side forms the rational scores a·QKᵀ for the exact rank, and encloses the
/// singular values by MPFI Jacobi + Rump with Ziv escalation (tight, and cheap at this size).  Above
/// it (a dispatcher of one threshold, as FLINT's): the exact rank from the factors Q, K
/// (layer_rank_from_factors, the same guarantee) and the binary64 singular values (linalg/fast_svd.hpp,
/// proofs/P16), one dgesdd and a rigorous residual bound, not escalated: their width is about
/// n^{3/2}·u·σ₁, so σ below that stay uncertified ([0, ...], cond "inf") while the rank is still exact.
inline constexpr long drift_mpfi_max_n = 64;

/// A sweep request.  n, d = 0 select the family's defaults.
struct drift_request {
  drift_family family = drift_family::two_token;
  double from = 0, to = 1;
  std::size_t points = 101;
  bool log = false;
  std::vector<recipe> recipes;
  std::vector<rank_policy> policies;
  layer_object object = layer_object::attention;
  std::uint64_t seed = 20261129;
  long n = 0, d = 0;
  double resolution = 1e-9;
  bool enclosures = true;  ///< compute the certified singular-value enclosures per point
  /// Use the closed form of two-token attention (P01) instead of the general path; tests
  /// switch it off to cross-check the two.
  bool closed_forms = true;
  unsigned start_bits = 128, max_bits = 4096;
  /// A part of the sweep's grid to evaluate instead of the whole (empty: drift_grid's from/to/points):
  /// strictly increasing points in [from, to], normally a run of drift_grid's points.  from, to and log
  /// keep their meaning (the bisection's midpoints and stopping rule), so a sweep split into runs that
  /// share their end points evaluates exactly what the whole sweep does (attncert.distributed.drift).
  std::vector<double> grid;
  /// Budget (--max-seconds; 0 = none) of the sweep: past it no further point is started (a point
  /// under way stops at its next poll) and the result is partial, covering the grid's first points;
  /// a bisection under way stops too, its end then the last point seen diverging (bisection_stopped).
  double max_seconds = 0;
  /// The caller's diagnostics, measured on every recipe next to the policies ("diagnostic:NAME").
  std::vector<user_diagnostic> diagnostics;
  /// Progress: called with (points done, total points) every 64 grid points and at the end.
  std::function<void(std::size_t, std::size_t)> progress;
};

/// Throws input_error when the request is malformed (one message naming the problem).
void validate(const drift_request& req);

/// The family's instance at score scale a: Q, K, V (dyadic, exactly representable in every
/// recipe's storage format except where stated), the mask, the object; scale = a.
recipe_input drift_instance(const drift_request& req, double a);

/// Description of the family's inputs for reports.
nlohmann::json drift_family_description(const drift_request& req);

/// The certified exact rank at a: lo ≤ rank ≤ hi, and which method decided it.
struct drift_exact {
  std::size_t lo = 0, hi = 0;
  bool closed_form = false;  ///< two-token attention: P01; else the transcendence method
};
drift_exact drift_exact_rank(const drift_request& req, double a);

/// One recipe's measurement at one parameter value.  Tier: approx (ranks are measurements).
struct recipe_measurement {
  bool formed = true;            ///< false: the recipe overflowed (no ranks; counts as diverging)
  std::string failure;           ///< why not formed
  std::vector<std::size_t> ranks;  ///< per policy, in request order
  std::vector<bool> diverges_by_policy;
  double sigma_min = 0, sigma_max = 0, condition_number = 0;  ///< binary64 (may underflow for mpfrN)
  std::string sigma_min_text;    ///< decimal σ_min at the SVD's precision (mpfrN only; else empty)
  std::string svd;               ///< the SVD's working format
  std::vector<std::size_t> diagnostic_ranks;  ///< per drift_request::diagnostics (0 when not formed)
  std::vector<bool> diagnostic_diverges;
  bool diverges = false;         ///< some policy or diagnostic diverges (or the recipe overflowed)
};

/// The object formed by recipe r on `in`, as binary64 numbers (exact for every recipe but mpfrN: rounded to
/// nearest), or nothing when the recipe overflows or cannot form it.  Tier: approx.
std::optional<matrix<double>> approx_formed_object(const recipe& r, const recipe_input& in);

/// Form the object with recipe r and measure its numerical ranks under `policies`
/// (ε of the recipe's result format; the SVD runs in the result format, binary32 for the
/// 16-bit formats as NumPy/PyTorch do).  diverges_by_policy[i]: rank outside [lo, hi].
recipe_measurement measure_recipe(const recipe& r, const recipe_input& in, const std::vector<rank_policy>& policies,
                                  const drift_exact& exact);

/// One grid point.
struct drift_point {
  double a = 0;
  drift_exact exact;
  /// Enclosures (decimal strings, rounded outward) of the exact smallest singular value and
  /// of the condition number σ₁/σ_min ("inf" when σ_min is not certified > 0); binary64
  /// outward copies for plots.  Empty strings when enclosures were not requested.
  std::string smin_lo, smin_hi, cond_lo, cond_hi;
  double smin_lo_d = 0, smin_hi_d = 0;
  unsigned enclosure_bits = 0;
  std::vector<recipe_measurement> recipes;  ///< in request order
  bool diverges = false;
};

struct drift_intervals {
  std::string recipe, policy;  ///< policy: a rank policy's name, or "diagnostic:NAME"
  std::vector<std::pair<double, double>> intervals;
  std::size_t bisection_evaluations = 0;
};

/// A run of consecutive grid points a sweep did not compute: first, last, and how many.
struct grid_gap {
  double first = 0, last = 0;
  std::size_t points = 0;
};

struct drift_result {
  std::vector<double> grid;  ///< the points computed (all of the grid unless partial)
  std::vector<drift_point> points;
  bool partial = false;            ///< stopped at max_seconds: some grid points not computed (not_computed)
  std::size_t points_planned = 0;  ///< the whole grid's size
  /// The grid points left out (partial ⇔ not empty): the tail a sweep stopped at max_seconds did not
  /// reach; in a sweep merged from runs (drift/runs.hpp), gaps anywhere in the grid.
  std::vector<grid_gap> not_computed;
  bool bisection_stopped = false;  ///< past max_seconds during the bisection: some ends not to the resolution
  std::vector<drift_intervals> divergence;  ///< recipe-major, policy-minor
};

/// The grid: linear a_i = from + (to − from)·i/(N − 1), or geometric 10^(log10 from +
/// (log10 to − log10 from)·i/(N − 1)); the ends are exactly from and to.  With req.grid: that.
std::vector<double> drift_grid(const drift_request& req);

/// Run the sweep (validate, grid, points, bisection).  Errors: input_error.
drift_result run_drift(const drift_request& req);

/// Does recipe × policy diverge at a?  (One evaluation of the bisection predicate.)
bool drift_diverges_at(const drift_request& req, const recipe& r, const rank_policy& p, double a);

/// The two-token family's contrast eigenvalue λ = A₀₀ − A₀₁ (A·(1,−1)ᵀ = λ·(1,−1)ᵀ) and
/// determinant A₀₀A₁₁ − A₀₁A₁₀ of the attention matrix formed by recipe r at a, both computed
/// in the recipe's result format (the formulas of checks/two_token.cpp).  Exactly, both are
/// tanh a (P01).  Tier: approx.  Returned as binary64 (exact for every format but mpfrN).
std::pair<double, double> two_token_contrast(const recipe& r, double a);

/// Is the exact side of this sweep the two-token closed form (P01)?  (Else the general path.)
bool drift_uses_closed_form(const drift_request& req);
/// True when the points' singular values are enclosed by the binary64 path alone (n above
/// drift_mpfi_max_n), not by MPFI: the report's enclosure_method says so.
bool drift_uses_binary64_enclosures(const drift_request& req);
/// The bisection's stopping rule in words, for reports.
std::string drift_resolution_rule(const drift_request& req);
/// The arithmetic of the SVD of recipe r's numerical ranks (rank/numerical.hpp: svd_label).
std::string drift_svd_label(const recipe& r);

// Renderings (JSON, text, CSV): report/drift.hpp.

}  // namespace attncert
