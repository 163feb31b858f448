// attncert/attention/heads.hpp — A·V, single- and multi-head attention, residual path.
#pragma once

#include <optional>
#include <vector>

#include "attncert/attention/scores.hpp"
#include "attncert/attention/softmax.hpp"

namespace attncert {

/// Output of one head: softmax(scale·QKᵀ under M)·V.  Q (n_q, d), K (n_k, d), V (n_k, d_v).
/// Tier: that of T.  Errors: shape mismatch, non-finite scores, fully masked rows (policy).
template <class T>
matrix<T> attention_output(const matrix<T>& Q, const matrix<T>& K, const matrix<T>& V, const T& scale,
                           const mask& M = mask::none(), empty_row_policy empty = empty_row_policy::error) {
  if (K.rows() != V.rows())
    throw input_error("K has " + std::to_string(K.rows()) + " rows but V has " + std::to_string(V.rows()));
  return multiply(masked_softmax(scores(Q, K, scale), M, empty), V);
}

/// Per-head projections of one attention head applied to a sequence X (n, d_model):
/// Q = X·Wq, K = X·Wk, V = X·Wv.
template <class T>
struct head_weights {
  matrix<T> Wq, Wk, Wv;
  std::optional<T> scale;  // default 1/√(Wq.cols())
};

/// The per-head outputs H_h = softmax(s_h (X Wq_h)(X Wk_h)ᵀ under M) (X Wv_h), each (n, d_v_h).
template <class T>
std::vector<matrix<T>> head_outputs(const matrix<T>& X, const std::vector<head_weights<T>>& heads,
                                    const mask& M = mask::none()) {
  std::vector<matrix<T>> out;
  for (const auto& h : heads) {
    const matrix<T> Q = multiply(X, h.Wq), K = multiply(X, h.Wk), V = multiply(X, h.Wv);
    const T s = h.scale ? *h.scale : default_scale<T>(h.Wq.cols());
    out.push_back(attention_output(Q, K, V, s, M));
  }
  return out;
}

/// Horizontal concatenation [H_1, ..., H_h] (exact in every tier).
/// Precondition: all blocks have the same number of rows.
template <class T>
matrix<T> concat_columns(const std::vector<matrix<T>>& blocks) {
  if (blocks.empty()) return matrix<T>();
  Eigen::Index cols = 0;
  for (const auto& b : blocks) {
    if (b.rows() != blocks[0].rows()) throw input_error("concat: heads have different numbers of rows");
    cols += b.cols();
  }
  matrix<T> c(blocks[0].rows(), cols);
  Eigen::Index at = 0;
  for (const auto& b : blocks) {
    for (Eigen::Index i = 0; i < b.rows(); ++i)
      for (Eigen::Index j = 0; j < b.cols(); ++j) c(i, at + j) = b(i, j);
    at += b.cols();
  }
  return c;
}

/// Multi-head attention: concat(H_1..H_h), then ·W_O when given.
template <class T>
matrix<T> multi_head(const matrix<T>& X, const std::vector<head_weights<T>>& heads,
                     const std::optional<matrix<T>>& W_O = std::nullopt, const mask& M = mask::none()) {
  matrix<T> C = concat_columns(head_outputs(X, heads, M));
  return W_O ? multiply(C, *W_O) : C;
}

/// Residual path X + Y (Y typically A·V or a projected multi-head output).
/// Precondition: same shape (else input_error).  Tier: that of T.
template <class T>
matrix<T> residual(const matrix<T>& X, const matrix<T>& Y) {
  if (X.rows() != Y.rows() || X.cols() != Y.cols())
    throw input_error("residual: X is " + std::to_string(X.rows()) + "x" + std::to_string(X.cols()) +
                      " but the branch is " + std::to_string(Y.rows()) + "x" + std::to_string(Y.cols()));
  matrix<T> R(X.rows(), X.cols());
  for (Eigen::Index i = 0; i < X.rows(); ++i)
    for (Eigen::Index j = 0; j < X.cols(); ++j) R(i, j) = X(i, j) + Y(i, j);
  return R;
}

}  // namespace attncert
