// attncert/oracle/fast_row.hpp — the oracle's fast path for one row, in double-double with a
// rigorous radius per element (proofs/P11-oracle.md), and its plain binary64 counterpart.  Not
// the oracle's API (oracle.hpp): the kernels' inputs and workspace, exposed for the oracle's own
// files, its tests and its benchmark.  Light on purpose: the kernels (fast_kernel.cpp,
// fast_backward.cpp) are compiled with their own flags and without the library's heavy headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace attncert::oracle {

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
  // The variants (proofs/P14-oracle-variants.md); the defaults give plain attention.
  double softcap = 0;               ///< C > 0 (a binary64 number), or 0 for none
  const double* add_hi = nullptr;   ///< per key additive term (ALiBi + bias): a_j in [add_hi + add_lo ± add_rad]
  const double* add_lo = nullptr;
  const double* add_rad = nullptr;
  bool has_sink = false;            ///< a sink logit in the denominator
  double sink = 0;
  const std::uint8_t* keep = nullptr;  ///< dropout keep-mask over the keys, or null
  double keep_hi = 1, keep_lo = 0, keep_rad = 0;  ///< 1/(1 - P) in [keep_hi + keep_lo ± keep_rad]
  /// Steps 1-4 without the value sums: the weights and W only, no outputs (the backward, P15).
  bool weights_only = false;
};
struct row_workspace {
  std::vector<double> s_hi, s_lo, s_rad, w_hi, w_lo;
  std::vector<double> acc_s, acc_c, acc_p;
  std::vector<double> z_hi, z_lo, z_rad, e_hi, e_lo, e_b;
  std::vector<double> y_hi, y_lo, y_b;  ///< softcap: y_j = x_j / C and its relative bound
  std::vector<double> f_hi, f_lo, f_b;  ///< softcap: e^{-2|y_j|} per key (0 where not evaluated) and its bound
  std::vector<std::size_t> softcap_redo;  ///< softcap: the keys the vector lanes leave to the one-key functions
  std::vector<std::size_t> z_idx;
  std::vector<std::size_t> v_idx;  ///< step 4: the keys whose weighted values are summed, in order
  // After a successful fast_row: weights w_j = w_hi[j] + w_lo[j] with |w_true - w| <= rho |w|
  // (w_hi[j] == 0: an underflowed weight in [0, 2^-1019], `under` of them), and
  // W_lo_bound <= sum_j w_true_j <= W_hi_bound.
  double rho = 0, W_lo_bound = 0, W_hi_bound = 0;
  std::size_t under = 0;
  double W_hi = 0, W_lo = 0, W_err = 0;  ///< |sum_j w_true_j - (W_hi + W_lo)| <= W_err
  double m = 0;  ///< the binary64 shift: W_true = sum_j e^{x_j - m} (+ e^{sink - m}), so LSE = m + ln W_true
  double sink_hi = 0, sink_lo = 0;  ///< the sink's weight e^{sink - m} (0 when it underflowed or there is none)
  /// |w_true - w| <= rho_normal |w| for the weights with |w_hi| >= 2^-900; the `tiny` others
  /// (0 < |w_hi| < 2^-900) err by less than 2^-928 absolutely (P11 step 3).
  double rho_normal = 0;
  std::size_t tiny = 0;
  /// With a softcap: |tanh(s q·k_j / C) - (th_hi[j] + th_lo[j])| <= th_rad[j] for the allowed keys.
  std::vector<double> th_hi, th_lo, th_rad;
};
bool fast_row(const row_inputs& in, row_workspace& ws, double* out_hi, double* out_lo, double* out_rad);
/// The same computation in plain binary64, no certification (the benchmark's baseline, and the
/// IEEE semantics of rows touching NaN/Inf).  With `lse`, also writes ln W there.
void plain_row(const row_inputs& in, row_workspace& ws, double* out, double* lse = nullptr);
/// The plain row's weights: w_j = exp(x_j - m) in ws.w_hi[j] for the allowed j in [jbegin, jend)
/// (the first and one past the last allowed key), ws.m = m, tanh(s q·k_j / C) in ws.th_hi with a
/// softcap; returns W = Σ_j w_j (+ the sink's weight).  Approx tier.
double plain_weights(const row_inputs& in, row_workspace& ws, std::size_t& jbegin, std::size_t& jend);
/// True when the AVX2+FMA build of the kernel is used.
bool kernel_vectorized();
}  // namespace detail

}  // namespace attncert::oracle
