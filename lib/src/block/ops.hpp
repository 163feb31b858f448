// lib/src/block/ops.hpp — internal to block/: interval binary64 arithmetic (ival), the midpoint-radius
// operations a transformer block needs beyond attention/binary64_enclosure.hpp, and the approximate
// attention kernels.  Tier of everything but the kernels: enclosure (every exact value lies inside; each
// operation's result moved outward by one ulp, which covers its rounding, subnormals included —
// proofs/L7-block-bound.md, part A).  The kernels are approx_ (they are the approximations measured).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attncert/block/block_bound.hpp"
#include "attncert/linalg/fast_svd.hpp"

namespace attncert::block::detail {

/// A closed interval [lo, hi] of binary64 numbers.
struct ival {
  double lo = 0, hi = 0;
};
ival add(ival a, ival b);
ival sub(ival a, ival b);
ival mul(ival a, ival b);
ival div(ival a, ival b);  ///< b.lo > 0 or b.hi < 0 (else input_error)
ival sqr(ival a);
ival sqrt_of(ival a);      ///< a.lo clamped at 0
ival exp_of(ival a);       ///< e^a; input_error above 709
ival tanh_of(ival a);
ival sigmoid_of(ival a);
/// φ on an interval (name: gelu_tanh, silu, relu) and sup |φ'| over it (subdivided when wide).
ival activation_of(const std::string& name, ival x);
double activation_derivative_sup(const std::string& name, ival x);

using mr = binary64_enclosure;
ival entry(const mr& x, Eigen::Index i, Eigen::Index j);
void set_entry(mr& x, Eigen::Index i, Eigen::Index j, ival v);

/// x·W + b (b broadcast over rows; empty: none) for binary64 x and W, enclosed.
mr affine(const matrix<double>& x, const matrix<double>& W, const std::vector<double>& b);
/// Per row i, an upper bound of the Euclidean norm of the radius row (every point of the enclosure lies within
/// it of the midpoint row, in ℓ2).
std::vector<double> row_radius(const mr& x);

/// A norm applied row by row to binary64 x (enclosed), and per row a lower bound of ‖x_i − μ_i‖₂ (RMSNorm: ‖x_i‖₂).
struct norm_enclosure {
  mr y;
  std::vector<double> centred_lo;
};
norm_enclosure enclose_norm(const matrix<double>& x, const norm_params& p, bool rms, double eps);

/// 1/√d as an interval (MPFR, directed roundings).
ival inv_sqrt(std::size_t d);

/// Upper bound of ‖W‖₂ (certified_singular_values_binary64).
double spectral_norm_up(const matrix<double>& W);
/// Upper bound of ‖x_i‖₂.
double row_norm_hi(const matrix<double>& x, Eigen::Index i);
/// Bounds of ‖a_i − b_i‖₂: {lo, hi}.
ival row_distance(const matrix<double>& a, const matrix<double>& b, Eigen::Index i);

/// The exact model's stages (norm-1, heads, attention-out, residual-1, norm-2, mlp, block-out) for blocks
/// 0 … depth−1, enclosed componentwise (MPFI at `bits`, rounded outward to binary64 midpoint and radius).
/// Errors: input_error when an enclosure is not finite.
std::vector<std::vector<mr>> enclose_exact_model(const model& m, const matrix<double>& x0, std::size_t depth, unsigned bits,
                                                 const std::function<void(const std::string&)>& progress);

/// The approximate attention of one head (causal): the kernel's output Ô (n × d_v) and the probabilities
/// Â (n × n) it applies, Ô ≈ Â·v.  approx_: no claim.
struct kernel_output {
  matrix<double> O, A;
};
kernel_output approx_attention(const approximation& ap, const matrix<double>& q, const matrix<double>& k,
                               const matrix<double>& v, std::uint64_t seed);

}  // namespace attncert::block::detail
