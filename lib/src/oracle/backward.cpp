// lib/src/oracle/backward.cpp — the certified backward pass (attncert/oracle/backward.hpp): every
// gradient enclosed by MPFI over the whole problem at one precision, each element rounded when its
// enclosure decides it, passes repeated at doubled precision (number/ziv.hpp) while some element is
// undecided.  The rows' contributions are mpfi_row_backward's (ziv_stage.cpp); the rows, masks and
// variants are row_source's (rows.cpp), shared with the forward run.  Error analysis and the
// exact zeros: proofs/P15-oracle-backward.md.
//
// Tier: enclosure.  This is the escalation tier of the backward; it has no double-double filter
// yet, so it costs MPFI arithmetic on every (row, key, feature).
#include "attncert/oracle/backward.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "attncert/error.hpp"
#include "attncert/number/ziv.hpp"
#include "attncert/oracle/request.hpp"
#include "internal.hpp"
#include "rows.hpp"

namespace attncert::oracle {

using namespace internal;

namespace {

/// Intervals at one precision, with the pointer array that row_grad_sinks takes.
struct interval_array {
  std::vector<std::unique_ptr<mpfi_var>> v;
  std::vector<mpfi_ptr> p;
  void reset(std::size_t n, mpfr_prec_t prec) {
    v.clear();
    p.clear();
    v.reserve(n);
    p.reserve(n);
    for (std::size_t e = 0; e < n; ++e) {
      v.push_back(std::make_unique<mpfi_var>(prec));
      mpfi_set_ui(v.back()->v, 0);
      p.push_back(v.back()->v);
    }
  }
};

/// One gradient being decided: its result tensor, its enclosures at the current precision, and
/// which of its elements are still undecided.
struct gradient_slot {
  const char* name;
  gradient_tensor* out;
  interval_array enc;
  std::vector<std::uint8_t> open;
};

class backward_run {
 public:
  backward_run(const oracle_request& req, const backward_inputs& g)
      : req_(req), g_(g), var_(req.variant), src_(req), B_(req.Q.B), H_(req.Q.H), Hkv_(req.K.H), group_(H_ / Hkv_),
        nq_(req.Q.n), nk_(req.K.n), d_(req.Q.d), dv_(req.V.d) {}

  backward_result run() {
    check_cotangents();
    check_rows();
    prepare();
    const auto outcome = ziv_escalate(precision_schedule{first_mpfi_bits, req_.max_bits}, [&](unsigned prec) {
      ++res_.passes;
      pass(prec);
      const std::size_t open = decide(prec);
      return open == 0 ? ziv_decided(open) : ziv_more(open);
    });
    if (!outcome.decided) throw internal_error("backward: undecided elements after the cap");  // decide() throws first
    finish();
    return std::move(res_);
  }

 private:
  std::size_t rows() const { return B_ * H_ * nq_; }
  bool used_row(std::size_t r, std::vector<std::uint8_t>& allowed) const {
    row_job job;
    src_.locate(r, job);
    if (job.i >= req_.seq_q(job.b)) return false;
    src_.allowed_row(job.b, job.h, job.i, allowed);
    return !(row_source::none_allowed(allowed) && var_.sink.empty());
  }

  std::string row_text(std::size_t r) const {
    row_job job;
    src_.locate(r, job);
    return "(b, h, i) = (" + std::to_string(job.b) + ", " + std::to_string(job.h) + ", " + std::to_string(job.i) + ")";
  }

  void check_cotangents() const {
    if (g_.dO.size() != rows() * dv_)
      throw input_error("the output gradient dO has " + std::to_string(g_.dO.size()) + " elements, the output has " +
                        std::to_string(rows() * dv_));
    if (!g_.dLSE.empty() && g_.dLSE.size() != rows())
      throw input_error("the LSE gradient has " + std::to_string(g_.dLSE.size()) + " elements, the LSE has " +
                        std::to_string(rows()));
  }

  // Before any work: fully masked rows under policy error, NaN/Inf in the cotangents of used rows,
  // and used rows that touch a non-finite input (the backward has no IEEE fallback).
  void check_rows() const {
    std::vector<std::uint8_t> allowed;
    row_scratch scratch;
    for (std::size_t r = 0; r < rows(); ++r) {
      row_job job;
      src_.locate(r, job);
      if (job.i >= req_.seq_q(job.b)) continue;
      src_.allowed_row(job.b, job.h, job.i, allowed);
      if (row_source::none_allowed(allowed) && var_.sink.empty()) {
        if (req_.empty_rows == empty_row_policy::error)
          throw input_error("row " + row_text(r) +
                            " is fully masked: softmax is undefined (use --empty-rows zeros|nan to choose a value)");
        continue;
      }
      for (std::size_t k = 0; k < dv_; ++k)
        if (!std::isfinite(g_.dO[r * dv_ + k]))
          throw input_error("the output gradient dO has NaN/Inf at row " + row_text(r) + ", which is used");
      if (!g_.dLSE.empty() && !std::isfinite(g_.dLSE[r]))
        throw input_error("the LSE gradient has NaN/Inf at row " + row_text(r) + ", which is used");
      scratch.allowed = allowed;
      job.allowed = scratch.allowed.data();
      src_.build_job(job, scratch);
      if (src_.touches_nonfinite(job, scratch))
        throw input_error("row " + row_text(r) + " uses a NaN or Inf input (the backward pass needs finite inputs)");
    }
  }

  static void shape_tensor(gradient_tensor& t, std::vector<std::size_t> shape) {
    std::size_t n = 1;
    for (std::size_t s : shape) n *= s;
    t.shape = std::move(shape);
    t.reference.assign(n, 0.0);
    t.hi.assign(n, 0.0);
    t.lo.assign(n, 0.0);
    t.rad.assign(n, inf);
    t.how.assign(n, decided_by::mpfi);
    t.bits_used.assign(n, 0);
  }

  void prepare() {
    res_.target = req_.target;
    shape_tensor(res_.dq, {B_, H_, nq_, d_});
    shape_tensor(res_.dk, {B_, Hkv_, nk_, d_});
    shape_tensor(res_.dv, {B_, Hkv_, nk_, dv_});
    slots_.push_back({"dq", &res_.dq, {}, {}});
    slots_.push_back({"dk", &res_.dk, {}, {}});
    slots_.push_back({"dv", &res_.dv, {}, {}});
    res_.has_dbias = var_.has_bias;
    if (res_.has_dbias) {
      const score_bias& b = var_.bias;
      shape_tensor(res_.dbias, {b.mb, b.mh, b.mq, b.mk});
      slots_.push_back({"dbias", &res_.dbias, {}, {}});
    }
    res_.has_dsink = !var_.sink.empty();
    if (res_.has_dsink) {
      shape_tensor(res_.dsink, {H_});
      slots_.push_back({"dsink", &res_.dsink, {}, {}});
    }
    for (auto& s : slots_) s.open.assign(s.out->size(), 1);
  }

  // One pass: every used row adds its contributions at `prec` bits.  Units (b, kv head) are shared
  // between threads; each owns its rows' dq and its kv head's dk, dv; dbias and dsink are summed
  // under a lock (any order gives an enclosure; the rounded results do not depend on it).
  void pass(unsigned prec) {
    for (auto& s : slots_) s.enc.reset(s.out->size(), prec);
    next_unit_ = 0;
    units_done_ = 0;
    first_error_ = nullptr;
    stop_ = false;
    const std::size_t units = B_ * Hkv_;
    const unsigned nthreads = std::max(1u, std::min<unsigned>(req_.threads, static_cast<unsigned>(std::min<std::size_t>(units, 64))));
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < nthreads; ++t)
      pool.emplace_back([this, prec] {
        worker(prec, false);
        mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
      });
    worker(prec, true);
    for (auto& th : pool) th.join();
    if (first_error_) std::rethrow_exception(first_error_);
  }

  void worker(unsigned prec, bool main_thread) {
    try {
      row_scratch scratch;
      interval_array ds;
      mpfi_var dsink(prec);
      if (var_.has_bias) ds.reset(nk_, prec);
      while (!stop_.load(std::memory_order_relaxed)) {
        const std::size_t u = next_unit_.fetch_add(1);
        if (u >= B_ * Hkv_) break;
        unit(u / Hkv_, u % Hkv_, prec, scratch, ds, dsink);
        const std::size_t done = units_done_.fetch_add(1) + 1;
        if (main_thread && req_.progress) req_.progress(done, B_ * Hkv_);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!first_error_) first_error_ = std::current_exception();
      stop_ = true;
    }
  }

  void unit(std::size_t b, std::size_t hk, unsigned prec, row_scratch& scratch, interval_array& ds, mpfi_var& dsink) {
    const std::size_t bhk = b * Hkv_ + hk;
    for (std::size_t h = hk * group_; h < (hk + 1) * group_; ++h)
      for (std::size_t i = 0; i < req_.seq_q(b); ++i) {
        const std::size_t r = (b * H_ + h) * nq_ + i;
        if (!used_row(r, scratch.allowed)) continue;
        row_job job;
        src_.locate(r, job);
        job.allowed = scratch.allowed.data();
        src_.build_job(job, scratch);
        row_grad_sinks out;
        out.dq = slots_[0].enc.p.data() + r * d_;
        out.dk = slots_[1].enc.p.data() + bhk * nk_ * d_;
        out.dv = slots_[2].enc.p.data() + bhk * nk_ * dv_;
        if (var_.has_bias) out.ds = ds.p.data();
        if (res_.has_dsink) out.dsink = dsink.v;
        mpfi_row_backward(job.ctx, g_.dO.data() + r * dv_, g_.dLSE.empty() ? nullptr : &g_.dLSE[r], prec, out);
        if (!var_.has_bias && !res_.has_dsink) continue;
        std::lock_guard<std::mutex> lock(mu_);
        if (var_.has_bias) {
          const score_bias& sb = var_.bias;
          gradient_slot& s = slots_[3];
          for (std::size_t j = 0; j < nk_; ++j) {
            if (!scratch.allowed[j]) continue;
            const std::size_t e = (((sb.mb == 1 ? 0 : b) * sb.mh + (sb.mh == 1 ? 0 : h)) * sb.mq + (sb.mq == 1 ? 0 : i)) * sb.mk +
                                  (sb.mk == 1 ? 0 : j);
            mpfi_add(s.enc.p[e], s.enc.p[e], ds.p[j]);
          }
        }
        if (res_.has_dsink) {
          mpfi_ptr t = slots_.back().enc.p[h];
          mpfi_add(t, t, dsink.v);
        }
      }
  }

  // Rounds every open element whose enclosure decides it; at the cap, faithfully when the
  // enclosure lies strictly between two adjacent target numbers, else "precision too low".
  // Returns how many stay open.
  std::size_t decide(unsigned prec) {
    const target_format t = req_.target;
    mpfr_var L(prec), U(prec);
    std::size_t open = 0, decided = 0;
    for (auto& s : slots_) {
      gradient_tensor& out = *s.out;
      for (std::size_t e = 0; e < out.size(); ++e) {
        if (!s.open[e]) continue;
        mpfi_srcptr x = s.enc.p[e];
        mpfi_get_left(L.v, x);
        mpfi_get_right(U.v, x);
        enclosure_to_dd(x, out.hi[e], out.lo[e], out.rad[e]);
        const double fl = round_mpfr_to_target(L.v, t), fu = round_mpfr_to_target(U.v, t);
        out.bits_used[e] = static_cast<std::uint16_t>(std::min(prec, 65535u));
        if (fl == fu) {
          out.reference[e] = fl == 0 ? 0.0 : fl;
          out.how[e] = decided_by::mpfi;
          s.open[e] = 0;
          ++decided;
          if (mpfr_zero_p(L.v) && mpfr_zero_p(U.v)) ++res_.exact_zeros;
        } else if (prec >= req_.max_bits) {
          if (!(adjacent_or_equal(fl, fu, t) && !std::isnan(fl) && mpfr_cmp_d(L.v, std::min(fl, fu)) > 0 &&
                mpfr_cmp_d(U.v, std::max(fl, fu)) < 0))
            throw input_error(std::string(s.name) + " element " + std::to_string(e) +
                              " could not be enclosed within one ulp of the target at " + std::to_string(prec) +
                              " bits (precision too low: raise --max-precision)");
          mpfr_var mid(prec);
          mpfi_mid(mid.v, x);
          out.reference[e] = round_mpfr_to_target(mid.v, t);
          out.how[e] = decided_by::faithful_only;
          s.open[e] = 0;
          ++res_.faithful_only;
        } else {
          ++open;
        }
      }
    }
    if (decided) res_.by_mpfi.push_back({prec, decided});
    return open;
  }

  void finish() {
    res_.elements = 0;
    for (const auto& s : slots_) res_.elements += s.out->size();
    res_.correctly_rounded = res_.elements - res_.faithful_only;
  }

  const oracle_request& req_;
  const backward_inputs& g_;
  const attention_variant& var_;
  const row_source src_;
  const std::size_t B_, H_, Hkv_, group_, nq_, nk_, d_, dv_;
  backward_result res_;
  std::vector<gradient_slot> slots_;  // dq, dk, dv, then dbias and dsink when present
  std::atomic<std::size_t> next_unit_{0}, units_done_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;  // guards the dbias / dsink sums and first_error_
  std::exception_ptr first_error_;
};

}  // namespace

backward_result run_oracle_backward(const oracle_request& req, const backward_inputs& g) {
  validate_request(req);
  return backward_run(req, g).run();
}

}  // namespace attncert::oracle
