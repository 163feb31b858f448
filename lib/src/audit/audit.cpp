// lib/src/audit/audit.cpp — the article's evaluation protocol on captured attention calls.
#include "attncert/audit/audit.hpp"

#include <mpfi.h>
#include <mpfr.h>
#include <nettle/sha2.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <set>
#include <stdexcept>

#include "attncert/attention/binary64_enclosure.hpp"
#include "attncert/deadline.hpp"
#include "attncert/error.hpp"
#include "attncert/field.hpp"
#include "attncert/linalg/exact.hpp"
#include "attncert/linalg/fast_svd.hpp"
#include "attncert/rank/numerical.hpp"
#include "attncert/number/decimal.hpp"
#include "attncert/number/format.hpp"
#include "attncert/number/traits.hpp"
#include "attncert/rank/policy.hpp"

namespace attncert::audit {

namespace {

using ojson = nlohmann::ordered_json;

// ---- small RAII wrappers of MPFR / MPFI numbers (directed roundings) ----
struct fr {
  mpfr_t x;
  explicit fr(mpfr_prec_t bits = 128) { mpfr_init2(x, bits); mpfr_set_zero(x, 1); }
  ~fr() { mpfr_clear(x); }
  fr(const fr&) = delete;
  fr& operator=(const fr&) = delete;
};
struct fi {
  mpfi_t x;
  explicit fi(mpfr_prec_t bits = 128) { mpfi_init2(x, bits); mpfi_set_si(x, 0); }
  ~fi() { mpfi_clear(x); }
  fi(const fi&) = delete;
  fi& operator=(const fi&) = delete;
};

std::string shortest(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

std::string up17(mpfr_srcptr x) { return decimal_up(x, 17); }
std::string down17(mpfr_srcptr x) { return decimal_down(x, 17); }

// ---- the captured arrays, one head at a time ----
std::size_t dim(const tensor& t, std::size_t i) { return t.shape.at(i); }

void check_4d(const tensor& t, const std::string& what) {
  if (t.shape.size() != 4) throw input_error(what + ": a captured array of 4 dimensions (b, h, n, d) is expected");
  for (double x : t.values)
    if (!std::isfinite(x)) throw input_error(what + ": contains NaN or Inf");
}

// Rows n and columns c of t[b, h] as binary64 numbers.
matrix<double> slice(const tensor& t, std::size_t b, std::size_t h) {
  const std::size_t H = dim(t, 1), n = dim(t, 2), c = dim(t, 3);
  matrix<double> m(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(c));
  const double* p = t.values.data() + (b * H + h) * n * c;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < c; ++j) m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = p[i * c + j];
  return m;
}

// The allowed keys of head h of batch b (broadcast dimensions of size 1), or no mask.
mask mask_of(const captured_call& c, std::size_t b, std::size_t h) {
  if (!c.allowed) return mask::none();
  const tensor& a = *c.allowed;
  const std::size_t bb = dim(a, 0) == 1 ? 0 : b, hh = dim(a, 1) == 1 ? 0 : h, n = dim(a, 2), m = dim(a, 3);
  Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic> allowed(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(m));
  const double* p = a.values.data() + (bb * dim(a, 1) + hh) * n * m;
  bool all = true;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < m; ++j) {
      allowed(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = p[i * m + j] != 0;
      all = all && p[i * m + j] != 0;
    }
  return all ? mask::none() : mask::from_matrix(allowed);
}

// The scale a model used: the binary64 number its decimal text reads as (Python's repr round-trips), exactly.
mpq_rational binary64_scale(const std::string& text) {
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(x) || x == 0)
    throw input_error("scale '" + one_line(text, 40) + "': \"1/sqrt(d)\" or a finite nonzero decimal expected");
  return mpq_rational(x);
}

score_scale scale_of(const captured_call& c) {
  score_scale sc;
  if (c.scale == "1/sqrt(d)") sc.inv_sqrt_d = true;
  else sc.rational = binary64_scale(c.scale);
  return sc;
}

const char* format_of_dtype(const std::string& dtype) {
  if (dtype == "float16") return "binary16";
  if (dtype == "bfloat16") return "bfloat16";
  if (dtype == "float32") return "binary32";
  if (dtype == "float64") return "binary64";
  throw input_error("dtype '" + one_line(dtype, 40) + "': float16, bfloat16, float32 or float64 expected");
}

std::string formats_of(const audit_spec& s, const std::string& dtype) {
  if (!s.formats.empty()) return s.formats;
  const std::string f = format_of_dtype(dtype);
  return f == std::string("binary64") ? f : f + ",binary64";
}

// The budget left of the audit (0: none), at least a millisecond when there is one.
double left(const audit_spec& s, std::chrono::steady_clock::time_point t0) {
  if (s.max_seconds <= 0) return 0;
  const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::max(1e-3, s.max_seconds - spent);
}

rank_request base_request(const audit_spec& s, const std::string& formats) {
  rank_request r;
  r.formats = parse_formats(formats);
  r.policies = parse_policies(s.policies);
  r.max_bits = s.max_precision;
  r.formats_explicit = true;
  // Above 64 rows the singular values escalate on a deflated subspace (P16 part D) rather than by MPFI
  // Jacobi on the whole matrix: both certified, the first 40 times faster on a 128-token causal head
  // (0.6 s against 24 s measured), where the MPFI path would dominate an audit.
  r.mpfi_svd_max_dim = audit_mpfi_svd_max_dim;
  return r;
}

// max_j ‖v_j‖₂ enclosed: sums of squares and square roots rounded down, then up.
void value_scale(const matrix<double>& V, fr& lo, fr& hi) {
  fr s_lo, s_hi, t;
  mpfr_set_zero(lo.x, 1);
  mpfr_set_zero(hi.x, 1);
  for (Eigen::Index j = 0; j < V.rows(); ++j) {
    mpfr_set_zero(s_lo.x, 1);
    mpfr_set_zero(s_hi.x, 1);
    for (Eigen::Index k = 0; k < V.cols(); ++k) {
      mpfr_set_d(t.x, V(j, k), MPFR_RNDN);  // exact: 53 <= 128 bits
      mpfr_sqr(t.x, t.x, MPFR_RNDD);
      mpfr_add(s_lo.x, s_lo.x, t.x, MPFR_RNDD);
      mpfr_set_d(t.x, V(j, k), MPFR_RNDN);
      mpfr_sqr(t.x, t.x, MPFR_RNDU);
      mpfr_add(s_hi.x, s_hi.x, t.x, MPFR_RNDU);
    }
    mpfr_sqrt(s_lo.x, s_lo.x, MPFR_RNDD);
    mpfr_sqrt(s_hi.x, s_hi.x, MPFR_RNDU);
    mpfr_max(lo.x, lo.x, s_lo.x, MPFR_RNDD);
    mpfr_max(hi.x, hi.x, s_hi.x, MPFR_RNDU);
  }
}

// Upper bound of max_i ‖Â_i − A_i‖₁ for A inside `A` (every step rounded up).
void l1_error_hi(const matrix<double>& W, const binary64_enclosure& A, fr& out) {
  fr row, d;
  mpfr_set_zero(out.x, 1);
  for (Eigen::Index i = 0; i < W.rows(); ++i) {
    mpfr_set_zero(row.x, 1);
    for (Eigen::Index j = 0; j < W.cols(); ++j) {
      const double w = W(i, j), m = A.mid(i, j);
      if (w >= m) {
        mpfr_set_d(d.x, w, MPFR_RNDU);
        mpfr_sub_d(d.x, d.x, m, MPFR_RNDU);
      } else {
        mpfr_set_d(d.x, m, MPFR_RNDU);
        mpfr_sub_d(d.x, d.x, w, MPFR_RNDU);
      }
      mpfr_add_d(d.x, d.x, A.rad(i, j), MPFR_RNDU);
      mpfr_add(row.x, row.x, d.x, MPFR_RNDU);
    }
    mpfr_max(out.x, out.x, row.x, MPFR_RNDU);
  }
}

// The relative output error max_i ‖((Â − A)V)_i‖₂ / max_j ‖v_j‖₂ enclosed in MPFI (A inside `A`, the value
// scale inside [vlo, vhi]): [lo, hi] of its exact value for every A in the enclosure.
void output_error_rel(const matrix<double>& W, const binary64_enclosure& A, const matrix<double>& V, const fr& vlo,
                      const fr& vhi, fr& lo, fr& hi) {
  fi a, r, t, e, row;
  fr left, right;
  mpfr_set_zero(lo.x, 1);  // the max over rows of [left_i, right_i] is [max left_i, max right_i]
  mpfr_set_zero(hi.x, 1);
  for (Eigen::Index i = 0; i < W.rows(); ++i) {
    check_deadline();
    mpfi_set_si(row.x, 0);
    for (Eigen::Index k = 0; k < V.cols(); ++k) {
      mpfi_set_si(e.x, 0);
      for (Eigen::Index j = 0; j < W.cols(); ++j) {
        mpfi_set_d(a.x, A.mid(i, j));
        mpfi_interv_d(r.x, -A.rad(i, j), A.rad(i, j));
        mpfi_add(a.x, a.x, r.x);        // A_ij
        mpfi_d_sub(t.x, W(i, j), a.x);  // Â_ij − A_ij
        mpfi_mul_d(t.x, t.x, V(j, k));
        mpfi_add(e.x, e.x, t.x);
      }
      mpfi_sqr(e.x, e.x);
      mpfi_add(row.x, row.x, e.x);
    }
    mpfi_sqrt(row.x, row.x);
    mpfi_get_left(left.x, row.x);
    mpfi_get_right(right.x, row.x);
    mpfr_max(lo.x, lo.x, left.x, MPFR_RNDD);
    mpfr_max(hi.x, hi.x, right.x, MPFR_RNDU);
  }
  if (mpfr_zero_p(vhi.x)) {  // every value row is zero: (Â − A)V = 0 exactly, whatever Â
    mpfr_set_zero(lo.x, 1);
    mpfr_set_zero(hi.x, 1);
    return;
  }
  mpfr_div(lo.x, lo.x, vhi.x, MPFR_RNDD);
  if (mpfr_zero_p(vlo.x)) mpfr_set_inf(hi.x, 1);
  else mpfr_div(hi.x, hi.x, vlo.x, MPFR_RNDU);
}

// The head's objects measured separately, by analyse_rank (the numbers `attncert rank` gives).
std::vector<object_result> measure_objects(const audit_spec& s, const captured_call& c, const matrix<double>& Q,
                                           const matrix<double>& K, const matrix<double>& V, const mask& M,
                                           std::chrono::steady_clock::time_point t0) {
  std::vector<object_result> out;
  const std::string formats = formats_of(s, c.dtype);
  for (const auto& obj : s.objects) {
    if (obj == "multi_head" || obj == "residual") continue;  // per batch, all heads together: multi_head(), residual()
    rank_request r = base_request(s, formats);
    r.max_seconds = left(s, t0);
    if (obj == "values") {
      r.S = from_double_matrix<mpq_rational>(V);
      r.object = layer_object::scores;
    } else {
      r.Q = from_double_matrix<mpq_rational>(Q);
      r.K = from_double_matrix<mpq_rational>(K);
      if (c.scale == "1/sqrt(d)") r.inv_sqrt_d = true;
      else r.scale = binary64_scale(c.scale);
      if (obj != "scores") r.M = M;
      if (obj == "output") r.V = from_double_matrix<mpq_rational>(V);
      r.object = parse_layer_object(obj);
    }
    out.push_back({obj, analyse_rank(r)});
  }
  return out;
}

// Rows of a midpoint-radius enclosure and of exact products as MPFI vectors.
void enclosure_row(const binary64_enclosure& O, Eigen::Index i, Eigen::Index k, fi& out) {
  fi r;
  mpfi_set_d(out.x, O.mid(i, k));
  if (O.rad.size() == 0) return;  // a point matrix
  mpfi_interv_d(r.x, -O.rad(i, k), O.rad(i, k));
  mpfi_add(out.x, out.x, r.x);
}

// ‖x − y‖₂ enclosed, for x, y given per column k by fill(k, x_k, y_k).
template <class Fill>
void distance(Eigen::Index cols, Fill fill, fr& lo, fr& hi) {
  fi x, y, sum;
  mpfi_set_si(sum.x, 0);
  for (Eigen::Index k = 0; k < cols; ++k) {
    fill(k, x, y);
    mpfi_sub(x.x, x.x, y.x);
    mpfi_sqr(x.x, x.x);
    mpfi_add(sum.x, sum.x, x.x);
  }
  mpfi_sqrt(sum.x, sum.x);
  mpfi_get_left(lo.x, sum.x);
  mpfi_get_right(hi.x, sum.x);
}

// (W V)_{i,k} exactly enclosed (W, V binary64: every product and sum in MPFI at 128 bits).
void product_entry(const matrix<double>& W, const matrix<double>& V, Eigen::Index i, Eigen::Index k, fi& out) {
  fi t;
  mpfi_set_si(out.x, 0);
  for (Eigen::Index j = 0; j < W.cols(); ++j) {
    mpfi_set_d(t.x, W(i, j));
    mpfi_mul_d(t.x, t.x, V(j, k));
    mpfi_add(out.x, out.x, t.x);
  }
}

// §5 (proofs/L6): the gain of the query-side contrast e_p − e_q through A, ‖A_p − A_q‖₂ / √2 (enclosed), and the side of
// float32's NumPy threshold τ = σ₁·n·2⁻²³ (n = max(n_q, n_k)) it lies on, with 1 ≤ σ₁ ≤ √(max column sum of A).
void measure_gain(const binary64_enclosure& A, Eigen::Index p, Eigen::Index q, head_result& hr) {
  fr lo, hi, t;
  distance(A.mid.cols(), [&](Eigen::Index k, fi& x, fi& y) { enclosure_row(A, p, k, x); enclosure_row(A, q, k, y); }, lo, hi);
  mpfr_set_ui(t.x, 2, MPFR_RNDN);
  mpfr_sqrt(t.x, t.x, MPFR_RNDU);
  mpfr_div(lo.x, lo.x, t.x, MPFR_RNDD);  // lo / (√2 rounded up) <= lo / √2
  mpfr_set_ui(t.x, 2, MPFR_RNDN);
  mpfr_sqrt(t.x, t.x, MPFR_RNDD);
  mpfr_div(hi.x, hi.x, t.x, MPFR_RNDU);
  hr.contrast_gain_lo = down17(lo.x);
  hr.contrast_gain_hi = up17(hi.x);
  fi col, e;
  fr colmax;
  mpfr_set_zero(colmax.x, 1);
  for (Eigen::Index j = 0; j < A.mid.cols(); ++j) {
    mpfi_set_si(col.x, 0);
    for (Eigen::Index i = 0; i < A.mid.rows(); ++i) {
      enclosure_row(A, i, j, e);
      mpfi_add(col.x, col.x, e.x);
    }
    mpfi_get_right(t.x, col.x);
    mpfr_max(colmax.x, colmax.x, t.x, MPFR_RNDU);
  }
  const double n = static_cast<double>(std::max(A.mid.rows(), A.mid.cols()));
  fr tau_lo, tau_hi;
  mpfr_set_d(tau_lo.x, n, MPFR_RNDD);
  mpfr_mul_2si(tau_lo.x, tau_lo.x, -23, MPFR_RNDD);  // n·2⁻²³ <= τ (σ₁ >= 1)
  mpfr_sqrt(tau_hi.x, colmax.x, MPFR_RNDU);
  mpfr_mul_d(tau_hi.x, tau_hi.x, n, MPFR_RNDU);
  mpfr_mul_2si(tau_hi.x, tau_hi.x, -23, MPFR_RNDU);  // τ <= √(max column sum)·n·2⁻²³
  hr.contrast_float32 = mpfr_less_p(hi.x, tau_lo.x)  ? "discarded"
                        : mpfr_greater_p(lo.x, tau_hi.x) ? "kept"
                                                          : "undecided";
}

// The spec's target contrast on head h: exact (A·V enclosed) and the model's (Â·V, when Â was captured).
void measure_contrast(const audit_spec& s, const captured_call& c, std::size_t b, std::size_t h, head_result& hr) {
  const target_contrast_spec& tc = s.target_contrast;
  const std::size_t H = dim(c.q, 1), Hkv = dim(c.k, 1), g = h / (H / Hkv);
  auto output_of = [&](std::size_t batch, binary64_enclosure* A_out) {
    const binary64_enclosure A =
        enclose_attention_binary64(enclose_scores_binary64(slice(c.q, batch, h), slice(c.k, batch, g), scale_of(c)), mask_of(c, batch, h));
    if (A_out) *A_out = A;
    return enclose_product_binary64(A, slice(c.v, batch, g));
  };
  fr lo, hi, rlo, rhi;
  if (tc.between == "tokens") {
    const auto p = static_cast<Eigen::Index>(tc.first), q = static_cast<Eigen::Index>(tc.second);
    binary64_enclosure A;
    const binary64_enclosure O = output_of(b, &A);
    measure_gain(A, p, q, hr);
    distance(O.mid.cols(), [&](Eigen::Index k, fi& x, fi& y) { enclosure_row(O, p, k, x); enclosure_row(O, q, k, y); }, lo, hi);
    hr.contrast_exact_lo = down17(lo.x);
    hr.contrast_exact_hi = up17(hi.x);
    if (c.weights) {
      const matrix<double> W = slice(*c.weights, b, h), V = slice(c.v, b, g);
      distance(V.cols(), [&](Eigen::Index k, fi& x, fi& y) { product_entry(W, V, p, k, x); product_entry(W, V, q, k, y); }, lo, hi);
      hr.contrast_model_lo = down17(lo.x);
      hr.contrast_model_hi = up17(hi.x);
    }
    return;
  }
  // batches: the largest row distance between the two inputs
  const binary64_enclosure O1 = output_of(tc.first, nullptr), O2 = output_of(tc.second, nullptr);
  mpfr_set_zero(rlo.x, 1);
  mpfr_set_zero(rhi.x, 1);
  for (Eigen::Index i = 0; i < O1.mid.rows(); ++i) {
    check_deadline();
    distance(O1.mid.cols(), [&](Eigen::Index k, fi& x, fi& y) { enclosure_row(O1, i, k, x); enclosure_row(O2, i, k, y); }, lo, hi);
    mpfr_max(rlo.x, rlo.x, lo.x, MPFR_RNDD);
    mpfr_max(rhi.x, rhi.x, hi.x, MPFR_RNDU);
  }
  hr.contrast_exact_lo = down17(rlo.x);
  hr.contrast_exact_hi = up17(rhi.x);
  if (c.weights) {
    const matrix<double> W1 = slice(*c.weights, tc.first, h), W2 = slice(*c.weights, tc.second, h);
    const matrix<double> V1 = slice(c.v, tc.first, g), V2 = slice(c.v, tc.second, g);
    if (static_cast<double>(W1.rows()) * static_cast<double>(W1.cols()) * static_cast<double>(V1.cols()) > audit_error_max_work) return;
    mpfr_set_zero(rlo.x, 1);
    mpfr_set_zero(rhi.x, 1);
    for (Eigen::Index i = 0; i < W1.rows(); ++i) {
      check_deadline();
      distance(V1.cols(), [&](Eigen::Index k, fi& x, fi& y) { product_entry(W1, V1, i, k, x); product_entry(W2, V2, i, k, y); }, lo, hi);
      mpfr_max(rlo.x, rlo.x, lo.x, MPFR_RNDD);
      mpfr_max(rhi.x, rhi.x, hi.x, MPFR_RNDU);
    }
    hr.contrast_model_lo = down17(rlo.x);
    hr.contrast_model_hi = up17(rhi.x);
  }
}

head_result audit_head(const audit_spec& s, const captured_call& c, std::size_t b, std::size_t h,
                       std::chrono::steady_clock::time_point t0) {
  const std::size_t H = dim(c.q, 1), Hkv = dim(c.k, 1);
  head_result hr;
  hr.batch = b;
  hr.head = h;
  hr.kv_head = h / (H / Hkv);
  const matrix<double> Q = slice(c.q, b, h), K = slice(c.k, b, hr.kv_head), V = slice(c.v, b, hr.kv_head);
  const mask M = mask_of(c, b, h);
  hr.objects = measure_objects(s, c, Q, K, V, M, t0);
  fr vlo, vhi;
  value_scale(V, vlo, vhi);
  hr.value_scale_lo = down17(vlo.x);
  hr.value_scale_hi = up17(vhi.x);
  if (c.weights) {
    try {
      const binary64_enclosure A = enclose_attention_binary64(enclose_scores_binary64(Q, K, scale_of(c)), M);
      fr l1, bound;
      l1_error_hi(slice(*c.weights, b, h), A, l1);
      mpfr_mul(bound.x, l1.x, vhi.x, MPFR_RNDU);
      hr.attention_l1_error_hi = up17(l1.x);
      hr.output_error_bound_hi = up17(bound.x);
      fr rlo, rhi;
      if (static_cast<double>(Q.rows()) * static_cast<double>(K.rows()) * static_cast<double>(V.cols()) <= audit_error_max_work) {
        output_error_rel(slice(*c.weights, b, h), A, V, vlo, vhi, rlo, rhi);
        mpfr_min(rhi.x, rhi.x, l1.x, MPFR_RNDU);  // §11: never above max_i ‖Â_i − A_i‖₁
      } else {
        mpfr_set_zero(rlo.x, 1);
        mpfr_set(rhi.x, l1.x, MPFR_RNDU);
      }
      hr.output_error_rel_lo = down17(rlo.x);
      hr.output_error_rel_hi = up17(rhi.x);
    } catch (const input_error& e) {
      hr.why = std::string("the attention's binary64 enclosure is not usable here: ") + e.what();
    }
  }
  const target_contrast_spec& tc = s.target_contrast;
  if (tc.between == "tokens" || (tc.between == "batches" && b == tc.first)) {
    try {
      measure_contrast(s, c, b, h, hr);
    } catch (const input_error& e) {
      hr.why = (hr.why.empty() ? "" : hr.why + "; ") + "the target contrast is not measured: the attention's binary64 enclosure is not usable here: " + e.what();
    }
  }
  return hr;
}

// W_Oᵀ (H·d_v × E) of a call.
matrix<double> w_o_transposed(const captured_call& c) {
  const tensor& W = *c.w_o;  // (E, H·d_v)
  const auto ei = static_cast<Eigen::Index>(W.shape[0]), ci = static_cast<Eigen::Index>(W.shape[1]);
  matrix<double> Wt(ci, ei);
  for (Eigen::Index i = 0; i < ei; ++i)
    for (Eigen::Index j = 0; j < ci; ++j) Wt(j, i) = W.values[static_cast<std::size_t>(i * ci + j)];
  return Wt;
}

// concat_h(A_h V_h) W_Oᵀ of batch b enclosed; input_error when a head's enclosure is not usable.
binary64_enclosure heads_through_w_o(const captured_call& c, std::size_t b, const matrix<double>& Wt) {
  const std::size_t H = dim(c.q, 1), Hkv = dim(c.k, 1), nq = dim(c.q, 2), dv = dim(c.v, 3);
  const auto ni = static_cast<Eigen::Index>(nq), ci = static_cast<Eigen::Index>(H * dv);
  binary64_enclosure C{matrix<double>(ni, ci), matrix<double>(ni, ci)};
  for (std::size_t h = 0; h < H; ++h) {
    const std::size_t g = h / (H / Hkv);
    const binary64_enclosure A = enclose_attention_binary64(enclose_scores_binary64(slice(c.q, b, h), slice(c.k, b, g), scale_of(c)),
                                                            mask_of(c, b, h));
    const binary64_enclosure O = enclose_product_binary64(A, slice(c.v, b, g));
    C.mid.middleCols(static_cast<Eigen::Index>(h * dv), static_cast<Eigen::Index>(dv)) = O.mid;
    C.rad.middleCols(static_cast<Eigen::Index>(h * dv), static_cast<Eigen::Index>(dv)) = O.rad;
  }
  return enclose_product_binary64(C, Wt);
}

// Rows b of a (B, n, E) tensor as a matrix.
matrix<double> batch_rows(const tensor& t, std::size_t b) {
  const auto n = static_cast<Eigen::Index>(t.shape[1]), e = static_cast<Eigen::Index>(t.shape[2]);
  matrix<double> m(n, e);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < e; ++j) m(i, j) = t.values[static_cast<std::size_t>((static_cast<Eigen::Index>(b) * n + i) * e + j)];
  return m;
}

std::vector<numerical_rank_entry> measured(const audit_spec& s, const captured_call& c, const matrix<double>& M, const rank_interval& exact) {
  const format_spec f = parse_format(format_of_dtype(c.dtype));
  const auto policies = parse_policies(s.policies);
  const auto meas = approx_numerical_rank(M, f, policies, exact.lo, exact.hi);
  std::vector<numerical_rank_entry> out;
  for (std::size_t p = 0; p < policies.size(); ++p) {
    numerical_rank_entry e;
    e.format = f.name;
    e.policy = policies[p].name();
    e.rank = meas.ranks[p];
    e.diverges = meas.diverges[p];
    out.push_back(e);
  }
  return out;
}

// The residual object of batch b (see residual_result).
residual_result residual(const audit_spec& s, const captured_call& c, std::size_t b) {
  residual_result r;
  r.batch = b;
  const matrix<double> Wt = w_o_transposed(c);
  const matrix<double> X = batch_rows(*c.residual, b);
  const Eigen::Index n = X.rows(), E = X.cols();
  binary64_enclosure R;
  try {
    R = heads_through_w_o(c, b, Wt);
  } catch (const input_error& e) {
    r.why = std::string("the heads' binary64 enclosures are not usable here: ") + e.what();
    return r;
  }
  R = enclose_sum_binary64(X, R);
  if (c.b_o) {
    matrix<double> Bo(n, E);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < E; ++j) Bo(i, j) = c.b_o->values[static_cast<std::size_t>(j)];
    R = enclose_sum_binary64(Bo, R);
  }
  const singular_value_enclosures sv = certified_singular_values_binary64(R);
  r.exact.lo = sv.certified_positive;
  r.exact.hi = static_cast<std::size_t>(std::min(n, E));
  r.exact.lo_witness = std::to_string(sv.certified_positive) + " singular values certified > 0 (binary64 enclosures of the heads, W_O, b_O and the residual stream)";
  r.exact.hi_witness = "rank <= min(n_q, E) = min(" + std::to_string(n) + ", " + std::to_string(E) + ")";
  for (const auto& x : sv.sigma) r.singular_values.push_back(outward_decimal(x, 17));
  if (static_cast<double>(n) * static_cast<double>(E) <= audit_residual_exact_max)
    r.x_rank = static_cast<long>(rank(from_double_matrix<mpq_rational>(X)));
  if (c.output) {
    const matrix<double> out = batch_rows(*c.output, b);
    r.numerical = measured(s, c, (X + out).eval(), r.exact);
  }
  return r;
}

// The multi-head object of batch b (see multi_head_result).
multi_head_result multi_head(const audit_spec& s, const captured_call& c, std::size_t b) {
  multi_head_result m;
  m.batch = b;
  const tensor& W = *c.w_o;  // (E, H·d_v)
  const std::size_t H = dim(c.q, 1), nq = dim(c.q, 2), dv = dim(c.v, 3), E = W.shape[0];
  const auto ni = static_cast<Eigen::Index>(nq), ei = static_cast<Eigen::Index>(E);
  const matrix<double> Wt = w_o_transposed(c);
  binary64_enclosure P;
  try {
    P = heads_through_w_o(c, b, Wt);
  } catch (const input_error& e) {
    m.why = std::string("the heads' binary64 enclosures are not usable here: ") + e.what();
    return m;
  }
  const singular_value_enclosures sv = certified_singular_values_binary64(P);
  const std::size_t w_rank = rank(from_double_matrix<mpq_rational>(Wt));
  m.exact.lo = sv.certified_positive;
  m.exact.hi = std::min({nq, E, H * dv, w_rank});
  m.exact.lo_witness = std::to_string(sv.certified_positive) + " singular values certified > 0 (binary64 enclosures of the heads, their concatenation and the product with W_O)";
  m.exact.hi_witness = "rank <= min(n_q, E, H d_v, rank W_O) = min(" + std::to_string(nq) + ", " + std::to_string(E) + ", " +
                       std::to_string(H * dv) + ", " + std::to_string(w_rank) + ") (rank W_O exact)";
  if (m.exact.lo > m.exact.hi) throw internal_error("multi-head object: certified rank above its structural bound");
  for (const auto& x : sv.sigma) m.singular_values.push_back(outward_decimal(x, 17));
  if (c.output) {
    const tensor& out = *c.output;  // (B, n_q, E)
    matrix<double> M(ni, ei);
    for (Eigen::Index i = 0; i < ni; ++i)
      for (Eigen::Index j = 0; j < ei; ++j)
        M(i, j) = out.values[static_cast<std::size_t>((static_cast<Eigen::Index>(b) * ni + i) * ei + j)] -
                  (c.b_o ? c.b_o->values[static_cast<std::size_t>(j)] : 0.0);
    m.numerical = measured(s, c, M, m.exact);
  }
  return m;
}

void check_call(const captured_call& c) {
  const std::string who = "call '" + one_line(c.name, 80) + "'";
  check_4d(c.q, who + " q");
  check_4d(c.k, who + " k");
  check_4d(c.v, who + " v");
  const std::size_t B = dim(c.q, 0), H = dim(c.q, 1), nq = dim(c.q, 2), d = dim(c.q, 3);
  const std::size_t Hkv = dim(c.k, 1), nk = dim(c.k, 2);
  if (dim(c.k, 0) != B || dim(c.v, 0) != B || dim(c.v, 1) != Hkv || dim(c.v, 2) != nk || dim(c.k, 3) != d)
    throw input_error(who + ": q, k and v do not fit: q (b, h, n_q, d), k (b, h_kv, n_k, d), v (b, h_kv, n_k, d_v)");
  if (Hkv == 0 || H % Hkv != 0) throw input_error(who + ": the query heads are not a multiple of the key/value heads");
  if (B == 0 || nq == 0 || nk == 0 || d == 0) throw input_error(who + ": an empty array");
  (void)format_of_dtype(c.dtype);
  if (c.allowed) {
    const tensor& a = *c.allowed;
    if (a.shape.size() != 4 || (dim(a, 0) != 1 && dim(a, 0) != B) || (dim(a, 1) != 1 && dim(a, 1) != H) || dim(a, 2) != nq ||
        dim(a, 3) != nk)
      throw input_error(who + ": allowed must be (b or 1, h or 1, n_q, n_k)");
  }
  if (c.w_o) {
    const tensor& w = *c.w_o;
    if (w.shape.size() != 2 || w.shape[1] != H * dim(c.v, 3)) throw input_error(who + ": w_o must be (E, h * d_v)");
    if (c.output && c.output->shape != std::vector<std::size_t>{B, nq, w.shape[0]}) throw input_error(who + ": output must be (b, n_q, E)");
    if (c.b_o && c.b_o->shape != std::vector<std::size_t>{w.shape[0]}) throw input_error(who + ": b_o must be (E,)");
  }
  if (c.output)
    for (double v : c.output->values)
      if (!std::isfinite(v)) throw input_error(who + " output: contains NaN or Inf");
  if (c.residual) {
    const tensor& x = *c.residual;
    if (x.shape.size() != 3 || x.shape[0] != B || x.shape[1] != nq) throw input_error(who + ": the residual stream must be (b, n_q, E)");
    if (c.w_o && x.shape[2] != c.w_o->shape[0]) throw input_error(who + ": the residual stream's width is not w_o's E");
    for (double v : x.values)
      if (!std::isfinite(v)) throw input_error(who + " residual: contains NaN or Inf");
  }
  if (c.weights) {
    check_4d(*c.weights, who + " weights");
    if (c.weights->shape != std::vector<std::size_t>{B, H, nq, nk}) throw input_error(who + ": weights must be (b, h, n_q, n_k)");
  }
}

}  // namespace

std::string sha256_hex(const std::string& bytes) {
  sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, bytes.size(), reinterpret_cast<const std::uint8_t*>(bytes.data()));
  std::uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_digest(&ctx, SHA256_DIGEST_SIZE, digest);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (std::uint8_t x : digest) {
    out += hex[x >> 4];
    out += hex[x & 15];
  }
  return out;
}

std::string default_audit_spec_text() {
  const audit_spec d;
  ojson j;
  j["objects"] = d.objects;
  j["formats"] = d.formats;
  j["policies"] = d.policies;
  j["allowable_output_error"] = d.allowable_output_error;
  j["target_contrast"] = nullptr;
  j["fixed_at"] = d.fixed_at;
  j["bypass"] = d.bypass;
  j["max_precision"] = d.max_precision;
  j["max_seconds"] = d.max_seconds;
  return j.dump(2) + "\n";
}

namespace {

// {"tokens"|"batches": [a, b], "margin": m} (null or "": none).
target_contrast_spec parse_target_contrast(const nlohmann::json& v) {
  target_contrast_spec t;
  if (v.is_null() || (v.is_string() && v.get<std::string>().empty())) return t;
  const std::string shape = "target_contrast must be null or {\"tokens\": [i, j], \"margin\": m} or {\"batches\": [b1, b2], \"margin\": m}";
  if (!v.is_object()) throw input_error(field("spec") + ": " + shape);
  for (const auto& [k, x] : v.items()) {
    if (k == "tokens" || k == "batches") {
      if (!t.between.empty()) throw input_error(field("spec") + ": target_contrast names both tokens and batches");
      if (!x.is_array() || x.size() != 2 || !x[0].is_number_unsigned() || !x[1].is_number_unsigned())
        throw input_error(field("spec") + ": target_contrast." + k + " must be two non-negative integers");
      t.between = k;
      t.first = x[0].get<std::size_t>();
      t.second = x[1].get<std::size_t>();
      if (t.first == t.second) throw input_error(field("spec") + ": target_contrast." + k + " must name two different " + (k == "tokens" ? "rows" : "inputs"));
    } else if (k == "margin") {
      if (!x.is_number() || !std::isfinite(x.get<double>()) || x.get<double>() < 0)
        throw input_error(field("spec") + ": target_contrast.margin must be a finite number >= 0");
      t.margin = x.get<double>();
    } else {
      throw input_error(field("spec") + ": target_contrast: unknown key '" + one_line(k, 40) + "' (tokens or batches, margin)");
    }
  }
  if (t.between.empty() || !v.contains("margin")) throw input_error(field("spec") + ": " + shape);
  return t;
}

bool is_utc_timestamp(const std::string& t) {
  if (t.size() != 20) return false;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    const bool digit = c >= '0' && c <= '9';
    if (i == 4 || i == 7) { if (c != '-') return false; }
    else if (i == 10) { if (c != 'T') return false; }
    else if (i == 13 || i == 16) { if (c != ':') return false; }
    else if (i == 19) { if (c != 'Z') return false; }
    else if (!digit) return false;
  }
  const int y = std::stoi(t.substr(0, 4)), mo = std::stoi(t.substr(5, 2)), d = std::stoi(t.substr(8, 2)), h = std::stoi(t.substr(11, 2)),
            mi = std::stoi(t.substr(14, 2)), se = std::stoi(t.substr(17, 2));
  if (mo < 1 || mo > 12) return false;
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  const int days[] = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return d >= 1 && d <= days[mo - 1] && h <= 23 && mi <= 59 && se <= 59;
}

}  // namespace

audit_spec parse_audit_spec(const std::string& text) {
  audit_spec s;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw input_error(field("spec") + ": not JSON: " + one_line(e.what(), 200));
  }
  if (!j.is_object()) throw input_error(field("spec") + ": a JSON object is expected");
  for (const auto& [key, value] : j.items()) {
    try {
      if (key == "objects") {
        s.objects = value.get<std::vector<std::string>>();
        const std::set<std::string> known{"scores", "attention", "values", "output", "multi_head", "residual"};
        for (const auto& o : s.objects)
          if (!known.count(o))
            throw input_error(field("spec") + ": unknown object '" + one_line(o, 40) + "' (scores, attention, values, output, multi_head, residual)");
        if (std::set<std::string>(s.objects.begin(), s.objects.end()).size() != s.objects.size())
          throw input_error(field("spec") + ": objects names an object twice");
      } else if (key == "formats") {
        s.formats = value.get<std::string>();
        if (!s.formats.empty()) (void)parse_formats(s.formats);
      } else if (key == "policies") {
        s.policies = value.get<std::string>();
        (void)parse_policies(s.policies);
      } else if (key == "allowable_output_error") {
        s.allowable_output_error = value.get<double>();
        if (!(s.allowable_output_error >= 0) || !std::isfinite(s.allowable_output_error))
          throw input_error(field("spec") + ": allowable_output_error must be a finite number >= 0");
      } else if (key == "target_contrast") {
        s.target_contrast = parse_target_contrast(value);
      } else if (key == "fixed_at") {
        s.fixed_at = value.get<std::string>();
        if (!s.fixed_at.empty() && !is_utc_timestamp(s.fixed_at))
          throw input_error(field("spec") + ": fixed_at must be a UTC time YYYY-MM-DDTHH:MM:SSZ (or \"\"), got '" + one_line(s.fixed_at, 40) + "'");
      } else if (key == "bypass") {
        s.bypass = value.get<std::vector<std::string>>();
      } else if (key == "max_precision") {
        if (!value.is_number_integer()) throw input_error(field("spec") + ": max_precision must be an integer number of bits");
        s.max_precision = value.get<unsigned>();
        if (s.max_precision < 128 || s.max_precision > (1u << 20))
          throw input_error(field("spec") + ": max_precision must be in [128, 1048576]");
      } else if (key == "max_seconds") {
        s.max_seconds = value.get<double>();
        if (!(s.max_seconds >= 0) || s.max_seconds > 1e7) throw input_error(field("spec") + ": max_seconds must be in [0, 1e7]");
      } else {
        throw input_error(field("spec") + ": unknown key '" + one_line(key, 60) +
                          "' (objects, formats, policies, allowable_output_error, target_contrast, fixed_at, bypass, max_precision, max_seconds)");
      }
    } catch (const nlohmann::json::exception&) {
      throw input_error(field("spec") + ": " + one_line(key, 60) + " has a value of the wrong type (" + value.type_name() + ")");
    }
  }
  if (s.objects.empty()) throw input_error(field("spec") + ": objects must name at least one object");
  s.text = text;
  s.sha256 = sha256_hex(text);
  return s;
}

namespace {
// A decimal end of an outward enclosure as a binary64 number that is still outward (strtod rounds to
// nearest, which may move it inward by up to an ulp: one step outward restores the containment).
double outward_lo(const std::string& t) { return std::nextafter(std::stod(t), -HUGE_VAL); }
double outward_hi(const std::string& t) { return std::nextafter(std::stod(t), HUGE_VAL); }
}  // namespace

void check_registered(const audit_spec& spec, const registered_criteria& reg) {
  if (spec.sha256 != reg.sha256)
    throw input_error("the spec's SHA-256 " + spec.sha256 + " is not the registered " + one_line(reg.sha256, 80) + " (" + one_line(reg.source, 200) +
                      "): the criteria changed after they were fixed; audit under the registered spec, or register the new one and say so");
  if (!reg.fixed_at.empty() && reg.fixed_at != spec.fixed_at)
    throw input_error("the spec's fixed_at '" + spec.fixed_at + "' is not the registered '" + one_line(reg.fixed_at, 40) + "' (" + one_line(reg.source, 200) + ")");
}

const char* to_string(outcome o) {
  switch (o) {
    case outcome::rank_kept_within_tolerance: return "rank-kept/within-tolerance";
    case outcome::rank_kept_exceeds_tolerance: return "rank-kept/exceeds-tolerance";
    case outcome::rank_reduced_adequate: return "rank-reduced/adequate";
    case outcome::rank_reduced_inadequate: return "rank-reduced/inadequate";
    case outcome::undecided: return "undecided";
  }
  return "undecided";
}

outcome outcome_of(const audit_spec& s, const head_result& h, const std::string& dtype_format, std::string& why) {
  const object_result* att = nullptr;
  for (const auto& o : h.objects)
    if (o.object == "attention") att = &o;
  if (!att) {
    why = "the spec's objects do not include attention: rank kept or reduced is not measured";
    return outcome::undecided;
  }
  const rank_analysis& a = att->analysis;
  const std::string policy = parse_policies(s.policies).front().name();
  const numerical_rank_entry* e = nullptr;
  for (const auto& x : a.numerical)
    if (x.format == dtype_format && x.policy == policy) e = &x;
  if (!e) {
    why = "no numerical rank in the model's format " + dtype_format + " under " + policy;
    return outcome::undecided;
  }
  bool kept = false;
  if (e->rank < a.exact.lo) kept = false;
  else if (a.exact.exact() && e->rank == a.exact.lo) kept = true;
  else {
    why = "the numerical rank " + std::to_string(e->rank) + " (" + dtype_format + ", " + policy + ") against the exact rank [" +
          std::to_string(a.exact.lo) + ", " + std::to_string(a.exact.hi) + "] decides neither kept nor reduced";
    return outcome::undecided;
  }
  if (h.output_error_rel_hi.empty()) {
    why = std::string(kept ? "rank kept" : "rank reduced") + "; the model's attention weights were not captured, so its output error is not bounded";
    return outcome::undecided;
  }
  // The decimals are rounded outward, so they contain the relative output error; strtod rounds each to
  // nearest, which may move it inward by up to an ulp: one step outward restores the containment.
  const double lo = outward_lo(h.output_error_rel_lo), hi = outward_hi(h.output_error_rel_hi);
  const std::string rk = std::string(kept ? "rank kept (" : "rank reduced (") + std::to_string(e->rank) + " in " + dtype_format + " under " +
                         policy + ", exact " + std::to_string(a.exact.lo) + ")";
  std::string err = "the output error relative to max|v_j| lies in [" + h.output_error_rel_lo + ", " + h.output_error_rel_hi + "]";
  // -1: fails the criterion, 0: not decided, 1: meets it
  const int error_ok = hi <= s.allowable_output_error ? 1 : lo > s.allowable_output_error ? -1 : 0;
  err += error_ok == 1 ? ", within the allowance " : error_ok == -1 ? ", above the allowance " : ", which contains the allowance ";
  err += shortest(s.allowable_output_error);
  int contrast_ok = 1;
  const target_contrast_spec& tc = s.target_contrast;
  if (!tc.between.empty() && (tc.between == "tokens" || h.batch == tc.first)) {
    if (h.contrast_model_lo.empty()) {
      contrast_ok = 0;
      err += "; the target contrast of the model is not measured";
    } else {
      const double clo = outward_lo(h.contrast_model_lo), chi = outward_hi(h.contrast_model_hi);
      contrast_ok = clo >= tc.margin ? 1 : chi < tc.margin ? -1 : 0;
      err += "; the target contrast (" + tc.between + " " + std::to_string(tc.first) + ", " + std::to_string(tc.second) + ") of the model lies in [" +
             h.contrast_model_lo + ", " + h.contrast_model_hi + "], " +
             (contrast_ok == 1 ? "at least" : contrast_ok == -1 ? "below" : "which contains") + " the margin " + shortest(tc.margin);
    }
  }
  if (error_ok == -1 || contrast_ok == -1) {
    why = rk + "; " + err;
    return kept ? outcome::rank_kept_exceeds_tolerance : outcome::rank_reduced_inadequate;
  }
  if (error_ok == 1 && contrast_ok == 1) {
    why = rk + "; " + err;
    return kept ? outcome::rank_kept_within_tolerance : outcome::rank_reduced_adequate;
  }
  why = rk + "; " + err + ": not decided";
  return outcome::undecided;
}

std::vector<control_result> controls(const audit_spec& s) {
  std::vector<control_result> out;
  const std::string formats = s.formats.empty() ? "binary32,binary64" : s.formats;
  auto run = [&](const std::string& name, const std::string& object, const std::string& statement, std::size_t expected,
                 rank_request r) {
    control_result c{name, object, statement, expected, analyse_rank(r), false};
    c.passed = c.analysis.exact.lo == expected && c.analysis.exact.hi == expected;
    out.push_back(std::move(c));
  };
  {  // two-token attention at a = 1: A symmetric with eigenvalues 1 and tanh 1, rank 2 (P01)
    rank_request r = base_request(s, formats);
    matrix<mpq_rational> S(2, 2);
    S << 1, -1, -1, 1;
    r.S = S;
    r.object = layer_object::attention;
    run("two-token", "attention", "softmax of [[a, -a], [-a, a]] at a = 1 has rank 2 (eigenvalues 1 and tanh a)", 2, r);
  }
  {  // identical values: every output row is the common value row, rank 1
    rank_request r = base_request(s, formats);
    matrix<mpq_rational> Q(4, 2), K(4, 2), V(4, 3);
    Q << 1, 0, 0, 1, 1, 1, 2, -1;
    K << 1, 2, -1, 0, 0, 1, 1, -1;
    for (int j = 0; j < 4; ++j) V.row(j) << 1, -2, 3;
    r.Q = Q;
    r.K = K;
    r.V = V;
    r.scale = mpq_rational(1, 2);
    r.object = layer_object::output;
    run("identical-values", "output", "identical value rows give output rank 1 whatever the attention", 1, r);
  }
  {  // a causal mask: the attention is lower triangular with a positive diagonal, full rank
    rank_request r = base_request(s, formats);
    matrix<mpq_rational> S(5, 5);
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 5; ++j) S(i, j) = 1;  // rank-one scores
    r.S = S;
    r.M = mask::causal();
    r.object = layer_object::attention;
    run("causal", "attention", "a causal mask on rank-one scores gives full-rank attention (5)", 5, r);
  }
  return out;
}

namespace {

// Rows or batches named by the spec's target contrast that a call does not have: refused before anything runs.
void check_contrast_fits(const target_contrast_spec& tc, const std::vector<captured_call>& calls) {
  for (const auto& c : calls) {
    const std::string who = "call '" + one_line(c.name, 80) + "'";
    if (tc.between == "tokens" && std::max(tc.first, tc.second) >= dim(c.q, 2))
      throw input_error(field("spec") + ": target_contrast.tokens [" + std::to_string(tc.first) + ", " + std::to_string(tc.second) + "]: " + who +
                        " has " + std::to_string(dim(c.q, 2)) + " query rows");
    if (tc.between == "batches" && std::max(tc.first, tc.second) >= dim(c.q, 0))
      throw input_error(field("spec") + ": target_contrast.batches [" + std::to_string(tc.first) + ", " + std::to_string(tc.second) + "]: " + who +
                        " has a batch of " + std::to_string(dim(c.q, 0)));
  }
}

// The call's identity and shape (no result yet).
call_result describe_call(const captured_call& c) {
  call_result cr;
  cr.name = c.name;
  cr.kind = c.kind;
  cr.dtype = c.dtype;
  cr.scale = c.scale;
  cr.mask_kind = c.mask_kind;
  cr.batch = dim(c.q, 0);
  cr.heads = dim(c.q, 1);
  cr.kv_heads = dim(c.k, 1);
  cr.n_q = dim(c.q, 2);
  cr.n_k = dim(c.k, 2);
  cr.head_dim = dim(c.q, 3);
  cr.value_dim = dim(c.v, 3);
  return cr;
}

void not_computed(audit_result& r, call_result& cr, std::size_t b, const std::string& what) {
  r.partial = true;
  cr.notes.push_back("batch " + std::to_string(b) + " " + what + ": not computed (past max_seconds)");
}

// Every head of the call, each with its outcome.
void audit_heads(const audit_spec& s, const captured_call& c, audit_result& r, call_result& cr,
                 const std::function<void(const std::string&)>& progress, std::chrono::steady_clock::time_point t0) {
  for (std::size_t b = 0; b < cr.batch; ++b)
    for (std::size_t h = 0; h < cr.heads; ++h) {
      const std::string head = "head " + std::to_string(h);
      if (deadline_passed()) {
        not_computed(r, cr, b, head);
        continue;
      }
      if (progress) progress(c.name + " batch " + std::to_string(b) + " " + head);
      head_result hr;
      try {
        hr = audit_head(s, c, b, h, t0);
      } catch (const time_limit_reached&) {
        not_computed(r, cr, b, head);
        continue;
      } catch (const input_error& e) {
        throw input_error("call '" + one_line(c.name, 80) + "' batch " + std::to_string(b) + " " + head + ": " + e.what());
      }
      for (const auto& o : hr.objects) r.partial = r.partial || o.analysis.partial;
      std::string why;
      hr.result = outcome_of(s, hr, format_of_dtype(c.dtype), why);
      hr.why = hr.why.empty() ? why : hr.why + "; " + why;
      cr.heads_results.push_back(std::move(hr));
    }
}

bool wants(const audit_spec& s, const char* object) { return std::find(s.objects.begin(), s.objects.end(), object) != s.objects.end(); }

// The multi-head object of every batch (when the spec asks for it).
void audit_multi_head(const audit_spec& s, const captured_call& c, audit_result& r, call_result& cr) {
  for (std::size_t b = 0; b < cr.batch; ++b) {
    if (!c.w_o) {
      multi_head_result m;
      m.batch = b;
      m.why = "W_O was not captured (the call is not a MultiheadAttention)";
      cr.multi_head.push_back(std::move(m));
      continue;
    }
    if (deadline_passed()) {
      not_computed(r, cr, b, "multi-head object");
      continue;
    }
    try {
      cr.multi_head.push_back(multi_head(s, c, b));
    } catch (const time_limit_reached&) {
      not_computed(r, cr, b, "multi-head object");
    }
  }
}

// The residual object of every batch (when the spec asks for it).
void audit_residual(const audit_spec& s, const captured_call& c, audit_result& r, call_result& cr,
                    const std::function<void(const std::string&)>& progress) {
  for (std::size_t b = 0; b < cr.batch; ++b) {
    if (!c.w_o || !c.residual) {
      residual_result x;
      x.batch = b;
      x.why = !c.w_o ? "W_O was not captured (the call is not a MultiheadAttention)"
                     : "the residual stream is not known (the call is not the self-attention of an nn.TransformerEncoderLayer or DecoderLayer)";
      cr.residual.push_back(std::move(x));
      continue;
    }
    if (deadline_passed()) {
      not_computed(r, cr, b, "residual object");
      continue;
    }
    if (progress) progress(c.name + " batch " + std::to_string(b) + " residual");
    try {
      cr.residual.push_back(residual(s, c, b));
    } catch (const time_limit_reached&) {
      not_computed(r, cr, b, "residual object");
    }
  }
}

}  // namespace

audit_result run_audit(const audit_spec& s, const std::vector<captured_call>& calls,
                       const std::function<void(const std::string&)>& progress) {
  for (const auto& c : calls) check_call(c);
  if (calls.empty()) throw input_error("no attention call to audit (the capture holds none)");
  const auto t0 = std::chrono::steady_clock::now();
  audit_result r;
  r.spec = s;
  if (progress) progress("negative controls");
  r.controls = controls(s);
  for (const auto& c : r.controls)
    if (!c.passed)
      throw internal_error("negative control '" + c.name + "' failed (exact rank [" + std::to_string(c.analysis.exact.lo) + ", " +
                               std::to_string(c.analysis.exact.hi) + "], expected " + std::to_string(c.expected) +
                               "): no model result is reported");
  check_contrast_fits(s.target_contrast, calls);
  deadline_scope budget(s.max_seconds);
  for (const auto& c : calls) {
    call_result cr = describe_call(c);
    if (c.bias) {
      cr.notes.push_back("an additive attention bias was captured: its heads are not audited yet (not computed)");
    } else {
      audit_heads(s, c, r, cr, progress, t0);
      if (wants(s, "multi_head")) audit_multi_head(s, c, r, cr);
      if (wants(s, "residual")) audit_residual(s, c, r, cr, progress);
    }
    r.calls.push_back(std::move(cr));
  }
  return r;
}

}  // namespace attncert::audit
