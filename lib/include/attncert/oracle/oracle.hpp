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
#include <optional>
#include <string>
#include <limits>
#include <vector>

#include "attncert/attention/empty_rows.hpp"
#include "attncert/number/types.hpp"
#include "attncert/oracle/target.hpp"

namespace attncert::oracle {

/// The scale s of s·QKᵀ: either 1/sqrt(d) (irrational unless d is a square) or an exact rational
/// (a caller's text such as "0.125", "1/8", "1e300" is parsed by build_request, spec.hpp).
struct scale_spec {
  bool inv_sqrt_d = true;
  mpq_rational rational;  ///< the scale when !inv_sqrt_d; numerator and denominator below 2^4000
};

/// The scale s in binary64 midpoint-radius form, |s - (hi + lo)| <= rad, as the fast path multiplies by
/// it; rad = +inf when binary64 cannot hold it (then the fast kernels decline and MPFI takes the row).
struct scale_ball {
  double hi = 0, lo = 0, rad = 0;
};
scale_ball scale_binary64(const scale_spec& s, std::size_t d);

enum class mask_kind { none, causal, explicit_mask };

/// A tensor of shape (B, H, n, d) in C order (an input of shape (n, d) has B = H = 1, of shape
/// (h, n, d) B = 1).  Other layouts (bshd, packed thd, paged K/V) are gathered into this one by
/// oracle/request.hpp; sequences shorter than n are described by oracle_request::seqlens_q/k.
struct tensor4 {
  std::size_t B = 1, H = 1, n = 0, d = 0;
  std::vector<double> values;
  const double* row(std::size_t b, std::size_t h, std::size_t i) const { return values.data() + ((b * H + h) * n + i) * d; }
};

/// A boolean mask of shape (mb, mh, nq, nk) whose leading dimensions are 1 (broadcast) or equal
/// to B and H (the query heads).
struct bool_mask {
  std::size_t mb = 1, mh = 1, nq = 0, nk = 0;
  std::vector<std::uint8_t> allowed;
  bool at(std::size_t b, std::size_t h, std::size_t i, std::size_t j) const {
    const std::size_t bb = mb == 1 ? 0 : b, hh = mh == 1 ? 0 : h;
    return allowed[((bb * mh + hh) * nq + i) * nk + j] != 0;
  }
};

/// An additive score term broadcastable to (B, H_q, nq, nk): each dimension is 1 or full.
struct score_bias {
  std::size_t mb = 1, mh = 1, mq = 1, mk = 1;
  std::vector<double> values;
  double at(std::size_t b, std::size_t h, std::size_t i, std::size_t j) const {
    return values[(((mb == 1 ? 0 : b) * mh + (mh == 1 ? 0 : h)) * mq + (mq == 1 ? 0 : i)) * mk + (mk == 1 ? 0 : j)];
  }
};

/// The attention variants of real kernels (semantics and error analysis: proofs/P14-oracle-variants.md).
/// Defaults give plain attention.
struct attention_variant {
  bool causal_bottom_right = false;    ///< key j allowed iff j <= i + nk(b) - nq(b)
  long long window_left = -1, window_right = -1;  ///< -1 = unbounded; both -1: no window
  /// FlashAttention's sink_token_length (StreamingLLM): keys j' < sink_tokens stay allowed beside a left window
  /// (j' the key's position, below); the right side of the window, causal masks and chunks still apply.
  std::size_t sink_tokens = 0;
  /// FlashAttention's attention_chunk (chunked local attention): with c > 0, key j' is allowed only in the chunk of
  /// c keys that holds the row's diagonal p = i + n_k' - n_q: c·floor(p / c) <= j' < c·floor(p / c) + c.
  std::size_t chunk = 0;
  /// FlashAttention's key_leftpad (cache_leftpad), one per batch: keys j < key_leftpad[b] are padding, and a key's
  /// position is j' = j - key_leftpad[b], the sequence's key count n_k' = n_k(b) - key_leftpad[b] (masks, windows,
  /// chunks, sinks and ALiBi count in positions; an explicit mask, a bias and a dropout mask are indexed by j).
  std::vector<std::size_t> key_leftpad;
  std::optional<mpq_rational> softcap; ///< C > 0 (numerator and denominator below 2^4000); none: no softcap
  std::vector<double> alibi_slopes;    ///< empty, H_q slopes, or B·H_q slopes (row-major (b, h))
  /// ALiBi in the form FlashAttention 2's kernel (and its reference) adds under a causal mask: a_j = +slope·j,
  /// instead of the distance form −slope·|i + n_k − n_q − j|.  On the keys a causal mask allows the two differ
  /// by the row constant slope·(i + n_k − n_q): the same output, an LSE larger by that constant.  Needs a
  /// causal mask (validate_request).
  bool alibi_key_position = false;
  bool has_bias = false;
  score_bias bias;                     ///< additive; -inf masks the key
  std::vector<double> sink;            ///< empty or one logit per query head
  bool has_dropout = false;
  bool_mask dropout_keep;              ///< (B, H_q, nq, nk) keep-mask (leading dims may broadcast)
  mpq_rational dropout_p = 0;          ///< P in [0, 1) (with has_dropout)
};

/// What the LSE output is.
struct lse_options {
  bool want = false;                    ///< compute the LSE of every row
  bool base2 = false;                   ///< log2 instead of ln
  /// The LSE of a row without keys (no allowed key, no sink): -inf (the limit, FlashAttention 3's), +inf (FlashAttention
  /// 2's), 0 or NaN, as the caller declares; graded exactly (grading.hpp).
  double empty_value = -std::numeric_limits<double>::infinity();
  target_format target = target_format::binary32;  ///< format the LSE is rounded to
};

struct oracle_request {
  tensor4 Q, K, V;  ///< Q (B, H_q, nq, d), K (B, H_kv, nk, d), V (B, H_kv, nk, dv); H_q a multiple of H_kv
  /// Per-sequence lengths (empty: every sequence has nq queries and nk keys).  Rows i >= seqlens_q[b]
  /// are padding: not computed, not graded (how = padding).  Keys j >= seqlens_k[b] are never attended.
  std::vector<std::size_t> seqlens_q, seqlens_k;
  scale_spec scale;
  mask_kind mask = mask_kind::none;  ///< causal: key j is allowed for query i iff j <= i (PyTorch's is_causal, top-left)
  bool_mask M;                       ///< for explicit_mask (combines with causal_bottom_right / window by AND)
  attention_variant variant;
  lse_options lse;
  empty_row_policy empty_rows = empty_row_policy::error;
  target_format target = target_format::binary64;
  unsigned max_bits = 4096;  ///< precision cap of the MPFI stage (>= 128)
  unsigned threads = 2;      ///< worker threads (rows are split between them)
  /// Budget in seconds (0: none; deadline.hpp).  Past it no row is started, and a row under way
  /// stops at its next escalation step: such rows are undecided — NaN in the reference, no
  /// enclosure (grading skips them), counted in oracle_result::undecided_rows.  Never a wrong bit.
  /// The backward (run_oracle_backward) has the same budget, all or nothing: past it, it throws
  /// time_limit_reached.  A caller's enclosing deadline_scope (one command) holds too.
  double max_seconds = 0;
  /// With NaN/±Inf in a value an allowed score uses: false = input_error; true = such rows are
  /// computed in plain IEEE binary64 (approx tier) and counted as ieee_nonfinite.  Non-finite
  /// values that no allowed score uses are ignored either way.
  bool allow_nonfinite = false;
  /// Approx tier, for benchmarks only: every row is computed by detail::plain_row in binary64
  /// (the same jobs, masks and variants, no certification); results are marked ieee_nonfinite.
  /// run_oracle_backward likewise runs detail::plain_row_backward (dq, dk, dv only).
  bool approx_plain_binary64 = false;
  /// Called now and then from the main thread with (rows done, rows total); may be empty.
  std::function<void(std::size_t, std::size_t)> progress;

  /// A sample of the query rows to compute (empty: every row).  Otherwise one flag per internal row
  /// (b·H_q + h)·nq + i; rows flagged 0 are not computed and come back as padding rows do (NaN, not
  /// graded, not counted as elements).  The forward only (run_oracle_backward rejects a sample).
  std::vector<std::uint8_t> row_sample;

  /// Packed sequences (--layout thd), memory O(total tokens): empty, or the S + 1 query offsets and
  /// S + 1 key offsets of S sequences (from 0).  Then Q is (1, H_q, cu_q[S], d) and K, V are
  /// (1, H_kv, cu_k[S], ·), nothing padded: internal row (0, h, t) is query t - cu_q[s] of sequence
  /// s (cu_q[s] <= t < cu_q[s+1]), which attends only the keys cu_k[s] .. cu_k[s+1] - 1 of s.  Causal
  /// alignment, windows, ALiBi positions and (b, h_q) ALiBi slopes use the sequence's own coordinates
  /// (b = s, i = t - cu_q[s], j = key - cu_k[s]).  Not with a bias, an explicit or a dropout mask, or
  /// seqlens_q / seqlens_k.
  std::vector<std::size_t> packed_cu_q, packed_cu_k;
  bool packed() const { return !packed_cu_q.empty(); }
  /// The batch of the masks and variants: the sequences when packed, else Q.B.
  std::size_t sequences() const { return packed() ? packed_cu_q.size() - 1 : Q.B; }

  /// Sequence b's queries and keys (b a sequence: packed, the sequences' own lengths).
  std::size_t seq_q(std::size_t b) const {
    return packed() ? packed_cu_q[b + 1] - packed_cu_q[b] : seqlens_q.empty() ? Q.n : seqlens_q[b];
  }
  std::size_t seq_k(std::size_t b) const {
    return packed() ? packed_cu_k[b + 1] - packed_cu_k[b] : seqlens_k.empty() ? K.n : seqlens_k[b];
  }
  /// Internal rows (b, h, i) with i below this are in their sequence (packed: every row).
  std::size_t rows_in(std::size_t b) const { return packed() ? Q.n : seq_q(b); }
  /// False for a padding row or a row left out of row_sample (internal coordinates).
  bool row_used(std::size_t row, std::size_t b, std::size_t i) const {
    return i < rows_in(b) && (row_sample.empty() || row_sample[row] != 0);
  }
};

/// Which stage decided an element.
/// padding: a row outside its sequence (seqlens_q), not an output; its values are NaN.
enum class decided_by : std::uint8_t { double_double, mpfi, faithful_only, exact_policy, ieee_nonfinite, padding, undecided };

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
  std::size_t padding_rows = 0;       ///< rows outside their sequence (not outputs)
  std::size_t undecided_rows = 0;     ///< rows not computed within max_seconds (NaN, decided_by::undecided)
  /// The LSE of each row (b, h, i) at index (b·H + h)·nq + i, when requested: the rounded value in
  /// lse_target, an enclosure |lse - (hi + lo)| <= rad as for the outputs, and who decided it.
  bool has_lse = false;
  target_format lse_target = target_format::binary32;
  std::vector<double> lse_reference, lse_hi, lse_lo, lse_rad;
  std::vector<decided_by> lse_how;
};

/// Runs the oracle.  Errors: input_error on shape mismatch, empty tensors, non-finite inputs
/// (unless allow_nonfinite), a fully masked row with policy error, max_bits outside
/// [128, 1 << 16], and an element the cap cannot enclose within two adjacent target numbers
/// ("precision too low").
oracle_result run_oracle(const oracle_request& req);


}  // namespace attncert::oracle
