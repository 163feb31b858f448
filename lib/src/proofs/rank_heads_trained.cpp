// Attention-only nearest-neighbour models on the fixed test set of proofs/L4-rank-heads-tradeoff.md parts H and I:
// see attncert/proofs/rank_heads.hpp.  The prediction is enclosed in binary64 intervals rounded outward (filter) or
// in MPFI (escalation); the test set and its targets are exact.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attncert/attention/softmax.hpp"
#include "attncert/deadline.hpp"
#include "attncert/error.hpp"
#include "attncert/number/double_double.hpp"
#include "attncert/number/interval.hpp"
#include "attncert/number/outward.hpp"
#include "attncert/proofs/rank_heads.hpp"

namespace attncert::rank_heads {

namespace {

constexpr int content_dim = 8;

// The weights of the first layer's first head (after the positions, if any).
const double* layer_weights(const trained_model_info& m) {
  return m.encoding == trained_encoding::none ? m.weights : m.weights + static_cast<long>(m.N + 1) * m.width;
}
// The first token rows: [x_i, 0…] for the keys and [y, 1, 0…] for the query, plus the positions (if any).
double token_entry(const trained_model_info& m, const std::vector<double>& y, const std::vector<std::vector<double>>& keys, int row, int col) {
  return row < m.N ? (col < content_dim ? keys[static_cast<std::size_t>(row)][static_cast<std::size_t>(col)] : 0.0)
                   : (col < content_dim ? y[static_cast<std::size_t>(col)] : col == content_dim ? 1.0 : 0.0);
}
double position_entry(const trained_model_info& m, int row, int col) {
  return m.encoding == trained_encoding::none ? 0.0 : (m.weights[static_cast<long>(row) * m.width + col]);
}

// ⟨a, b⟩ of two binary64 vectors, exactly.
mpq_rational exact_dot(const std::vector<double>& a, const std::vector<double>& b) {
  mpq_rational s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += mpq_rational(a[i]) * mpq_rational(b[i]);
  return s;
}

template <class T>
matrix<T> block(const double* w, Eigen::Index rows, Eigen::Index cols) {
  matrix<T> m(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j) m(i, j) = T(w[i * cols + j]);
  return m;
}

// ---- the filter: binary64 intervals rounded outward (number/outward.hpp: after each round-to-nearest operation the
// exact result lies in [next_down(r), next_up(r)]); the exponential from exp_with_bound (number/double_double.hpp) and
// its relative error bound.  A result that is not finite, an exponent outside the domain, or an enclosure wider than
// wanted escalates to MPFI.
struct b64i {
  double lo = 0, hi = 0;
};
struct escalate {};

inline b64i point(double x) { return {x, x}; }
inline b64i operator+(b64i a, b64i b) { return {next_down(a.lo + b.lo), next_up(a.hi + b.hi)}; }
inline b64i operator-(b64i a, b64i b) { return {next_down(a.lo - b.hi), next_up(a.hi - b.lo)}; }
inline b64i operator*(b64i a, b64i b) {
  const double p1 = a.lo * b.lo, p2 = a.lo * b.hi, p3 = a.hi * b.lo, p4 = a.hi * b.hi;
  const b64i r{next_down(std::min(std::min(p1, p2), std::min(p3, p4))), next_up(std::max(std::max(p1, p2), std::max(p3, p4)))};
  if (!std::isfinite(r.lo) || !std::isfinite(r.hi)) throw escalate{};
  return r;
}
inline b64i divide_positive(b64i a, b64i b) {  // b > 0
  if (!(b.lo > 0)) throw escalate{};
  const double q1 = a.lo / b.lo, q2 = a.lo / b.hi, q3 = a.hi / b.lo, q4 = a.hi / b.hi;
  return {next_down(std::min(std::min(q1, q2), std::min(q3, q4))), next_up(std::max(std::max(q1, q2), std::max(q3, q4)))};
}
// exp(x) >= value·(1 − B) and <= value·(1 + B) with B the relative bound of exp_with_bound.
inline double exp_down(double x) {
  if (x < -708) return 0;
  const dd_with_error e = exp_with_bound(dd{x, 0.0});
  if (!std::isfinite(e.rel_error_bound) || e.rel_error_bound >= 0.5) throw escalate{};
  return std::max(0.0, next_down(next_down(e.value.hi + e.value.lo) * next_down(1 - e.rel_error_bound)));
}
inline double exp_up(double x) {
  if (x < -708) return 0x1p-1020;  // e^-708 < 2^-1021
  const dd_with_error e = exp_with_bound(dd{x, 0.0});
  if (!std::isfinite(e.rel_error_bound) || e.rel_error_bound >= 0.5) throw escalate{};
  const double r = next_up(next_up(e.value.hi + e.value.lo) * next_up(1 + e.rel_error_bound));
  if (!std::isfinite(r)) throw escalate{};
  return r;
}

// The model's prediction in binary64 intervals (the same computation as trained_forward).
std::vector<b64i> forward_b64i(const trained_model_info& m, const std::vector<double>& y, const std::vector<std::vector<double>>& keys) {
  const int N = m.N, D = m.width;
  std::vector<std::vector<b64i>> X(static_cast<std::size_t>(N + 1), std::vector<b64i>(static_cast<std::size_t>(D), point(0)));
  for (int i = 0; i <= N; ++i)
    for (int j = 0; j < D; ++j)
      X[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = point(token_entry(m, y, keys, i, j)) + point(position_entry(m, i, j));
  auto project = [&](const std::vector<b64i>& x, const double* W, int cols, int c) {
    b64i s = point(0);
    for (int k = 0; k < D; ++k) s = s + x[static_cast<std::size_t>(k)] * point(W[k * cols + c]);
    return s;
  };
  const double* w = layer_weights(m);
  for (int layer = 0; layer < m.layers; ++layer) {
    const int from = layer + 1 == m.layers ? N : 0;
    std::vector<std::vector<b64i>> update(static_cast<std::size_t>(N + 1 - from), std::vector<b64i>(D, point(0)));
    for (int h = 0; h < m.H; ++h) {
      const double *Wq = w, *Wk = w + D * m.r, *Wv = w + 2 * D * m.r;
      w += 2 * D * m.r + D * D;
      std::vector<std::vector<b64i>> K(static_cast<std::size_t>(N), std::vector<b64i>(static_cast<std::size_t>(m.r))),
          V(static_cast<std::size_t>(N), std::vector<b64i>(D));
      for (int i = 0; i < N; ++i) {
        for (int c = 0; c < m.r; ++c) K[static_cast<std::size_t>(i)][static_cast<std::size_t>(c)] = project(X[static_cast<std::size_t>(i)], Wk, m.r, c);
        for (int c = 0; c < D; ++c) V[static_cast<std::size_t>(i)][static_cast<std::size_t>(c)] = project(X[static_cast<std::size_t>(i)], Wv, D, c);
      }
      for (int row = from; row <= N; ++row) {
        std::vector<b64i> q(static_cast<std::size_t>(m.r));
        for (int c = 0; c < m.r; ++c) q[static_cast<std::size_t>(c)] = project(X[static_cast<std::size_t>(row)], Wq, m.r, c);
        std::vector<b64i> S(static_cast<std::size_t>(N));
        double shift = -std::numeric_limits<double>::infinity();
        for (int i = 0; i < N; ++i) {
          b64i s = point(0);
          for (int c = 0; c < m.r; ++c) s = s + q[static_cast<std::size_t>(c)] * K[static_cast<std::size_t>(i)][static_cast<std::size_t>(c)];
          S[static_cast<std::size_t>(i)] = s;
          shift = std::max(shift, s.hi);
        }
        // softmax(S) = exp(S − shift)/Σ exp(S − shift) for any real shift; each term enclosed, then the quotient.
        std::vector<b64i> E(static_cast<std::size_t>(N));
        b64i Z = point(0);
        for (int i = 0; i < N; ++i) {
          const b64i t = S[static_cast<std::size_t>(i)] - point(shift);
          E[static_cast<std::size_t>(i)] = {exp_down(t.lo), exp_up(t.hi)};
          Z = Z + E[static_cast<std::size_t>(i)];
        }
        for (int i = 0; i < N; ++i) {
          const b64i a = divide_positive(E[static_cast<std::size_t>(i)], Z);
          for (int c = 0; c < D; ++c) {
            b64i& u = update[static_cast<std::size_t>(row - from)][static_cast<std::size_t>(c)];
            u = u + a * V[static_cast<std::size_t>(i)][static_cast<std::size_t>(c)];
          }
        }
      }
    }
    for (int row = from; row <= N; ++row)
      for (int c = 0; c < D; ++c) X[static_cast<std::size_t>(row)][static_cast<std::size_t>(c)] = X[static_cast<std::size_t>(row)][static_cast<std::size_t>(c)] + update[static_cast<std::size_t>(row - from)][static_cast<std::size_t>(c)];
  }
  std::vector<b64i> pred(content_dim);
  for (int c = 0; c < content_dim; ++c) pred[static_cast<std::size_t>(c)] = project(X[static_cast<std::size_t>(N)], w, content_dim, c);
  return pred;
}

}  // namespace

bool trained_forward_binary64_intervals(const trained_model_info& m, const std::vector<double>& y, const std::vector<std::vector<double>>& keys,
                                        std::vector<mpfi_float>& out) {
  if (static_cast<int>(keys.size()) != m.N || static_cast<int>(y.size()) != content_dim)
    throw input_error("trained_forward_binary64_intervals: the input does not match the model");
  out.clear();
  try {
    for (const b64i& c : forward_b64i(m, y, keys)) out.push_back(hull_of(mpfi_float(c.lo), mpfi_float(c.hi)));
  } catch (const escalate&) {
    out.clear();
    return false;
  }
  return true;
}

trained_test_set trained_test_set_of(int N, int inputs) {
  if (N < 2 || N > 64 || inputs < 1) throw input_error("trained_test_set_of: need 2 <= N <= 64 and inputs >= 1");
  trained_test_set t;
  splitmix64 g{20261205ULL + static_cast<std::uint64_t>(N)};
  auto point = [&] {
    const lattice_point p = lattice_ball_point(g, content_dim, lattice_radius_max);
    const double r = std::sqrt(static_cast<double>(p.norm2));  // correctly rounded, as every operation below
    std::vector<double> x;
    for (std::int64_t c : p.z) x.push_back(static_cast<double>(c) / r);
    return x;
  };
  while (static_cast<int>(t.y.size()) < inputs) {
    std::vector<double> y = point();
    std::vector<std::vector<double>> keys;
    for (int i = 0; i < N; ++i) keys.push_back(point());
    std::vector<int> best{0};
    mpq_rational top = exact_dot(keys[0], y);
    for (int i = 1; i < N; ++i) {
      const mpq_rational s = exact_dot(keys[static_cast<std::size_t>(i)], y);
      if (s > top) { best.assign(1, i); top = s; }
      else if (s == top) best.push_back(i);
    }
    if (best.size() != 1) { ++t.redrawn; continue; }
    t.y.push_back(std::move(y));
    t.x.push_back(std::move(keys));
    t.target.push_back(best[0]);
  }
  return t;
}

template <class T>
std::vector<T> trained_forward(const trained_model_info& m, const std::vector<double>& y, const std::vector<std::vector<double>>& keys) {
  const Eigen::Index N = static_cast<Eigen::Index>(keys.size());
  if (N != m.N || static_cast<int>(y.size()) != content_dim) throw input_error("trained_forward: the input does not match the model");
  const int width = m.width;
  matrix<T> X(N + 1, width);
  for (int i = 0; i <= static_cast<int>(N); ++i)
    for (int j = 0; j < width; ++j) X(i, j) = T(token_entry(m, y, keys, i, j)) + T(position_entry(m, i, j));
  const double* w = layer_weights(m);
  for (int layer = 0; layer < m.layers; ++layer) {
    // Every token attends to the N keys only; after the last layer only the query's row is read, so the last
    // layer updates that row alone.
    const bool last = layer + 1 == m.layers;
    const Eigen::Index from = last ? N : 0;
    const matrix<T> Xrows = X.middleRows(from, N + 1 - from), Xkeys = X.topRows(N);
    matrix<T> update = matrix<T>::Zero(Xrows.rows(), width);
    for (int h = 0; h < m.H; ++h) {
      const matrix<T> Wq = block<T>(w, width, m.r), Wk = block<T>(w + width * m.r, width, m.r),
                      Wv = block<T>(w + 2 * width * m.r, width, width);
      w += 2 * width * m.r + width * width;
      const matrix<T> S = multiply(multiply(Xrows, Wq), transpose(multiply(Xkeys, Wk)));
      update += multiply(masked_softmax(S), multiply(Xkeys, Wv));
    }
    for (Eigen::Index i = 0; i < Xrows.rows(); ++i)
      for (Eigen::Index j = 0; j < width; ++j) X(from + i, j) += update(i, j);
  }
  const matrix<T> pred = multiply(matrix<T>(X.row(N)), block<T>(w, width, content_dim));
  std::vector<T> out;
  for (int j = 0; j < content_dim; ++j) out.push_back(pred(0, j));
  return out;
}
template std::vector<mpfi_float> trained_forward<mpfi_float>(const trained_model_info&, const std::vector<double>&,
                                                             const std::vector<std::vector<double>>&);
template std::vector<double> trained_forward<double>(const trained_model_info&, const std::vector<double>&,
                                                     const std::vector<std::vector<double>>&);

trained_error trained_error_of(const trained_model_info& m, const trained_test_set& t) {
  if (t.y.empty() || static_cast<int>(t.x[0].size()) != m.N) throw input_error("trained_error_of: the test set does not match the model");
  trained_error e;
  mpfi_float sum(0);
  double approx = 0;
  for (std::size_t s = 0; s < t.y.size(); ++s) {
    check_deadline();
    // Filter: binary64 intervals; escalate to MPFI when they fail or are wider than 2^-30 in some coordinate.
    std::vector<mpfi_float> p;
    bool narrow = trained_forward_binary64_intervals(m, t.y[s], t.x[s], p);
    for (const mpfi_float& c : p)
      if (!(upper_of(c) - lower_of(c) <= mpfr_float(0x1p-30))) narrow = false;
    if (!narrow) {
      p = trained_forward<mpfi_float>(m, t.y[s], t.x[s]);
      ++e.escalated;
    }
    const std::vector<double> pd = trained_forward<double>(m, t.y[s], t.x[s]);
    const std::vector<double>& target = t.x[s][static_cast<std::size_t>(t.target[s])];
    for (int j = 0; j < content_dim; ++j) {
      const mpfi_float diff = p[static_cast<std::size_t>(j)] - mpfi_float(target[static_cast<std::size_t>(j)]);
      sum += diff * diff;
      approx += (pd[static_cast<std::size_t>(j)] - target[static_cast<std::size_t>(j)]) * (pd[static_cast<std::size_t>(j)] - target[static_cast<std::size_t>(j)]);
    }
    // The prediction's nearest key (largest ⟨p, x_i⟩): the target, another key, or not decided by the enclosures.
    auto inner = [&](int i) {
      mpfi_float a(0);
      for (int j = 0; j < content_dim; ++j) a += p[static_cast<std::size_t>(j)] * mpfi_float(t.x[s][static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]);
      return a;
    };
    const mpfi_float at = inner(t.target[s]);
    bool right = true, wrong = false;
    for (int i = 0; i < m.N; ++i) {
      if (i == t.target[s]) continue;
      const mpfi_float gap = at - inner(i);
      if (!(lower_of(gap) > 0)) right = false;
      if (upper_of(gap) < 0) wrong = true;
    }
    (right ? e.nearest_right : wrong ? e.nearest_wrong : e.nearest_undecided) += 1;
  }
  e.mse = mpfi_float(sum / mpfi_float(static_cast<long>(t.y.size())));
  e.approx_binary64_mse = approx / static_cast<double>(t.y.size());
  return e;
}


}  // namespace attncert::rank_heads
