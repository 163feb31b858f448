// The exact model's trajectory enclosed in MPFI at p bits (componentwise intervals; MPFI's operations are
// outward-rounded, so every exact value lies in its interval — MPFI's guarantee).  Interval arithmetic
// overestimates through a deep network (each product sums |W|-weighted radii: the radii grow by about 10⁵ per
// block here), so p grows with the depth (exact_bits); at the end every interval is rounded outward to a
// binary64 midpoint and radius.  Raw mpfi_t storage: no temporaries in the inner loops.
#include <mpfi.h>

#include <cmath>
#include <functional>
#include <utility>
#include <string>
#include <vector>

#include "attncert/deadline.hpp"
#include "attncert/error.hpp"
#include "ops.hpp"

namespace attncert::block::detail {

namespace {

// A row-major matrix of MPFI intervals at a fixed precision.
class imat {
 public:
  imat(Eigen::Index rows, Eigen::Index cols, mpfr_prec_t p) : r_(rows), c_(cols), d_(static_cast<std::size_t>(rows * cols)) {
    for (auto& x : d_) mpfi_init2(&x, p);
  }
  imat(const imat&) = delete;
  imat& operator=(const imat&) = delete;
  imat(imat&& o) noexcept = default;  // o's vector is left empty
  imat& operator=(imat&& o) noexcept {
    std::swap(r_, o.r_);
    std::swap(c_, o.c_);
    d_.swap(o.d_);  // o clears what this held
    return *this;
  }
  ~imat() {
    for (auto& x : d_) mpfi_clear(&x);
  }
  mpfi_ptr operator()(Eigen::Index i, Eigen::Index j) { return &d_[static_cast<std::size_t>(i * c_ + j)]; }
  mpfi_srcptr operator()(Eigen::Index i, Eigen::Index j) const { return &d_[static_cast<std::size_t>(i * c_ + j)]; }
  Eigen::Index rows() const { return r_; }
  Eigen::Index cols() const { return c_; }

 private:
  Eigen::Index r_, c_;
  std::vector<__mpfi_struct> d_;
};

// One scratch interval.
struct ival_p {
  mpfi_t v;
  explicit ival_p(mpfr_prec_t p) { mpfi_init2(v, p); }
  ~ival_p() { mpfi_clear(v); }
  ival_p(const ival_p&) = delete;
  ival_p& operator=(const ival_p&) = delete;
};

mpfr_prec_t prec(const imat& m) { return mpfi_get_prec(m(0, 0)); }

imat from_doubles(const matrix<double>& x, mpfr_prec_t p) {
  imat out(x.rows(), x.cols(), p);
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    for (Eigen::Index j = 0; j < x.cols(); ++j) mpfi_set_d(out(i, j), x(i, j));
  return out;
}

// x·W + b.
imat affine_i(const imat& x, const matrix<double>& W, const std::vector<double>& b) {
  const mpfr_prec_t p = prec(x);
  imat out(x.rows(), W.cols(), p);
  ival_p t(p);
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    check_deadline();
    for (Eigen::Index j = 0; j < W.cols(); ++j) mpfi_set_d(out(i, j), b.empty() ? 0.0 : b[static_cast<std::size_t>(j)]);
    for (Eigen::Index k = 0; k < x.cols(); ++k)
      for (Eigen::Index j = 0; j < W.cols(); ++j) {
        mpfi_mul_d(t.v, x(i, k), W(k, j));
        mpfi_add(out(i, j), out(i, j), t.v);
      }
  }
  return out;
}

// The causal attention of one head: columns [c0, c0 + dh) of q, k, v; written into the same columns of `out`.
void head_i(const imat& q, const imat& k, const imat& v, Eigen::Index c0, Eigen::Index dh, imat& out) {
  const mpfr_prec_t p = prec(q);
  const Eigen::Index n = q.rows();
  ival_p scale(p), t(p), sum(p);
  mpfi_set_si(scale.v, static_cast<long>(dh));
  mpfi_sqrt(scale.v, scale.v);
  mpfi_inv(scale.v, scale.v);
  imat w(1, n, p);
  for (Eigen::Index i = 0; i < n; ++i) {
    check_deadline();
    mpfi_set_si(sum.v, 0);
    for (Eigen::Index j = 0; j <= i; ++j) {  // w_j = exp(c q_i·k_j)
      mpfi_set_si(w(0, j), 0);
      for (Eigen::Index l = c0; l < c0 + dh; ++l) {
        mpfi_mul(t.v, q(i, l), k(j, l));
        mpfi_add(w(0, j), w(0, j), t.v);
      }
      mpfi_mul(w(0, j), w(0, j), scale.v);
      mpfi_exp(w(0, j), w(0, j));
      mpfi_add(sum.v, sum.v, w(0, j));
    }
    for (Eigen::Index l = c0; l < c0 + dh; ++l) mpfi_set_si(out(i, l), 0);
    for (Eigen::Index j = 0; j <= i; ++j) {
      mpfi_div(w(0, j), w(0, j), sum.v);
      for (Eigen::Index l = c0; l < c0 + dh; ++l) {
        mpfi_mul(t.v, w(0, j), v(j, l));
        mpfi_add(out(i, l), out(i, l), t.v);
      }
    }
  }
}

imat sum_i(const imat& a, const imat& b) {
  imat out(a.rows(), a.cols(), prec(a));
  for (Eigen::Index i = 0; i < a.rows(); ++i)
    for (Eigen::Index j = 0; j < a.cols(); ++j) mpfi_add(out(i, j), a(i, j), b(i, j));
  return out;
}

imat norm_i(const imat& x, const norm_params& np, bool rms, double eps) {
  const mpfr_prec_t p = prec(x);
  const Eigen::Index E = x.cols();
  imat out(x.rows(), E, p), c(1, E, p);
  ival_p mean(p), ss(p), t(p);
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    mpfi_set_si(mean.v, 0);
    if (!rms) {
      for (Eigen::Index k = 0; k < E; ++k) mpfi_add(mean.v, mean.v, x(i, k));
      mpfi_div_si(mean.v, mean.v, static_cast<long>(E));
    }
    mpfi_set_si(ss.v, 0);
    for (Eigen::Index k = 0; k < E; ++k) {
      mpfi_sub(c(0, k), x(i, k), mean.v);
      mpfi_sqr(t.v, c(0, k));
      mpfi_add(ss.v, ss.v, t.v);
    }
    mpfi_div_si(ss.v, ss.v, static_cast<long>(E));
    mpfi_add_d(ss.v, ss.v, eps);
    mpfi_sqrt(ss.v, ss.v);
    for (Eigen::Index k = 0; k < E; ++k) {
      const auto kk = static_cast<std::size_t>(k);
      mpfi_div(out(i, k), c(0, k), ss.v);
      mpfi_mul_d(out(i, k), out(i, k), np.gamma[kk]);
      if (!np.beta.empty()) mpfi_add_d(out(i, k), out(i, k), np.beta[kk]);
    }
  }
  return out;
}

void activation_i(imat& z, const std::string& name) {
  const mpfr_prec_t p = prec(z);
  ival_p k(p), a(p), t(p), u(p);
  mpfi_const_pi(k.v);
  mpfi_si_div(k.v, 2, k.v);
  mpfi_sqrt(k.v, k.v);                              // √(2/π)
  mpfi_set_str(a.v, "0.044715", 10);                // the interval of the decimal
  for (Eigen::Index i = 0; i < z.rows(); ++i)
    for (Eigen::Index j = 0; j < z.cols(); ++j) {
      mpfi_ptr x = z(i, j);
      if (name == "relu") {
        if (mpfr_sgn(&x->left) < 0) mpfr_set_zero(&x->left, 1);
        if (mpfr_sgn(&x->right) < 0) mpfr_set_zero(&x->right, 1);
      } else if (name == "silu") {                  // x / (1 + e^{−x})
        mpfi_neg(t.v, x);
        mpfi_exp(t.v, t.v);
        mpfi_add_si(t.v, t.v, 1);
        mpfi_div(x, x, t.v);
      } else {                                      // 0.5 x (1 + tanh(k(x + a x³)))
        mpfi_sqr(t.v, x);
        mpfi_mul(t.v, t.v, x);
        mpfi_mul(t.v, t.v, a.v);
        mpfi_add(t.v, t.v, x);
        mpfi_mul(t.v, t.v, k.v);
        mpfi_tanh(t.v, t.v);
        mpfi_add_si(t.v, t.v, 1);
        mpfi_mul(u.v, x, t.v);
        mpfi_div_2ui(x, u.v, 1);
      }
    }
}

// Rounded outward to binary64 midpoint and radius (input_error if not finite or not bounded).
mr to_mr(const imat& x) {
  mr out{matrix<double>(x.rows(), x.cols()), matrix<double>(x.rows(), x.cols())};
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    for (Eigen::Index j = 0; j < x.cols(); ++j) {
      const double lo = mpfr_get_d(&x(i, j)->left, MPFR_RNDD), hi = mpfr_get_d(&x(i, j)->right, MPFR_RNDU);
      if (!std::isfinite(lo) || !std::isfinite(hi) || mpfi_nan_p(x(i, j)))
        throw input_error("the exact model's enclosure is not finite (a value overflows or the enclosure blew up)");
      set_entry(out, i, j, ival{lo, hi});
    }
  return out;
}

}  // namespace

std::vector<std::vector<mr>> enclose_exact_model(const model& m, const matrix<double>& x0, std::size_t depth, unsigned bits,
                                                 const std::function<void(const std::string&)>& progress) {
  const auto p = static_cast<mpfr_prec_t>(bits);
  const bool rms = m.norm == "rmsnorm";
  std::vector<std::vector<mr>> stages;
  imat x = from_doubles(x0, p);
  for (std::size_t b = 0; b < depth; ++b) {
    if (progress) progress("exact model (" + std::to_string(bits) + "-bit intervals), block " + std::to_string(b + 1) + "/" + std::to_string(depth));
    const auto& w = m.blocks[b];
    std::vector<mr> s;
    const imat h = norm_i(x, w.norm1, rms, m.eps);
    s.push_back(to_mr(h));
    const imat q = affine_i(h, w.w_q, w.b_q), k = affine_i(h, w.w_k, w.b_k), v = affine_i(h, w.w_v, w.b_v);
    imat heads(q.rows(), q.cols(), p);
    const Eigen::Index dh = q.cols() / static_cast<Eigen::Index>(m.heads);
    for (std::size_t hd = 0; hd < m.heads; ++hd) head_i(q, k, v, static_cast<Eigen::Index>(hd) * dh, dh, heads);
    s.push_back(to_mr(heads));
    const imat ao = affine_i(heads, w.w_o, w.b_o);
    s.push_back(to_mr(ao));
    const imat r1 = sum_i(x, ao);
    s.push_back(to_mr(r1));
    const imat g = norm_i(r1, w.norm2, rms, m.eps);
    s.push_back(to_mr(g));
    imat z = affine_i(g, w.w1, w.b1);
    activation_i(z, m.activation);
    const imat mo = affine_i(z, w.w2, w.b2);
    s.push_back(to_mr(mo));
    x = sum_i(r1, mo);
    s.push_back(to_mr(x));
    stages.push_back(std::move(s));
  }
  return stages;
}

}  // namespace attncert::block::detail
