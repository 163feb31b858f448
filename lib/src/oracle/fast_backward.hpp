// lib/src/oracle/fast_backward.hpp — the backward's fast path (not installed, not API): one row's
// gradients in double-double with a rigorous error radius, dK and dV summed over the rows of a
// (batch, kv head) unit by compensated sums whose error is bounded once at the end.  The error
// analysis, step by step, is in proofs/P15-oracle-backward.md ("Fast path"); the step letters
// below refer to it.  Used by backward.cpp (filter), which escalates what this cannot decide.
//
// Tier: enclosure (every value comes with |exact - (hi + lo)| <= rad), except plain_row_backward,
// which is the benchmark's uncertified binary64 baseline (approx tier).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "attncert/oracle/fast_row.hpp"
#include "attncert/oracle/target.hpp"

namespace attncert::oracle::detail {

/// One value with its radius: the exact value lies in [hi + lo - rad, hi + lo + rad].
struct dd_ball {
  double hi = 0, lo = 0, rad = 0;
};

/// x + y with the radius of Algorithm 6's error plus both radii; `ok` is cleared when an operand
/// is out of range (then the value is meaningless).
dd_ball ball_add(const dd_ball& x, const dd_ball& y, bool& ok);

/// The dK and dV sums of one (batch, kv head) unit, before the scale: Σ_i dU_ij q_i and
/// Σ_i a_ij dO_i over the unit's rows (P15 step G), as compensated sums (s, c) per element and
/// per key the bounds of step F (P: Σ|m.hi|·max|x|, R: Σ rad(m)·max|x|, n: terms accumulated).
struct unit_sums {
  std::size_t nk = 0, d = 0, dv = 0;
  std::vector<double> dk_s, dk_c, dv_s, dv_c;  // nk·d, nk·dv
  std::vector<double> dk_P, dk_R, dv_P, dv_R;  // per key
  std::vector<std::uint32_t> dk_n, dv_n;       // per key: terms accumulated (multiplier not an exact 0)
  std::size_t rows = 0;                        // rows added (terms of the P and R sums, per key)
  void reset(std::size_t nk_, std::size_t d_, std::size_t dv_);
};

/// What the fast backward of a row needs beyond row_inputs (which must have weights_only set).
struct row_cotangent {
  const double* dO = nullptr;    ///< dv values (finite)
  const double* dlse = nullptr;  ///< dL/dLSE or null; in the LSE's units
  bool lse_base2 = false;        ///< the LSE is log2 W: dL/dln W = dlse / ln 2
  dd_ball inv_ln2;               ///< 1 / ln 2 (used with lse_base2)
  const double* VT = nullptr;    ///< dv × nk: V transposed, for dP (step B)
  const double* kmax = nullptr;  ///< per key max_l |k_jl|
  std::size_t key_offset = 0;    ///< the row's key j is key key_offset + j of the unit's sums
  bool want_ds = false;          ///< fill ds (dBias)
};

/// A row's own results: dq (d, scaled, final), dS_j per key (when want_ds), the sink's dS.
struct row_backward {
  std::vector<dd_ball> dq, ds;
  dd_ball dsink;
  std::size_t ref = 0;  ///< the reference key of step C (nk: none, every key dropped)
  dd_ball c, base;      ///< c = dP_ref and base = c P_sink - D'' + g (step D)
  // scratch (per key)
  std::vector<dd_ball> p, dp, du, a;
  std::vector<double> t_s, t_c, t_P;
  std::vector<double> acc_s, acc_c, acc_p;
  std::vector<std::size_t> keys;  ///< step F: the keys with dU_j.hi != 0, in order
  std::vector<double> mh, ml;     ///< step F: dU_j.hi and dU_j.lo by key (read at those keys only)
};

/// The fast backward of one row: fills out.dq (and out.ds, out.dsink) and adds the row's terms to
/// `sums`.  Returns false when a range condition fails (the row is then left to the MPFI stage;
/// `sums` may hold part of the row's terms, so the whole unit must be redone there).
bool fast_row_backward(const row_inputs& in, row_workspace& ws, const row_cotangent& g, unit_sums& sums,
                       row_backward& out);

/// x·y with the radius of Algorithm 12's error plus the propagated radii; `ok` as ball_add's.
dd_ball ball_mul(const dd_ball& x, const dd_ball& y, bool& ok);

/// The sums Σ_i dU_ij q_i (before the scale) and Σ_i a_ij dO_i of `sums` as balls (step F):
/// dk (nk·d), dv (nk·dv), C order.  Returns false when a sum overflowed or has too many terms.
/// Partial sums over blocks of rows (attncert.distributed) are these, added by ball_add.
bool sum_balls(const unit_sums& sums, std::vector<dd_ball>& dk, std::vector<dd_ball>& dv);

/// dK = s·Σ_i dU_ij q_i and dV = Σ_i a_ij dO_i of a unit, with radii (steps F, G): sum_balls, dk
/// times `scale` (s) by ball_mul.  Returns false when sum_balls does or a product is out of range.
bool finish_unit(const unit_sums& sums, const dd_ball& scale, std::vector<dd_ball>& dk, std::vector<dd_ball>& dv);

/// P11's decision rule: when every value of [hi + lo - rad, hi + lo + rad] rounds to the same
/// number of format t, sets `out` to it (+0 for a zero) and returns true; rad == 0 rounds the
/// exact hi + lo once.  False (undecided) for a non-finite ball or |hi| > 2^1000.
bool round_ball(double hi, double lo, double rad, target_format t, double& out);

/// The same backward of one row in plain binary64, uncertified: dq (d) is written, dk (nk·d) and
/// dv (nk·dv) are added to.  The benchmark's baseline; `VT` as in row_cotangent.
void plain_row_backward(const row_inputs& in, row_workspace& ws, const double* dO, const double* dlse,
                        const double* VT, double* dq, double* dk, double* dv);

/// V (nk × dv, row-major) transposed segment by segment: keys cuts[s] .. cuts[s+1] - 1 become the
/// (dv × n_s) block at VT + dv·cuts[s] (one segment {0, nk}: VT is dv × nk); kmax[j] = max_l |K_jl|.
void transpose_values(const double* V, const std::vector<std::size_t>& cuts, std::size_t dv, std::vector<double>& VT);
void key_magnitudes(const double* K, std::size_t nk, std::size_t d, std::vector<double>& kmax);

}  // namespace attncert::oracle::detail
