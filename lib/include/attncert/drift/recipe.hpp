// attncert/drift/recipe.hpp — precision recipes: how a kernel forms the attention
// matrix (or output) stage by stage, each stage in its own format.
//
// A recipe names five formats (article §5, §12: a rank diagnostic must say in which
// precision the matrix was formed):
//
//   storage   Q, K, V as stored (rounded once from the exact inputs)
//   scores    accumulation of S = scale·QKᵀ: every product and partial sum is rounded to it;
//             the scale is a scalar of this format (as FlashAttention's fp32 softmax_scale)
//   softmax   the row softmax (shift by the row maximum, exp, sum, divide), after S is
//             converted from the score format
//   output    accumulation of P·V (P converted from the softmax format, V from storage)
//   result    the stored result (attention matrix, scores or output), converted last
//
// Shipped recipes (storage / scores / softmax / output / result):
//
//   fp64           binary64 everywhere
//   fp32           binary32 everywhere
//   bf16-fp32acc   bfloat16 / binary32 / binary32 / binary32 / bfloat16
//   fp16-fp32acc   binary16 / binary32 / binary32 / binary32 / binary16
//   fp16           binary16 everywhere
//   bf16           bfloat16 everywhere
//   mpfrN          MPFR at N bits everywhere
//
// Every elementary operation rounds to its stated format: binary16 and bfloat16 are the
// correctly rounded emulations of number/emulated.hpp (exp included); binary32 and binary64
// use the hardware (libm's exp, faithful, not guaranteed correctly rounded); mpfrN is
// correctly rounded at N bits.  Each conversion between stages is one rounding to nearest
// even (conversions from a narrower format are exact).  Tier: approx throughout — a recipe
// models what a device computes; it claims nothing about the exact value.
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "attncert/attention/softmax.hpp"
#include "attncert/rank/exact_rank.hpp"
#include "attncert/linalg/matrix.hpp"
#include "attncert/number/format.hpp"

namespace attncert {

/// A named precision recipe (see the table above).
struct recipe {
  enum class kind { fp64, fp32, bf16_fp32acc, fp16_fp32acc, fp16, bf16, mpfr };
  kind type = kind::fp64;
  std::string name;  ///< canonical name, round-trips through parse_recipe
  format_spec storage, scores, softmax, output, result;
  /// "storage/scores/softmax/output/result" format names, for reports.
  std::string stages() const {
    return storage.name + "/" + scores.name + "/" + softmax.name + "/" + output.name + "/" + result.name;
  }
};

/// Parse one recipe name (fp64, fp32, bf16-fp32acc, fp16-fp32acc, fp16, bf16, mpfrN with
/// N in [24, 2^20]).  Throws input_error naming the valid recipes otherwise.
recipe parse_recipe(const std::string& name);
/// Parse a comma-separated list; duplicates and empty items are rejected (input_error).
std::vector<recipe> parse_recipes(const std::string& list);

/// Call f.template operator()<In, Acc, Sm, OAcc, Out>() with the recipe's stage types
/// (storage, score accumulation, softmax, output accumulation, result), under a
/// precision_guard for mpfrN.  Returns what f returns.
template <class F>
decltype(auto) with_recipe(const recipe& r, F&& f) {
  switch (r.type) {
    case recipe::kind::fp64: return f.template operator()<double, double, double, double, double>();
    case recipe::kind::fp32: return f.template operator()<float, float, float, float, float>();
    case recipe::kind::bf16_fp32acc: return f.template operator()<bfloat16, float, float, float, bfloat16>();
    case recipe::kind::fp16_fp32acc: return f.template operator()<binary16, float, float, float, binary16>();
    case recipe::kind::fp16: return f.template operator()<binary16, binary16, binary16, binary16, binary16>();
    case recipe::kind::bf16: return f.template operator()<bfloat16, bfloat16, bfloat16, bfloat16, bfloat16>();
    default: {
      precision_guard g(r.result.requested_bits);
      return f.template operator()<mpfr_float, mpfr_float, mpfr_float, mpfr_float, mpfr_float>();
    }
  }
}

/// x rounded to nearest even in To.  Tier approx.  Guarantee: one correct rounding of the
/// value of x (every value of binary16, bfloat16, binary32 and binary64 is exactly a
/// binary64, and float, the emulated formats and MPFR round a binary64 correctly).  MPFR to
/// MPFR is the identity (a recipe uses one MPFR precision).  Preconditions: From is
/// double, float, binary16, bfloat16 or mpfr_float; To likewise; MPFR only to MPFR.
template <class To, class From>
To round_to(const From& x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else {
    static_assert(!std::is_same_v<From, mpfr_float>, "MPFR stages convert only to MPFR");
    return To(static_cast<double>(x));
  }
}

/// Entry-wise round_to.
template <class To, class From>
matrix<To> round_matrix(const matrix<From>& m) {
  matrix<To> r(m.rows(), m.cols());
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) r(i, j) = round_to<To>(m(i, j));
  return r;
}

/// What a recipe forms: the object of one attention layer whose scores are scale·QKᵀ.
/// Q, K, V and scale are given as binary64 numbers, taken as exact (attncert's families use
/// dyadic inputs, so the exact tier sees the same values).
struct recipe_input {
  matrix<double> Q, K;
  double scale = 1;
  mask M = mask::none();
  std::optional<matrix<double>> V;  ///< required for layer_object::output
  layer_object object = layer_object::attention;
};

/// The object formed by the recipe with stage types In (storage), Acc (score
/// accumulation), Sm (softmax), OAcc (output accumulation), Out (result):
///   Q̂, K̂, V̂ = round_In(Q, K, V);  ŝ = round_Acc(scale)
///   S_ij = ŝ ⊗ (⊕_k Acc(q̂_ik) ⊗ Acc(k̂_jk))          (k ascending, every op in Acc)
///   A = masked_softmax(round_Sm(S), M)                 (every op in Sm; attention/softmax.hpp)
///   O_ij = ⊕_k OAcc(A_ik) ⊗ OAcc(v̂_kj)                (k ascending, every op in OAcc)
///   result = round_Out(S | A | O)
/// Tier: approx.  Errors (input_error): shape mismatch, a non-finite score in the recipe's
/// formats (overflow), a fully masked row, object residual (not a recipe object), output
/// without V.
template <class In, class Acc, class Sm, class OAcc, class Out>
matrix<Out> recipe_form(const recipe_input& in) {
  if (in.Q.cols() != in.K.cols()) throw input_error("Q and K have different widths");
  const matrix<In> Q = round_matrix<In>(in.Q), K = round_matrix<In>(in.K);
  const Acc scale = round_to<Acc>(in.scale);
  matrix<Acc> S(Q.rows(), K.rows());
  for (Eigen::Index i = 0; i < Q.rows(); ++i)
    for (Eigen::Index j = 0; j < K.rows(); ++j) {
      Acc s(0);
      for (Eigen::Index k = 0; k < Q.cols(); ++k) s += round_to<Acc>(Q(i, k)) * round_to<Acc>(K(j, k));
      S(i, j) = scale * s;
    }
  if (in.object == layer_object::scores) return round_matrix<Out>(S);
  if (in.object == layer_object::residual) throw input_error("recipes form scores, attention or output (not residual)");
  const matrix<Sm> A = masked_softmax(round_matrix<Sm>(S), in.M);
  if (in.object == layer_object::attention) return round_matrix<Out>(A);
  if (!in.V) throw input_error("the output object needs values V");
  if (in.V->rows() != A.cols()) throw input_error("V has the wrong number of rows");
  const matrix<In> V = round_matrix<In>(*in.V);
  return round_matrix<Out>(multiply(round_matrix<OAcc>(A), round_matrix<OAcc>(V)));
}

}  // namespace attncert
