// attncert/block/block_bound.hpp — the article's output bound (§11) carried through complete
// transformer blocks (`attncert block-bound`, attncert.block_bound): W_O, the residual, LayerNorm or
// RMSNorm, the MLP and the next block, compared with the error an approximate attention really makes.
//
// The model (pre-norm, as GPT-2): for each block, on the residual stream x (n tokens × width E),
//   h = norm₁(x);  q, k, v = h·W_Q + b_Q, h·W_K + b_K, h·W_V + b_V  (heads: consecutive column groups);
//   o_h = softmax(c·q_h k_hᵀ, causal) v_h,  c = 1/√d_head;   a = concat_h(o_h)·W_O + b_O;   x₁ = x + a;
//   g = norm₂(x₁);  m = φ(g·W₁ + b₁)·W₂ + b₂;   x' = x₁ + m.
// Norms: LayerNorm γ⊙(x − μ)/√(var + eps) + β or RMSNorm γ⊙x/√(mean(x²) + eps); φ: GELU (tanh form), SiLU
// or ReLU.  Every weight and the input are binary64 numbers; the model is the exact real function.
//
// The approximate model replaces only the attention core softmax(c q kᵀ) v of every head by a kernel
// (float32, bfloat16 with float32 accumulation, linear attention, top-k sparse, positive random features) that receives
// the approximate model's own binary64 q, k, v; everything else is computed in binary64 (the approximate
// model IS those binary64 values, each step's rounding enclosed for the bound).
//
// Tiers, per token i and stage (norm-1, heads, attention-out, residual-1, norm-2, mlp, block-out):
//   * measured: ‖x̃_i − x_i‖₂ enclosed — x̃ the approximate model's binary64 values, x the exact model's,
//     enclosed componentwise in MPFI at 128 + 24·depth bits (lib/src/block/exact_forward.cpp); the exact
//     error lies in [lo, hi];
//   * bound: a certified upper bound of the same quantity, computed from the approximate trajectory and
//     the kernel's outputs only, never from the exact trajectory (proofs/L7-block-bound.md derives every
//     step).  Two local terms at each attention: "article" = ‖Â_i − A_i‖₁·max_j‖v_j‖₂ + ‖Ô_i − Â_i V‖₂
//     (the §11 bound plus the kernel's own product error) and "direct" = ‖Ô_i − A_i V‖₂ certified; the
//     same propagation carries both.  The stage bound restarts each stage from the certified measured
//     error of its input: it shows how loose each stage is by itself.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attncert/linalg/matrix.hpp"

namespace attncert::block {

struct norm_params {
  std::vector<double> gamma, beta;  ///< beta empty: zero (RMSNorm has none)
};

/// One block's weights, row-vector convention (y = x·W + b): W_Q, W_K, W_V, W_O are E×E, W₁ E×F, W₂ F×E.
struct block_weights {
  norm_params norm1, norm2;
  matrix<double> w_q, w_k, w_v, w_o, w1, w2;
  std::vector<double> b_q, b_k, b_v, b_o, b1, b2;  ///< empty: zero
};

struct model {
  std::size_t heads = 1;
  std::string norm = "layernorm";        ///< layernorm or rmsnorm
  std::string activation = "gelu_tanh";  ///< gelu_tanh, silu or relu
  double eps = 1e-5;                     ///< the norms' epsilon (a binary64 number, > 0)
  std::vector<block_weights> blocks;
};

/// A seeded random model (weights rounded to binary32, as a trained model's are): width E, `heads` heads, MLP
/// width 4E, LayerNorm with γ near 1, GELU; projections N(0, 1/E), W₂ N(0, 1/(4E)).  And its input, n tokens
/// N(0, 1) rounded to binary32.  Tier: exact data (no claim).
model random_model(std::size_t blocks, std::size_t width, std::size_t heads, std::uint64_t seed);
matrix<double> random_input(std::size_t tokens, std::size_t width, std::uint64_t seed);

/// Errors (input_error, one line naming the block and weight): inconsistent shapes, heads not dividing E,
/// a non-finite entry, eps ≤ 0, an unknown norm or activation.
void validate(const model& m, const matrix<double>& x);

/// One approximation: "float32", "bfloat16", "linear" (elu + 1 features), "top-k:K" (K ≥ 1) or "random-features:M"
/// (M ≥ 1 features, FAVOR+ positive features, drawn from `seed`).  Errors: input_error for anything else.
struct approximation {
  std::string name;  ///< as given
  std::string kind;  ///< float32, bfloat16, linear, top-k, random-features
  std::size_t param = 0;
};
approximation parse_approximation(const std::string& text);

/// One stage of one block, every number the maximum over tokens.  Decimal upper bounds are binary64
/// numbers rounded outward.
struct stage_row {
  std::size_t block = 0;
  std::string stage;                      ///< norm-1, heads, attention-out, residual-1, norm-2, mlp, block-out
  double measured_lo = 0, measured_hi = 0;  ///< max_i ‖x̂_i − x_i‖₂ lies in [lo, hi]
  double bound_article = 0;               ///< certified ≥ max_i ‖x̂_i − x_i‖₂ (article local term)
  double bound_direct = 0;                ///< certified ≥ the same (direct local term)
  double stage_bound = 0;                 ///< certified ≥ the same, from the measured input error (direct)
  double scale = 0;                       ///< max_i ‖x_i‖₂ (upper end), to read errors relatively
};

struct approximation_result {
  approximation approx;
  std::vector<stage_row> rows;
  /// Where the bound is not within `target_ratio` of the measured error (bound_article / measured_lo at
  /// block-out), and why; empty when it is everywhere.
  std::vector<std::string> notes;
  bool within_target = false;  ///< bound_article ≤ target_ratio·measured_lo at every block-out
};

struct request {
  model m;
  matrix<double> x;                      ///< the input residual stream (n × E)
  std::vector<approximation> approximations;
  std::size_t depth = 0;                 ///< blocks to run (0: all of the model's)
  std::uint64_t seed = 20261204;         ///< random features
  double target_ratio = 10;
  std::string model_description;         ///< for the report
  /// Tests only: drop the attention's propagation term (the bound is then not sound; the soundness test
  /// must see it fall below the measured error).
  bool drop_propagation = false;
  /// Keep every stage's enclosures of both trajectories and every kernel output (result::dumps), for an
  /// independent re-check (tests/block/block_bound_mpmath.py).
  bool keep_trajectories = false;
  std::function<void(const std::string&)> progress;  ///< stage progress (may be empty)
};

struct result {
  std::size_t tokens = 0, width = 0, heads = 0, mlp_width = 0, depth = 0;
  std::string norm, activation, model_description;
  double eps = 0, target_ratio = 10;
  std::uint64_t seed = 0;
  unsigned exact_bits = 0;  ///< the MPFI precision of the exact model's enclosure
  std::vector<approximation_result> approximations;
  double seconds = 0;
  /// With keep_trajectories: "<model>.b<block>.<stage>.mid" / ".rad" (model "exact" or the approximation's
  /// name) and "<approximation>.b<block>.h<head>.out" (the kernel's output), blocks and heads from 0.
  std::vector<std::pair<std::string, matrix<double>>> dumps;
};

/// Runs every approximation through `depth` blocks.  Errors: input_error (validate, parse, an enclosure
/// too wide to bound the softmax, a score or activation overflowing binary64).
result run(const request& r);

}  // namespace attncert::block
