// lib/src/oracle/ziv_stage.hpp — what the oracle's files share (not installed, not API):
// RAII wrappers of the MPFR / MPFI C types, rounding to the target formats, the exact scale,
// per-head data and the MPFI enclosure of one row.  See attncert/oracle/oracle.hpp.
#pragma once

#include <gmp.h>
#include <mpfi.h>
#include <mpfr.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "attncert/number/c_handles.hpp"
#include "attncert/oracle/fast_row.hpp"
#include "attncert/oracle/oracle.hpp"

namespace attncert::oracle::internal {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr unsigned first_mpfi_bits = 128;  ///< first precision of the Ziv stage
constexpr unsigned cap_limit = 1u << 16;   ///< largest accepted --max-precision

using attncert::mpfi_var;  // RAII owners: number/c_handles.hpp
using attncert::mpfr_var;

/// "(b, h, i, k)".
std::string index_text(std::size_t b, std::size_t h, std::size_t i, std::size_t k);

// ---- rounding to the target (rounding.cpp) -------------------------------------------------

/// RN of a binary64 number to a narrower target (one correct rounding).
double rn_from_double(double s, target_format t) noexcept;
/// RN_t(s + eps) for an eps of sign `dir` below one binary64 ulp of s (rounding.cpp).
double round_dir(double s, int dir, target_format t) noexcept;
/// RN of an MPFR number to the target, with gradual underflow and overflow.
double round_mpfr_to_target(mpfr_srcptr x, target_format t);
/// Whether two target numbers are adjacent (or equal).
bool adjacent_or_equal(double a, double b, target_format t);

// ---- the exact scale (ziv_stage.cpp) -----------------------------------------------------------

struct scale_value {
  bool inv_sqrt_d = true;
  mpq_t q;
  unsigned d = 1;
  double hi = 0, lo = 0, rad = 0;  // |s - (hi + lo)| <= rad
  int sign = 1;
  double approx = 0;  ///< s rounded to binary64 (may be 0 or inf for extreme scales): to choose references only
  scale_value() { mpq_init(q); }
  ~scale_value() { mpq_clear(q); }
  scale_value(const scale_value&) = delete;
  scale_value& operator=(const scale_value&) = delete;
  void enclose(mpfi_ptr out) const {
    if (inv_sqrt_d) {
      mpfi_set_ui(out, d);
      mpfi_sqrt(out, out);
      mpfi_ui_div(out, 1, out);
    } else {
      mpfi_set_q(out, q);
    }
  }
};

/// Sets sv from the request's scale; a scale the fast path cannot use gets rad = inf.
void init_scale(scale_value& sv, const scale_spec& spec, std::size_t d);

// ---- per-head data -----------------------------------------------------------------------------

struct head_data {
  std::vector<double> KT;                    // d × nk
  std::vector<std::uint8_t> k_finite, v_finite;  // per key
};

// ---- the MPFI stage for one row ----------------------------------------------------------------

/// Exact forms of the variants' constants (proofs/P14-oracle-variants.md), built once per run.
struct variant_values {
  bool has_softcap = false;
  mpq_t softcap;         ///< C > 0
  double softcap_d = 0;  ///< C when it is a binary64 number (the fast path needs that), else 0
  bool has_dropout = false;
  mpq_t keep_factor;     ///< 1 / (1 - P)
  double keep_hi = 1, keep_lo = 0, keep_rad = 0;  ///< |keep_factor - (hi + lo)| <= rad
  variant_values() {
    mpq_init(softcap);
    mpq_init(keep_factor);
    mpq_set_ui(keep_factor, 1, 1);
  }
  ~variant_values() {
    mpq_clear(softcap);
    mpq_clear(keep_factor);
  }
  variant_values(const variant_values&) = delete;
  variant_values& operator=(const variant_values&) = delete;
};

/// Sets vv from the request's variant (the decimals are parsed exactly).  Errors: input_error for a
/// softcap <= 0 or a dropout probability outside [0, 1).
void init_variant_values(variant_values& vv, const attention_variant& v);

struct mpfi_row_ctx {
  const double* q;
  const double* K;
  const double* V;
  const std::uint8_t* allowed;
  std::size_t nk, d, dv;
  const scale_value* scale;
  // the variants of the row (P14)
  const variant_values* var = nullptr;  ///< softcap and dropout constants (null: none)
  const double* bias = nullptr;         ///< per key bias, or null
  bool has_alibi = false;
  double slope = 0;                     ///< ALiBi: a_j -= slope |pos - j|
  long long pos = 0;                    ///< i + n_k - n_q
  bool alibi_key = false;               ///< ALiBi as a_j += slope·j (attention_variant::alibi_key_position)
  bool has_sink = false;
  double sink = 0;
  const std::uint8_t* keep = nullptr;   ///< dropout keep-mask over the keys, or null
  bool lse_base2 = false;
};

/// Encloses o_k for k in `ks` at `prec` bits: out[idx] receives the enclosure of o_{ks[idx]};
/// k == dv stands for the row's LSE (ln W, or log2 W with lse_base2).
void mpfi_row(const mpfi_row_ctx& c, const std::vector<std::size_t>& ks, mpfr_prec_t prec, std::vector<mpfi_var*>& out);
/// Where the backward of one row (P15) puts its contributions: the arrays hold intervals at the
/// precision of the call; the row adds to dq (d), dk (nk·d of its kv head) and dv (nk·dv), and sets
/// ds[j] = dS_j (nk, for dBias; null: not wanted) and *dsink (the sink's dS; null: no sink).
/// dk and dv null (both): the row's dq only.
struct row_grad_sinks {
  mpfi_ptr* dq = nullptr;
  mpfi_ptr* dk = nullptr;
  mpfi_ptr* dv = nullptr;
  mpfi_ptr* ds = nullptr;
  mpfi_ptr dsink = nullptr;
};
/// Adds the row's contributions to the gradients for the cotangent dO (dv values) and dLSE
/// (null: none; in the units of c.lse_base2), at `prec` bits.
void mpfi_row_backward(const mpfi_row_ctx& c, const double* dO, const double* dlse, mpfr_prec_t prec,
                       const row_grad_sinks& out);
/// What the fast path knows of a row that the key-column escalation reuses (P15): the binary64
/// shift m with W = Σ_j e^{x_j - m} (+ e^{sink - m}) in [W_hi + W_lo ± W_rad], the reference key
/// `ref` (nk: none) with c = dP_ref in its ball, and base = c P_sink - D'' + g in its ball.
struct row_summary {
  double m = 0, W_hi = 0, W_lo = 0, W_rad = 0;
  double c_hi = 0, c_lo = 0, c_rad = 0, base_hi = 0, base_lo = 0, base_rad = 0;
  std::size_t ref = 0;
};
/// Adds the row's contributions to dK_j (dk[idx]: d intervals) and dV_j (dv[idx]: dv) for j =
/// keys[idx] at `prec` bits, from `rs` and each key's exact score.  Enclosures, as wide as the
/// balls of `rs` make them (about 2^-100 relative): for a precision that those balls allow.
void mpfi_key_columns(const mpfi_row_ctx& c, const row_summary& rs, const double* dO, const std::vector<std::size_t>& keys,
                      mpfr_prec_t prec, mpfi_ptr* const* dk, mpfi_ptr* const* dv);
/// The same summary from MPFI at `prec` bits (for rows whose fast-path balls are too wide: weights
/// that underflow binary64), with the cotangents dO and dLSE (null: none).
void mpfi_row_summary(const mpfi_row_ctx& c, const double* dO, const double* dlse, mpfr_prec_t prec, row_summary& out);
/// t_hi, t_lo, t_rad from an MPFI enclosure: |o - (hi + lo)| <= rad.
void enclosure_to_dd(mpfi_srcptr o, double& hi, double& lo, double& rad);

}  // namespace attncert::oracle::internal
