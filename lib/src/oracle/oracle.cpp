// lib/src/oracle/oracle.cpp — the reference oracle: orchestration, the MPFI (Ziv) stage, rounding to
// the target format, and the grading of candidates.  See attention/oracle.hpp and
// proofs/P11-oracle.md.
#include "attncert/oracle/oracle.hpp"

#include <gmp.h>
#include <mpfi.h>
#include <mpfr.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <memory>
#include <limits>
#include <mutex>
#include <thread>

#include "attncert/error.hpp"
#include "attncert/number/double_double.hpp"
#include "attncert/number/emulated.hpp"
#include "attncert/number/traits.hpp"

namespace attncert::oracle {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr unsigned first_mpfi_bits = 128;
constexpr unsigned cap_limit = 1u << 16;

// ---- small RAII wrappers around the MPFR / MPFI C types ------------------------------------

struct fr {
  mpfr_t v;
  explicit fr(mpfr_prec_t p) { mpfr_init2(v, p); }
  ~fr() { mpfr_clear(v); }
  fr(const fr&) = delete;
  fr& operator=(const fr&) = delete;
};
struct fi {
  mpfi_t v;
  explicit fi(mpfr_prec_t p) { mpfi_init2(v, p); }
  ~fi() { mpfi_clear(v); }
  fi(const fi&) = delete;
  fi& operator=(const fi&) = delete;
};

std::string index_text(std::size_t b, std::size_t h, std::size_t i, std::size_t k) {
  return "(" + std::to_string(b) + ", " + std::to_string(h) + ", " + std::to_string(i) + ", " + std::to_string(k) + ")";
}

// RN of a double to a narrower target (one correct rounding).
double rn_from_double(double s, target_format t) noexcept {
  switch (t) {
    case target_format::binary64: return s;
    case target_format::binary32: return static_cast<double>(static_cast<float>(s));
    case target_format::binary16: return static_cast<double>(binary16(s));
    case target_format::bfloat16: return static_cast<double>(bfloat16(s));
  }
  return s;
}

// RN_t(s + eps) where eps has sign `dir` and |eps| is below one binary64 ulp of s and does not
// reach the next binary64 number (e.g. the error term of two_sum, or the remainder after a
// rounding toward zero).  Every rounding boundary (midpoint) of a target narrower than binary64
// is a binary64 number, so s + eps lies on the same side of every boundary as s unless s is a
// boundary itself; then the sign of eps decides.
double round_dir(double s, int dir, target_format t) noexcept {
  const double f = rn_from_double(s, t);
  if (dir == 0 || t == target_format::binary64 || !std::isfinite(s)) return f;
  const double ulp = target_ulp(s, t);
  const double half = ulp * 0.5;
  const double x = s / half;  // exact (power-of-two scaling), |x| < 2^(p+2)
  if (x == std::trunc(x) && std::fmod(std::fabs(x), 2.0) == 1.0)  // s is a midpoint
    return rn_from_double(dir > 0 ? s + half : s - half, t);
  return f;
}

// RN of an MPFR number to the target.
double round_mpfr_to_target(mpfr_srcptr x, target_format t) {
  if (mpfr_nan_p(x)) return std::numeric_limits<double>::quiet_NaN();
  if (mpfr_zero_p(x)) return mpfr_signbit(x) ? -0.0 : 0.0;
  if (t == target_format::binary64) {
    // RN to binary64 with gradual underflow and overflow, by comparison with the midpoint.
    const double z = mpfr_get_d(x, MPFR_RNDZ);
    const int c = mpfr_cmp_d(x, z);
    if (c == 0) return z;
    if (std::fabs(z) == std::numeric_limits<double>::max()) {
      // Overflow threshold 2^1024 (1 - 2^-54): at or beyond it RN gives ±Inf.
      fr th(64);
      mpfr_set_ui_2exp(th.v, 1, 1024, MPFR_RNDN);
      mpfr_sub_d(th.v, th.v, std::ldexp(1.0, 970), MPFR_RNDN);  // exact at 64 bits
      if (mpfr_cmpabs(x, th.v) >= 0) return std::copysign(inf, z);
      return z;
    }
    const double away = std::nextafter(z, c > 0 ? inf : -inf);
    fr mid(64);
    mpfr_set_d(mid.v, z, MPFR_RNDN);
    mpfr_add_d(mid.v, mid.v, away, MPFR_RNDN);  // exact: adjacent binary64 numbers
    mpfr_div_2ui(mid.v, mid.v, 1, MPFR_RNDN);
    const int cm = mpfr_cmpabs(x, mid.v);
    if (cm < 0) return z == 0 ? std::copysign(0.0, away) : z;
    if (cm > 0) return away;
    // tie: the one with an even last significand bit
    std::uint64_t bz = 0;
    std::memcpy(&bz, &z, sizeof bz);
    return (bz & 1u) == 0 ? (z == 0 ? std::copysign(0.0, away) : z) : away;
  }
  const double z = mpfr_get_d(x, MPFR_RNDZ);  // |x - z| < one binary64 ulp, same side
  const int c = mpfr_cmp_d(x, z);
  // c > 0 means x > z (x positive, as z = RZ(x)); the remainder x - z has the sign of c.
  double r = round_dir(z, c == 0 ? 0 : (c > 0 ? 1 : -1), t);
  if (r == 0) r = mpfr_signbit(x) ? -0.0 : 0.0;
  return r;
}

// Decides whether two target numbers are adjacent (or equal).
bool adjacent_or_equal(double a, double b, target_format t) {
  if (!std::isfinite(a) || !std::isfinite(b)) return false;
  if (a == b) return true;
  const double lo = std::min(a, b), hi = std::max(a, b);
  const double diff = hi - lo;  // exact for adjacent numbers of any target
  return diff == target_ulp(lo, t) || diff == target_ulp(hi, t);
}

// ---- the scale ---------------------------------------------------------------------------------

struct scale_value {
  bool inv_sqrt_d = true;
  mpq_t q;
  unsigned d = 1;
  double hi = 0, lo = 0, rad = 0;  // |s - (hi + lo)| <= rad
  int sign = 1;
  scale_value() { mpq_init(q); }
  ~scale_value() { mpq_clear(q); }
  scale_value(const scale_value&) = delete;
  scale_value& operator=(const scale_value&) = delete;
  void enclose(mpfi_ptr out) const {
    if (inv_sqrt_d) {
      mpfi_set_ui(out, d);
      mpfi_sqrt(out, out);
      mpfi_ui_div(out, 1, out);
    } else {
      mpfi_set_q(out, q);
    }
  }
};

void init_scale(scale_value& sv, const scale_spec& spec, std::size_t d) {
  sv.inv_sqrt_d = spec.inv_sqrt_d;
  sv.d = static_cast<unsigned>(d);
  if (!spec.inv_sqrt_d) {
    const mpq_rational r = number_traits<mpq_rational>::from_string(spec.rational);
    mpq_set(sv.q, r.backend().data());
    if (mpz_sizeinbase(mpq_numref(sv.q), 2) > 4000 || mpz_sizeinbase(mpq_denref(sv.q), 2) > 4000)
      throw input_error("--scale '" + spec.rational + "' is too large or too small (more than 4000 bits)");
  }
  fi s(400);
  sv.enclose(s.v);
  fr mid(400), a(2600), t(2600);
  mpfi_mid(mid.v, s.v);
  sv.sign = mpfr_sgn(mid.v) > 0 ? 1 : (mpfr_sgn(mid.v) < 0 ? -1 : 0);
  sv.hi = mpfr_get_d(mid.v, MPFR_RNDN);
  if (!std::isfinite(sv.hi) || std::fabs(sv.hi) > 0x1p1000 || (sv.hi != 0 && std::fabs(sv.hi) < 0x1p-900)) {
    sv.hi = sv.lo = 0;
    sv.rad = inf;  // the fast path declines; the MPFI stage handles any scale
    return;
  }
  mpfr_sub_d(a.v, mid.v, sv.hi, MPFR_RNDN);  // exact at 2600 bits
  sv.lo = mpfr_get_d(a.v, MPFR_RNDN);
  // rad >= max(|left - (hi+lo)|, |right - (hi+lo)|), each difference exact at 2600 bits.
  double rad = 0;
  for (int side = 0; side < 2; ++side) {
    if (side == 0) mpfi_get_left(t.v, s.v);
    else mpfi_get_right(t.v, s.v);
    mpfr_sub_d(t.v, t.v, sv.hi, MPFR_RNDN);
    mpfr_sub_d(t.v, t.v, sv.lo, MPFR_RNDN);
    mpfr_abs(t.v, t.v, MPFR_RNDN);
    rad = std::max(rad, mpfr_get_d(t.v, MPFR_RNDU));
  }
  sv.rad = rad;
  const dd n = two_sum(sv.hi, sv.lo);
  if (n.hi != sv.hi) sv.rad = inf;  // not normalized (cannot happen for RN); decline fast path
}

// ---- per-head data -----------------------------------------------------------------------------

struct head_data {
  std::vector<double> KT;                    // d × nk
  std::vector<std::uint8_t> k_finite, v_finite;  // per key
};

// ---- the MPFI stage for one row ----------------------------------------------------------------

struct mpfi_row_ctx {
  const double* q;
  const double* K;
  const double* V;
  const std::uint8_t* allowed;
  std::size_t nk, d, dv;
  const scale_value* scale;
};

// Encloses o_k for k in `ks` at `prec` bits.  out[idx] receives the enclosure of o_{ks[idx]}.
void mpfi_row(const mpfi_row_ctx& c, const std::vector<std::size_t>& ks, mpfr_prec_t prec, std::vector<fi*>& out) {
  const std::size_t d = c.d;
  // approximate reference key: argmax of sign(s) q·k_j in binary64 (any choice is exact)
  auto approx_key = [&]() {
    std::size_t best = c.nk;
    double bv = -inf;
    for (std::size_t j = 0; j < c.nk; ++j) {
      if (!c.allowed[j]) continue;
      double acc = 0;
      for (std::size_t l = 0; l < d; ++l) acc += c.q[l] * c.K[j * d + l];
      const double v = c.scale->sign * acc;
      if (best == c.nk || v > bv || std::isnan(bv)) {
        best = j;
        bv = v;
      }
    }
    return best;
  };
  std::size_t ref = approx_key();
  std::vector<std::unique_ptr<fr>> store;
  store.reserve(2 * d);
  for (std::size_t l = 0; l < 2 * d; ++l) store.push_back(std::make_unique<fr>(106));
  std::vector<mpfr_ptr> ptrs(2 * d);
  for (std::size_t l = 0; l < 2 * d; ++l) ptrs[l] = store[l]->v;
  fr lo(prec), hi(prec);
  std::vector<std::unique_ptr<fi>> D(c.nk);
  auto differences = [&](std::size_t r) {
    for (std::size_t l = 0; l < d; ++l) {
      mpfr_set_d(store[d + l]->v, c.q[l], MPFR_RNDN);
      mpfr_mul_d(store[d + l]->v, store[d + l]->v, -c.K[r * d + l], MPFR_RNDN);  // exact (106 bits)
    }
    for (std::size_t j = 0; j < c.nk; ++j) {
      if (!c.allowed[j]) continue;
      if (!D[j]) D[j] = std::make_unique<fi>(prec);
      if (j == r) {
        mpfi_set_ui(D[j]->v, 0);
        continue;
      }
      for (std::size_t l = 0; l < d; ++l) {
        mpfr_set_d(store[l]->v, c.q[l], MPFR_RNDN);
        mpfr_mul_d(store[l]->v, store[l]->v, c.K[j * d + l], MPFR_RNDN);  // exact
      }
      mpfr_sum(lo.v, ptrs.data(), 2 * d, MPFR_RNDD);
      mpfr_sum(hi.v, ptrs.data(), 2 * d, MPFR_RNDU);
      mpfi_interv_fr(D[j]->v, lo.v, hi.v);
    }
  };
  differences(ref);
  // If another key has a larger exact score, shift by that one instead (so no exponent is large
  // and positive): the exact differences decide it up to the tiny width of D.
  {
    std::size_t best = ref;
    fr m(prec), bm(prec);
    mpfr_set_ui(bm.v, 0, MPFR_RNDN);
    for (std::size_t j = 0; j < c.nk; ++j) {
      if (!c.allowed[j] || j == ref) continue;
      mpfi_mid(m.v, D[j]->v);
      if (c.scale->sign < 0) mpfr_neg(m.v, m.v, MPFR_RNDN);
      if (mpfr_cmp(m.v, bm.v) > 0) {
        mpfr_set(bm.v, m.v, MPFR_RNDN);
        best = j;
      }
    }
    if (best != ref) {
      ref = best;
      differences(ref);
    }
  }
  fi s(prec), z(prec), w(prec), W(prec), t(prec);
  c.scale->enclose(s.v);
  mpfi_set_ui(W.v, 0);
  std::vector<std::unique_ptr<fi>> N;
  for (std::size_t idx = 0; idx < ks.size(); ++idx) {
    N.push_back(std::make_unique<fi>(prec));
    mpfi_set_ui(N.back()->v, 0);
  }
  for (std::size_t j = 0; j < c.nk; ++j) {
    if (!c.allowed[j]) continue;
    mpfi_mul(z.v, s.v, D[j]->v);
    mpfi_exp(w.v, z.v);
    mpfi_add(W.v, W.v, w.v);
    for (std::size_t idx = 0; idx < ks.size(); ++idx) {
      mpfi_mul_d(t.v, w.v, c.V[j * c.dv + ks[idx]]);
      mpfi_add(N[idx]->v, N[idx]->v, t.v);
    }
  }
  for (std::size_t idx = 0; idx < ks.size(); ++idx) {
    mpfi_set_prec(out[idx]->v, prec);
    mpfi_div(out[idx]->v, N[idx]->v, W.v);
  }
}

// Fills t_hi, t_lo, t_rad from an MPFI enclosure: |o - (hi + lo)| <= rad.
void enclosure_to_dd(mpfi_srcptr o, double& hi, double& lo, double& rad) {
  const mpfr_prec_t p = mpfi_get_prec(o) + 2400;
  fr mid(mpfi_get_prec(o)), a(p), e(p);
  mpfi_mid(mid.v, o);
  hi = mpfr_get_d(mid.v, MPFR_RNDN);
  if (!std::isfinite(hi)) {
    lo = 0;
    rad = inf;
    return;
  }
  mpfr_sub_d(a.v, mid.v, hi, MPFR_RNDN);  // exact at p bits
  lo = mpfr_get_d(a.v, MPFR_RNDN);
  rad = 0;
  for (int side = 0; side < 2; ++side) {
    if (side == 0) mpfi_get_left(e.v, o);
    else mpfi_get_right(e.v, o);
    mpfr_sub_d(e.v, e.v, hi, MPFR_RNDN);  // exact
    mpfr_sub_d(e.v, e.v, lo, MPFR_RNDN);  // exact
    mpfr_abs(e.v, e.v, MPFR_RNDN);
    rad = std::max(rad, mpfr_get_d(e.v, MPFR_RNDU));
  }
}

// Shapes: checks and describes.
void check_tensor(const tensor4& t, const char* name) {
  if (t.n == 0 || t.d == 0 || t.B == 0 || t.H == 0)
    throw input_error(std::string(name) + " is empty (shape has a zero dimension)");
  if (t.values.size() != t.B * t.H * t.n * t.d) throw input_error(std::string(name) + ": values do not match the shape");
}

}  // namespace

// ---- public helpers ------------------------------------------------------------------------------

target_format parse_target(const std::string& s) {
  if (s == "binary64" || s == "float64" || s == "fp64" || s == "f64") return target_format::binary64;
  if (s == "binary32" || s == "float32" || s == "fp32" || s == "f32") return target_format::binary32;
  if (s == "binary16" || s == "float16" || s == "fp16" || s == "f16" || s == "half") return target_format::binary16;
  if (s == "bfloat16" || s == "bf16") return target_format::bfloat16;
  throw input_error("unknown target format '" + s + "' (expected binary64, binary32, binary16 or bfloat16)");
}

std::string to_string(target_format t) {
  switch (t) {
    case target_format::binary64: return "binary64";
    case target_format::binary32: return "binary32";
    case target_format::binary16: return "binary16";
    case target_format::bfloat16: return "bfloat16";
  }
  return "?";
}

int target_precision(target_format t) {
  switch (t) {
    case target_format::binary64: return 53;
    case target_format::binary32: return 24;
    case target_format::binary16: return 11;
    case target_format::bfloat16: return 8;
  }
  return 53;
}

int target_emin(target_format t) {
  switch (t) {
    case target_format::binary64: return -1022;
    case target_format::binary32: return -126;
    case target_format::binary16: return -14;
    case target_format::bfloat16: return -126;
  }
  return -1022;
}

double target_ulp(double x, target_format t) noexcept {
  const int p = target_precision(t), emin = target_emin(t);
  int e = emin;
  if (x != 0 && std::isfinite(x)) e = std::max(std::ilogb(x), emin);
  return std::ldexp(1.0, e - p + 1);
}

double round_sum_to_target(double a, double b, target_format t) noexcept {
  if (t == target_format::binary64) return a + b;  // one IEEE addition: RN of the exact sum
  const dd s = two_sum(a, b);
  return round_dir(s.hi, s.lo > 0 ? 1 : (s.lo < 0 ? -1 : 0), t);
}

// ---- the oracle ----------------------------------------------------------------------------------

oracle_result run_oracle(const oracle_request& req) {
  check_tensor(req.Q, "Q");
  check_tensor(req.K, "K");
  check_tensor(req.V, "V");
  const auto& Q = req.Q;
  const auto& K = req.K;
  const auto& V = req.V;
  if (K.B != Q.B || K.H != Q.H || V.B != Q.B || V.H != Q.H)
    throw input_error("Q, K and V must have the same batch and head dimensions");
  if (K.d != Q.d)
    throw input_error("Q and K differ in feature dimension (" + std::to_string(Q.d) + " vs " + std::to_string(K.d) + ")");
  if (V.n != K.n)
    throw input_error("K and V differ in sequence length (" + std::to_string(K.n) + " vs " + std::to_string(V.n) + ")");
  if (req.max_bits < first_mpfi_bits || req.max_bits > cap_limit)
    throw input_error("precision cap " + std::to_string(req.max_bits) + " bits is out of range [" +
                      std::to_string(first_mpfi_bits) + ", " + std::to_string(cap_limit) + "] (precision too low?)");
  if (req.mask == mask_kind::explicit_mask) {
    const auto& M = req.M;
    if (M.nq != Q.n || M.nk != K.n)
      throw input_error("mask shape (..., " + std::to_string(M.nq) + ", " + std::to_string(M.nk) +
                        ") does not match (n_q, n_k) = (" + std::to_string(Q.n) + ", " + std::to_string(K.n) + ")");
    if ((M.mb != 1 && M.mb != Q.B) || (M.mh != 1 && M.mh != Q.H))
      throw input_error("mask leading dimensions must be 1 or equal to the batch and head dimensions");
    if (M.allowed.size() != M.mb * M.mh * M.nq * M.nk) throw input_error("mask values do not match its shape");
  }
  auto finite_all = [](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
  };
  const bool all_finite = finite_all(Q.values) && finite_all(K.values) && finite_all(V.values);
  if (!all_finite && !req.allow_nonfinite)
    throw input_error("an input contains NaN or Inf (use --allow-nonfinite for IEEE semantics on the affected rows)");

  const std::size_t B = Q.B, H = Q.H, nq = Q.n, nk = K.n, d = Q.d, dv = V.d;
  scale_value sv;
  init_scale(sv, req.scale, d);

  // per-head transposed keys and finiteness
  std::vector<head_data> heads(B * H);
  for (std::size_t bh = 0; bh < B * H; ++bh) {
    auto& hd = heads[bh];
    hd.KT.resize(d * nk);
    const double* Kh = K.values.data() + bh * nk * d;
    for (std::size_t j = 0; j < nk; ++j)
      for (std::size_t l = 0; l < d; ++l) hd.KT[l * nk + j] = Kh[j * d + l];
    if (!all_finite) {
      hd.k_finite.resize(nk);
      hd.v_finite.resize(nk);
      const double* Vh = V.values.data() + bh * nk * dv;
      for (std::size_t j = 0; j < nk; ++j) {
        bool kf = true, vf = true;
        for (std::size_t l = 0; l < d; ++l) kf = kf && std::isfinite(Kh[j * d + l]);
        for (std::size_t l = 0; l < dv; ++l) vf = vf && std::isfinite(Vh[j * dv + l]);
        hd.k_finite[j] = kf;
        hd.v_finite[j] = vf;
      }
    }
  }

  oracle_result res;
  res.B = B;
  res.H = H;
  res.nq = nq;
  res.dv = dv;
  const std::size_t total = B * H * nq * dv;
  res.elements = total;
  res.reference.assign(total, 0.0);
  res.t_hi.assign(total, 0.0);
  res.t_lo.assign(total, 0.0);
  res.t_rad.assign(total, inf);
  res.how.assign(total, decided_by::double_double);
  res.bits_used.assign(total, 0);
  res.fast_kernel_vectorized = detail::kernel_vectorized();

  const std::size_t rows = B * H * nq;
  // Fully masked rows are found up front, so that policy `error` fails before any work.
  auto allowed_row = [&](std::size_t b, std::size_t h, std::size_t i, std::vector<std::uint8_t>& a) {
    a.assign(nk, 1);
    if (req.mask == mask_kind::causal)
      for (std::size_t j = 0; j < nk; ++j) a[j] = j <= i;
    else if (req.mask == mask_kind::explicit_mask)
      for (std::size_t j = 0; j < nk; ++j) a[j] = req.M.at(b, h, i, j);
  };
  if (req.mask == mask_kind::explicit_mask) {
    std::vector<std::uint8_t> a;
    for (std::size_t r = 0; r < rows; ++r) {
      const std::size_t i = r % nq, h = (r / nq) % H, b = r / (nq * H);
      allowed_row(b, h, i, a);
      if (std::none_of(a.begin(), a.end(), [](std::uint8_t x) { return x != 0; }) &&
          req.empty_rows == empty_row_policy::error)
        throw input_error("row (b, h, i) = (" + std::to_string(b) + ", " + std::to_string(h) + ", " + std::to_string(i) +
                          ") is fully masked: softmax is undefined (use --empty-rows zeros|nan to choose a value)");
    }
  }

  std::atomic<std::size_t> next_row{0}, rows_done{0};
  std::atomic<bool> stop{false};
  std::mutex mu;  // guards the summary counters and the first exception
  std::exception_ptr first_error;
  std::vector<std::pair<unsigned, std::size_t>> by_mpfi;
  std::size_t n_dd = 0, n_faithful = 0, n_policy = 0, n_ieee = 0, n_escalated = 0, n_failed = 0, n_empty = 0;

  auto worker = [&](bool main_thread) {
    try {
      detail::row_workspace ws;
      std::vector<std::uint8_t> allowed;
      std::vector<double> ohi(dv), olo(dv), orad(dv), plain(dv);
      std::vector<std::size_t> pending;
      std::vector<std::pair<unsigned, std::size_t>> local_mpfi;
      std::size_t l_dd = 0, l_faithful = 0, l_policy = 0, l_ieee = 0, l_esc = 0, l_failed = 0, l_empty = 0;
      std::size_t last_report = 0;
      for (;;) {
        if (stop.load(std::memory_order_relaxed)) break;
        const std::size_t r = next_row.fetch_add(1);
        if (r >= rows) break;
        const std::size_t i = r % nq, h = (r / nq) % H, b = r / (nq * H);
        const std::size_t bh = b * H + h;
        allowed_row(b, h, i, allowed);
        const std::size_t base = r * dv;
        const bool empty = std::none_of(allowed.begin(), allowed.end(), [](std::uint8_t x) { return x != 0; });
        if (empty) {
          if (req.empty_rows == empty_row_policy::error)
            throw input_error("row (b, h, i) = (" + std::to_string(b) + ", " + std::to_string(h) + ", " +
                              std::to_string(i) + ") is fully masked: softmax is undefined");
          const double v = req.empty_rows == empty_row_policy::zeros ? 0.0 : std::numeric_limits<double>::quiet_NaN();
          for (std::size_t k = 0; k < dv; ++k) {
            res.reference[base + k] = v;
            res.t_hi[base + k] = v;
            res.t_rad[base + k] = req.empty_rows == empty_row_policy::zeros ? 0.0 : std::numeric_limits<double>::quiet_NaN();
            res.how[base + k] = decided_by::exact_policy;
          }
          l_policy += dv;
          ++l_empty;
          rows_done.fetch_add(1);
          continue;
        }
        const double* q = Q.values.data() + (bh * nq + i) * d;
        const double* Kh = K.values.data() + bh * nk * d;
        const double* Vh = V.values.data() + bh * nk * dv;
        detail::row_inputs in{q, Kh, heads[bh].KT.data(), Vh, allowed.data(), nk, d, dv, sv.hi, sv.lo, sv.rad};
        if (!all_finite) {
          bool touches = !std::all_of(q, q + d, [](double x) { return std::isfinite(x); });
          for (std::size_t j = 0; j < nk && !touches; ++j)
            touches = allowed[j] && (!heads[bh].k_finite[j] || !heads[bh].v_finite[j]);
          if (touches) {
            detail::plain_row(in, ws, plain.data());
            for (std::size_t k = 0; k < dv; ++k) {
              res.reference[base + k] = rn_from_double(plain[k], req.target);
              res.t_hi[base + k] = plain[k];
              res.t_rad[base + k] = std::numeric_limits<double>::quiet_NaN();
              res.how[base + k] = decided_by::ieee_nonfinite;
            }
            l_ieee += dv;
            rows_done.fetch_add(1);
            continue;
          }
        }
        pending.clear();
        const bool fast_ok = std::isfinite(sv.rad) && detail::fast_row(in, ws, ohi.data(), olo.data(), orad.data());
        if (!fast_ok) {
          ++l_failed;
          for (std::size_t k = 0; k < dv; ++k) pending.push_back(k);
        } else {
          for (std::size_t k = 0; k < dv; ++k) {
            res.t_hi[base + k] = ohi[k];
            res.t_lo[base + k] = olo[k];
            res.t_rad[base + k] = orad[k];
            if (std::isfinite(orad[k])) {
              const double dn = std::nextafter(olo[k] - orad[k], -inf);
              const double up = std::nextafter(olo[k] + orad[k], inf);
              const double fl = round_sum_to_target(ohi[k], dn, req.target);
              const double fu = round_sum_to_target(ohi[k], up, req.target);
              if (fl == fu) {  // a zero of uncertain sign is reported as +0 (see the header)
                res.reference[base + k] = fl == 0 ? 0.0 : fl;
                res.how[base + k] = decided_by::double_double;
                ++l_dd;
                continue;
              }
            }
            pending.push_back(k);
          }
        }
        if (!pending.empty()) {
          ++l_esc;
          mpfi_row_ctx ctx{q, Kh, Vh, allowed.data(), nk, d, dv, &sv};
          std::vector<std::unique_ptr<fi>> encl;
          std::vector<fi*> eptr;
          for (unsigned prec = first_mpfi_bits;; prec = std::min(prec * 2, req.max_bits)) {
            encl.clear();
            eptr.clear();
            for (std::size_t idx = 0; idx < pending.size(); ++idx) {
              encl.push_back(std::make_unique<fi>(prec));
              eptr.push_back(encl.back().get());
            }
            mpfi_row(ctx, pending, prec, eptr);
            fr L(prec), U(prec);
            std::vector<std::size_t> still;
            std::size_t decided_here = 0;
            for (std::size_t idx = 0; idx < pending.size(); ++idx) {
              const std::size_t k = pending[idx];
              mpfi_get_left(L.v, eptr[idx]->v);
              mpfi_get_right(U.v, eptr[idx]->v);
              const double fl = round_mpfr_to_target(L.v, req.target);
              const double fu = round_mpfr_to_target(U.v, req.target);
              enclosure_to_dd(eptr[idx]->v, res.t_hi[base + k], res.t_lo[base + k], res.t_rad[base + k]);
              if (fl == fu) {
                res.reference[base + k] = fl == 0 ? 0.0 : fl;
                res.how[base + k] = decided_by::mpfi;
                res.bits_used[base + k] = static_cast<std::uint16_t>(std::min(prec, 65535u));
                ++decided_here;
              } else if (prec >= req.max_bits) {
                // Cap reached: faithful rounding if the enclosure lies strictly between two
                // adjacent target numbers.
                if (adjacent_or_equal(fl, fu, req.target) && !std::isnan(fl) && mpfr_cmp_d(L.v, std::min(fl, fu)) > 0 &&
                    mpfr_cmp_d(U.v, std::max(fl, fu)) < 0) {  // strictly between: both neighbours are faithful
                  fr mid(prec);
                  mpfi_mid(mid.v, eptr[idx]->v);
                  res.reference[base + k] = round_mpfr_to_target(mid.v, req.target);
                  res.how[base + k] = decided_by::faithful_only;
                  res.bits_used[base + k] = static_cast<std::uint16_t>(std::min(prec, 65535u));
                  ++l_faithful;
                } else {
                  throw input_error("element (b, h, i, k) = " + index_text(b, h, i, k) +
                                    " could not be enclosed within one ulp of the target at " + std::to_string(prec) +
                                    " bits (precision too low: raise --max-precision)");
                }
              } else {
                still.push_back(k);
              }
            }
            if (decided_here) {
              auto it = std::find_if(local_mpfi.begin(), local_mpfi.end(), [&](auto& pr) { return pr.first == prec; });
              if (it == local_mpfi.end()) local_mpfi.push_back({prec, decided_here});
              else it->second += decided_here;
            }
            if (still.empty() || prec >= req.max_bits) break;
            pending.swap(still);
          }
        }
        const std::size_t done = rows_done.fetch_add(1) + 1;
        if (main_thread && req.progress && done - last_report >= std::max<std::size_t>(1, rows / 200)) {
          last_report = done;
          req.progress(done, rows);
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      n_dd += l_dd;
      n_faithful += l_faithful;
      n_policy += l_policy;
      n_ieee += l_ieee;
      n_escalated += l_esc;
      n_failed += l_failed;
      n_empty += l_empty;
      for (auto& pr : local_mpfi) {
        auto it = std::find_if(by_mpfi.begin(), by_mpfi.end(), [&](auto& x) { return x.first == pr.first; });
        if (it == by_mpfi.end()) by_mpfi.push_back(pr);
        else it->second += pr.second;
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!first_error) first_error = std::current_exception();
      stop = true;
    }
  };
  const unsigned nthreads = std::max(1u, std::min<unsigned>(req.threads, static_cast<unsigned>(std::min<std::size_t>(rows, 64))));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < nthreads; ++t)
    pool.emplace_back([&worker] {
      worker(false);
      mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);  // MPFR's caches are thread-local: free them before the thread ends
    });
  worker(true);
  for (auto& th : pool) th.join();
  if (first_error) std::rethrow_exception(first_error);
  if (req.progress) req.progress(rows, rows);

  std::sort(by_mpfi.begin(), by_mpfi.end());
  res.by_double_double = n_dd;
  res.by_mpfi = by_mpfi;
  res.faithful_only = n_faithful;
  res.exact_policy = n_policy;
  res.ieee_nonfinite = n_ieee;
  res.rows_escalated = n_escalated;
  res.fast_path_rows_failed = n_failed;
  res.empty_rows = n_empty;
  std::size_t by_m = 0;
  for (auto& pr : by_mpfi) by_m += pr.second;
  res.correctly_rounded = n_dd + by_m;
  return res;
}

// ---- grading -------------------------------------------------------------------------------------

candidate_grade grade_candidate(const oracle_result& r, const std::vector<double>& c, target_format t,
                                const std::string& name) {
  if (c.size() != r.reference.size())
    throw input_error("candidate '" + name + "' has " + std::to_string(c.size()) + " elements, the output has " +
                      std::to_string(r.reference.size()));
  candidate_grade g;
  g.name = name;
  g.elements = c.size();
  double sum_ulp = 0;
  for (std::size_t e = 0; e < c.size(); ++e) {
    if (!std::isfinite(r.t_rad[e]) || !std::isfinite(r.t_hi[e])) continue;  // truth not enclosed / not finite
    if (!std::isfinite(c[e])) {
      ++g.nonfinite_where_finite;
      continue;
    }
    ++g.compared;
    const double hi = r.t_hi[e], lo = r.t_lo[e];
    const double diff = std::fabs((c[e] - hi) - lo);
    const double ulp = target_ulp(hi, t);
    const double eu = diff / ulp;
    sum_ulp += eu;
    g.max_abs = std::max(g.max_abs, diff);
    if (hi != 0) g.max_rel = std::max(g.max_rel, diff / std::fabs(hi));
    for (std::size_t q = 0; q < ulp_thresholds.size(); ++q)
      if (eu > ulp_thresholds[q]) ++g.beyond[q];
    if (!g.has_worst || eu > g.max_ulp) {
      g.has_worst = true;
      g.max_ulp = eu;
      const std::size_t k = e % r.dv, i = (e / r.dv) % r.nq, h = (e / (r.dv * r.nq)) % r.H, b = e / (r.dv * r.nq * r.H);
      g.worst = {b, h, i, k};
    }
  }
  g.mean_ulp = g.compared ? sum_ulp / static_cast<double>(g.compared) : 0.0;
  return g;
}

namespace {
// Outward-rounded interval arithmetic in binary64: a rounded sum or product is moved one ulp
// outward only when it is inexact (the exact error comes from TwoSum / an fma), so exact
// operations (e.g. 1 - 1) keep point intervals.
struct dint {
  double lo, hi;
};
inline double dn(double x) { return std::nextafter(x, -inf); }
inline double up(double x) { return std::nextafter(x, inf); }
inline double sum_dn(double a, double b) {
  const dd s = two_sum(a, b);
  return s.lo < 0 ? dn(s.hi) : s.hi;
}
inline double sum_up(double a, double b) {
  const dd s = two_sum(a, b);
  return s.lo > 0 ? up(s.hi) : s.hi;
}
inline double prod_dn(double a, double b) {
  const double p = a * b;
  if (std::fabs(p) < 0x1p-960) return p == 0 && (a == 0 || b == 0) ? 0.0 : dn(p);
  const double e = std::fma(a, b, -p);
  return e < 0 ? dn(p) : p;
}
inline double prod_up(double a, double b) {
  const double p = a * b;
  if (std::fabs(p) < 0x1p-960) return p == 0 && (a == 0 || b == 0) ? 0.0 : up(p);
  const double e = std::fma(a, b, -p);
  return e > 0 ? up(p) : p;
}
inline dint isub(dint a, dint b) { return {sum_dn(a.lo, -b.hi), sum_up(a.hi, -b.lo)}; }
inline dint iadd(dint a, dint b) { return {sum_dn(a.lo, b.lo), sum_up(a.hi, b.hi)}; }
inline dint imul_d(dint a, double v) {
  const double x1 = prod_dn(a.lo, v), x2 = prod_dn(a.hi, v), y1 = prod_up(a.lo, v), y2 = prod_up(a.hi, v);
  return {std::min(x1, x2), std::max(y1, y2)};
}
inline dint iabs(dint a) {
  if (a.lo >= 0) return a;
  if (a.hi <= 0) return {-a.hi, -a.lo};
  return {0.0, std::max(-a.lo, a.hi)};
}
}  // namespace

attention_grade grade_attention(const oracle_request& req, const std::vector<double>& A_hat) {
  const auto& Q = req.Q;
  const auto& K = req.K;
  const auto& V = req.V;
  const std::size_t B = Q.B, H = Q.H, nq = Q.n, nk = K.n, d = Q.d, dv = V.d;
  if (A_hat.size() != B * H * nq * nk)
    throw input_error("attention candidate has " + std::to_string(A_hat.size()) + " elements, expected B*H*n_q*n_k = " +
                      std::to_string(B * H * nq * nk));
  for (double a : A_hat)
    if (!std::isfinite(a)) throw input_error("attention candidate contains NaN or Inf");
  scale_value sv;
  init_scale(sv, req.scale, d);
  attention_grade g;
  const std::size_t rows = B * H * nq;
  g.rows = rows;
  g.row_l1.assign(rows, std::numeric_limits<double>::quiet_NaN());
  g.lhs_upper.assign(rows, std::numeric_limits<double>::quiet_NaN());
  g.rhs_lower.assign(rows, std::numeric_limits<double>::quiet_NaN());
  std::vector<double> KT(d * nk);
  detail::row_workspace ws;
  std::vector<std::uint8_t> allowed(nk);
  std::vector<double> ohi(dv), olo(dv), orad(dv);
  std::vector<dint> acc(dv);
  for (std::size_t bh = 0; bh < B * H; ++bh) {
    const double* Kh = K.values.data() + bh * nk * d;
    const double* Vh = V.values.data() + bh * nk * dv;
    for (std::size_t j = 0; j < nk; ++j)
      for (std::size_t l = 0; l < d; ++l) KT[l * nk + j] = Kh[j * d + l];
    const std::size_t b = bh / H, h = bh % H;
    // max_j ||v_j||_2^2 over all keys of the head, bounded below and above
    double vmax_sq_hi = 0, vmax_sq_lo = 0;
    for (std::size_t j = 0; j < nk; ++j) {
      double n2lo = 0, n2hi = 0;
      for (std::size_t k = 0; k < dv; ++k) {
        const double v = Vh[j * dv + k];
        n2lo = sum_dn(n2lo, prod_dn(v, v));
        n2hi = sum_up(n2hi, prod_up(v, v));
      }
      vmax_sq_lo = std::max(vmax_sq_lo, n2lo);
      vmax_sq_hi = std::max(vmax_sq_hi, n2hi);
    }
    for (std::size_t i = 0; i < nq; ++i) {
      const std::size_t r = bh * nq + i;
      for (std::size_t j = 0; j < nk; ++j)
        allowed[j] = req.mask == mask_kind::causal ? j <= i
                     : req.mask == mask_kind::explicit_mask ? req.M.at(b, h, i, j)
                                                            : 1;
      const double* q = Q.values.data() + r * d;
      detail::row_inputs in{q, Kh, KT.data(), Vh, allowed.data(), nk, d, dv, sv.hi, sv.lo, sv.rad};
      if (!std::isfinite(sv.rad) || !detail::fast_row(in, ws, ohi.data(), olo.data(), orad.data())) {
        ++g.rows_skipped;
        continue;
      }
      // The weights and their sum as intervals: w_j in w (1 ± rho), W in [Wlo, Whi].
      const double rho = ws.rho, Wlo = ws.W_lo_bound, Whi = ws.W_hi_bound;
      const double* ah = A_hat.data() + r * nk;
      dint l1{0, 0};
      for (auto& a : acc) a = {0, 0};
      const std::size_t n_allowed = static_cast<std::size_t>(std::count(allowed.begin(), allowed.end(), 1));
      for (std::size_t j = 0; j < nk; ++j) {
        dint A{0, 0};
        if (allowed[j] && j < ws.w_hi.size()) {
          const double w = ws.w_hi[j];
          if (n_allowed == 1) {
            A = {1.0, 1.0};  // a single attended key: A_ij = 1 exactly
          } else if (w == 0.0 && ws.under > 0) {
            A = {0, up(0x1p-1019 / Wlo)};
          } else {
            const double wl = dn(dn(w + ws.w_lo[j]) * dn(1 - rho)), wu = up(up(w + ws.w_lo[j]) * up(1 + rho));
            A = {dn(wl / Whi), up(wu / Wlo)};
          }
        }
        const dint diff = isub(dint{ah[j], ah[j]}, A);
        l1 = iadd(l1, iabs(diff));
        if (diff.lo == 0 && diff.hi == 0) continue;
        for (std::size_t k = 0; k < dv; ++k) acc[k] = iadd(acc[k], imul_d(diff, Vh[j * dv + k]));
      }
      double lhs2_hi = 0, lhs2_lo = 0;
      for (std::size_t k = 0; k < dv; ++k) {
        const dint a = iabs(acc[k]);
        lhs2_hi = sum_up(lhs2_hi, prod_up(a.hi, a.hi));
        lhs2_lo = sum_dn(lhs2_lo, prod_dn(a.lo, a.lo));
      }
      const double lhs_hi = lhs2_hi == 0 ? 0.0 : up(std::sqrt(lhs2_hi)), lhs_lo = dn(std::sqrt(lhs2_lo));
      const double rhs_lo = prod_dn(l1.lo, dn(std::sqrt(vmax_sq_lo))), rhs_hi = prod_up(l1.hi, up(std::sqrt(vmax_sq_hi)));
      g.row_l1[r] = 0.5 * (l1.lo + l1.hi);
      g.max_row_l1 = std::max(g.max_row_l1, l1.hi);
      g.lhs_upper[r] = lhs_hi;
      g.rhs_lower[r] = rhs_lo;
      if (lhs_hi <= rhs_lo) ++g.bound_certified;
      else if (lhs_lo > rhs_hi) ++g.bound_refuted;
      else ++g.bound_undecided;
    }
  }
  return g;
}

}  // namespace attncert::oracle
