// attncert/attention/mask.hpp — attention masks: none, causal, explicit boolean matrix.
#pragma once

#include <Eigen/Core>
#include <string>

#include "attncert/error.hpp"

namespace attncert {

/// Which query-key pairs may attend.  `allows(i, j)` is true when query i may see key j.
///  - none:     every pair.
///  - causal:   j <= i (top-left aligned, as PyTorch's is_causal=True / torch.tril).
///  - explicit: a boolean matrix of shape (n_q, n_k), true = allowed.
/// A mask is applied *before* normalization: masked scores are excluded from the row's
/// maximum and from its normalizer, and the masked probabilities are exact zeros.
class mask {
 public:
  enum class kind { none, causal, explicit_matrix };

  static mask none() { return mask(kind::none); }
  static mask causal() { return mask(kind::causal); }
  static mask from_matrix(Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic> allowed) {
    mask m(kind::explicit_matrix);
    m.allowed_ = std::move(allowed);
    return m;
  }

  kind type() const { return kind_; }
  std::string describe() const {
    switch (kind_) {
      case kind::none: return "none";
      case kind::causal: return "causal";
      default: return "explicit";
    }
  }

  /// Precondition: (i, j) inside the shape checked by `check_shape`.
  bool allows(Eigen::Index i, Eigen::Index j) const {
    switch (kind_) {
      case kind::none: return true;
      case kind::causal: return j <= i;
      default: return allowed_(i, j);
    }
  }

  /// Throws input_error if an explicit mask does not have shape (rows, cols).
  void check_shape(Eigen::Index rows, Eigen::Index cols) const {
    if (kind_ == kind::explicit_matrix && (allowed_.rows() != rows || allowed_.cols() != cols))
      throw input_error("mask shape (" + std::to_string(allowed_.rows()) + ", " + std::to_string(allowed_.cols()) +
                        ") does not match scores (" + std::to_string(rows) + ", " + std::to_string(cols) + ")");
  }

 private:
  explicit mask(kind k) : kind_(k) {}
  kind kind_;
  Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic> allowed_;
};

}  // namespace attncert
