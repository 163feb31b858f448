// attncert/audit/audit.hpp — the article's evaluation protocol on a user's own model (`attncert audit`,
// attncert.audit): every captured attention call, every head, its objects measured separately.
//
// The protocol (article §11, §12, §14):
//   * the criteria are fixed before anything is computed: the spec (audit_spec, parsed from JSON whose
//     unknown keys are errors) is recorded with the SHA-256 of its text at the top of the report;
//   * exact negative controls first (controls(): two-token attention, identical values, a causal
//     mask), measured by the same code and thresholds as the model; a control whose certified answer
//     is not the known one stops the audit before any model result exists;
//   * per head, the objects scores, attention, values and output (A·V) measured separately, each with
//     its certified exact rank [lo, hi], certified singular values and numerical ranks per format and
//     policy (analyse_rank, rank/analyse_rank.hpp: the numbers `attncert rank` prints for that head);
//   * the value scale max_j ‖v_j‖₂ (certified: MPFR with directed roundings), and, when the model's own
//     attention probabilities Â were captured, the §11 bound of the head's output error
//     ‖((Â − A)V)_i‖₂ ≤ ‖Â_i − A_i‖₁ · max_j ‖v_j‖₂ with a certified upper bound of max_i ‖Â_i − A_i‖₁
//     (A enclosed by attention/binary64_enclosure.hpp);
//   * the outcome per head in the article's distinct classes, decided only from quantities the spec
//     fixed in advance (outcome_of).
//
// Tiers: exact ranks and value scales are certified; numerical ranks are measurements (approx); the
// §11 bound is a certified upper bound of the error Â makes, for exact V.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attncert/rank/analyse_rank.hpp"
#include "attncert/tensor.hpp"

namespace attncert::audit {

/// One captured attention call (attncert.capture's record; a capture directory's manifest entry).
/// Arrays in C order; q (B, H, n_q, d), k (B, H_kv, n_k, d), v (B, H_kv, n_k, d_v); allowed (bool,
/// (B or 1, H or 1, n_q, n_k), true where the key may be attended); weights (B, H, n_q, n_k), the
/// model's own attention probabilities.
struct captured_call {
  std::string name, kind;
  std::string dtype = "float32";    ///< the model's compute dtype: float16, bfloat16, float32, float64
  std::string scale = "1/sqrt(d)";  ///< "1/sqrt(d)" or a decimal (binary64) scale
  std::string mask_kind = "none";
  tensor q, k, v;
  std::optional<tensor> allowed, bias, weights;
  /// The module's output (B, n_q, E), its out-projection W_O (E, H·d_v) and bias b_O (E,): the multi-head
  /// object needs the first two (MultiheadAttention; not SDPA).
  std::optional<tensor> output, w_o, b_o;
  /// The residual stream the call's output is added to (B, n_q, E): the input of the enclosing
  /// nn.TransformerEncoderLayer / TransformerDecoderLayer whose self-attention this call is (both norm_first
  /// settings add the attention's output to the layer's input).  Absent when the capture cannot know it.
  std::optional<tensor> residual;
};

/// A contrast the model must keep, fixed in the spec: two query rows of one input ("tokens": [i, j]) or the
/// same rows of two inputs of the batch ("batches": [b1, b2]) whose head outputs must stay at least `margin`
/// apart in the L2 norm (for batches: the largest row distance).
struct target_contrast_spec {
  std::string between;          ///< "" (none), "tokens" or "batches"
  std::size_t first = 0, second = 0;
  double margin = 0;
};

/// The criteria, fixed before anything is computed.  Field names are the JSON keys.
struct audit_spec {
  std::vector<std::string> objects{"scores", "attention", "values", "output", "multi_head", "residual"};
  std::string formats;            ///< numerical-rank formats ("": the call's dtype and binary64)
  std::string policies = "numpy"; ///< the first decides rank-kept
  /// Allowable error of a head's output, relative to its value scale: max_i ‖((Â − A)V)_i‖₂ / max_j ‖v_j‖₂
  /// (bounded through §11 by max_i ‖Â_i − A_i‖₁).
  double allowable_output_error = 1e-2;
  /// The contrast the model must keep (none by default); measured per head (head_result::contrast_*).
  target_contrast_spec target_contrast;
  /// The spec's "fixed_at" (recorded, part of the hashed text): when the criteria were fixed.
  std::string fixed_at;
  std::vector<std::string> bypass;  ///< declared bypass paths ("residual", "other-heads"), recorded
  unsigned max_precision = 4096;
  double max_seconds = 0;           ///< the whole audit (0: none)
  std::string text;                 ///< the spec as given (what spec_sha256 hashes)
  std::string sha256;               ///< of `text`, lowercase hex
  bool is_default = false;          ///< no spec given: default_audit_spec()
};

/// The spec of a JSON text.  Errors (input_error, one line): not JSON, not an object, an unknown key
/// (named), a value of the wrong type or out of range, an unknown object.
audit_spec parse_audit_spec(const std::string& json_text);
/// The default spec's JSON text (every key, its default value).
std::string default_audit_spec_text();

/// Criteria registered before the audit (a pre-registration): the SHA-256 of the spec's text and, when
/// known (an earlier report), its fixed_at.
struct registered_criteria {
  std::string sha256, fixed_at, source;
};
/// input_error (one line, both hashes) when the spec is not the registered one: its SHA-256 differs, or
/// the registration states a fixed_at that the spec does not (a threshold given after the fact).
void check_registered(const audit_spec& spec, const registered_criteria& registered);

/// SHA-256 of `bytes`, lowercase hex (Nettle's).
std::string sha256_hex(const std::string& bytes);

/// The audit's rank_request::mpfi_svd_max_dim (`attncert rank` uses 128): up to this size the singular
/// values escalate by MPFI Jacobi, above it on a deflated subspace.  The exact and numerical ranks are
/// those `attncert rank` gives at any size; the singular-value enclosures too up to this size (above it
/// they come from the other certified method).
inline constexpr long audit_mpfi_svd_max_dim = 64;

/// Above this many multiply-adds (n_q·n_k·d_v) per head the output error is bounded by §11 alone.
inline constexpr double audit_error_max_work = 4e6;

/// One object of one head.
struct object_result {
  std::string object;  ///< scores, attention, values, output
  rank_analysis analysis;
};

/// The outcome classes of the article (never one success label).
enum class outcome { rank_kept_within_tolerance, rank_kept_exceeds_tolerance, rank_reduced_adequate, rank_reduced_inadequate, undecided };
const char* to_string(outcome o);

struct head_result {
  std::size_t batch = 0, head = 0, kv_head = 0;
  std::vector<object_result> objects;
  std::string value_scale_lo, value_scale_hi;  ///< max_j ‖v_j‖₂, certified (decimal, outward)
  /// Certified upper bound of max_i ‖Â_i − A_i‖₁ (Â: the model's weights); empty when not captured.
  std::string attention_l1_error_hi;
  std::string output_error_bound_hi;  ///< the §11 bound: the above times value_scale_hi (upward)
  /// The output error relative to the value scale, max_i ‖((Â − A)V)_i‖₂ / max_j ‖v_j‖₂, enclosed (MPFI;
  /// computed when n_q·n_k·d_v <= audit_error_max_work, else its upper end is the §11 bound and its lower
  /// end 0).  Empty when the weights were not captured.
  std::string output_error_rel_lo, output_error_rel_hi;
  /// The target contrast (when the spec fixes one), enclosed: of the exact head output A·V
  /// (contrast_exact_*) and of the model's attention times the exact values Â·V (contrast_model_*; empty
  /// when the weights were not captured).  Only on the head results of the contrast's first batch.
  std::string contrast_exact_lo, contrast_exact_hi, contrast_model_lo, contrast_model_hi;
  /// A token contrast's gain through the exact attention (§5, proofs/L6): ‖A_p − A_q‖₂ / √2 enclosed, and the side of
  /// float32's NumPy numerical-rank threshold τ = σ₁·max(n_q, n_k)·2⁻²³ it lies on: "discarded" (gain < max(n_q, n_k)·2⁻²³
  /// ≤ τ: a float32 numerical rank cuts the directions that carry it), "kept" (gain > √(max column sum)·max(n_q, n_k)·2⁻²³
  /// ≥ τ), or "undecided" (between the two bounds of τ).  Empty for a contrast between batches.
  std::string contrast_gain_lo, contrast_gain_hi, contrast_float32;
  outcome result = outcome::undecided;
  std::string why;                    ///< how the outcome was decided, or why it is undecided
};

/// The residual object of one batch: R = X + concat_h(A_h V_h) W_Oᵀ + b_O (n_q × E), X the residual stream.
/// Tier: its exact rank lies in [lo, hi], lo = the singular values certified > 0 (binary64 enclosure, as
/// for the multi-head object, plus X and b_O with the roundings of the sums bounded), hi = min(n_q, E).  The
/// rank of X alone is exact (FLINT) where n_q·E <= audit_residual_exact_max, to show what the bypass
/// carries.  The numerical ranks measure the model's own X + output (rounded to binary64) in its dtype.
struct residual_result {
  std::size_t batch = 0;
  rank_interval exact;
  std::vector<std::pair<std::string, std::string>> singular_values;
  std::vector<numerical_rank_entry> numerical;
  long x_rank = -1;  ///< exact rank of X (-1: not computed)
  std::string why;   ///< not computed, and why (empty when computed)
};

/// Above this many entries (n_q·E) the rank of the residual stream X alone is not computed exactly.
inline constexpr double audit_residual_exact_max = 16384;

/// The multi-head object of one batch: P = concat_h(A_h V_h) · W_Oᵀ (n_q × E, without b_O).
/// Tier: its exact rank lies in [lo, hi]: lo = the singular values certified > 0 (binary64 enclosures of
/// every A_h V_h, their concatenation and the product: attention/binary64_enclosure.hpp, linalg/fast_svd.hpp),
/// hi = min(n_q, E, H·d_v, rank W_O) (W_O's rank exact, FLINT).  The numerical ranks measure the model's own
/// output minus b_O (rounded to binary64; SVD in binary64) under each policy with the eps of its dtype.
struct multi_head_result {
  std::size_t batch = 0;
  rank_interval exact;
  std::vector<std::pair<std::string, std::string>> singular_values;  ///< decimal, outward
  std::vector<numerical_rank_entry> numerical;
  std::string why;  ///< not computed, and why (empty when computed)
};

struct call_result {
  std::string name, kind, dtype, scale, mask_kind;
  std::size_t batch = 0, heads = 0, kv_heads = 0, n_q = 0, n_k = 0, head_dim = 0, value_dim = 0;
  std::vector<head_result> heads_results;
  std::vector<multi_head_result> multi_head;  ///< per batch, when the spec asks for it
  std::vector<residual_result> residual;      ///< per batch, when the spec asks for it
  std::vector<std::string> notes;  ///< what was not audited, and why
};

struct control_result {
  std::string name, object, statement;
  std::size_t expected = 0;
  rank_analysis analysis;
  bool passed = false;
};

struct audit_result {
  audit_spec spec;
  std::vector<control_result> controls;
  std::vector<call_result> calls;
  bool partial = false;  ///< stopped at max_seconds: the heads not audited are named in notes
  std::vector<std::string> notes;
};

/// The exact negative controls, measured with the spec's formats and policies.  Every control passes
/// when the code is right; one that does not is a bug, and run_audit stops (input_error is not the
/// right kind: it throws internal_error naming the control, exit 70 in the CLI).
std::vector<control_result> controls(const audit_spec& spec);

/// The outcome of a head from its attention object (rank kept: the first policy's numerical rank in
/// the call's dtype lies in the certified exact [lo, hi]) and its certified output-error bound against
/// the spec's allowance.  Undecided when either side is (the exact rank not decided, no weights).
outcome outcome_of(const audit_spec& spec, const head_result& h, const std::string& dtype_format, std::string& why);

/// Run the audit: controls, then every call and head.  progress (may be empty) is called with a short
/// line per head.  Errors: input_error for malformed calls (shapes, dtypes, a fully masked row).
audit_result run_audit(const audit_spec& spec, const std::vector<captured_call>& calls,
                       const std::function<void(const std::string&)>& progress = {});

// Renderings (JSON, Markdown): report/audit.hpp.

}  // namespace attncert::audit
