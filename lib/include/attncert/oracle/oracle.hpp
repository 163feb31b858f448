// attncert/oracle/oracle.hpp — the reference oracle: correctly rounded attention outputs
// softmax(s·QKᵀ + mask)·V and error reports for other implementations' outputs.
//
// Tier: rigorous.  Every element of `oracle_result::reference` is, unless counted as
// faithful_only, the value of the exact real number  o = Σ_j e^{s q·k_j} v_j / Σ_j e^{s q·k_j}
// (allowed j only; q, k_j, v_j the exact input values, s the exact scale) rounded to nearest,
// ties to even, in the target format.  A faithful_only element is one of the two target
// numbers adjacent to o (the precision cap could not decide between them: o may be a
// rounding midpoint).  Exception: the sign of a zero result is not certified (an enclosure
// around 0 is reported as +0).  See proofs/P11-oracle.md.
//
// How (filter, then escalate):
//   1. fast path, per row, in double-double with a rigorous error radius per element
//      (lib/src/oracle/fast_kernel.cpp; error analysis in proofs/P11-oracle.md);
//   2. elements whose enclosure straddles a rounding boundary of the target, and rows the
//      fast path cannot handle (overflowing scores, exp outside its domain), are recomputed
//      with MPFI at 128, 256, ... bits up to the cap (Ziv's strategy), with the scores
//      shifted by an exactly computed difference so that no exponent overflows.
// Memory: O(n·d) per head beyond the inputs; no n×n matrix is formed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attncert/attention/softmax.hpp"

namespace attncert::oracle {

/// The formats a reference can be rounded to.
enum class target_format { binary64, binary32, binary16, bfloat16 };

/// "binary64", "binary32", "binary16", "bfloat16"; parse accepts also float64/fp64/f64, float32/
/// fp32/f32, float16/fp16/f16/half and bf16.  Throws input_error on anything else.
target_format parse_target(const std::string& s);
std::string to_string(target_format t);
/// Precision (bits, implicit bit included) and exponent of the smallest normal of `t`.
int target_precision(target_format t);
int target_emin(target_format t);

/// Round-to-nearest-even of the exact sum a + b (two binary64 numbers) in format t, returned
/// as the binary64 number equal to it (±Inf on overflow).  Exact: one rounding, no double
/// rounding.  Preconditions: a, b finite, |a + b| below 2^1023.
double round_sum_to_target(double a, double b, target_format t) noexcept;

/// The spacing of format t at x (ulp(x) = 2^(max(e, emin) - p + 1), e = floor(log2|x|);
/// for x = 0 the smallest subnormal).  Exact power of two.
double target_ulp(double x, target_format t) noexcept;

/// The scale s of s·QKᵀ: either 1/sqrt(d) (irrational unless d is a square) or an exact
/// rational given as text ("0.125", "1/8", "1e300", "-2.5e-3").
struct scale_spec {
  bool inv_sqrt_d = true;
  std::string rational;  ///< exact text when !inv_sqrt_d (parsed with number_traits<mpq_rational>)
};

enum class mask_kind { none, causal, explicit_mask };

/// A tensor of shape (B, H, n, d) in C order (an input of shape (n, d) has B = H = 1, of shape
/// (h, n, d) B = 1).
struct tensor4 {
  std::size_t B = 1, H = 1, n = 0, d = 0;
  std::vector<double> values;
  const double* row(std::size_t b, std::size_t h, std::size_t i) const { return values.data() + ((b * H + h) * n + i) * d; }
};

/// A boolean mask (true = the key may be attended) of shape (mb, mh, nq, nk) whose leading
/// dimensions are 1 (broadcast) or equal to B and H.
struct bool_mask {
  std::size_t mb = 1, mh = 1, nq = 0, nk = 0;
  std::vector<std::uint8_t> allowed;
  bool at(std::size_t b, std::size_t h, std::size_t i, std::size_t j) const {
    const std::size_t bb = mb == 1 ? 0 : b, hh = mh == 1 ? 0 : h;
    return allowed[((bb * mh + hh) * nq + i) * nk + j] != 0;
  }
};

struct oracle_request {
  tensor4 Q, K, V;
  scale_spec scale;
  mask_kind mask = mask_kind::none;  ///< causal: key j is allowed for query i iff j <= i (PyTorch's is_causal, top-left)
  bool_mask M;                       ///< for explicit_mask
  empty_row_policy empty_rows = empty_row_policy::error;
  target_format target = target_format::binary64;
  unsigned max_bits = 4096;  ///< precision cap of the MPFI stage (>= 128)
  unsigned threads = 2;      ///< worker threads (rows are split between them)
  /// With NaN/±Inf inputs: false = input_error; true = rows touching a non-finite input are
  /// computed in plain IEEE binary64 (approx tier) and counted as ieee_nonfinite.
  bool allow_nonfinite = false;
  /// Called now and then from the main thread with (rows done, rows total); may be empty.
  std::function<void(std::size_t, std::size_t)> progress;
};

/// Which stage decided an element.
enum class decided_by : std::uint8_t { double_double, mpfi, faithful_only, exact_policy, ieee_nonfinite };

/// Result of the oracle.  Element (b, h, i, k) is at index ((b·H + h)·nq + i)·dv + k.
struct oracle_result {
  std::size_t B = 1, H = 1, nq = 0, dv = 0;
  std::vector<double> reference;  ///< the rounded value in the target format, as a binary64 number
  /// An approximation t_hi + t_lo of the exact value and a radius: |o - (t_hi + t_lo)| <= t_rad
  /// (rigorous, except for ieee_nonfinite and empty rows, where t_rad is NaN).
  std::vector<double> t_hi, t_lo, t_rad;
  std::vector<decided_by> how;
  std::vector<std::uint16_t> bits_used;  ///< MPFI precision that decided (0 for the fast path)
  // summary
  std::size_t elements = 0, correctly_rounded = 0, faithful_only = 0, exact_policy = 0, ieee_nonfinite = 0;
  std::size_t by_double_double = 0;
  std::vector<std::pair<unsigned, std::size_t>> by_mpfi;  ///< (bits, elements decided at those bits)
  std::size_t rows_escalated = 0;     ///< rows with at least one element sent to MPFI
  std::size_t fast_path_rows_failed = 0;  ///< rows the fast path could not handle at all
  std::size_t empty_rows = 0;         ///< fully masked rows (handled per the policy)
  bool fast_kernel_vectorized = false;  ///< the fast path ran the AVX2+FMA build of the kernel
};

/// Runs the oracle.  Errors: input_error on shape mismatch, empty tensors, non-finite inputs
/// (unless allow_nonfinite), a fully masked row with policy error, max_bits outside
/// [128, 1 << 16], and an element the cap cannot enclose within two adjacent target numbers
/// ("precision too low").
oracle_result run_oracle(const oracle_request& req);

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

namespace detail {
/// The fast path for one row (exposed for tests).  Fills out_hi/out_lo/out_rad (dv each) with an
/// enclosure of the exact outputs; returns false if the fast path cannot handle the row.
/// `allowed` has nk entries.  scale_hi + scale_lo approximates s with |s - (hi + lo)| <= scale_rad.
struct row_inputs {
  const double* q;
  const double* K;   ///< nk × d, row-major
  const double* KT;  ///< d × nk (K transposed)
  const double* V;   ///< nk × dv
  const std::uint8_t* allowed;
  std::size_t nk, d, dv;
  double scale_hi, scale_lo, scale_rad;
};
struct row_workspace {
  std::vector<double> s_hi, s_lo, s_rad, w_hi, w_lo;
  std::vector<double> acc_s, acc_c, acc_p;
  std::vector<double> z_hi, z_lo, z_rad, e_hi, e_lo, e_b;
  std::vector<std::size_t> z_idx;
  // After a successful fast_row: weights w_j = w_hi[j] + w_lo[j] with |w_true - w| <= rho |w|
  // (w_hi[j] == 0: an underflowed weight in [0, 2^-1019], `under` of them), and
  // W_lo_bound <= sum_j w_true_j <= W_hi_bound.
  double rho = 0, W_lo_bound = 0, W_hi_bound = 0;
  std::size_t under = 0;
};
bool fast_row(const row_inputs& in, row_workspace& ws, double* out_hi, double* out_lo, double* out_rad);
/// The same computation in plain binary64, no certification (the benchmark's baseline).
void plain_row(const row_inputs& in, row_workspace& ws, double* out);
/// w[i] = exp_with_bound(z[i]) for i < n (number/double_double.hpp), bit for bit: the same
/// sequence of IEEE operations, evaluated four lanes at a time with AVX2 when available; lanes
/// off the common path (tiny reduced argument, subnormal low word, outside [-708, 709]) call
/// exp_with_bound itself.  bound[i] is its relative error bound.
void exp_batch(const double* z_hi, const double* z_lo, std::size_t n, double* w_hi, double* w_lo, double* bound);
/// True when the AVX2+FMA build of the kernel is used.
bool kernel_vectorized();
}  // namespace detail

}  // namespace attncert::oracle
