// The approximate attention kernels block-bound measures (approx_: they are the approximations, no claim).
// Causal throughout (query i sees keys j ≤ i).  Each returns its output Ô and the probabilities Â it
// applies (Ô ≈ Â·v; for the low-precision kernels Â_ij = p̂_ij / ℓ̂_i with the kernel's own p̂ and ℓ̂).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "attncert/error.hpp"
#include "attncert/number/emulated.hpp"
#include "ops.hpp"

namespace attncert::block::detail {

namespace {

float to_bf16(float x) { return static_cast<float>(round_to_format<8, -126, 127>(static_cast<double>(x))); }

// float32 or bfloat16 inputs, float32 scores, max, exponentials and sums (sequential, in key order),
// as a straightforward kernel computes them.  bfloat16: inputs rounded to bfloat16, the probabilities
// rounded to bfloat16 before P·V (as FlashAttention does), the output rounded to bfloat16.
kernel_output low_precision(const matrix<double>& q, const matrix<double>& k, const matrix<double>& v, bool bf16) {
  const Eigen::Index n = q.rows(), nk = k.rows(), d = q.cols(), dv = v.cols();
  auto in = [bf16](double x) { return bf16 ? to_bf16(static_cast<float>(x)) : static_cast<float>(x); };
  Eigen::MatrixXf qf = q.unaryExpr(in), kf = k.unaryExpr(in), vf = v.unaryExpr(in);
  const float c = 1.0f / std::sqrt(static_cast<float>(d));
  kernel_output out{matrix<double>::Zero(n, dv), matrix<double>::Zero(n, nk)};
  std::vector<float> s(static_cast<std::size_t>(nk)), p(static_cast<std::size_t>(nk)), o(static_cast<std::size_t>(dv));
  for (Eigen::Index i = 0; i < n; ++i) {
    const Eigen::Index last = std::min(i, nk - 1);
    float m = -INFINITY;
    for (Eigen::Index j = 0; j <= last; ++j) {
      float acc = 0;
      for (Eigen::Index l = 0; l < d; ++l) acc += qf(i, l) * kf(j, l);
      s[static_cast<std::size_t>(j)] = acc * c;
      m = std::max(m, s[static_cast<std::size_t>(j)]);
    }
    float ell = 0;
    std::fill(o.begin(), o.end(), 0.0f);
    for (Eigen::Index j = 0; j <= last; ++j) {
      float e = std::exp(s[static_cast<std::size_t>(j)] - m);
      ell += e;
      if (bf16) e = to_bf16(e);
      p[static_cast<std::size_t>(j)] = e;
      for (Eigen::Index l = 0; l < dv; ++l) o[static_cast<std::size_t>(l)] += e * vf(j, l);
    }
    for (Eigen::Index l = 0; l < dv; ++l) {
      float r = o[static_cast<std::size_t>(l)] / ell;
      if (bf16) r = to_bf16(r);
      out.O(i, l) = r;
    }
    for (Eigen::Index j = 0; j <= last; ++j) out.A(i, j) = static_cast<double>(p[static_cast<std::size_t>(j)]) / ell;
  }
  return out;
}

// Binary64 softmax over the K largest scores of each row (ties: the lower key index first).
kernel_output top_k(const matrix<double>& q, const matrix<double>& k, const matrix<double>& v, std::size_t K) {
  const Eigen::Index n = q.rows(), nk = k.rows();
  const double c = 1.0 / std::sqrt(static_cast<double>(q.cols()));
  const matrix<double> S = c * (q * k.transpose());
  kernel_output out{matrix<double>(), matrix<double>::Zero(n, nk)};
  std::vector<Eigen::Index> idx;
  for (Eigen::Index i = 0; i < n; ++i) {
    const Eigen::Index last = std::min(i, nk - 1);
    idx.resize(static_cast<std::size_t>(last + 1));
    std::iota(idx.begin(), idx.end(), Eigen::Index{0});
    const std::size_t keep = std::min(K, idx.size());
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(keep), idx.end(),
                      [&](Eigen::Index a, Eigen::Index b) { return S(i, a) > S(i, b) || (S(i, a) == S(i, b) && a < b); });
    const double m = S(i, idx[0]);
    double sum = 0;
    for (std::size_t t = 0; t < keep; ++t) sum += (out.A(i, idx[t]) = std::exp(S(i, idx[t]) - m));
    for (std::size_t t = 0; t < keep; ++t) out.A(i, idx[t]) /= sum;
  }
  out.O = out.A * v;
  return out;
}

// FAVOR+ positive random features (Choromanski et al.): exp(c q·k) ≈ φ(q')·φ(k'), q' = √c q, k' = √c k,
// φ(x)_r = exp(ω_r·x − ‖x‖²/2 − h) with ω_r ~ N(0, I) (M of them); the stabilizers h (per query row, and
// one for all keys) cancel in the normalization.
kernel_output random_features(const matrix<double>& q, const matrix<double>& k, const matrix<double>& v, std::size_t M,
                              std::uint64_t seed) {
  const Eigen::Index n = q.rows(), nk = k.rows(), d = q.cols();
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  matrix<double> W(d, static_cast<Eigen::Index>(M));
  for (Eigen::Index i = 0; i < W.size(); ++i) W.data()[i] = normal(gen);
  const double rc = std::pow(static_cast<double>(d), -0.25);
  auto features = [&](const matrix<double>& x, bool per_row) {
    const matrix<double> xs = rc * x;
    matrix<double> F = xs * W;
    for (Eigen::Index i = 0; i < F.rows(); ++i) F.row(i).array() -= 0.5 * xs.row(i).squaredNorm();
    if (per_row) {
      for (Eigen::Index i = 0; i < F.rows(); ++i) F.row(i).array() -= F.row(i).maxCoeff();
    } else {
      F.array() -= F.maxCoeff();
    }
    return matrix<double>(F.array().exp());
  };
  const matrix<double> Fq = features(q, true), Fk = features(k, false);
  kernel_output out{matrix<double>(), matrix<double>::Zero(n, nk)};
  const matrix<double> K = Fq * Fk.transpose();
  for (Eigen::Index i = 0; i < n; ++i) {
    const Eigen::Index last = std::min(i, nk - 1);
    const double sum = K.row(i).head(last + 1).sum();
    if (!(sum > 0)) throw input_error("random-features: a row's feature sum underflows (use more features)");
    out.A.row(i).head(last + 1) = K.row(i).head(last + 1) / sum;
  }
  out.O = out.A * v;
  return out;
}

// Linear attention (Katharopoulos et al.): φ(x) = elu(x) + 1 on q and k (no scale: the feature map replaces the
// exponential), A_ij = φ(q_i)·φ(k_j) / Σ_{j' ≤ i} φ(q_i)·φ(k_j').  Binary64.
kernel_output linear(const matrix<double>& q, const matrix<double>& k, const matrix<double>& v) {
  auto phi = [](const matrix<double>& x) {
    return matrix<double>(x.unaryExpr([](double t) { return t > 0 ? t + 1 : std::exp(t); }));
  };
  const Eigen::Index n = q.rows(), nk = k.rows();
  const matrix<double> K = phi(q) * phi(k).transpose();
  kernel_output out{matrix<double>(), matrix<double>::Zero(n, nk)};
  for (Eigen::Index i = 0; i < n; ++i) {
    const Eigen::Index last = std::min(i, nk - 1);
    const double sum = K.row(i).head(last + 1).sum();  // > 0: every feature is > 0
    out.A.row(i).head(last + 1) = K.row(i).head(last + 1) / sum;
  }
  out.O = out.A * v;
  return out;
}

}  // namespace

kernel_output approx_attention(const approximation& ap, const matrix<double>& q, const matrix<double>& k,
                               const matrix<double>& v, std::uint64_t seed) {
  if (ap.kind == "float32") return low_precision(q, k, v, false);
  if (ap.kind == "bfloat16") return low_precision(q, k, v, true);
  if (ap.kind == "top-k") return top_k(q, k, v, ap.param);
  if (ap.kind == "random-features") return random_features(q, k, v, ap.param, seed);
  if (ap.kind == "linear") return linear(q, k, v);
  throw input_error("unknown approximation '" + ap.name + "'");
}

}  // namespace attncert::block::detail
