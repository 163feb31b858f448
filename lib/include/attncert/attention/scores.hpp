// attncert/attention/scores.hpp — scores S = s·QKᵀ with an explicit scale.
#pragma once

#include "attncert/linalg/matrix.hpp"

namespace attncert {

/// The conventional scale 1/√d, evaluated in T (approx: rounded; enclosure: encloses 1/√d).
/// Not available for exact rationals (1/√d is irrational unless d is a square): pass an
/// explicit rational scale there.  Precondition: d > 0.
template <class T>
T default_scale(Eigen::Index d) {
  if (d <= 0) throw input_error("head dimension must be positive");
  using std::sqrt;
  static_assert(!std::is_same_v<T, mpq_rational>, "1/sqrt(d) is not rational in general: pass a scale");
  return T(1) / sqrt(T(static_cast<int>(d)));
}

/// S = scale · Q Kᵀ.  Q is (n_q, d), K is (n_k, d); returns (n_q, n_k).
/// Tier: that of T (exact for rationals; an enclosure entry by entry for intervals).
/// Precondition: Q.cols() == K.cols() (else input_error).
template <class T>
matrix<T> scores(const matrix<T>& Q, const matrix<T>& K, const T& scale) {
  if (Q.cols() != K.cols())
    throw input_error("Q has " + std::to_string(Q.cols()) + " features but K has " + std::to_string(K.cols()));
  matrix<T> S = multiply(Q, transpose(K));
  for (Eigen::Index i = 0; i < S.rows(); ++i)
    for (Eigen::Index j = 0; j < S.cols(); ++j) S(i, j) = scale * S(i, j);
  return S;
}

/// S = (1/√d) · Q Kᵀ (default scale).
template <class T>
matrix<T> scores(const matrix<T>& Q, const matrix<T>& K) {
  return scores(Q, K, default_scale<T>(Q.cols()));
}

}  // namespace attncert
