// lib/src/oracle/rows.cpp — the rows of an oracle request (rows.hpp): masks, GQA heads, additive
// terms, sinks and dropout per row, for the forward run (run.cpp) and the backward (backward.cpp).
#include "rows.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "attncert/number/double_double.hpp"

namespace attncert::oracle::internal {

namespace {
bool finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}
}  // namespace

row_source::row_source(const oracle_request& req)
    : req_(req), var_(req.variant), B_(req.Q.B), H_(req.Q.H), Hkv_(req.K.H), group_(req.Q.H / req.K.H), nq_(req.Q.n),
      nk_(req.K.n), d_(req.Q.d), dv_(req.V.d) {
  init_scale(sv_, req.scale, d_);
  init_variant_values(vv_, var_);
  all_finite_ = finite(req.Q.values) && finite(req.K.values) && finite(req.V.values);
  key_cuts_ = req.packed() ? req.packed_cu_k : std::vector<std::size_t>{0, nk_};
  prepare_heads();
}

void row_source::locate(std::size_t r, row_job& job) const {
  job.i = r % nq_;
  job.h = (r / nq_) % H_;
  job.b = r / (nq_ * H_);
  job.hk = job.h / group_;
  job.base = r * dv_;
  job.row = r;
  if (req_.packed()) {  // the last sequence starting at or before t: the one holding it (empty ones skipped)
    const auto& cu = req_.packed_cu_q;
    job.s = static_cast<std::size_t>(std::upper_bound(cu.begin(), cu.end(), job.i) - cu.begin()) - 1;
    job.il = job.i - cu[job.s];
    job.k0 = req_.packed_cu_k[job.s];
    job.nk = req_.packed_cu_k[job.s + 1] - job.k0;
  } else {
    job.s = job.b;
    job.il = job.i;
    job.k0 = 0;
    job.nk = nk_;
  }
}

std::string row_source::row_text(const row_job& job) {
  return "(b, h, i) = (" + std::to_string(job.s) + ", " + std::to_string(job.h) + ", " + std::to_string(job.il) + ")";
}

bool row_source::none_allowed(const std::vector<std::uint8_t>& a) {
  return std::none_of(a.begin(), a.end(), [](std::uint8_t x) { return x != 0; });
}

// Per head: the transposed keys (segment after segment: d × the segment's keys each), and which
// keys / values are finite (only when some input is not).
void row_source::prepare_heads() {
  heads_.resize(B_ * Hkv_);
  for (std::size_t bh = 0; bh < B_ * Hkv_; ++bh) {
    auto& hd = heads_[bh];
    hd.KT.resize(d_ * nk_);
    const double* Kh = req_.K.values.data() + bh * nk_ * d_;
    for (std::size_t s = 0; s + 1 < key_cuts_.size(); ++s) {
      const std::size_t k0 = key_cuts_[s], n = key_cuts_[s + 1] - k0;
      double* KT = hd.KT.data() + d_ * k0;
      for (std::size_t j = 0; j < n; ++j)
        for (std::size_t l = 0; l < d_; ++l) KT[l * n + j] = Kh[(k0 + j) * d_ + l];
    }
    if (all_finite_) continue;
    hd.k_finite.resize(nk_);
    hd.v_finite.resize(nk_);
    const double* Vh = req_.V.values.data() + bh * nk_ * dv_;
    for (std::size_t j = 0; j < nk_; ++j) {
      hd.k_finite[j] = std::all_of(Kh + j * d_, Kh + (j + 1) * d_, [](double x) { return std::isfinite(x); });
      hd.v_finite[j] = std::all_of(Vh + j * dv_, Vh + (j + 1) * dv_, [](double x) { return std::isfinite(x); });
    }
  }
}

namespace {
// The row's keys in positions (attention_variant::key_leftpad): key j of the sequence is position j - pad.
struct key_positions {
  long long pad = 0, nk = 0, diag = 0;  ///< leftpad, n_k' (keys after the padding), i + n_k' - n_q
};
key_positions positions(const oracle_request& req, std::size_t b, std::size_t i) {
  key_positions p;
  const auto& lp = req.variant.key_leftpad;
  p.pad = lp.empty() ? 0 : static_cast<long long>(lp[b]);
  p.nk = static_cast<long long>(req.seq_k(b)) - p.pad;
  p.diag = static_cast<long long>(i) + p.nk - static_cast<long long>(req.seq_q(b));
  return p;
}
// The first position of the chunk of c keys holding position p (floor division, p may be negative).
long long chunk_start(long long p, long long c) {
  const long long r = p % c;
  return p - (r < 0 ? r + c : r);
}
}  // namespace

// Which keys the row may attend: every mask of P14 step 4, AND-combined, and a bias of -inf, in the
// sequence's own coordinates (b, i, j); masks, windows, chunks and sinks count in key positions jp.
void row_source::allowed_row(const row_job& job, std::vector<std::uint8_t>& a) const {
  const std::size_t b = job.s, h = job.h, i = job.il;
  const std::size_t nk = req_.seq_k(b);
  a.assign(job.nk, 0);
  const key_positions kp = positions(req_, b, i);
  const long long diag = kp.diag;  // i + n_k' - n_q
  const long long c = static_cast<long long>(var_.chunk), c0 = c > 0 ? chunk_start(diag, c) : 0;
  for (std::size_t j = static_cast<std::size_t>(kp.pad); j < nk; ++j) {
    const long long jj = static_cast<long long>(j) - kp.pad;
    bool ok = true;
    if (req_.mask == mask_kind::causal) ok = jj <= static_cast<long long>(i);
    if (var_.causal_bottom_right) ok = ok && jj <= diag;
    // j >= diag - left and j <= diag + right, written as differences of two indices (each below
    // 2^62 in magnitude): a window side up to 2^63 - 1 cannot overflow, and one wider than the
    // sequences bounds nothing, as it should.  Sink tokens are exempt from the left side only.
    if (var_.window_left >= 0) ok = ok && (diag - jj <= var_.window_left || jj < static_cast<long long>(var_.sink_tokens));
    if (var_.window_right >= 0) ok = ok && jj - diag <= var_.window_right;
    if (c > 0) ok = ok && jj >= c0 && jj - c0 < c;
    if (req_.M.nk != 0) ok = ok && req_.M.at(b, h, i, j);
    if (var_.has_bias && ok) ok = var_.bias.at(b, h, i, j) != -inf;
    a[j] = ok;
  }
}

bool row_source::any_allowed(const row_job& job, std::vector<std::uint8_t>& a) const {
  if (req_.M.nk != 0 || var_.has_bias || (var_.sink_tokens > 0 && var_.window_left >= 0)) {
    allowed_row(job, a);
    return !none_allowed(a);
  }
  // The conditions of allowed_row as an interval lo <= jp <= hi of the sequence's key positions, in 128
  // bits (a window side may be 2^63 - 1).
  using wide = __int128;
  const key_positions kp = positions(req_, job.s, job.il);
  const wide i = static_cast<wide>(job.il), diag = static_cast<wide>(kp.diag);
  wide lo = 0, hi = static_cast<wide>(kp.nk) - 1;
  if (req_.mask == mask_kind::causal) hi = std::min(hi, i);
  if (var_.causal_bottom_right) hi = std::min(hi, diag);
  if (var_.window_left >= 0) lo = std::max(lo, diag - static_cast<wide>(var_.window_left));
  if (var_.window_right >= 0) hi = std::min(hi, diag + static_cast<wide>(var_.window_right));
  if (var_.chunk > 0) {
    const wide c0 = chunk_start(kp.diag, static_cast<long long>(var_.chunk));
    lo = std::max(lo, c0);
    hi = std::min(hi, c0 + static_cast<wide>(var_.chunk) - 1);
  }
  return lo <= hi;
}

// Does the row use a non-finite value (P14: q, and per allowed key k_j, the bias and v_j if
// kept; the head's slope and sink)?  Values no allowed score uses do not count.
bool row_source::touches_nonfinite(const row_job& job, const row_scratch& w) const {
  auto fin = [](double x) { return std::isfinite(x); };
  if (job.in.has_sink && !std::isfinite(job.in.sink)) return true;
  if (job.ctx.has_alibi && !std::isfinite(job.ctx.slope)) return true;
  if (var_.has_bias)
    for (std::size_t j = 0; j < job.nk; ++j)
      if (job.allowed[j] && !std::isfinite(w.bias[j])) return true;  // -inf biases are not allowed keys
  if (all_finite_) return false;
  const double* q = job.in.q;
  if (!std::all_of(q, q + d_, fin)) return true;
  const head_data& hd = heads_[job.b * Hkv_ + job.hk];
  for (std::size_t j = 0; j < job.nk; ++j)
    if (job.allowed[j] && (!hd.k_finite[job.k0 + j] || (!hd.v_finite[job.k0 + j] && !(job.in.keep && !job.in.keep[j]))))
      return true;
  return false;
}

// The row's additive terms a_j = -slope |i + n_k - n_q - j| + bias_j (P14 step 3) for the fast
// path as hi + lo ± rad: -slope·dist is exact as TwoProd (checked against underflow), the bias
// is added by a double-double addition with its bound.
void row_source::additive_terms(const row_job& job, row_scratch& w) const {
  w.bias.assign(job.nk, 0.0);
  if (var_.has_bias)
    for (std::size_t j = 0; j < job.nk; ++j) w.bias[j] = var_.bias.at(job.s, job.h, job.il, j);
  w.add_hi.assign(job.nk, 0.0);
  w.add_lo.assign(job.nk, 0.0);
  w.add_rad.assign(job.nk, 0.0);
  for (std::size_t j = 0; j < job.nk; ++j) {
    if (!job.allowed[j]) continue;
    dd a{0.0, 0.0};
    double rad = 0;
    if (job.ctx.has_alibi) {
      const long long dist = job.ctx.alibi_key ? static_cast<long long>(j) : std::llabs(job.ctx.pos - static_cast<long long>(j));
      const double sd = job.ctx.alibi_key ? job.ctx.slope : -job.ctx.slope, dd_dist = static_cast<double>(dist);
      if (sd != 0 && dist != 0) {
        a = two_prod(sd, dd_dist);
        if (!dd_detail::product_ok(sd, dd_dist) || !std::isfinite(a.hi)) rad = inf;
      }
    }
    if (var_.has_bias && !std::isfinite(w.bias[j])) {  // +inf / NaN: IEEE semantics only (touches_nonfinite)
      a = dd{a.hi + w.bias[j], 0.0};
      rad = inf;
    } else if (var_.has_bias) {
      const dd_with_error z = add_with_bound(a, w.bias[j]);
      rad = (rad + z.rel_error_bound * std::fabs(z.value.hi) * (1.0 + 0x1p-50)) * (1.0 + 0x1p-40);
      a = z.value;
    }
    w.add_hi[j] = a.hi;
    w.add_lo[j] = a.lo;
    w.add_rad[j] = std::isfinite(rad) ? rad : inf;
  }
}

// The row's inputs for both stages: GQA head, masks, additive terms, sink, dropout (P14).
void row_source::build_job(row_job& job, row_scratch& w) const {
  const std::size_t bhk = job.b * Hkv_ + job.hk;
  job.in = detail::row_inputs{req_.Q.values.data() + ((job.b * H_ + job.h) * nq_ + job.i) * d_,
                              req_.K.values.data() + (bhk * nk_ + job.k0) * d_,
                              heads_[bhk].KT.data() + d_ * job.k0,
                              req_.V.values.data() + (bhk * nk_ + job.k0) * dv_,
                              w.allowed.data(),
                              job.nk,
                              d_,
                              dv_,
                              sv_.hi,
                              sv_.lo,
                              sv_.rad};
  mpfi_row_ctx& c = job.ctx;
  c = mpfi_row_ctx{job.in.q, job.in.K, job.in.V, job.allowed, job.nk, d_, dv_, &sv_};
  c.var = &vv_;
  c.lse_base2 = req_.lse.base2;
  c.pos = static_cast<long long>(job.il) + static_cast<long long>(req_.seq_k(job.s)) -
          static_cast<long long>(req_.seq_q(job.s));
  if (!var_.alibi_slopes.empty()) {
    c.has_alibi = true;
    c.alibi_key = var_.alibi_key_position;
    c.slope = var_.alibi_slopes.size() == H_ ? var_.alibi_slopes[job.h] : var_.alibi_slopes[job.s * H_ + job.h];
  }
  if (!var_.sink.empty()) {
    c.has_sink = job.in.has_sink = true;
    c.sink = job.in.sink = var_.sink[job.h];
  }
  job.in.softcap = vv_.softcap_d;
  if (var_.has_dropout) {
    w.keep.assign(job.nk, 0);
    for (std::size_t j = 0; j < job.nk; ++j) w.keep[j] = var_.dropout_keep.at(job.s, job.h, job.il, j);
    c.keep = job.in.keep = w.keep.data();
    job.in.keep_hi = vv_.keep_hi;
    job.in.keep_lo = vv_.keep_lo;
    job.in.keep_rad = vv_.keep_rad;
  }
  if (var_.has_bias || c.has_alibi) {
    additive_terms(job, w);
    job.in.add_hi = w.add_hi.data();
    job.in.add_lo = w.add_lo.data();
    job.in.add_rad = w.add_rad.data();
    if (var_.has_bias) c.bias = w.bias.data();
  }
}

}  // namespace attncert::oracle::internal
