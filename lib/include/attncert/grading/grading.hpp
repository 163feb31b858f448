// attncert/grading/grading.hpp — grading other implementations' outputs against the oracle's
// exact values: errors in ulps / absolute / relative, the published test-suite rules
// (FlashAttention's, PyTorch's SDPA tests', torch.testing.assert_close's, a bound in ulps),
// the run-to-run spread of a kernel, and a candidate attention matrix against the article's
// output bound (§11).
//
// Tier: approx.  The truth of every rule is the exact value o of each element (the oracle's
// enclosure |o - (t_hi + t_lo)| <= t_rad), never the rounded reference; every error, threshold
// and margin is computed in binary64 from t_hi + t_lo, so each figure has a relative error
// below 2^-50 and a verdict whose observed/threshold ratio lies within 2^-48 of 1 may differ
// from the comparison in exact arithmetic.
//
// grading depends on the oracle (its results, requests and target formats), never the other way
// round; report/oracle.hpp renders what it decides (oracle_verdict), computing nothing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attncert/oracle/backward.hpp"
#include "attncert/oracle/oracle.hpp"
#include "attncert/oracle/request.hpp"

namespace attncert::grading {

// What grading takes from the oracle.
using oracle::backward_result;
using oracle::gradient_tensor;
using oracle::oracle_request;
using oracle::oracle_result;
using oracle::output_layout;
using oracle::target_format;

// ---- the truth a graded array is compared with --------------------------------------------------

/// A view of the exact values an array is graded against: element e is the exact o_e with
/// |o_e - (hi[e] + lo[e])| <= rad[e], `reference[e]` its correctly rounded value in `target`.
/// Elements whose rad or hi is not finite (padding rows, ieee_nonfinite rows, empty rows under
/// policy nan, an LSE of -inf) have no enclosed truth, and elements marked `absent` are not in
/// the caller's tensor (the padding rows of a packed layout): both are skipped by every measure.
/// A view: the vectors hi, lo, rad, reference belong to the result (oracle_result,
/// backward_result) and must outlive it.
struct truth_view {
  const std::vector<double>* hi = nullptr;
  const std::vector<double>* lo = nullptr;
  const std::vector<double>* rad = nullptr;
  const std::vector<double>* reference = nullptr;
  target_format target = target_format::binary64;  ///< ulps are ulps of this format at o
  /// The dimensions, C order, the first `rank` entries used: (B, H, nq, dv) for an output,
  /// (B, H, nq) for an LSE, a gradient's own shape (gradient_truth).
  std::array<std::size_t, 4> shape{};
  std::size_t rank = 4;                            ///< 1 to 4
  std::string what;                                ///< "output", "LSE", "dq", ... (for messages)
  std::string index_order;                         ///< names of the index entries, e.g. "b,h,i,k"
  std::vector<std::uint8_t> absent;                ///< empty, or 1 for elements not in the caller's tensor
  /// How each element was decided (output_truth, lse_truth; null for gradients): an element decided by the empty-row
  /// policy (decided_by::exact_policy) is exactly reference[e] (zeros or NaN for an output, the declared empty LSE),
  /// and a candidate is judged on it by equality (NaN equals NaN), not in ulps.
  const std::vector<oracle::decided_by>* how = nullptr;
  /// The field that declares those values ("empty_rows", "empty_lse"), for messages.
  std::string policy_field;

  std::size_t size() const { return hi->size(); }
  bool enclosed(std::size_t e) const;
  /// The index of element e: its first `rank` entries, the others 0 ((b, h, i, 0) for an LSE).
  std::array<std::size_t, 4> index(std::size_t e) const;
};

/// The attention output of `r`, ulps of `t` (the format the candidates were computed in; the
/// oracle's target).  Index order (b, h, i, k).
truth_view output_truth(const oracle_result& r, target_format t);
/// The LSE of `r` (index (b, h, i), ulps of r.lse_target).  Errors: input_error when the
/// oracle computed no LSE (!r.has_lse).
truth_view lse_truth(const oracle_result& r);
/// One gradient of the backward pass (oracle/backward.hpp) in its internal layout, ulps of `t`
/// (the backward's target); `what` names it ("dq", "dk", "dv", "dbias", "dsink") and sets the
/// index order: dq (b, h, i, k), dk and dv (b, h_kv, j, k), dbias (b, h, i, j) over the bias's
/// own (broadcast) dimensions, dsink (h); other names: d0, d1, ....  Errors: internal_error when
/// the tensor's rank is not 1 to 4 or its vectors disagree with its shape.
truth_view gradient_truth(const gradient_tensor& g, target_format t, std::string what);
/// Marks as absent the rows of `v` (rank 4, (B, H, n, d) as `lay` describes it) that have no
/// place in the caller's tensor (lay.output_row(r) == none: the padding rows of --layout thd),
/// so that a candidate converted with lay.output_to_internal (NaN there) is not judged on them.
/// Errors: internal_error when the shapes disagree.
void skip_absent_rows(truth_view& v, const output_layout& lay);

// ---- grading rules ------------------------------------------------------------------------------

/// The acceptance rules of the published test suites, evaluated against the exact value o
/// (c: the candidate, b: the baseline, elementwise |·|; max over the graded elements):
///   ulp          max |c - o| / ulp(o) <= max_ulp                       (attncert's own)
///   flash        max |c - o| <= k · max |b - o| + atol                 (FlashAttention,
///                tests/test_flash_attn.py: "numerical error at most twice that of a PyTorch
///                implementation"; k = 2, atol = 0 there, + 1e-5 or 3e-5 in some tests)
///   torch_sdpa   |c - o| <= atol + rtol·|o| for every element, with the tolerances PyTorch's
///                test/test_transformers.py get_tolerances() derives from the baseline:
///                atol = F·max(max|b - o|, default_atol), rtol = F·max(max|b - o|/|o|,
///                default_rtol) (0/0 -> default_rtol; rtol > 1e30 -> default_rtol), F = fudge
///   assert_close |c - o| <= atol + rtol·|o| for every element (torch.testing.assert_close)
/// NaN/Inf in the candidate where the truth is finite fails every rule.
enum class grading_rule { ulp, flash, torch_sdpa, assert_close };

/// "ulp", "flash", "torch-sdpa", "assert-close" (parse accepts also torch_sdpa, assert_close).
/// Errors: input_error on anything else.
grading_rule parse_grading_rule(const std::string& s);
std::string to_string(grading_rule r);
/// The rule as a formula ("max|c - o| <= k * max|b - o| + atol", ...) and where it comes from
/// (the test file / function it reproduces), for reports.
std::string rule_statement(grading_rule r);
std::string rule_source(grading_rule r);

struct tolerances {
  double rtol = 0, atol = 0;
};

/// torch.testing.assert_close's defaults for the dtype of format t (torch/testing/_comparison.py,
/// _DTYPE_PRECISIONS): float64 (1e-7, 1e-7), float32 (1.3e-6, 1e-5), float16 (1e-3, 1e-5),
/// bfloat16 (1.6e-2, 1e-5) as (rtol, atol).
tolerances assert_close_defaults(target_format t);
/// PyTorch test/test_transformers.py default_rtol / default_atol: float32 (1.3e-6, 1e-5),
/// float16 (1e-3, 1e-3), bfloat16 (1.6e-2, 1e-3).  That file has no float64 entry: binary64
/// takes assert_close's (1e-7, 1e-7).
tolerances sdpa_defaults(target_format t);

/// A rule and its settings (the fields rule, max_ulp, flash_k, fudge, atol, rtol: the CLI's --rule,
/// --max-ulp, ..., Python's rule=, max_ulp=, ...).
struct rule_settings {
  grading_rule rule = grading_rule::ulp;
  std::optional<double> max_ulp;  ///< ulp: the bound; none: errors are reported, no verdict
  double flash_k = 2;             ///< flash: k
  double fudge = 4;               ///< torch_sdpa: F (PyTorch's forward-output fudge factor)
  std::optional<double> atol;     ///< flash: default 0; assert_close: default per dtype
  std::optional<double> rtol;     ///< assert_close: default per dtype
};

/// Errors: input_error naming the field (field.hpp) when a value is negative, NaN or infinite.
void validate_rule_settings(const rule_settings& s);

/// True for the rules that need a baseline (flash, torch_sdpa).
bool rule_needs_baseline(grading_rule r);

// ---- the rules applied to the gradients of the backward pass -------------------------------------

/// The arrays of a backward call (oracle/backward.hpp) that can be graded.
enum class gradient_kind { dq, dk, dv, dbias, dsink };
/// "dq", "dk", "dv", "dbias", "dsink" (the suffixes of the written references, PREFIX.dq.npy ...).
std::string to_string(gradient_kind g);

/// flash on a gradient: FlashAttention 2's tests/test_flash_attn.py, test_flash_attn_output, checks
/// "assert (dq - dq_ref).abs().max().item() <= 3 * (dq_pt - dq_ref).abs().max().item()" (dk, dv the
/// same) next to 2 for the output; earlier versions of that test had 2 for the gradients as well.
inline constexpr double flash_gradient_k = 3;

/// torch_sdpa on a gradient: PyTorch's fudge factor F for it, from test/test_transformers.py:
///   dq 180, dk 16, dv 4   test_flash_attention_vs_math_ref_grads, fudge_factors {'out': 4,
///                         'grad_query': 180.0, 'grad_key': 16, 'grad_value': 4} (CUDA values)
///   dbias 45              test_mem_efficient_attention_attn_mask_vs_math_ref_grads,
///                         "grad_attn_mask": 45.0 (the gradient of an additive float mask)
///   dsink 45              ours: PyTorch has no sink.  dsink_h is minus the sum over batches and
///                         rows of the sink's weight times the row's D term, the same kind of
///                         reduction as the dbias of a bias broadcast over (b, i, j), so it takes
///                         dbias's factor.
double sdpa_gradient_fudge(gradient_kind g);

/// The settings that grade gradient g under `s` (the forward's settings): flash_k becomes
/// flash_gradient_k and fudge sdpa_gradient_fudge(g), unless the user gave them (flash_k_given /
/// fudge_given: --flash-k / --fudge apply to every graded array).  Everything else is s's.
rule_settings gradient_rule_settings(rule_settings s, gradient_kind g, bool flash_k_given, bool fudge_given);

/// The verdict of a rule on one candidate.  observed / threshold / margin / ratio:
///   ulp:   max ulp error / max_ulp, at the largest ulp error;
///   flash: max |c - o| / (k · max |b - o| + atol), at the largest absolute error;
///   torch_sdpa, assert_close: |c - o| / (atol + rtol·|o|) at the decisive element, the one
///   with the largest ratio (the rule holds iff that ratio is <= 1);
/// margin = threshold - observed, ratio = observed / threshold (0 when observed is 0, +inf when
/// only the threshold is 0).  All over the elements where both the truth and the candidate are
/// finite; NaN/Inf there are counted in `nonfinite` and fail the rule.
struct rule_verdict {
  grading_rule rule = grading_rule::ulp;
  bool graded = false;  ///< false: ulp without max_ulp (no verdict)
  bool pass = true;
  double observed = 0, threshold = 0, margin = 0, ratio = 0;
  std::array<std::size_t, 4> at{};  ///< index of the element observed
  bool has_at = false;
  std::size_t violations = 0;  ///< elements over their tolerance (flash: over the threshold; ulp: over max_ulp)
  std::size_t nonfinite = 0;   ///< NaN/Inf in the candidate where the truth is finite
  double atol = 0, rtol = 0;   ///< the tolerances applied (flash: atol; elementwise rules: both)
  double k = 0;                ///< flash
  double k_needed = 0;         ///< flash: the smallest k that passes ((observed - atol) / max|b - o|)
  double fudge = 0;            ///< torch_sdpa
  double fudge_needed = 0;     ///< torch_sdpa: the smallest F that passes (see fudge_needed_for)
  tolerances defaults;         ///< torch_sdpa / assert_close: the dtype's defaults
  double baseline_max_abs = 0, baseline_max_rel = 0;  ///< flash, torch_sdpa: max |b - o|, max |b - o|/|o|
  std::size_t baseline_nonfinite = 0;  ///< NaN/Inf in the baseline where the truth is finite (fails the rule)
  std::string reason;          ///< why it failed (empty when it passed or was not graded)
};

// ---- grading candidates ------------------------------------------------------------------------

/// Thresholds (in ulps of the target) counted by the candidate report.
inline constexpr std::array<double, 5> ulp_thresholds{0.5, 1, 2, 4, 16};

/// The errors of one graded array from the exact values, and its rule's verdict.  Indices are
/// (b, h, i, k), or (b, h, i, 0) with index_rank 3 (an LSE); a gradient's as gradient_truth says.
struct candidate_grade {
  std::string name;
  std::size_t elements = 0;
  double max_ulp = 0, mean_ulp = 0, max_abs = 0, max_rel = 0;
  std::array<std::size_t, ulp_thresholds.size()> beyond{};  ///< elements with error > threshold ulps
  std::size_t nonfinite_where_finite = 0;  ///< NaN/Inf in the candidate where the truth is finite
  std::size_t compared = 0;                ///< elements with a finite truth and a finite candidate
  std::size_t skipped = 0;                 ///< elements without an enclosed, finite truth (not graded)
  /// Elements of fully masked rows (truth_view::how): their exact declared value compared by equality.
  std::size_t policy_compared = 0, policy_mismatch = 0;
  std::array<std::size_t, 4> policy_worst{};  ///< the first mismatch
  double policy_expected = 0, policy_value = 0;
  std::string policy_field;                   ///< truth_view::policy_field
  std::array<std::size_t, 4> worst{};      ///< index of the largest ulp error
  bool has_worst = false;
  std::array<std::size_t, 4> worst_abs{}, worst_rel{};  ///< index of the largest absolute / relative error
  bool has_worst_rel = false;              ///< false when every compared truth is 0 (no relative error)
  std::size_t index_rank = 4;
  std::string index_order;                 ///< the truth's (truth_view::index_order)
  double worst_truth = 0, worst_reference = 0, worst_value = 0;  ///< at `worst`: t_hi + t_lo, the rounded reference, c
  rule_verdict rule;                       ///< the rule's verdict (approx_grade); ungraded from grade_candidate
};

/// The errors of `c` (same layout as the truth) from the exact values: |c - o| (abs),
/// |c - o| / |o| (rel, elements with o != 0), |c - o| / ulp(o) with ulp of truth.target at o
/// (ulp, mean and beyond-threshold counts), each with the index of its maximum.  Approx tier
/// (header comment).  Errors: input_error when c.size() != truth.size().
candidate_grade approx_errors(const truth_view& truth, const std::vector<double>& c, const std::string& name);

/// approx_errors on the output of r in ulps of t, with no rule verdict (rule.graded false).
/// Errors are measured from the exact value o (not from the rounded reference).
candidate_grade grade_candidate(const oracle_result& r, const std::vector<double>& c, target_format t,
                                const std::string& name);

/// approx_errors plus the verdict of rule `s` (the header's table).  `baseline` (same layout)
/// is required by flash and torch_sdpa and ignored by the others.  Errors: input_error on a
/// missing baseline, a size mismatch, or settings validate_rule_settings rejects.
candidate_grade approx_grade(const truth_view& truth, const std::vector<double>& c, const std::vector<double>* baseline,
                             const rule_settings& s, const std::string& name);

/// torch_sdpa: the smallest fudge factor F for which candidate errors d_e = |c_e - o_e| pass,
/// given A = max(max|b - o|, default_atol) > 0 and R = max(max|b - o|/|o|, default_rtol) (R may
/// be +inf): the tolerance of element e is F·A + r(F)·|o_e| with r(F) = F·R, or default_rtol
/// when F·R > 1e30 (PyTorch's guard).  With F·R <= 1e30 the answer is max_e d_e/(A + R|o_e|);
/// beyond 1e30/R it is max_e (d_e - default_rtol|o_e|)/A (the infimum just above 1e30/R).
/// `d` and `abs_o` hold d_e and |o_e| of the compared elements.
double fudge_needed_for(const std::vector<double>& d, const std::vector<double>& abs_o, double A, double R,
                        double default_rtol);

// ---- run-to-run spread ---------------------------------------------------------------------------

/// Two runs c1, c2 of the same kernel on the same inputs: how far apart they are.
struct rerun_spread {
  std::size_t elements = 0;
  std::size_t differing = 0;          ///< elements whose values differ (NaN equals NaN; -0 equals +0)
  std::size_t nonfinite_differing = 0;  ///< of those, elements where exactly one run is NaN/Inf, or Infs of opposite sign
  double max_abs = 0;                 ///< max |c1 - c2| over elements finite in both runs
  double max_ulp = 0;                 ///< max |c1 - c2| / ulp(o) over those with an enclosed truth
  std::array<std::size_t, 4> worst{};  ///< index of max_abs
  bool has_worst = false;
  std::size_t index_rank = 4;
  std::string index_order;             ///< the truth's (truth_view::index_order)
};

/// The spread between two runs (approx tier: binary64).  Errors: input_error on a size mismatch.
rerun_spread approx_rerun_spread(const truth_view& truth, const std::vector<double>& c1, const std::vector<double>& c2);

// ---- attention candidates ------------------------------------------------------------------------

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

// ---- the gradients of a kernel, graded ------------------------------------------------------------

/// One array of a kernel's gradients (--candidate-grads PREFIX), graded by approx_grade with the
/// settings gradient_rule_settings gives it, and the spread from its second run (--rerun-grads).
/// For the baseline's gradients (--baseline-grads) the grade carries no verdict.
struct gradient_grade {
  gradient_kind gradient = gradient_kind::dq;
  std::string file;
  candidate_grade grade;
  rule_settings rules;                ///< the settings it was graded by (k / fudge of this gradient)
  std::optional<rerun_spread> rerun;  ///< --rerun-grads (the first kernel only)
  std::string rerun_file;
};

/// The gradients of one kernel (or of the baseline), in the order dq, dk, dv, dbias, dsink.
struct gradient_set_grade {
  std::string name;    ///< "g1", "g2", ... for the kernels, "b" for the baseline
  std::string prefix;  ///< the PREFIX given
  std::vector<gradient_grade> gradients;
};

// ---- the verdict of an oracle call ----------------------------------------------------------------

/// How a call (or one kernel's gradients) came out:
///   none       nothing was judged (no candidate; the ulp rule without max_ulp; no gradient graded)
///   pass       something was judged and nothing failed, everything asked for was computed
///   fail       a graded candidate (output, LSE, a gradient) fails its rule, or the output bound
///              of an attention candidate is refuted
///   undecided  nothing failed, but rows (past max_seconds) or the backward were not computed
enum class outcome { none, pass, fail, undecided };

/// "none", "pass", "fail", "undecided".
std::string to_string(outcome o);

/// The exit status of an outcome: fail 1, undecided 3, none and pass 0.
int exit_status(outcome o);

/// The outcome of one kernel's gradients: fail if a graded gradient fails, else pass if one was
/// graded, else none (the baseline's, which carry no verdict).
outcome gradient_set_outcome(const gradient_set_grade& s);

/// FlashAttention's acceptance test between two candidates: max ulp error of the first <= 2 x that
/// of the second, and no NaN/Inf in the first where the truth is finite.  Reported, not part of the
/// exit status.
struct candidate_comparison {
  std::string candidate, baseline;  ///< the two candidates' names
  double candidate_max_ulp = 0, baseline_max_ulp = 0;
  std::optional<double> ratio;      ///< candidate_max_ulp / baseline_max_ulp; none when the latter is 0
  bool pass = false;
};

/// The comparison of candidates[0] with candidates[1]; none with fewer than two candidates.
std::optional<candidate_comparison> compare_candidates(const std::vector<candidate_grade>& candidates);

/// What one oracle call graded (the arrays belong to the caller and must outlive the call of
/// decide_oracle_verdict).
struct graded_call {
  const oracle_result* result = nullptr;  ///< the forward (its undecided_rows)
  const std::vector<candidate_grade>* candidates = nullptr;  ///< graded by the rule (or null: none)
  const candidate_grade* lse_candidate = nullptr;            ///< or null
  const std::vector<gradient_set_grade>* gradient_candidates = nullptr;  ///< or null
  const attention_grade* attention = nullptr;                ///< or null
  /// Non-empty when a backward was asked for and not computed within the budget: why.
  std::string backward_not_computed;
};

/// The verdict of an oracle call: its outcome, why (each failing verdict, then what was not
/// computed), and the comparison of the first two candidates.  Texts name the caller's fields
/// marked (field.hpp: field("rule"), field("max_seconds")) for the front end to spell.
struct oracle_verdict {
  outcome result = outcome::none;
  std::vector<std::string> reasons;
  std::optional<candidate_comparison> comparison;

  bool passed() const { return result == outcome::none || result == outcome::pass; }
  int exit_status() const { return grading::exit_status(result); }
};

/// The verdict of `call`: fail with one reason per failing verdict (the candidates in order, the LSE
/// candidate, each kernel's gradients in order dq, dk, dv, dbias, dsink, a refuted output bound);
/// otherwise undecided when rows were left undecided or the backward was not computed (one reason
/// each); otherwise pass when a rule was graded or an attention candidate checked, else none.
/// Errors: internal_error when call.result is null.
oracle_verdict decide_oracle_verdict(const graded_call& call);

}  // namespace attncert::grading
