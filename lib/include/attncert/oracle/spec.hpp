// attncert/oracle/spec.hpp — an oracle call as its user describes it (arrays plus named options:
// the CLI's flags, the Python keywords), turned into one validated oracle_request by one function.
// The CLI reads files into a spec; the Python extension fills one from NumPy buffers.  Both get the
// same validation and the same one-line error texts, which name the spec's fields (field.hpp): each
// front end spells them its own way (--softcap, softcap=).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "attncert/field.hpp"
#include "attncert/oracle/request.hpp"
#include "attncert/tensor.hpp"

namespace attncert::oracle {

/// Everything an oracle call says about its inputs and variant (proofs/P14-oracle-variants.md).
/// Arrays are as the caller holds them (the layout given by `layout`); strings are the caller's texts
/// (exact numbers are parsed into the request's rationals by build_request).
struct attention_spec {
  tensor q, k, v;
  std::string layout = "bhsd";                                        ///< bhsd, bshd or thd
  std::optional<tensor> cu_seqlens_q, cu_seqlens_k, seqlens_k;        ///< int arrays
  std::optional<tensor> block_table;                                  ///< paged K/V (with page_size)
  std::size_t page_size = 0;
  bool causal = false;               ///< top-left (PyTorch's is_causal)
  bool causal_bottom_right = false;  ///< FlashAttention's
  std::optional<tensor> mask; ///< boolean, true = attend (ANDed with the above)
  std::string mask_name = field("mask");  ///< names the mask in errors (the CLI: its file)
  std::string scale;                 ///< "" = 1/sqrt(d); else an exact rational text
  std::string empty_rows = "error";  ///< error, zeros or nan
  std::string target = "binary64";
  std::string window;                ///< "LEFT,RIGHT" or ""
  std::string softcap;               ///< exact decimal or ""
  std::optional<tensor> alibi_slopes, bias, sink, dropout_mask;
  std::string alibi = "distance";    ///< distance (-slope |i + n_k - n_q - j|) or flash2 (+slope j, with a causal mask)
  bool sink_off_by_one = false;
  std::size_t sink_token_length = 0;  ///< FlashAttention's: keys kept beside a left window (attention_variant::sink_tokens)
  std::size_t attention_chunk = 0;    ///< FlashAttention's chunked local attention (attention_variant::chunk); 0: none
  std::optional<tensor> key_leftpad;  ///< int (b,): FlashAttention's cache_leftpad (attention_variant::key_leftpad)
  /// FlashAttention 3's qv (MLA): scores scale·(q·k + qv·v), qv in q's layout with v's feature size; the default scale is
  /// then 1/sqrt(d + d_v).  Forward only (FlashAttention's backward takes no qv).
  std::optional<tensor> qv;
  std::string dropout_p;             ///< exact decimal; needed with dropout_mask
  std::string qkv_format;            ///< FP8: e4m3fn, e5m2 or ""
  std::string q_descale, k_descale, v_descale;  ///< a decimal text (exact in binary64), or "" ...
  std::optional<tensor> q_descale_array, k_descale_array, v_descale_array;  ///< ... an array: (), (1,) or (b, h_kv)
  bool want_lse = false;
  std::string lse_base = "e", empty_lse = "-inf", lse_target;  ///< lse_target "" = binary64 for a binary64 target, else binary32
  unsigned max_bits = 4096, threads = 2;
  double max_seconds = 0;  ///< the budget of each pass, forward and backward (oracle_request::max_seconds), in [0, 1e7]
  bool allow_nonfinite = false;
};

/// The request and the layouts that convert between the caller's tensors and the internal ones.
struct built_request {
  oracle_request req;
  input_layout lay;
  output_layout olay;  ///< the output's and LSE's layout
};

/// The LSE of a row without keys from its text: "-inf" (FlashAttention 3, the default), "+inf" or "inf" (FlashAttention 2),
/// "0" or "nan".  Errors: input_error naming field("empty_lse").
double parse_empty_lse(const std::string& text);
/// The text of such a value ("-inf", "+inf", "0", "nan").
std::string empty_lse_text(double v);

/// "LEFT,RIGHT" with integers >= -1 into v.window_left / window_right.  Errors: input_error naming field("window").
void parse_window(const std::string& w, attention_variant& v);

/// The request of `s`, validated (validate_request) and with its output layout.  Errors (input_error,
/// one line): everything set_qkv, the array converters and validate_request reject; a mask with
/// --layout thd; bias or dropout with thd; paged K/V without both table and page size; a sink given
/// twice; dropout without both mask and P; a bad LSE base or empty-LSE value.
built_request build_request(const attention_spec& s);

/// The gradients' layouts (dq, dk, dv) of a built request: make_gradient_layout for Q, K and V.
std::vector<output_layout> gradient_layouts(const attention_spec& s, const built_request& b);

}  // namespace attncert::oracle
