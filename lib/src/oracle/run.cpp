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
#include <optional>
#include <thread>

#include "attncert/deadline.hpp"
#include "attncert/error.hpp"
#include "attncert/field.hpp"
#include "attncert/number/double_double.hpp"
#include "attncert/number/ziv.hpp"
#include "attncert/oracle/request.hpp"
#include "ziv_stage.hpp"
#include "rows.hpp"

namespace attncert::oracle {

using namespace internal;

std::string internal::index_text(std::size_t b, std::size_t h, std::size_t i, std::size_t k) {
  return "(" + std::to_string(b) + ", " + std::to_string(h) + ", " + std::to_string(i) + ", " + std::to_string(k) + ")";
}

namespace {

/// What one worker counts; merged into the result at the end.
struct decision_counts {
  std::size_t double_double = 0, faithful = 0, policy = 0, ieee = 0, escalated = 0, fast_failed = 0, empty = 0, padding = 0,
              undecided = 0;
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
    padding += o.padding;
    undecided += o.undecided;
    for (const auto& pr : o.by_mpfi) add_mpfi(pr.first, pr.second);
  }
};

/// A worker's scratch space.
struct worker_space {
  detail::row_workspace ws;
  row_scratch rows;
  std::vector<double> ohi, olo, orad, plain;
  std::vector<std::size_t> pending;
  decision_counts counts;
  explicit worker_space(std::size_t dv) : ohi(dv), olo(dv), orad(dv), plain(dv) {}
};

class oracle_run {
 public:
  explicit oracle_run(const oracle_request& req)
      : req_(req), var_(req.variant), src_(req), B_(req.Q.B), H_(req.Q.H), nq_(req.Q.n), dv_(req.V.d),
        sv_(src_.scale()), vv_(src_.values()) {
    prepare_result();
  }

  oracle_result run() {
    reject_empty_rows_up_front();
    run_workers();
    finish();
    return std::move(res_);
  }

 private:
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
    if (req_.lse.want) {
      res_.has_lse = true;
      res_.lse_target = req_.lse.target;
      const std::size_t n = B_ * H_ * nq_;
      res_.lse_reference.assign(n, 0.0);
      res_.lse_hi.assign(n, 0.0);
      res_.lse_lo.assign(n, 0.0);
      res_.lse_rad.assign(n, inf);
      res_.lse_how.assign(n, decided_by::double_double);
    }
  }

  std::size_t rows() const { return B_ * H_ * nq_; }



  // Fully masked rows are found up front, so that policy `error` fails before any work.
  void reject_empty_rows_up_front() const {
    if (req_.empty_rows != empty_row_policy::error || !var_.sink.empty()) return;
    std::vector<std::uint8_t> a;
    for (std::size_t r = 0; r < rows(); ++r) {
      row_job job;
      src_.locate(r, job);
      if (!req_.row_used(r, job.b, job.i)) continue;
      if (!src_.any_allowed(job, a))
        throw input_error("row " + row_source::row_text(job) +
                          " is fully masked: softmax is undefined (use " + field("empty_rows") + " zeros|nan to choose a value)");
    }
  }

  // A fully masked row (no allowed key, no sink) gets the policy's value (zeros or NaN), and the
  // LSE -inf (or +inf), decided exactly.
  void fill_empty_row(const row_job& job, decision_counts& c) {
    if (req_.empty_rows == empty_row_policy::error)
      throw input_error("row " + row_source::row_text(job) + " is fully masked: softmax is undefined");
    const bool zeros = req_.empty_rows == empty_row_policy::zeros;
    const double v = zeros ? 0.0 : std::numeric_limits<double>::quiet_NaN();
    for (std::size_t k = 0; k < dv_; ++k) {
      res_.reference[job.base + k] = v;
      res_.t_hi[job.base + k] = v;
      res_.t_rad[job.base + k] = v;
      res_.how[job.base + k] = decided_by::exact_policy;
    }
    if (res_.has_lse) {
      const double l = req_.lse.empty_value;
      res_.lse_reference[job.row] = l;
      res_.lse_hi[job.row] = l;
      res_.lse_rad[job.row] = std::numeric_limits<double>::quiet_NaN();
      res_.lse_how[job.row] = decided_by::exact_policy;
    }
    c.policy += dv_;
    ++c.empty;
  }

  // A row outside its sequence (seqlens_q) or left out of the row sample: not an output.
  // A row not computed within the budget: NaN, no enclosure, decided_by::undecided (padding rows
  // stay padding).
  void fill_undecided_row(std::size_t r, worker_space& w) {
    row_job job;
    src_.locate(r, job);
    if (!req_.row_used(job.row, job.b, job.i)) return fill_padding_row(job, w.counts);
    fill_padding_row(job, w.counts);
    --w.counts.padding;
    ++w.counts.undecided;
    for (std::size_t k = 0; k < dv_; ++k) res_.how[job.base + k] = decided_by::undecided;
    if (res_.has_lse) res_.lse_how[job.row] = decided_by::undecided;
  }

  void fill_padding_row(const row_job& job, decision_counts& c) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (std::size_t k = 0; k < dv_; ++k) {
      res_.reference[job.base + k] = nan;
      res_.t_hi[job.base + k] = nan;
      res_.t_rad[job.base + k] = nan;
      res_.how[job.base + k] = decided_by::padding;
    }
    if (res_.has_lse) {
      res_.lse_reference[job.row] = nan;
      res_.lse_hi[job.row] = nan;
      res_.lse_rad[job.row] = nan;
      res_.lse_how[job.row] = decided_by::padding;
    }
    ++c.padding;
  }


  // Such a row follows plain IEEE binary64 (approx tier, counted, not certified).
  void fill_ieee_row(const row_job& job, worker_space& w) {
    if (!req_.allow_nonfinite && !req_.approx_plain_binary64)
      throw input_error("row " + row_source::row_text(job) +
                        " uses a NaN or Inf input (use " + field("allow_nonfinite") + " for IEEE semantics on the affected rows)");
    double lse = 0;
    detail::plain_row(job.in, w.ws, w.plain.data(), &lse);
    for (std::size_t k = 0; k < dv_; ++k) {
      res_.reference[job.base + k] = rn_from_double(w.plain[k], req_.target);
      res_.t_hi[job.base + k] = w.plain[k];
      res_.t_rad[job.base + k] = std::numeric_limits<double>::quiet_NaN();
      res_.how[job.base + k] = decided_by::ieee_nonfinite;
    }
    if (res_.has_lse) {
      res_.lse_reference[job.row] = rn_from_double(req_.lse.base2 ? lse / std::log(2.0) : lse, req_.lse.target);
      res_.lse_hi[job.row] = res_.lse_reference[job.row];
      res_.lse_rad[job.row] = std::numeric_limits<double>::quiet_NaN();
      res_.lse_how[job.row] = decided_by::ieee_nonfinite;
    }
    w.counts.ieee += dv_;
  }

  // Where element k of a row lives in the result: k < dv an output, k == dv the row's LSE.
  struct slot {
    double *reference, *hi, *lo, *rad;
    decided_by* how;
    std::uint16_t* bits;
    target_format target;
  };
  slot slot_of(const row_job& job, std::size_t k) {
    if (k == dv_)
      return {&res_.lse_reference[job.row], &res_.lse_hi[job.row], &res_.lse_lo[job.row], &res_.lse_rad[job.row],
              &res_.lse_how[job.row], nullptr, req_.lse.target};
    const std::size_t e = job.base + k;
    return {&res_.reference[e], &res_.t_hi[e], &res_.t_lo[e], &res_.t_rad[e], &res_.how[e], &res_.bits_used[e], req_.target};
  }

  // Decides a slot from an enclosure hi + lo ± rad when it rounds to one target number.
  static bool decide_from_dd(const slot& sl, double hi, double lo, double rad) {
    *sl.hi = hi;
    *sl.lo = lo;
    *sl.rad = rad;
    if (!std::isfinite(rad)) return false;
    const double dn = std::nextafter(lo - rad, -inf);
    const double up = std::nextafter(lo + rad, inf);
    const double fl = round_sum_to_target(hi, dn, sl.target);
    const double fu = round_sum_to_target(hi, up, sl.target);
    if (fl != fu) return false;
    *sl.reference = fl == 0 ? 0.0 : fl;  // a zero of uncertain sign is reported as +0 (see the header)
    *sl.how = decided_by::double_double;
    return true;
  }

  // The LSE from the fast path's shift m and bounds W_lo <= W <= W_hi: m + ln [W_lo, W_hi]
  // (/ ln 2), enclosed by MPFI at 128 bits (P14).
  bool fast_lse(const row_job& job, const worker_space& w) {
    mpfi_var W(first_mpfi_bits), t(first_mpfi_bits);
    mpfi_interv_d(t.v, -w.ws.W_err, w.ws.W_err);
    mpfi_add_d(t.v, t.v, w.ws.W_hi);
    mpfi_add_d(W.v, t.v, w.ws.W_lo);  // [W_hi + W_lo - W_err, W_hi + W_lo + W_err], outward
    if (!(mpfr_sgn(&W.v->left) > 0)) return false;
    mpfi_log(W.v, W.v);
    mpfi_add_d(W.v, W.v, w.ws.m);
    if (req_.lse.base2) {
      mpfi_const_log2(t.v);
      mpfi_div(W.v, W.v, t.v);
    }
    double hi = 0, lo = 0, rad = 0;
    enclosure_to_dd(W.v, hi, lo, rad);
    return decide_from_dd(slot_of(job, dv_), hi, lo, rad);
  }

  // The filter: the double-double fast path decides every element whose enclosure rounds to
  // one target number; the others go to w.pending.
  void fast_stage(const row_job& job, worker_space& w) {
    w.pending.clear();
    const bool fast_ok = std::isfinite(sv_.rad) && (!vv_.has_softcap || vv_.softcap_d != 0) &&
                         (!vv_.has_dropout || std::isfinite(vv_.keep_rad)) &&
                         detail::fast_row(job.in, w.ws, w.ohi.data(), w.olo.data(), w.orad.data());
    const std::size_t elems = dv_ + (res_.has_lse ? 1 : 0);
    if (!fast_ok) {
      ++w.counts.fast_failed;
      for (std::size_t k = 0; k < elems; ++k) w.pending.push_back(k);
      return;
    }
    for (std::size_t k = 0; k < dv_; ++k) {
      if (decide_from_dd(slot_of(job, k), w.ohi[k], w.olo[k], w.orad[k])) ++w.counts.double_double;
      else w.pending.push_back(k);
    }
    if (res_.has_lse && !fast_lse(job, w)) w.pending.push_back(dv_);
  }

  // One step of the Ziv stage: encloses the pending elements at `prec` bits, decides those
  // whose enclosure rounds to one target number (at the cap: faithfully, if it lies strictly
  // between two adjacent target numbers; else "precision too low"), and keeps the others
  // pending.  Returns how many it decided.
  std::size_t ziv_step(const row_job& job, worker_space& w, unsigned prec) {
    std::vector<std::unique_ptr<mpfi_var>> enclosures;
    std::vector<mpfi_var*> eptr;
    for (std::size_t idx = 0; idx < w.pending.size(); ++idx) {
      enclosures.push_back(std::make_unique<mpfi_var>(prec));
      eptr.push_back(enclosures.back().get());
    }
    mpfi_row(job.ctx, w.pending, prec, eptr);
    mpfr_var L(prec), U(prec);
    std::vector<std::size_t> still;
    std::size_t decided_here = 0;
    for (std::size_t idx = 0; idx < w.pending.size(); ++idx) {
      const std::size_t k = w.pending[idx];
      const slot sl = slot_of(job, k);
      mpfi_get_left(L.v, eptr[idx]->v);
      mpfi_get_right(U.v, eptr[idx]->v);
      const double fl = round_mpfr_to_target(L.v, sl.target);
      const double fu = round_mpfr_to_target(U.v, sl.target);
      enclosure_to_dd(eptr[idx]->v, *sl.hi, *sl.lo, *sl.rad);
      if (fl == fu) {
        *sl.reference = fl == 0 ? 0.0 : fl;
        *sl.how = decided_by::mpfi;
        if (sl.bits) *sl.bits = static_cast<std::uint16_t>(std::min(prec, 65535u));
        if (k < dv_) ++decided_here;
      } else if (prec >= req_.max_bits) {
        decide_faithfully_at_cap(job, k, sl, eptr[idx]->v, L.v, U.v, fl, fu, prec);
        if (k < dv_) ++w.counts.faithful;
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
  void decide_faithfully_at_cap(const row_job& job, std::size_t k, const slot& sl, mpfi_srcptr enclosure, mpfr_srcptr L,
                                mpfr_srcptr U, double fl, double fu, unsigned prec) {
    if (adjacent_or_equal(fl, fu, sl.target) && !std::isnan(fl) && mpfr_cmp_d(L, std::min(fl, fu)) > 0 &&
        mpfr_cmp_d(U, std::max(fl, fu)) < 0) {
      mpfr_var mid(prec);
      mpfi_mid(mid.v, enclosure);
      *sl.reference = round_mpfr_to_target(mid.v, sl.target);
      *sl.how = decided_by::faithful_only;
      if (sl.bits) *sl.bits = static_cast<std::uint16_t>(std::min(prec, 65535u));
      return;
    }
    throw input_error((k == dv_ ? "the LSE of row " + row_source::row_text(job)
                                : "element (b, h, i, k) = " + index_text(job.s, job.h, job.il, k)) +
                      " could not be enclosed within one ulp of the target at " + std::to_string(prec) +
                      " bits (precision too low: raise " + field("max_precision") + ")");
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
    src_.locate(r, job);
    if (!req_.row_used(job.row, job.b, job.i)) return fill_padding_row(job, w.counts);
    src_.allowed_row(job, w.rows.allowed);
    job.allowed = w.rows.allowed.data();
    if (row_source::none_allowed(w.rows.allowed) && var_.sink.empty()) return fill_empty_row(job, w.counts);
    src_.build_job(job, w.rows);
    if (req_.approx_plain_binary64 || src_.touches_nonfinite(job, w.rows)) return fill_ieee_row(job, w);
    fast_stage(job, w);
    ziv_stage(job, w);
  }

  // The first failing row in index order wins, whatever the thread timing: after a failure at
  // row r, workers stop taking rows past r, and every row before r was already taken and finishes.
  void record_error(std::size_t r) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!first_error_ || r < error_row_) {
      first_error_ = std::current_exception();
      error_row_ = r;
      error_limit_ = r;
    }
  }

  void worker(bool main_thread, const attncert::detail::deadline_state& budget) {
    try {
      deadline_scope adopt(budget);  // the run's budget on this thread too
      worker_space w(dv_);
      std::size_t last_report = 0;
      for (;;) {
        const std::size_t r = next_row_.fetch_add(1);
        if (r >= rows() || r > error_limit_.load(std::memory_order_relaxed)) break;
        // With a budget, the counts before the row: a row stopped inside is undecided as a whole,
        // so what it had counted is taken back.
        std::optional<decision_counts> before;
        try {
          check_interrupt();  // Ctrl-C (CLI, Python): every worker stops at its next row
          if (deadline_passed()) {
            fill_undecided_row(r, w);
          } else {
            if (budget.active) before = w.counts;
            process_row(r, w);
          }
        } catch (const time_limit_reached&) {
          if (before) w.counts = *before;
          fill_undecided_row(r, w);  // stopped inside the row: all of it is undecided
        } catch (...) {
          record_error(r);
          break;
        }
        const std::size_t done = rows_done_.fetch_add(1) + 1;
        if (main_thread && req_.progress && done - last_report >= std::max<std::size_t>(1, rows() / 200)) {
          last_report = done;
          req_.progress(done, rows());
        }
      }
      std::lock_guard<std::mutex> lock(mu_);
      totals_.merge(w.counts);
    } catch (...) {
      record_error(0);
    }
  }

  void run_workers() {
    const unsigned nthreads =
        std::max(1u, std::min<unsigned>(req_.threads, static_cast<unsigned>(std::min<std::size_t>(rows(), 64))));
    deadline_scope run_budget(req_.max_seconds);
    const attncert::detail::deadline_state budget = current_budget();
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < nthreads; ++t)
      pool.emplace_back([this, budget] {
        worker(false, budget);
        mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);  // MPFR's caches are thread-local: free them before the thread ends
      });
    worker(true, budget);
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
    res_.padding_rows = totals_.padding;
    res_.undecided_rows = totals_.undecided;
    std::size_t by_mpfi = 0;
    for (const auto& pr : totals_.by_mpfi) by_mpfi += pr.second;
    res_.correctly_rounded = totals_.double_double + by_mpfi;
    res_.elements -= totals_.padding * dv_;  // padding rows are not outputs
  }

  const oracle_request& req_;
  const attention_variant& var_;
  const row_source src_;
  const std::size_t B_, H_, nq_, dv_;
  const scale_value& sv_;
  const variant_values& vv_;
  oracle_result res_;
  std::atomic<std::size_t> next_row_{0}, rows_done_{0};
  std::atomic<std::size_t> error_limit_{std::numeric_limits<std::size_t>::max()};
  std::mutex mu_;  // guards totals_, first_error_ and error_row_
  std::exception_ptr first_error_;
  std::size_t error_row_ = 0;
  decision_counts totals_;
};

}  // namespace

oracle_result run_oracle(const oracle_request& req) {
  validate_request(req);
  return oracle_run(req).run();
}

}  // namespace attncert::oracle
