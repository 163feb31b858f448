// block-bound: both trajectories enclosed, the certified bound propagated from the approximate one,
// per stage.  Every step's bound is derived in proofs/L7-block-bound.md (part B: the norms, part C: the
// attention's propagation, part D: the MLP), and stated where it is computed.
#include "attncert/block/block_bound.hpp"

#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "attncert/attention/binary64_enclosure.hpp"
#include "attncert/deadline.hpp"
#include "attncert/error.hpp"
#include "attncert/number/outward.hpp"
#include "ops.hpp"

namespace attncert::block {

namespace {

using namespace detail;
constexpr auto up = next_up;
constexpr auto down = next_down;
constexpr double inf = std::numeric_limits<double>::infinity();
using vec = std::vector<double>;

enum stage_index : std::size_t { s_norm1, s_heads, s_attn_out, s_res1, s_norm2, s_mlp, s_out, n_stages };
constexpr std::array<const char*, n_stages> stage_names{"norm-1", "heads", "attention-out", "residual-1",
                                                         "norm-2", "mlp",   "block-out"};

// What the approximate model computed in one block: every stage's binary64 midpoint, the certified ℓ2
// rounding bound ε_i of the step that produced it (‖f(mid_in)_i − mid_out_i‖₂ ≤ ε_i, f exact), and what the
// Lipschitz-type steps need.  The midpoints of the approximate model ARE the approximate model: binary64
// everywhere, the kernel in attention (it receives the midpoints q, k, v).
struct head_record {
  matrix<double> q, k, v;  // the head's inputs (midpoints)
  mr A, O;                 // the exact attention and output at them, enclosed
  kernel_output kernel;    // the approximation's output and probabilities
};

struct block_record {
  std::array<matrix<double>, n_stages> mid;
  std::array<vec, n_stages> eps;
  vec eps_q, eps_k, eps_v, eps_z, eps_act;
  vec norm1_lo, norm2_lo;  // lower bounds of ‖c_i‖ (centred midpoint row; RMSNorm the row) entering each norm
  matrix<double> z;        // the MLP's pre-activation (midpoint)
  std::vector<head_record> heads;
};

// Certified upper bounds of the spectral norms a block's steps use.
struct block_norms {
  vec wq, wk, wv;  // per head: the column groups of W_Q, W_K, W_V
  double wo = 0, w1 = 0, w2 = 0, gamma1 = 0, gamma2 = 0;
};

double max_abs(const vec& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

block_norms norms_of(const block_weights& w, std::size_t heads) {
  block_norms n;
  const Eigen::Index dh = w.w_q.cols() / static_cast<Eigen::Index>(heads);
  for (std::size_t h = 0; h < heads; ++h) {
    const Eigen::Index c = static_cast<Eigen::Index>(h) * dh;
    n.wq.push_back(spectral_norm_up(w.w_q.middleCols(c, dh)));
    n.wk.push_back(spectral_norm_up(w.w_k.middleCols(c, dh)));
    n.wv.push_back(spectral_norm_up(w.w_v.middleCols(c, dh)));
  }
  n.wo = spectral_norm_up(w.w_o);
  n.w1 = spectral_norm_up(w.w1);
  n.w2 = spectral_norm_up(w.w2);
  n.gamma1 = max_abs(w.norm1.gamma);
  n.gamma2 = max_abs(w.norm2.gamma);
  return n;
}

// An enclosure's midpoint and its ℓ2 row radii.
void take(const mr& e, matrix<double>& mid, vec& eps) {
  mid = e.mid;
  eps = row_radius(e);
}

// a + b in binary64, with the rounding per row: |fl(a + b) − (a + b)| ≤ u|fl|(1 + 2u) per entry.
void residual_sum(const matrix<double>& a, const matrix<double>& b, matrix<double>& mid, vec& eps) {
  mr e{a + b, matrix<double>(a.rows(), a.cols())};
  for (Eigen::Index i = 0; i < e.mid.size(); ++i) {
    if (!std::isfinite(e.mid.data()[i])) throw input_error("the residual stream overflows binary64");
    e.rad.data()[i] = up(std::fabs(e.mid.data()[i]) * (0x1p-53 * (1.0 + 0x1p-51)));
  }
  take(e, mid, eps);
}

// The heads of one block: the kernel's outputs, concatenated, and per head the exact attention at its inputs.
void attention_heads(const model& m, const block_weights& w, const approximation& ap, std::uint64_t seed, std::size_t block,
                     block_record& rec) {
  matrix<double> q, k, v;
  take(affine(rec.mid[s_norm1], w.w_q, w.b_q), q, rec.eps_q);
  take(affine(rec.mid[s_norm1], w.w_k, w.b_k), k, rec.eps_k);
  take(affine(rec.mid[s_norm1], w.w_v, w.b_v), v, rec.eps_v);
  const Eigen::Index n = q.rows(), E = q.cols(), dh = E / static_cast<Eigen::Index>(m.heads);
  rec.mid[s_heads].resize(n, E);
  rec.eps[s_heads].assign(static_cast<std::size_t>(n), 0.0);  // per-head terms are in head_local
  score_scale c;
  c.inv_sqrt_d = true;
  for (std::size_t hd = 0; hd < m.heads; ++hd) {
    const Eigen::Index first = static_cast<Eigen::Index>(hd) * dh;
    head_record r{q.middleCols(first, dh), k.middleCols(first, dh), v.middleCols(first, dh), {}, {}, {}};
    r.A = enclose_attention_binary64(enclose_scores_binary64(r.q, r.k, c), mask::causal());
    r.O = enclose_product_binary64(r.A, r.v);
    r.kernel = approx_attention(ap, r.q, r.k, r.v, seed + 7919 * block + 104729 * hd);
    rec.mid[s_heads].middleCols(first, dh) = r.kernel.O;
    rec.heads.push_back(std::move(r));
  }
}

// One block of the approximate model (the exact one is enclosed by exact_forward.cpp).
block_record forward_block(const model& m, const block_weights& w, const matrix<double>& x, const approximation& ap,
                           std::uint64_t seed, std::size_t block) {
  const bool rms = m.norm == "rmsnorm";
  block_record rec;
  norm_enclosure n1 = enclose_norm(x, w.norm1, rms, m.eps);
  rec.norm1_lo = std::move(n1.centred_lo);
  take(n1.y, rec.mid[s_norm1], rec.eps[s_norm1]);
  attention_heads(m, w, ap, seed, block, rec);
  take(affine(rec.mid[s_heads], w.w_o, w.b_o), rec.mid[s_attn_out], rec.eps[s_attn_out]);
  residual_sum(x, rec.mid[s_attn_out], rec.mid[s_res1], rec.eps[s_res1]);
  norm_enclosure n2 = enclose_norm(rec.mid[s_res1], w.norm2, rms, m.eps);
  rec.norm2_lo = std::move(n2.centred_lo);
  take(n2.y, rec.mid[s_norm2], rec.eps[s_norm2]);
  take(affine(rec.mid[s_norm2], w.w1, w.b1), rec.z, rec.eps_z);
  mr act{matrix<double>(rec.z.rows(), rec.z.cols()), matrix<double>(rec.z.rows(), rec.z.cols())};
  for (Eigen::Index j = 0; j < act.mid.cols(); ++j)
    for (Eigen::Index i = 0; i < act.mid.rows(); ++i)
      set_entry(act, i, j, activation_of(m.activation, ival{rec.z(i, j), rec.z(i, j)}));
  matrix<double> a;
  take(act, a, rec.eps_act);
  take(affine(a, w.w2, w.b2), rec.mid[s_mlp], rec.eps[s_mlp]);
  residual_sum(rec.mid[s_res1], rec.mid[s_mlp], rec.mid[s_out], rec.eps[s_out]);
  return rec;
}

// ---- the steps: each maps per-token upper bounds of input errors to one of the output error ----------------

vec plus(const vec& a, const vec& b) {
  vec out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = up(a[i] + b[i]);
  return out;
}
// ε + s·e
vec affine_step(const vec& eps, double s, const vec& e) {
  vec out(e.size());
  for (std::size_t i = 0; i < e.size(); ++i) out[i] = up(eps[i] + up(s * e[i]));
  return out;
}

// A norm (part B): ‖N(x) − N(x̃)‖ ≤ max|γ|·√E / √(max(‖c̃‖ − e, 0)² + E·eps) · e, plus the rounding ε.
vec norm_step(const vec& eps, const vec& e, const vec& c_lo, double gmax, Eigen::Index E, double norm_eps) {
  vec out(e.size());
  const double num = up(gmax * up(std::sqrt(static_cast<double>(E)))), floor_term = down(static_cast<double>(E) * norm_eps);
  for (std::size_t i = 0; i < e.size(); ++i) {
    const double c = std::max(0.0, down(c_lo[i] - e[i]));
    const double den = down(std::sqrt(down(down(c * c) + floor_term)));
    out[i] = den > 0 ? up(eps[i] + up(up(num / den) * e[i])) : inf;
  }
  return out;
}

// ‖ṽ_j − w_i‖₂ upper bound.
double distance_hi(const matrix<double>& v, Eigen::Index j, const matrix<double>& w, Eigen::Index i) {
  double s = 0;
  for (Eigen::Index l = 0; l < v.cols(); ++l) {
    const double t = up(std::fabs(v(j, l) - w(i, l)));
    s = up(s + up(t * t));
  }
  return up(std::sqrt(s));
}

// The attention's propagation (part C), per query i, for inputs within dq_i, dk_j, dv_j of the midpoints q̃, k̃, ṽ.
// Two certified bounds, the smaller kept.  The first:
//   ‖A(q,k)v − A(q̃,k̃)ṽ‖_i ≤ P_i = e^{2D_i} Σ_j Ã_ij Δv_j + 2D_i e^{2D_i} Σ_j Ã_ij (‖ṽ_j − w_i‖ + Δv_j),
//   D_i = max_j c(Δq_i‖k̃_j‖ + ‖q̃_i‖Δk_j + Δq_iΔk_j),  Ã = A(q̃, k̃) (upper ends), w_i any fixed point (the midpoint).
// The second (part C.2) keeps the direction of the query's perturbation: the score change c δq·k_j moves the output
// by c M δq with M = Σ_j A_j (v_j − o) k_jᵀ, a covariance of values and keys under A, whose norm is usually far
// below the product max‖k‖ Σ A‖v − o‖ the first bound pays:
//   ≤ e^{2D} Σ_j Ã_j Δv_j + c Δq_i sup_t‖M(t)‖ + c(‖q̃_i‖ + Δq_i) e^{2D} Σ_j Ã_j Δk_j (‖ã_j‖ + E_j),
// with ã_j = ṽ_j − w_i, E_j = Δv_j + P_i + ‖õ_i − w_i‖ ≥ ‖(v_j(t) − o(t)) − ã_j‖, and sup_t‖M(t)‖ bounded by the
// Frobenius norm of M̃ = Σ_j Ã_j ã_j (k̃_j − κ)ᵀ (κ = Σ_j Ã_j k̃_j) plus its perturbation along the path.
vec attention_propagation(const vec& dq, const vec& dk, const vec& dv, const head_record& r, double c_hi) {
  const auto n = static_cast<Eigen::Index>(dq.size());
  const Eigen::Index d = r.k.cols(), dv_cols = r.v.cols();
  vec qn(dq.size()), kn(dq.size()), out(dq.size());
  const vec orad = row_radius(r.O);
  for (Eigen::Index i = 0; i < n; ++i) {
    qn[static_cast<std::size_t>(i)] = row_norm_hi(r.q, i);
    kn[static_cast<std::size_t>(i)] = row_norm_hi(r.k, i);
  }
  std::vector<double> an(static_cast<std::size_t>(n)), bn(static_cast<std::size_t>(n));
  Eigen::VectorXd kappa(d);
  matrix<double> F(dv_cols, d);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto ii = static_cast<std::size_t>(i);
    double D = 0, vsum = 0, sum = 0;
    for (Eigen::Index j = 0; j <= i; ++j) {
      const auto jj = static_cast<std::size_t>(j);
      D = std::max(D, up(c_hi * up(up(dq[ii] * kn[jj]) + up(up(qn[ii] * dk[jj]) + up(dq[ii] * dk[jj])))));
      const double a = up(r.A.mid(i, j) + r.A.rad(i, j));
      an[jj] = distance_hi(r.v, j, r.O.mid, i);
      vsum = up(vsum + up(a * dv[jj]));
      sum = up(sum + up(a * up(an[jj] + dv[jj])));
    }
    const double twoD = up(2 * D);
    if (twoD > 700) {
      out[ii] = inf;
      continue;
    }
    const double g = exp_of(ival{twoD, twoD}).hi;  // ≥ e^{2D}: A_ij(t) ≤ Ã_ij e^{2D} on the whole path
    const double P = up(up(g * vsum) + up(up(twoD * g) * sum));
    // Part C.2.
    kappa.setZero();
    for (Eigen::Index j = 0; j <= i; ++j) kappa += r.A.mid(i, j) * r.k.row(j).transpose();
    F.setZero();
    double err = 0, pert = 0, ksum = 0;
    for (Eigen::Index j = 0; j <= i; ++j) {
      const auto jj = static_cast<std::size_t>(j);
      double b2 = 0;
      for (Eigen::Index l = 0; l < d; ++l) {
        const double t = up(std::fabs(r.k(j, l) - kappa(l)));
        b2 = up(b2 + up(t * t));
      }
      bn[jj] = up(std::sqrt(b2));
      const Eigen::VectorXd av = r.v.row(j).transpose() - r.O.mid.row(i).transpose();
      const Eigen::VectorXd bv = r.k.row(j).transpose() - kappa;
      F.noalias() += (r.A.mid(i, j) * av) * bv.transpose();
      const double ahi = up(r.A.mid(i, j) + r.A.rad(i, j));
      const double E = up(up(dv[jj] + P) + orad[ii]);
      const double dA = up(up(up(g - 1) * ahi) + r.A.rad(i, j));  // ≥ |A_j(t) − Ã_mid,j|
      err = up(err + up(ahi * up(an[jj] * bn[jj])));
      pert = up(pert + up(dA * up(up(an[jj] + E) * up(bn[jj] + dk[jj]))));
      pert = up(pert + up(ahi * up(up(E * up(bn[jj] + dk[jj])) + up(an[jj] * dk[jj]))));
      ksum = up(ksum + up(ahi * up(dk[jj] * up(an[jj] + E))));
    }
    // ‖M̃‖ ≤ ‖fl(M̃)‖_F + 2γ_{n+4} Σ_j Ã_j ‖ã_j‖‖b̃_j‖ (the differences, the products and the sums rounded).
    double f2 = 0;
    for (Eigen::Index l = 0; l < F.size(); ++l) f2 = up(f2 + up(F.data()[l] * F.data()[l]));
    const double m0 = up(up(std::sqrt(f2)) + up(2 * gamma_up(static_cast<std::size_t>(i + 5)) * err));
    const double M = up(m0 + pert);
    const double sharp = up(up(up(g * vsum) + up(c_hi * up(dq[ii] * M))) + up(c_hi * up(up(qn[ii] + dq[ii]) * up(g * ksum))));
    out[ii] = std::min(P, sharp);
  }
  return out;
}

enum class local_kind { article, direct };

// The head's own term at its input midpoints, per query: direct ‖Ô_i − (A ṽ)_i‖ or the article's ‖Â_i − A_i‖₁ max_j ‖ṽ_j‖ + ‖Ô_i − Â_i ṽ‖
// (Â the kernel's probabilities); certified upper bounds.
vec head_local(const head_record& r, local_kind kind) {
  const Eigen::Index n = r.O.mid.rows();
  vec out(static_cast<std::size_t>(n));
  const mr O{r.O.mid, r.O.rad};
  const mr Av = kind == local_kind::article ? enclose_product_binary64(mr{r.kernel.A, matrix<double>()}, r.v) : mr{};
  double vmax = 0;
  for (Eigen::Index i = 0; i < n; ++i) {
    const mr& ref = kind == local_kind::direct ? O : Av;
    double s = 0;  // ‖Ô_i − ref_i‖ over the enclosure ref
    for (Eigen::Index l = 0; l < O.mid.cols(); ++l) {
      const double t = up(up(std::fabs(r.kernel.O(i, l) - ref.mid(i, l))) + ref.rad(i, l));
      s = up(s + up(t * t));
    }
    s = up(std::sqrt(s));
    if (kind == local_kind::article) {
      vmax = std::max(vmax, row_norm_hi(r.v, i));  // keys j ≤ i
      double l1 = 0;
      for (Eigen::Index j = 0; j <= i; ++j)
        l1 = up(l1 + up(up(std::fabs(r.kernel.A(i, j) - r.A.mid(i, j))) + r.A.rad(i, j)));
      s = up(s + up(l1 * vmax));
    }
    out[static_cast<std::size_t>(i)] = s;
  }
  return out;
}

struct block_steps {
  const model& m;
  const block_record& rec;
  const block_norms& bn;
  double c_hi;
  bool drop;  // tests: no propagation through the attention
  Eigen::Index width() const { return rec.mid[s_norm1].cols(); }

  vec norm1(const vec& e) const { return norm_step(rec.eps[s_norm1], e, rec.norm1_lo, bn.gamma1, width(), m.eps); }
  vec norm2(const vec& e) const { return norm_step(rec.eps[s_norm2], e, rec.norm2_lo, bn.gamma2, width(), m.eps); }
  // The concatenated heads' error from the norm-1 output error e_h.
  vec heads(const vec& e_h, local_kind kind) const {
    vec sq(e_h.size(), 0.0);
    for (std::size_t hd = 0; hd < rec.heads.size(); ++hd) {
      const auto& r = rec.heads[hd];
      const vec prop = drop ? vec(e_h.size(), 0.0)
                            : attention_propagation(affine_step(rec.eps_q, bn.wq[hd], e_h), affine_step(rec.eps_k, bn.wk[hd], e_h),
                                                    affine_step(rec.eps_v, bn.wv[hd], e_h), r, c_hi);
      const vec loc = head_local(r, kind);
      for (std::size_t i = 0; i < sq.size(); ++i) {
        const double t = up(loc[i] + prop[i]);
        sq[i] = up(sq[i] + up(t * t));
      }
    }
    for (double& s : sq) s = up(std::sqrt(s));
    return sq;
  }
  // The MLP (part D) from the norm-2 output error: z within ε_z + ‖W₁‖e of its midpoint, so each z_ij within that;
  // φ(z) within ε_act + max_j sup|φ'| over [z̃_ij ± e_z] times e_z; then W₂.
  vec mlp(const vec& e_g) const {
    const vec e_z = affine_step(rec.eps_z, bn.w1, e_g);
    vec e_act(e_z.size());
    for (std::size_t i = 0; i < e_z.size(); ++i) {
      double dmax = 0;
      for (Eigen::Index j = 0; j < rec.z.cols() && std::isfinite(dmax); ++j) {
        const double z = rec.z(static_cast<Eigen::Index>(i), j);
        dmax = std::max(dmax, activation_derivative_sup(m.activation, ival{down(z - e_z[i]), up(z + e_z[i])}));
      }
      e_act[i] = up(rec.eps_act[i] + up(dmax * e_z[i]));
    }
    return affine_step(rec.eps[s_mlp], bn.w2, e_act);
  }
};

struct stage_vectors {
  std::array<vec, n_stages> v;
};

// Every stage's error bound from the error entering the block.
stage_vectors propagate(const vec& e_in, const block_steps& st, local_kind kind) {
  stage_vectors s;
  s.v[s_norm1] = st.norm1(e_in);
  s.v[s_heads] = st.heads(s.v[s_norm1], kind);
  s.v[s_attn_out] = affine_step(st.rec.eps[s_attn_out], st.bn.wo, s.v[s_heads]);
  s.v[s_res1] = plus(st.rec.eps[s_res1], plus(e_in, s.v[s_attn_out]));
  s.v[s_norm2] = st.norm2(s.v[s_res1]);
  s.v[s_mlp] = st.mlp(s.v[s_norm2]);
  s.v[s_out] = plus(st.rec.eps[s_out], plus(s.v[s_res1], s.v[s_mlp]));
  return s;
}

// Each stage restarted from the measured error (upper ends) of its own inputs, direct local terms.
stage_vectors stage_bounds(const vec& meas_in, const std::array<vec, n_stages>& meas, const block_steps& st) {
  stage_vectors s;
  s.v[s_norm1] = st.norm1(meas_in);
  s.v[s_heads] = st.heads(meas[s_norm1], local_kind::direct);
  s.v[s_attn_out] = affine_step(st.rec.eps[s_attn_out], st.bn.wo, meas[s_heads]);
  s.v[s_res1] = plus(st.rec.eps[s_res1], plus(meas_in, meas[s_attn_out]));
  s.v[s_norm2] = st.norm2(meas[s_res1]);
  s.v[s_mlp] = st.mlp(meas[s_norm2]);
  s.v[s_out] = plus(st.rec.eps[s_out], plus(meas[s_res1], meas[s_mlp]));
  return s;
}

double vmax(const vec& v) {
  double m = 0;
  for (double x : v) {
    if (!(x >= 0)) return inf;  // a NaN (0·∞) bounds nothing
    m = std::max(m, x);
  }
  return m;
}

std::string ratio_text(double num, double den) {
  if (!(den > 0)) return "unbounded (measured error not certified > 0)";
  if (!std::isfinite(num)) return "inf";
  std::ostringstream os;
  os.precision(3);
  os << up(num / den) << "x";
  return os.str();
}

void keep(result& res, const std::string& name, std::size_t b, const block_record& rec) {
  const std::string prefix = name + ".b" + std::to_string(b) + ".";
  for (std::size_t s = 0; s < n_stages; ++s) res.dumps.emplace_back(prefix + stage_names[s] + ".mid", rec.mid[s]);
  for (std::size_t h = 0; h < rec.heads.size(); ++h)
    res.dumps.emplace_back(prefix + "h" + std::to_string(h) + ".out", rec.heads[h].kernel.O);
}

// Bounds of ‖a_i − x_i‖₂ over every x_i inside the enclosure's row i: {lo, hi}.
ival distance_to_enclosure(const matrix<double>& a, const mr& e, Eigen::Index i) {
  double lo = 0, hi = 0;
  for (Eigen::Index k = 0; k < a.cols(); ++k) {
    const double d = std::fabs(a(i, k) - e.mid(i, k));  // within half an ulp of |a − mid|
    const double h = up(up(d) + e.rad(i, k)), l = std::max(0.0, down(down(d) - e.rad(i, k)));
    hi = up(hi + up(h * h));
    lo = std::max(0.0, down(lo + down(l * l)));
  }
  return {std::max(0.0, down(std::sqrt(lo))), up(std::sqrt(hi))};
}

// ‖x_i‖₂ upper bound over the enclosure's row.
double row_norm_hi(const mr& e, Eigen::Index i) {
  double s = 0;
  for (Eigen::Index k = 0; k < e.mid.cols(); ++k) {
    const double t = up(std::fabs(e.mid(i, k)) + e.rad(i, k));
    s = up(s + up(t * t));
  }
  return up(std::sqrt(s));
}

// The exact model's MPFI precision: its intervals widen by about 2^17 per block (overestimation), so 128 bits
// plus 24 per block keep the enclosure far below any error measured here.
unsigned exact_bits(std::size_t depth) { return static_cast<unsigned>(std::min<std::size_t>(4096, 128 + 24 * depth)); }

}  // namespace

model random_model(std::size_t blocks, std::size_t width, std::size_t heads, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  const auto E = static_cast<Eigen::Index>(width), F = 4 * E;
  auto f32 = [&](double mean, double sd) { return static_cast<double>(static_cast<float>(mean + sd * normal(gen))); };
  auto mat = [&](Eigen::Index r, Eigen::Index c, double sd) {
    matrix<double> M(r, c);
    for (Eigen::Index i = 0; i < M.size(); ++i) M.data()[i] = f32(0, sd);
    return M;
  };
  auto vecn = [&](Eigen::Index n, double mean, double sd) {
    vec v(static_cast<std::size_t>(n));
    for (double& x : v) x = f32(mean, sd);
    return v;
  };
  model m;
  m.heads = heads;
  const double s = 1 / std::sqrt(static_cast<double>(E)), s4 = 1 / std::sqrt(static_cast<double>(F));
  for (std::size_t b = 0; b < blocks; ++b) {
    block_weights w;
    w.norm1 = {vecn(E, 1, 0.1), vecn(E, 0, 0.1)};
    w.w_q = mat(E, E, s), w.w_k = mat(E, E, s), w.w_v = mat(E, E, s), w.w_o = mat(E, E, s);
    w.b_q = vecn(E, 0, 0.02), w.b_k = vecn(E, 0, 0.02), w.b_v = vecn(E, 0, 0.02), w.b_o = vecn(E, 0, 0.02);
    w.norm2 = {vecn(E, 1, 0.1), vecn(E, 0, 0.1)};
    w.w1 = mat(E, F, s), w.b1 = vecn(F, 0, 0.02), w.w2 = mat(F, E, s4), w.b2 = vecn(E, 0, 0.02);
    m.blocks.push_back(std::move(w));
  }
  return m;
}

matrix<double> random_input(std::size_t tokens, std::size_t width, std::uint64_t seed) {
  std::mt19937_64 gen(seed ^ 0x9e3779b97f4a7c15ULL);
  std::normal_distribution<double> normal(0.0, 1.0);
  matrix<double> x(static_cast<Eigen::Index>(tokens), static_cast<Eigen::Index>(width));
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = static_cast<double>(static_cast<float>(normal(gen)));
  return x;
}

approximation parse_approximation(const std::string& text) {
  approximation a{text, text, 0};
  const auto colon = text.find(':');
  if (colon != std::string::npos) {
    a.kind = text.substr(0, colon);
    const std::string p = text.substr(colon + 1);
    const auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), a.param);
    if (ec != std::errc() || ptr != p.data() + p.size() || a.param < 1 || a.param > 1000000)
      throw input_error("approximation '" + text + "': the parameter after ':' must be an integer in [1, 1000000]");
  }
  const bool parametric = a.kind == "top-k" || a.kind == "random-features";
  if (!(a.kind == "float32" || a.kind == "bfloat16" || a.kind == "linear" || parametric))
    throw input_error("unknown approximation '" + text + "' (float32, bfloat16, linear, top-k:K, random-features:M)");
  if (parametric != (colon != std::string::npos))
    throw input_error("approximation '" + text + "': " + (parametric ? "needs a parameter (top-k:32, random-features:64)" : "takes no parameter"));
  return a;
}

result run(const request& r) {
  const auto t0 = std::chrono::steady_clock::now();
  validate(r.m, r.x);
  const std::size_t depth = r.depth == 0 ? r.m.blocks.size() : r.depth;
  if (depth > r.m.blocks.size())
    throw input_error("--depth " + std::to_string(depth) + " exceeds the model's " + std::to_string(r.m.blocks.size()) + " blocks");
  if (r.approximations.empty()) throw input_error("no approximation given");
  result res;
  res.tokens = static_cast<std::size_t>(r.x.rows());
  res.width = static_cast<std::size_t>(r.x.cols());
  res.heads = r.m.heads;
  res.mlp_width = static_cast<std::size_t>(r.m.blocks[0].w1.cols());
  res.depth = depth;
  res.norm = r.m.norm;
  res.activation = r.m.activation;
  res.eps = r.m.eps;
  res.target_ratio = r.target_ratio;
  res.seed = r.seed;
  res.model_description = r.model_description;
  const double c_hi = inv_sqrt(res.width / res.heads).hi;
  const auto n = static_cast<std::size_t>(r.x.rows());
  std::vector<block_norms> norms;
  for (std::size_t b = 0; b < depth; ++b) norms.push_back(norms_of(r.m.blocks[b], r.m.heads));
  res.exact_bits = exact_bits(depth);
  const std::vector<std::vector<mr>> exact = enclose_exact_model(r.m, r.x, depth, res.exact_bits, r.progress);
  if (r.keep_trajectories)
    for (std::size_t b = 0; b < depth; ++b)
      for (std::size_t s = 0; s < n_stages; ++s) {
        const std::string name = "exact.b" + std::to_string(b) + "." + stage_names[s];
        res.dumps.emplace_back(name + ".mid", exact[b][s].mid);
        res.dumps.emplace_back(name + ".rad", exact[b][s].rad);
      }
  for (const auto& ap : r.approximations) {
    approximation_result ar{ap, {}, {}, true};
    matrix<double> xa = r.x;
    vec e_article(n, 0.0), e_direct(n, 0.0), meas_in(n, 0.0);
    for (std::size_t b = 0; b < depth; ++b) {
      check_deadline();
      if (r.progress) r.progress(ap.name + ", block " + std::to_string(b + 1) + "/" + std::to_string(depth));
      const block_record rec = forward_block(r.m, r.m.blocks[b], xa, ap, r.seed, b);
      if (r.keep_trajectories) keep(res, ap.name, b, rec);
      // measured: ‖x̃_i − x_i‖ within ‖x̃_i − mid_i‖ ± rad_i (x̃ the approximate model, mid and rad the exact one's)
      std::array<vec, n_stages> lo, hi;
      vec scale(n_stages, 0.0);
      for (std::size_t s = 0; s < n_stages; ++s)
        for (Eigen::Index i = 0; i < r.x.rows(); ++i) {
          const ival d = distance_to_enclosure(rec.mid[s], exact[b][s], i);
          lo[s].push_back(d.lo);
          hi[s].push_back(d.hi);
          scale[s] = std::max(scale[s], row_norm_hi(exact[b][s], i));
        }
      const block_steps st{r.m, rec, norms[b], c_hi, r.drop_propagation};
      const stage_vectors art = propagate(e_article, st, local_kind::article), dir = propagate(e_direct, st, local_kind::direct),
                          stg = stage_bounds(meas_in, hi, st);
      for (std::size_t s = 0; s < n_stages; ++s)
        ar.rows.push_back({b, stage_names[s], vmax(lo[s]), vmax(hi[s]), vmax(art.v[s]), vmax(dir.v[s]), vmax(stg.v[s]), scale[s]});
      e_article = art.v[s_out];
      e_direct = dir.v[s_out];
      meas_in = hi[s_out];
      xa = rec.mid[s_out];
    }
    for (const auto& row : ar.rows) {
      if (row.stage != std::string("block-out")) continue;
      if (row.measured_lo > 0 && row.bound_article <= r.target_ratio * row.measured_lo) continue;
      ar.within_target = false;
      std::string why = "block " + std::to_string(row.block + 1) + ": bound/measured = " +
                        ratio_text(row.bound_article, row.measured_lo) + " (article), " +
                        ratio_text(row.bound_direct, row.measured_lo) + " (direct local term)";
      // Why: the loosest stage of this block by itself (restarted from the measured error of its input; stages whose
      // error is at the level of binary64's rounding are left out); the carried bound multiplies the looseness of
      // every stage before it.
      double worst = 0;
      std::string where;
      for (const auto& st : ar.rows)
        if (st.block == row.block && st.measured_lo > 0x1p-47 * st.scale && st.stage_bound / st.measured_lo > worst) {
          worst = st.stage_bound / st.measured_lo;
          where = st.stage;
        }
      if (!where.empty())
        why += "; loosest stage by itself: " + where + " (" + ratio_text(worst, 1) + (where == "heads" ?
               ", the attention's propagation takes the worst direction of every perturbation)" : ")") +
               (row.block > 0 ? "; the carried bound compounds every earlier stage's looseness" : "");
      for (const auto& st : ar.rows)  // the article's local term against the direct one, at this block's heads
        if (st.block == row.block && st.stage == std::string("heads") && st.bound_direct > 0 && std::isfinite(st.bound_direct))
          why += "; at the heads the article's local term is " + ratio_text(st.bound_article, st.bound_direct) + " the direct one";
      ar.notes.push_back(why);
    }
    res.approximations.push_back(std::move(ar));
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

void validate(const model& m, const matrix<double>& x) {
  auto fail = [](const std::string& what) { throw input_error("model: " + what); };
  if (m.blocks.empty()) fail("no blocks");
  if (m.norm != "layernorm" && m.norm != "rmsnorm") fail("unknown norm '" + m.norm + "' (layernorm, rmsnorm)");
  if (m.activation != "gelu_tanh" && m.activation != "silu" && m.activation != "relu")
    fail("unknown activation '" + m.activation + "' (gelu_tanh, silu, relu)");
  if (!(m.eps > 0) || !std::isfinite(m.eps)) fail("eps must be a finite number > 0");
  const Eigen::Index E = x.cols();
  if (x.rows() < 1 || E < 1) fail("the input has no tokens");
  if (m.heads < 1 || E % static_cast<Eigen::Index>(m.heads) != 0)
    fail(std::to_string(m.heads) + " heads do not divide the width " + std::to_string(E));
  if (!x.allFinite()) fail("the input has a non-finite entry");
  for (std::size_t b = 0; b < m.blocks.size(); ++b) {
    const auto& w = m.blocks[b];
    const std::string at = "block " + std::to_string(b) + ": ";
    const Eigen::Index F = w.w1.cols();
    auto shape = [&](const matrix<double>& W, Eigen::Index r, Eigen::Index c, const char* name) {
      if (W.rows() != r || W.cols() != c)
        fail(at + name + " is " + std::to_string(W.rows()) + "x" + std::to_string(W.cols()) + ", expected " +
             std::to_string(r) + "x" + std::to_string(c));
      if (!W.allFinite()) fail(at + name + " has a non-finite entry");
    };
    auto length = [&](const vec& v, Eigen::Index n, bool optional, const char* name) {
      if ((optional && v.empty())) return;
      if (static_cast<Eigen::Index>(v.size()) != n)
        fail(at + name + " has " + std::to_string(v.size()) + " entries, expected " + std::to_string(n));
      for (double t : v)
        if (!std::isfinite(t)) fail(at + name + " has a non-finite entry");
    };
    if (F < 1) fail(at + "w1 has no columns");
    shape(w.w_q, E, E, "w_q"), shape(w.w_k, E, E, "w_k"), shape(w.w_v, E, E, "w_v"), shape(w.w_o, E, E, "w_o");
    shape(w.w1, E, F, "w1"), shape(w.w2, F, E, "w2");
    length(w.norm1.gamma, E, false, "norm1 gamma"), length(w.norm1.beta, E, true, "norm1 beta");
    length(w.norm2.gamma, E, false, "norm2 gamma"), length(w.norm2.beta, E, true, "norm2 beta");
    length(w.b_q, E, true, "b_q"), length(w.b_k, E, true, "b_k"), length(w.b_v, E, true, "b_v");
    length(w.b_o, E, true, "b_o"), length(w.b1, F, true, "b1"), length(w.b2, E, true, "b2");
  }
}

}  // namespace attncert::block
