// attncert/oracle/request.hpp — building and validating an oracle request: tensors and
// masks from .npy arrays (PyTorch's layouts), and the one validation of a request.
#pragma once

#include <string>
#include <vector>

#include "attncert/oracle/oracle.hpp"
#include "attncert/tensor.hpp"

namespace attncert::oracle {

/// A (n, d), (h, n, d) or (b, h, n, d) array as a tensor4.  Errors: input_error naming `what`
/// for other ranks or an empty dimension.
tensor4 to_tensor4(const tensor& a, const std::string& what);

/// A boolean mask of shape (nq, nk), (h, nq, nk) or (b, h, nq, nk) (dtype bool; true = the key
/// may be attended, as PyTorch's boolean attn_mask).  Errors: input_error naming `what`.
bool_mask to_bool_mask(const tensor& a, const std::string& what);

/// How Q, K and V are laid out (proofs/P14-oracle-variants.md, "Geometry").
enum class qkv_layout { bhsd, bshd, thd };
/// "bhsd", "bshd", "thd"; throws input_error on anything else.
qkv_layout parse_layout(const std::string& s);
std::string to_string(qkv_layout l);

/// The 8-bit input formats (OCP FP8), decoded exactly.
enum class fp8_format { none, e4m3fn, e5m2 };
/// "e4m3fn", "e5m2" (or "" / "none"); throws input_error on anything else.
fp8_format parse_fp8_format(const std::string& s);
/// The exact value of an FP8 byte (NaN for NaN encodings, ±inf for e5m2's infinities).
double decode_fp8(std::uint8_t byte, fp8_format f);

/// A descale factor: one binary64 number, or one per (b, h_kv).
struct descale {
  std::vector<double> values;  ///< empty = 1; size 1 = per tensor; size B·H_kv = per (b, kv head)
};

/// Everything about the inputs' layout besides Q, K and V themselves.
struct input_layout {
  qkv_layout layout = qkv_layout::bhsd;
  std::vector<std::size_t> cu_seqlens_q, cu_seqlens_k;  ///< thd: b + 1 offsets each
  std::vector<std::size_t> seqlens_k;                    ///< --seqlens-k: keys used per sequence
  bool paged = false;                                    ///< --block-table / --page-size
  std::size_t page_size = 0, table_rows = 0, table_cols = 0;
  std::vector<long long> block_table;                    ///< (b, m) row-major
  /// Paged with --seqlens-k and nothing shaped by the table's key count (no bias, explicit mask or
  /// dropout mask): n_k is the longest sequence used, so memory follows the keys used, not the
  /// table's capacity (a (1, 10^6) table with 5 keys used allocates 5 keys).
  bool trim_pages = false;
  fp8_format fp8 = fp8_format::none;
  descale q_descale, k_descale, v_descale;
};

/// 1-D non-negative integer offsets/lengths from an int32/int64 array.  Errors name `what`.
std::vector<std::size_t> to_index_vector(const tensor& a, const std::string& what);

/// Sets req.Q, req.K, req.V (and req.seqlens_q / seqlens_k) from the arrays as laid out by `lay`,
/// gathering bshd and paged K/V into the internal (B, H, n, d) tensors and packed thd into
/// (1, H, t, d) with req.packed_cu_q / packed_cu_k (memory O(total tokens), nothing padded); FP8 bytes
/// are decoded and descaled exactly.  Errors (input_error, one line): wrong ranks, cu_seqlens not
/// starting at 0 / not monotone / not matching the tensors, a block-table entry out of range,
/// a descale <= 0 or non-finite or of the wrong shape, uint8 arrays without an FP8 format.
void set_qkv(oracle_request& req, const tensor& q, const tensor& k, const tensor& v,
             const input_layout& lay = {});

/// Where the internal rows go in the caller's layout.  Internal row r = (b·H + h)·nq + i.
struct output_layout {
  qkv_layout layout = qkv_layout::bhsd;
  std::size_t B = 1, H = 1, nq = 0, dv = 0, total_q = 0;
  std::vector<std::size_t> cu_q;                 ///< thd: {0, t} (the internal rows are packed too)
  std::vector<std::size_t> out_shape, lse_shape;  ///< the shapes of the output and the LSE
  /// Paged dK / dV: the external row (page·page_size + slot)·H + h of each internal row, or none;
  /// `external_rows` rows in all.  Empty for every other layout.
  std::vector<std::size_t> row_map;
  std::size_t external_rows = 0;
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
  /// The external output row of internal row r (none for padding rows).
  std::size_t output_row(std::size_t r) const;
  /// The external LSE index of internal row r (none for padding rows).
  std::size_t lse_index(std::size_t r) const;
  /// Internal (B·H·nq·dv) values in the external layout, and back (padding: NaN).
  std::vector<double> output_to_external(const std::vector<double>& internal) const;
  std::vector<double> output_to_internal(const std::vector<double>& external) const;
  std::vector<double> lse_to_external(const std::vector<double>& internal) const;
  std::vector<double> lse_to_internal(const std::vector<double>& external) const;
};

/// The output layout of a request built by set_qkv with `lay` from a Q array of shape `q_shape`.
output_layout make_output_layout(const oracle_request& req, const input_layout& lay, const std::vector<std::size_t>& q_shape);

/// Which input a gradient belongs to.
enum class gradient_of { q, k, v };
/// Where the rows of dQ (internal (B, H_q, nq, d)), dK (B, H_kv, nk, d) or dV (B, H_kv, nk, dv) go in
/// the layout of Q, K or V as given (`shape`: that input's array shape); rows that are not in the
/// caller's tensor (padding) are dropped, as for the output.  Paged K/V: dK and dV are written in the
/// pages' layout (pages, page_size, h_kv, d); page slots no sequence uses get exact zeros.  Errors:
/// input_error when a page slot is used by two sequences (or twice by one): its gradient would be a
/// sum of two exact values, which the backward does not form yet.
output_layout make_gradient_layout(const oracle_request& req, const input_layout& lay, gradient_of which,
                                   const std::vector<std::size_t>& shape);
/// Values rounded to `t` as a .npy array of `shape` (float64/32/16; bfloat16 stored exactly as float32).
tensor target_array(const std::vector<double>& values, target_format t, const std::vector<std::size_t>& shape);

/// The output's shape as the inputs lay it out: Q's leading dimensions, then (n_q, d_v).
std::vector<std::size_t> output_shape(const tensor& q, const tensor& v);

/// Checks that the array `c` read from `file` can be graded as an output candidate: a float
/// array of shape `out_shape`.  Errors: input_error starting with `file`.
void check_candidate_array(const tensor& c, const std::vector<std::size_t>& out_shape, const std::string& file);

/// Checks that the array `a` read from `file` has an attention candidate's shape
/// (…, n_q, n_k) for the inputs `q`, `k`.  Errors: input_error starting with `file`.
void check_attention_array(const tensor& a, const tensor& q, const tensor& k,
                           const std::string& file);

/// The reference as --write-reference stores it: float64, float32 or float16 as the target
/// format (bfloat16 values are stored exactly as float32), of shape `shape`, NaN/Inf allowed.
tensor reference_array(const oracle_result& r, target_format t, const std::vector<std::size_t>& shape);
/// The same in the caller's layout.
tensor reference_array(const oracle_result& r, target_format t, const output_layout& lay);
/// The LSE as --write-lse stores it (format of r.lse_target, as reference_array), in the caller's layout.
tensor lse_array(const oracle_result& r, const output_layout& lay);

/// The variant inputs from arrays: ALiBi slopes (h_q,) or (b, h_q); a bias of up to 4 dims
/// broadcastable to (b, h_q, n_q, n_k) (right-aligned, as PyTorch broadcasts); sink logits (h_q,);
/// a dropout keep-mask (bool or uint8 0/1, up to 4 dims, broadcast as a mask).  Errors name `what`.
std::vector<double> to_alibi_slopes(const tensor& a, const std::string& what);
score_bias to_score_bias(const tensor& a, const std::string& what);
bool_mask to_keep_mask(const tensor& a, const std::string& what);
/// One unit of split work (attncert.distributed): batch b and the query heads [h0, h1) of a problem of
/// B batches and H query heads.  What the unit reads of a variant input of shape `shape`, as index ranges
/// [begin, end) per dimension of that shape.  `what` names the input, and its kind: "bias", "mask" or
/// "dropout_mask" (up to 4 dims, right-aligned to (b, h_q, n_q, n_k)), "alibi_slopes" ((h_q,) or
/// (b, h_q)), "sink" ((h_q,)), "seqlens_k" and "key_leftpad" ((b,)).  A dimension of size 1 broadcasts and is kept whole,
/// so the part broadcasts over the unit as the whole input does over the problem, and the unit's
/// oracle call reads exactly the values the whole call reads for the unit's rows.  Errors
/// (input_error naming the field): an unknown `what`, a batch or head dimension neither 1 nor full.
std::vector<std::pair<std::size_t, std::size_t>> unit_ranges(const std::string& what, const std::vector<std::size_t>& shape,
                                                             std::size_t B, std::size_t H, std::size_t b, std::size_t h0,
                                                             std::size_t h1);
/// A descale from a decimal text (exactly representable in binary64).  Errors name `what`.
descale parse_descale(const std::string& text, const std::string& what);
/// A descale from a float array of shape (), (1,) or (b, h_kv) (finite, > 0).  Errors name `what`.
descale descale_from_array(const tensor& a, const std::string& what);

/// The one validation of a request (run_oracle calls it first).  Errors (input_error): empty
/// tensors, Q/K/V batch, head, feature or length mismatch, max_bits outside [128, 65536], a
/// mask whose shape does not broadcast, NaN/Inf inputs without allow_nonfinite.
void validate_request(const oracle_request& req);

}  // namespace attncert::oracle
