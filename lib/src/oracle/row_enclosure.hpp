// lib/src/oracle/row_enclosure.hpp — the MPFI enclosures of one attention row at one precision (not
// installed, not API): the class shared by the forward's Ziv stage (ziv_stage.cpp: scores, outputs,
// proofs/P11, P14) and the backward's (ziv_backward.cpp: weights, row gradients, key columns, P15).
#pragma once

#include <memory>
#include <vector>

#include "ziv_stage.hpp"

namespace attncert::oracle::internal {

/// The row's additive term a_j = -slope |pos - j| + bias_j as an interval (exact when prec
/// holds it; outward rounded otherwise).
void additive_term(const mpfi_row_ctx& c, std::size_t j, mpfi_ptr out);
bool has_additive(const mpfi_row_ctx& c);
/// An approximate score in binary64, only to choose the reference key (any choice is exact).
double approx_score(const mpfi_row_ctx& c, std::size_t j);

/// The enclosures of one row at one precision (P11, P14).
class row_enclosure {
 public:
  row_enclosure(const mpfi_row_ctx& c, mpfr_prec_t prec);

  /// z_j = x_j - S for every allowed key, the shift S, and the sink's exponent.
  void scores();

  /// out[idx] for ks[idx]: outputs (k < dv) and the LSE (k == dv).
  void outputs(const std::vector<std::size_t>& ks, std::vector<mpfi_var*>& out);

  /// The contributions of this row to dK_j and dV_j for the keys `keys` (P15, escalation 2), from
  /// the fast path's row quantities `rs` (the shift m, W, c = dP_r, base) and this key's exact
  /// score: dk[idx] (d intervals) += s dU_j q, dv[idx] (dv) += P_j κ_j dO.  No scores() needed.
  void key_columns(const row_summary& rs, const double* dO, const std::vector<std::size_t>& keys, mpfi_ptr* const* dk,
                   mpfi_ptr* const* dv);

  /// After scores(): the weights' sum W = Σ_j e^{z_j} (+ the sink's), P_j = e^{z_j} / W for the
  /// allowed keys and P_sink (0 without a sink).
  void probabilities(std::vector<std::unique_ptr<mpfi_var>>& P, mpfi_ptr W, mpfi_ptr wsink);

  /// After scores(): the row's summary for the key columns (row_summary) at this precision:
  /// m = S rounded, W_m = W e^{S - m}, a kept reference key (MPFI's own when kept) with c = dP_ref,
  /// and base = c P_sink - D'' + g with D'' = Σ_j P_j (dP_j - c), each as a ball.
  void summary(const double* dO, const double* dlse, row_summary& out);

  /// g = dL/d ln W: dlse, or dlse / ln 2 with the LSE in base 2; 0 without dlse.
  void lse_cotangent(const double* dlse, mpfi_ptr g);

  /// The backward of the row (P15), after scores(): adds its contributions to `out`.
  void gradients(const double* dO, const double* dlse, const row_grad_sinks& out);

 private:
  /// The exact dO·v_j - dO·v_r (r == nk: dO·v_j) as an interval in `out` (products exact at 106 bits,
  /// one correctly rounded sum each way).
  void dot_dv(const double* dO, std::size_t j, std::size_t r, mpfi_ptr out);

  bool softcapped() const { return c_.var && c_.var->has_softcap; }

  /// [hi + lo - rad, hi + lo + rad], outward.
  void ball_interval(double hi, double lo, double rad, mpfi_ptr out);

  /// The exact score x_j of key j (scale, softcap, ALiBi, bias) as an interval; with a softcap
  /// also tanh(s q·k_j / C) in `th`.
  void exact_score(std::size_t j, mpfi_ptr x, mpfi_ptr th);

  std::size_t approx_reference() const;

  mpfi_ptr zvar(std::size_t j);

  /// The exact dot product q·k_j - q·k_r (r == nk: q·k_j) as an interval in `out`.
  void dot_difference(std::size_t j, std::size_t r, mpfi_ptr out);

  // Without softcap: z_j = s (q·k_j - q·k_r) + (a_j - a_r) from an exactly summed difference
  // (no cancellation however large the scores), S = s q·k_r + a_r.
  void difference_scores(std::size_t r);

  // With softcap: x_j = C tanh(s q·k_j / C) + a_j, bounded by C + |a_j|; z_j = x_j - x_r, S = x_r.
  void softcap_scores(std::size_t r);

  // If another key has a clearly larger exact score, the caller recomputes with it as the
  // reference (so no exponent is large and positive).
  std::size_t largest_midpoint(std::size_t ref);

  // A sink larger than every score becomes the shift: z_j -= (sink - S), S = sink.
  void shift_to_sink_if_larger();

  const mpfi_row_ctx& c_;
  mpfr_prec_t prec_;
  std::vector<std::unique_ptr<mpfr_var>> store_;
  std::vector<mpfr_ptr> ptrs_;
  mpfr_var lo_, hi_;
  std::vector<std::unique_ptr<mpfi_var>> z_;
  mpfi_var s_, a_, ar_, S_;  // scale, additive terms, the shift
  bool keep_tanh_ = false;   // backward with softcap: keep t_j = tanh(s q·k_j / C)
  std::vector<std::unique_ptr<mpfi_var>> th_;
  std::size_t ref_ = 0;      // the reference key of the scores (z_ref = 0 without a sink shift)
};


}  // namespace attncert::oracle::internal
