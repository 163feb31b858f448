// lib/src/oracle/run.cpp — the oracle's orchestration: per row, filter (the double-double
// fast path, fast_kernel.cpp) then escalate (the Ziv stage: MPFI at 128, 256, ... bits up to
// the cap, through number/ziv.hpp), rows shared between worker threads.  See
// attncert/oracle/oracle.hpp and proofs/P11-oracle.md.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include "attncert/error.hpp"
#include "attncert/number/double_double.hpp"
#include "attncert/number/ziv.hpp"
#include "attncert/oracle/request.hpp"
#include "internal.hpp"

namespace attncert::oracle {

using namespace internal;

std::string internal::index_text(std::size_t b, std::size_t h, std::size_t i, std::size_t k) {
  return "(" + std::to_string(b) + ", " + std::to_string(h) + ", " + std::to_string(i) + ", " + std::to_string(k) + ")";
}

namespace {

/// What one worker counts; merged into the result at the end.
struct decision_counts {
  std::size_t double_double = 0, faithful = 0, policy = 0, ieee = 0, escalated = 0, fast_failed = 0, empty = 0;
  std::vector<std::pair<unsigned, std::size_t>> by_mpfi;  ///< (bits, elements decided there)

  void add_mpfi(unsigned bits, std::size_t n) {
    if (n == 0) return;
    auto it = std::find_if(by_mpfi.begin(), by_mpfi.end(), [&](const auto& pr) { return pr.first == bits; });
    if (it == by_mpfi.end()) by_mpfi.push_back({bits, n});
    else it->second += n;
  }
  void merge(const decision_counts& o) {
    double_double += o.double_double;
    faithful += o.faithful;
    policy += o.policy;
    ieee += o.ieee;
    escalated += o.escalated;
    fast_failed += o.fast_failed;
    empty += o.empty;
    for (const auto& pr : o.by_mpfi) add_mpfi(pr.first, pr.second);
  }
};

/// One row: where it is, its allowed keys and its inputs.
struct row_job {
  std::size_t b = 0, h = 0, i = 0, base = 0;  ///< base: index of element (b, h, i, 0)
  const std::uint8_t* allowed = nullptr;
  detail::row_inputs in{};
};

/// A worker's scratch space.
struct worker_space {
  detail::row_workspace ws;
  std::vector<std::uint8_t> allowed;
  std::vector<double> ohi, olo, orad, plain;
  std::vector<std::size_t> pending;
  decision_counts counts;
  explicit worker_space(std::size_t dv) : ohi(dv), olo(dv), orad(dv), plain(dv) {}
};

class oracle_run {
 public:
  explicit oracle_run(const oracle_request& req)
      : req_(req), B_(req.Q.B), H_(req.Q.H), nq_(req.Q.n), nk_(req.K.n), d_(req.Q.d), dv_(req.V.d) {
    init_scale(sv_, req.scale, d_);
    all_finite_ = finite(req.Q.values) && finite(req.K.values) && finite(req.V.values);
    prepare_heads();
    prepare_result();
  }

  oracle_result run() {
    reject_empty_rows_up_front();
    run_workers();
    finish();
    return std::move(res_);
  }

 private:
  static bool finite(const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
  }

  // Per head: the transposed keys, and which keys / values are finite (only when some input is not).
  void prepare_heads() {
    heads_.resize(B_ * H_);
    for (std::size_t bh = 0; bh < B_ * H_; ++bh) {
      auto& hd = heads_[bh];
      hd.KT.resize(d_ * nk_);
      const double* Kh = req_.K.values.data() + bh * nk_ * d_;
      for (std::size_t j = 0; j < nk_; ++j)
        for (std::size_t l = 0; l < d_; ++l) hd.KT[l * nk_ + j] = Kh[j * d_ + l];
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

  void prepare_result() {
    res_.B = B_;
    res_.H = H_;
    res_.nq = nq_;
    res_.dv = dv_;
    const std::size_t total = B_ * H_ * nq_ * dv_;
    res_.elements = total;
    res_.reference.assign(total, 0.0);
    res_.t_hi.assign(total, 0.0);
    res_.t_lo.assign(total, 0.0);
    res_.t_rad.assign(total, inf);
    res_.how.assign(total, decided_by::double_double);
    res_.bits_used.assign(total, 0);
    res_.fast_kernel_vectorized = detail::kernel_vectorized();
  }

  std::size_t rows() const { return B_ * H_ * nq_; }

  void allowed_row(std::size_t b, std::size_t h, std::size_t i, std::vector<std::uint8_t>& a) const {
    a.assign(nk_, 1);
    if (req_.mask == mask_kind::causal)
      for (std::size_t j = 0; j < nk_; ++j) a[j] = j <= i;
    else if (req_.mask == mask_kind::explicit_mask)
      for (std::size_t j = 0; j < nk_; ++j) a[j] = req_.M.at(b, h, i, j);
  }

  static bool none_allowed(const std::vector<std::uint8_t>& a) {
    return std::none_of(a.begin(), a.end(), [](std::uint8_t x) { return x != 0; });
  }

  // Fully masked rows are found up front, so that policy `error` fails before any work.
  void reject_empty_rows_up_front() const {
    if (req_.mask != mask_kind::explicit_mask || req_.empty_rows != empty_row_policy::error) return;
    std::vector<std::uint8_t> a;
    for (std::size_t r = 0; r < rows(); ++r) {
      const std::size_t i = r % nq_, h = (r / nq_) % H_, b = r / (nq_ * H_);
      allowed_row(b, h, i, a);
      if (none_allowed(a))
        throw input_error("row (b, h, i) = (" + std::to_string(b) + ", " + std::to_string(h) + ", " + std::to_string(i) +
                          ") is fully masked: softmax is undefined (use --empty-rows zeros|nan to choose a value)");
    }
  }

  // A fully masked row gets the policy's value (zeros or NaN), decided exactly.
  void fill_empty_row(const row_job& job, decision_counts& c) {
    if (req_.empty_rows == empty_row_policy::error)
      throw input_error("row (b, h, i) = (" + std::to_string(job.b) + ", " + std::to_string(job.h) + ", " +
                        std::to_string(job.i) + ") is fully masked: softmax is undefined");
    const bool zeros = req_.empty_rows == empty_row_policy::zeros;
    const double v = zeros ? 0.0 : std::numeric_limits<double>::quiet_NaN();
    for (std::size_t k = 0; k < dv_; ++k) {
      res_.reference[job.base + k] = v;
      res_.t_hi[job.base + k] = v;
      res_.t_rad[job.base + k] = v;
      res_.how[job.base + k] = decided_by::exact_policy;
    }
    c.policy += dv_;
    ++c.empty;
  }

  // With --allow-nonfinite: does the row read a non-finite query, key or value?
  bool touches_nonfinite(const row_job& job) const {
    if (all_finite_) return false;
    const double* q = job.in.q;
    if (!std::all_of(q, q + d_, [](double x) { return std::isfinite(x); })) return true;
    const head_data& hd = heads_[job.b * H_ + job.h];
    for (std::size_t j = 0; j < nk_; ++j)
      if (job.allowed[j] && (!hd.k_finite[j] || !hd.v_finite[j])) return true;
    return false;
  }

  // Such a row follows plain IEEE binary64 (approx tier, counted, not certified).
  void fill_ieee_row(const row_job& job, worker_space& w) {
    detail::plain_row(job.in, w.ws, w.plain.data());
    for (std::size_t k = 0; k < dv_; ++k) {
      res_.reference[job.base + k] = rn_from_double(w.plain[k], req_.target);
      res_.t_hi[job.base + k] = w.plain[k];
      res_.t_rad[job.base + k] = std::numeric_limits<double>::quiet_NaN();
      res_.how[job.base + k] = decided_by::ieee_nonfinite;
    }
    w.counts.ieee += dv_;
  }

  // The filter: the double-double fast path decides every element whose enclosure rounds to
  // one target number; the others go to w.pending.
  void fast_stage(const row_job& job, worker_space& w) {
    w.pending.clear();
    const bool fast_ok = std::isfinite(sv_.rad) && detail::fast_row(job.in, w.ws, w.ohi.data(), w.olo.data(), w.orad.data());
    if (!fast_ok) {
      ++w.counts.fast_failed;
      for (std::size_t k = 0; k < dv_; ++k) w.pending.push_back(k);
      return;
    }
    for (std::size_t k = 0; k < dv_; ++k) {
      const std::size_t e = job.base + k;
      res_.t_hi[e] = w.ohi[k];
      res_.t_lo[e] = w.olo[k];
      res_.t_rad[e] = w.orad[k];
      if (std::isfinite(w.orad[k])) {
        const double dn = std::nextafter(w.olo[k] - w.orad[k], -inf);
        const double up = std::nextafter(w.olo[k] + w.orad[k], inf);
        const double fl = round_sum_to_target(w.ohi[k], dn, req_.target);
        const double fu = round_sum_to_target(w.ohi[k], up, req_.target);
        if (fl == fu) {  // a zero of uncertain sign is reported as +0 (see the header)
          res_.reference[e] = fl == 0 ? 0.0 : fl;
          res_.how[e] = decided_by::double_double;
          ++w.counts.double_double;
          continue;
        }
      }
      w.pending.push_back(k);
    }
  }

  // One step of the Ziv stage: encloses the pending elements at `prec` bits, decides those
  // whose enclosure rounds to one target number (at the cap: faithfully, if it lies strictly
  // between two adjacent target numbers; else "precision too low"), and keeps the others
  // pending.  Returns how many it decided.
  std::size_t ziv_step(const row_job& job, worker_space& w, unsigned prec) {
    const mpfi_row_ctx ctx{job.in.q, job.in.K, job.in.V, job.allowed, nk_, d_, dv_, &sv_};
    std::vector<std::unique_ptr<mpfi_var>> enclosures;
    std::vector<mpfi_var*> eptr;
    for (std::size_t idx = 0; idx < w.pending.size(); ++idx) {
      enclosures.push_back(std::make_unique<mpfi_var>(prec));
      eptr.push_back(enclosures.back().get());
    }
    mpfi_row(ctx, w.pending, prec, eptr);
    mpfr_var L(prec), U(prec);
    std::vector<std::size_t> still;
    std::size_t decided_here = 0;
    for (std::size_t idx = 0; idx < w.pending.size(); ++idx) {
      const std::size_t k = w.pending[idx], e = job.base + k;
      mpfi_get_left(L.v, eptr[idx]->v);
      mpfi_get_right(U.v, eptr[idx]->v);
      const double fl = round_mpfr_to_target(L.v, req_.target);
      const double fu = round_mpfr_to_target(U.v, req_.target);
      enclosure_to_dd(eptr[idx]->v, res_.t_hi[e], res_.t_lo[e], res_.t_rad[e]);
      if (fl == fu) {
        res_.reference[e] = fl == 0 ? 0.0 : fl;
        res_.how[e] = decided_by::mpfi;
        res_.bits_used[e] = static_cast<std::uint16_t>(std::min(prec, 65535u));
        ++decided_here;
      } else if (prec >= req_.max_bits) {
        decide_faithfully_at_cap(job, k, eptr[idx]->v, L.v, U.v, fl, fu, prec);
        ++w.counts.faithful;
      } else {
        still.push_back(k);
      }
    }
    w.counts.add_mpfi(prec, decided_here);
    w.pending.swap(still);
    return decided_here;
  }

  // Cap reached: faithful rounding if the enclosure lies strictly between two adjacent
  // target numbers (both are then faithful); otherwise the cap is too low for this element.
  void decide_faithfully_at_cap(const row_job& job, std::size_t k, mpfi_srcptr enclosure, mpfr_srcptr L, mpfr_srcptr U,
                                double fl, double fu, unsigned prec) {
    const std::size_t e = job.base + k;
    if (adjacent_or_equal(fl, fu, req_.target) && !std::isnan(fl) && mpfr_cmp_d(L, std::min(fl, fu)) > 0 &&
        mpfr_cmp_d(U, std::max(fl, fu)) < 0) {
      mpfr_var mid(prec);
      mpfi_mid(mid.v, enclosure);
      res_.reference[e] = round_mpfr_to_target(mid.v, req_.target);
      res_.how[e] = decided_by::faithful_only;
      res_.bits_used[e] = static_cast<std::uint16_t>(std::min(prec, 65535u));
      return;
    }
    throw input_error("element (b, h, i, k) = " + index_text(job.b, job.h, job.i, k) +
                      " could not be enclosed within one ulp of the target at " + std::to_string(prec) +
                      " bits (precision too low: raise --max-precision)");
  }

  // The escalation: Ziv steps at first_mpfi_bits, doubling, up to the cap, until no element
  // of the row is pending.
  void ziv_stage(const row_job& job, worker_space& w) {
    if (w.pending.empty()) return;
    ++w.counts.escalated;
    ziv_escalate(precision_schedule{first_mpfi_bits, req_.max_bits}, [&](unsigned prec) {
      const std::size_t decided = ziv_step(job, w, prec);
      return w.pending.empty() ? ziv_decided(decided) : ziv_more(decided);
    });
  }

  void process_row(std::size_t r, worker_space& w) {
    row_job job;
    job.i = r % nq_;
    job.h = (r / nq_) % H_;
    job.b = r / (nq_ * H_);
    job.base = r * dv_;
    allowed_row(job.b, job.h, job.i, w.allowed);
    job.allowed = w.allowed.data();
    if (none_allowed(w.allowed)) return fill_empty_row(job, w.counts);
    const std::size_t bh = job.b * H_ + job.h;
    job.in = detail::row_inputs{req_.Q.values.data() + (bh * nq_ + job.i) * d_,
                                req_.K.values.data() + bh * nk_ * d_,
                                heads_[bh].KT.data(),
                                req_.V.values.data() + bh * nk_ * dv_,
                                w.allowed.data(),
                                nk_,
                                d_,
                                dv_,
                                sv_.hi,
                                sv_.lo,
                                sv_.rad};
    if (touches_nonfinite(job)) return fill_ieee_row(job, w);
    fast_stage(job, w);
    ziv_stage(job, w);
  }

  void worker(bool main_thread) {
    try {
      worker_space w(dv_);
      std::size_t last_report = 0;
      while (!stop_.load(std::memory_order_relaxed)) {
        const std::size_t r = next_row_.fetch_add(1);
        if (r >= rows()) break;
        process_row(r, w);
        const std::size_t done = rows_done_.fetch_add(1) + 1;
        if (main_thread && req_.progress && done - last_report >= std::max<std::size_t>(1, rows() / 200)) {
          last_report = done;
          req_.progress(done, rows());
        }
      }
      std::lock_guard<std::mutex> lock(mu_);
      totals_.merge(w.counts);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!first_error_) first_error_ = std::current_exception();
      stop_ = true;
    }
  }

  void run_workers() {
    const unsigned nthreads =
        std::max(1u, std::min<unsigned>(req_.threads, static_cast<unsigned>(std::min<std::size_t>(rows(), 64))));
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < nthreads; ++t)
      pool.emplace_back([this] {
        worker(false);
        mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);  // MPFR's caches are thread-local: free them before the thread ends
      });
    worker(true);
    for (auto& th : pool) th.join();
    if (first_error_) std::rethrow_exception(first_error_);
    if (req_.progress) req_.progress(rows(), rows());
  }

  void finish() {
    std::sort(totals_.by_mpfi.begin(), totals_.by_mpfi.end());
    res_.by_double_double = totals_.double_double;
    res_.by_mpfi = totals_.by_mpfi;
    res_.faithful_only = totals_.faithful;
    res_.exact_policy = totals_.policy;
    res_.ieee_nonfinite = totals_.ieee;
    res_.rows_escalated = totals_.escalated;
    res_.fast_path_rows_failed = totals_.fast_failed;
    res_.empty_rows = totals_.empty;
    std::size_t by_mpfi = 0;
    for (const auto& pr : totals_.by_mpfi) by_mpfi += pr.second;
    res_.correctly_rounded = totals_.double_double + by_mpfi;
  }

  const oracle_request& req_;
  const std::size_t B_, H_, nq_, nk_, d_, dv_;
  scale_value sv_;
  bool all_finite_ = true;
  std::vector<head_data> heads_;
  oracle_result res_;
  std::atomic<std::size_t> next_row_{0}, rows_done_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;  // guards totals_ and first_error_
  std::exception_ptr first_error_;
  decision_counts totals_;
};

}  // namespace

oracle_result run_oracle(const oracle_request& req) {
  validate_request(req);
  return oracle_run(req).run();
}

}  // namespace attncert::oracle
