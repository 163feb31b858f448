// lib/src/oracle/backward.cpp — the certified backward pass (attncert/oracle/backward.hpp), filter
// then escalate: (1) the double-double fast path (fast_backward.cpp) encloses every gradient with a
// rigorous radius, unit by unit ((batch, kv head): its rows' dq, its dk and dv), and decides each
// element whose enclosure rounds to one target number; (2) a row whose dq stays undecided is
// recomputed alone in MPFI at 128, 256, ... bits (number/ziv.hpp); (3) a unit whose dk/dv stay
// undecided, or that the fast path declined, is recomputed in MPFI with all of its rows (all units
// when a dBias/dSink element is undecided: they sum over every unit).  The rows' MPFI
// contributions are mpfi_row_backward's (ziv_stage.cpp); the rows, masks and variants are
// row_source's (rows.cpp), shared with the forward run.  Error analysis and the exact zeros:
// proofs/P15-oracle-backward.md.
//
// Tier: enclosure.
#include "attncert/oracle/backward.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "attncert/deadline.hpp"
#include "attncert/error.hpp"
#include "attncert/field.hpp"
#include "attncert/number/ziv.hpp"
#include "attncert/oracle/request.hpp"
#include "fast_backward.hpp"
#include "ziv_stage.hpp"
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

/// Runs fn(index, state) for every index of `list` on up to `threads` workers (each with its own
/// State), the main thread reporting progress.  After all joined, the exception of the first
/// failing position in `list` is rethrown, the same one whatever the thread timing: after a failure
/// at position k no worker takes a position past k, and every position before k was already taken.
// Every worker adopts the caller's budget (deadline.hpp) and polls it before each position, as
// for_used_rows does before each row: past the budget time_limit_reached ends the whole backward
// (its sums run over every row, so there is no partial result to report).
template <class State, class F>
void for_each_parallel(const std::vector<std::size_t>& list, unsigned threads,
                       const std::function<void(std::size_t, std::size_t)>& progress, F&& fn) {
  const attncert::detail::deadline_state budget = current_budget();
  std::atomic<std::size_t> next{0}, done{0};
  std::atomic<std::size_t> limit{std::numeric_limits<std::size_t>::max()};
  std::mutex mu;
  std::exception_ptr first_error;
  std::size_t error_at = 0;
  auto record = [&](std::size_t k) {
    std::lock_guard<std::mutex> lock(mu);
    if (!first_error || k < error_at) {
      first_error = std::current_exception();
      error_at = k;
      limit = k;
    }
  };
  auto work = [&](bool main_thread) {
    try {
      deadline_scope adopt(budget);
      State st;
      for (;;) {
        const std::size_t k = next.fetch_add(1);
        if (k >= list.size() || k > limit.load(std::memory_order_relaxed)) break;
        try {
          check_deadline();  // Ctrl-C (CLI, Python) and the budget: every worker stops at its next position
          fn(list[k], st);
        } catch (...) {
          record(k);
          break;
        }
        const std::size_t n = done.fetch_add(1) + 1;
        if (main_thread && progress) progress(n, list.size());
      }
    } catch (...) {
      record(0);
    }
  };
  const unsigned n = std::max(1u, std::min<unsigned>(threads, static_cast<unsigned>(std::min<std::size_t>(list.size(), 64))));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < n; ++t)
    pool.emplace_back([&work] {
      work(false);
      mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
    });
  work(true);
  for (auto& th : pool) th.join();
  if (first_error) std::rethrow_exception(first_error);
}

/// A fast-stage worker's buffers.
struct fast_state {
  detail::row_workspace ws;
  row_scratch scratch;
  detail::row_backward rb;
  detail::unit_sums sums;
  std::vector<double> VT, kmax;
  std::vector<detail::dd_ball> dk, dv;
};

/// An MPFI-stage worker's buffers.
struct mpfi_state {
  row_scratch scratch;
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
    if (req_.approx_plain_binary64) {
      plain_stage();
      finish();
      return std::move(res_);
    }
    fast_stage();
    escalate_keys();
    choose_mpfi_units();
    escalate_rows();
    escalate_units();
    finish();
    return std::move(res_);
  }

  // The internal rows [begin, end) only: their dq, correctly rounded, and the partial sums of dK
  // (before the scale) and dV over them, as enclosures (backward.hpp: run_oracle_backward_block).
  backward_block_result run_block(std::size_t begin, std::size_t end) {
    if (!(begin < end && end <= rows()))
      throw input_error("row block [" + std::to_string(begin) + ", " + std::to_string(end) + ") is not within the " +
                        std::to_string(rows()) + " query rows");
    block_begin_ = begin;
    block_end_ = end;
    block_ = {};
    check_cotangents();
    check_rows();
    prepare();
    block_.target = req_.target;
    block_.scale_hi = scale_.hi;
    block_.scale_lo = scale_.lo;
    block_.scale_rad = scale_.rad;
    for (auto* p : {&block_.dk, &block_.dv}) {
      const std::size_t n = units() * nk_ * (p == &block_.dk ? d_ : dv_);
      p->hi.assign(n, 0.0);
      p->lo.assign(n, 0.0);
      p->rad.assign(n, 0.0);
    }
    if (req_.approx_plain_binary64 || !fast_possible_)
      return declined("the fast path does not hold this request's scale, softcap or keep factor");
    if (res_.has_dbias || res_.has_dsink) return declined("dBias and dSink sum over every row of every unit");
    std::vector<std::size_t> list;
    for (std::size_t u = unit_of_row(begin); u <= unit_of_row(end - 1); ++u) list.push_back(u);
    for_each_parallel<fast_state>(list, req_.threads, req_.progress,
                                  [this](std::size_t u, fast_state& st) { unit_fast_ok_[u] = fast_unit(u, st); });
    for (std::size_t u : list)
      if (!unit_fast_ok_[u]) return declined("the fast path declined a row of the block (a range condition)");
    for (std::size_t e = begin * d_; e < end * d_; ++e) decide_fast(slots_[0], e);
    unit_mpfi_.assign(units(), 0);
    escalate_rows();
    if (res_.faithful_only) return declined("a dq element of the block is only faithfully rounded at the cap");
    block_.dq.assign(res_.dq.reference.begin() + static_cast<std::ptrdiff_t>(begin * d_),
                     res_.dq.reference.begin() + static_cast<std::ptrdiff_t>(end * d_));
    block_.complete = true;
    return std::move(block_);
  }

 private:
  std::size_t rows() const { return B_ * H_ * nq_; }
  std::size_t units() const { return B_ * Hkv_; }
  std::size_t unit_of_row(std::size_t r) const { return (r / (nq_ * H_)) * Hkv_ + ((r / nq_) % H_) / group_; }
  bool used_row(std::size_t r, std::vector<std::uint8_t>& allowed) const {
    row_job job;
    src_.locate(r, job);
    if (job.i >= req_.rows_in(job.b)) return false;
    src_.allowed_row(job, allowed);
    return !(row_source::none_allowed(allowed) && var_.sink.empty());
  }

  bool in_block(std::size_t r) const { return r >= block_begin_ && r < block_end_; }

  backward_block_result declined(const char* why) {
    block_.complete = false;
    block_.declined = why;
    return std::move(block_);
  }

  // Calls fn(r, job) for every used row r of unit u (the query heads of its kv head, the queries
  // of its sequence) within the block, with the job built in `scratch`; stops, returning false,
  // when fn does.
  template <class F>
  bool for_used_rows(std::size_t u, row_scratch& scratch, F&& fn) const {
    const std::size_t b = u / Hkv_, hk = u % Hkv_;
    for (std::size_t h = hk * group_; h < (hk + 1) * group_; ++h)
      for (std::size_t i = 0; i < req_.rows_in(b); ++i) {
        const std::size_t r = (b * H_ + h) * nq_ + i;
        if (!in_block(r) || !used_row(r, scratch.allowed)) continue;
        check_deadline();  // a unit holds up to n_q x group rows: the budget and Ctrl-C per row
        row_job job;
        src_.locate(r, job);
        job.allowed = scratch.allowed.data();
        src_.build_job(job, scratch);
        if (!fn(r, job)) return false;
      }
    return true;
  }

  std::string row_text(std::size_t r) const {
    row_job job;
    src_.locate(r, job);
    return row_source::row_text(job);
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
    for (std::size_t r = block_begin_; r < std::min(rows(), block_end_); ++r) {
      row_job job;
      src_.locate(r, job);
      if (job.i >= req_.rows_in(job.b)) continue;
      check_deadline();  // O(the row's keys) per row: the budget and Ctrl-C
      src_.allowed_row(job, allowed);
      if (row_source::none_allowed(allowed) && var_.sink.empty()) {
        if (req_.empty_rows == empty_row_policy::error)
          throw input_error("row " + row_text(r) +
                            " is fully masked: softmax is undefined (use " + field("empty_rows") + " zeros|nan to choose a value)");
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
    // Gradients of unused inputs are exact zeros: rows outside their sequence and fully masked
    // rows contribute nothing, and keys no row attends get no term (decided as 0 below).
    const scale_value& sv = src_.scale();
    scale_ = {sv.hi, sv.lo, sv.rad};
    const variant_values& vv = src_.values();
    fast_possible_ = std::isfinite(sv.rad) && (!vv.has_softcap || vv.softcap_d != 0) &&
                     (!vv.has_dropout || std::isfinite(vv.keep_rad));
    if (req_.lse.base2) {
      mpfi_var t(256);
      mpfi_const_log2(t.v);
      mpfi_ui_div(t.v, 1, t.v);
      enclosure_to_dd(t.v, inv_ln2_.hi, inv_ln2_.lo, inv_ln2_.rad);
    }
    unit_fast_ok_.assign(units(), 0);
    if (fast_possible_) summary_.assign(rows(), {});
    if (res_.has_dbias) fast_dbias_.assign(res_.dbias.size(), {});
    if (res_.has_dsink) fast_dsink_.assign(H_, {});
  }

  std::size_t bias_index(std::size_t b, std::size_t h, std::size_t i, std::size_t j) const {
    const score_bias& sb = var_.bias;
    return (((sb.mb == 1 ? 0 : b) * sb.mh + (sb.mh == 1 ? 0 : h)) * sb.mq + (sb.mq == 1 ? 0 : i)) * sb.mk +
           (sb.mk == 1 ? 0 : j);
  }

  // ---- approx tier, for benchmarks: the same jobs in plain binary64 (oracle_request) ---------
  // dq, dk, dv only (no dbias, dsink); elements are marked ieee_nonfinite (uncertified).
  void plain_stage() {
    std::vector<std::size_t> all(units());
    for (std::size_t u = 0; u < units(); ++u) all[u] = u;
    for_each_parallel<fast_state>(all, req_.threads, {}, [this](std::size_t u, fast_state& st) { plain_unit(u, st); });
    for (auto& s : slots_)
      for (std::size_t e = 0; e < s.out->size(); ++e) {
        s.out->reference[e] = rn_from_double(s.out->hi[e], req_.target);
        s.out->how[e] = decided_by::ieee_nonfinite;
      }
  }

  void plain_unit(std::size_t u, fast_state& st) {
    detail::transpose_values(req_.V.values.data() + u * nk_ * dv_, src_.key_cuts(), dv_, st.VT);
    double* dk = res_.dk.hi.data() + u * nk_ * d_;
    double* dv = res_.dv.hi.data() + u * nk_ * dv_;
    const double ln2 = std::log(2.0);
    for_used_rows(u, st.scratch, [&](std::size_t r, row_job& job) {  // the row's keys k0 .. k0 + nk - 1
      double g = g_.dLSE.empty() ? 0.0 : g_.dLSE[r];
      if (req_.lse.base2) g /= ln2;
      detail::plain_row_backward(job.in, st.ws, g_.dO.data() + r * dv_, g_.dLSE.empty() ? nullptr : &g,
                                 st.VT.data() + dv_ * job.k0, res_.dq.hi.data() + r * d_, dk + job.k0 * d_,
                                 dv + job.k0 * dv_);
      return true;
    });
  }

  // ---- (1) the fast stage ---------------------------------------------------------------------

  void fast_stage() {
    if (!fast_possible_) return;
    std::vector<std::size_t> all(units());
    for (std::size_t u = 0; u < units(); ++u) all[u] = u;
    for_each_parallel<fast_state>(all, req_.threads, req_.progress,
                                  [this](std::size_t u, fast_state& st) { unit_fast_ok_[u] = fast_unit(u, st); });
    bool all_ok = true;
    for (std::size_t u = 0; u < units(); ++u) all_ok = all_ok && unit_fast_ok_[u];
    for (std::size_t u = 0; u < units(); ++u) {
      if (!unit_fast_ok_[u]) continue;
      decide_unit_fast(u);
    }
    if (all_ok) {
      if (res_.has_dbias) decide_fast_range(slots_[3], fast_dbias_);
      if (res_.has_dsink) decide_fast_range(slots_.back(), fast_dsink_);
    }
  }

  // The rows of unit u = (b, kv head) by the fast path, then its dk and dv.  False: declined.
  bool fast_unit(std::size_t u, fast_state& st) {
    const std::size_t b = u / Hkv_, hk = u % Hkv_;
    st.sums.reset(nk_, d_, dv_);
    detail::transpose_values(req_.V.values.data() + u * nk_ * dv_, src_.key_cuts(), dv_, st.VT);
    detail::key_magnitudes(req_.K.values.data() + u * nk_ * d_, nk_, d_, st.kmax);
    detail::row_cotangent g;
    g.lse_base2 = req_.lse.base2;
    g.inv_ln2 = inv_ln2_;
    g.VT = st.VT.data();
    g.kmax = st.kmax.data();
    g.want_ds = res_.has_dbias;
    for (std::size_t h = hk * group_; h < (hk + 1) * group_; ++h)  // unused rows: dq exactly 0
      for (std::size_t e = (b * H_ + h) * nq_ * d_; e < (b * H_ + h + 1) * nq_ * d_; ++e) set_ball(res_.dq, e, {});
    const bool rows_ok = for_used_rows(u, st.scratch, [&](std::size_t r, row_job& job) {
      job.in.weights_only = true;
      g.VT = st.VT.data() + dv_ * job.k0;  // the row's keys k0 .. k0 + nk - 1 (rows.hpp)
      g.kmax = st.kmax.data() + job.k0;
      g.key_offset = job.k0;
      g.dO = g_.dO.data() + r * dv_;
      g.dlse = g_.dLSE.empty() ? nullptr : &g_.dLSE[r];
      if (!detail::fast_row_backward(job.in, st.ws, g, st.sums, st.rb)) return false;
      for (std::size_t l = 0; l < d_; ++l) set_ball(res_.dq, r * d_ + l, st.rb.dq[l]);
      const detail::row_workspace& w = st.ws;
      const detail::row_backward& rb = st.rb;
      summary_[r] = {w.m,      w.W_hi,     w.W_lo,     w.W_err,     rb.c.hi, rb.c.lo,
                     rb.c.rad, rb.base.hi, rb.base.lo, rb.base.rad, rb.ref};
      if (res_.has_dbias || res_.has_dsink) add_shared(job, st);
      return true;
    });
    if (!rows_ok) return false;
    if (block_end_ != all_rows) {  // a block: the partial sums, unscaled
      if (!detail::sum_balls(st.sums, st.dk, st.dv)) return false;
      copy_balls(st.dk, block_.dk, u * nk_ * d_);
      copy_balls(st.dv, block_.dv, u * nk_ * dv_);
      return true;
    }
    if (!detail::finish_unit(st.sums, scale_, st.dk, st.dv)) return false;
    for (std::size_t e = 0; e < nk_ * d_; ++e) set_ball(res_.dk, u * nk_ * d_ + e, st.dk[e]);
    for (std::size_t e = 0; e < nk_ * dv_; ++e) set_ball(res_.dv, u * nk_ * dv_ + e, st.dv[e]);
    return true;
  }

  static void copy_balls(const std::vector<detail::dd_ball>& x, partial_sums& out, std::size_t at) {
    for (std::size_t e = 0; e < x.size(); ++e) {
      out.hi[at + e] = x[e].hi;
      out.lo[at + e] = x[e].lo;
      out.rad[at + e] = x[e].rad;
    }
  }

  static void set_ball(gradient_tensor& t, std::size_t e, const detail::dd_ball& x) {
    t.hi[e] = x.hi;
    t.lo[e] = x.lo;
    t.rad[e] = x.rad;
  }

  // dBias and dSink sum over units: the row's dS_j and the sink's dS are added under the lock.
  void add_shared(const row_job& job, fast_state& st) {
    std::lock_guard<std::mutex> lock(mu_);
    if (res_.has_dbias)
      for (std::size_t j = 0; j < job.nk; ++j) {
        if (!st.scratch.allowed[j]) continue;
        detail::dd_ball& acc = fast_dbias_[bias_index(job.s, job.h, job.il, j)];
        acc = detail::ball_add(acc, st.rb.ds[j], fast_shared_ok_);
      }
    if (res_.has_dsink) fast_dsink_[job.h] = detail::ball_add(fast_dsink_[job.h], st.rb.dsink, fast_shared_ok_);
  }

  // Decides from hi + lo ± rad when it rounds to one target number (P11's decision rule).
  bool decide_fast(gradient_slot& s, std::size_t e) {
    gradient_tensor& t = *s.out;
    const double hi = t.hi[e], lo = t.lo[e], rad = t.rad[e];
    // rad == 0: the exact value is hi + lo itself, rounded once (an exact zero included).
    if (!detail::round_ball(hi, lo, rad, req_.target, t.reference[e])) return false;
    t.how[e] = decided_by::double_double;
    s.open[e] = 0;
    ++res_.double_double;
    if (hi == 0 && lo == 0 && rad == 0) ++res_.exact_zeros;
    return true;
  }

  void decide_unit_fast(std::size_t u) {
    const std::size_t b = u / Hkv_, hk = u % Hkv_;
    for (std::size_t h = hk * group_; h < (hk + 1) * group_; ++h)
      for (std::size_t i = 0; i < nq_; ++i)
        for (std::size_t l = 0; l < d_; ++l) decide_fast(slots_[0], ((b * H_ + h) * nq_ + i) * d_ + l);
    for (std::size_t e = 0; e < nk_ * d_; ++e) decide_fast(slots_[1], u * nk_ * d_ + e);
    for (std::size_t e = 0; e < nk_ * dv_; ++e) decide_fast(slots_[2], u * nk_ * dv_ + e);
  }

  void decide_fast_range(gradient_slot& s, const std::vector<detail::dd_ball>& acc) {
    if (!fast_shared_ok_) return;
    for (std::size_t e = 0; e < acc.size(); ++e) {
      set_ball(*s.out, e, acc[e]);
      decide_fast(s, e);
    }
  }

  // ---- (2) keys whose dK/dV is undecided, column by column; rows whose dq is, alone;
  //      (3) units, whole ------------------------------------------------------------------

  bool shared_open() const {
    for (std::size_t k = 3; k < slots_.size(); ++k)
      for (auto o : slots_[k].open)
        if (o) return true;
    return false;
  }

  // The open keys of fast units, from the fast path's row quantities (row_summary) and each key's
  // exact score in MPFI at 128 and 256 bits: the rows' balls (about 2^-100 relative) bound what
  // more bits could give.  What stays open goes to the unit stage.  Not when dBias/dSink are open:
  // every unit is then redone whole anyway.
  void escalate_keys() {
    if (!fast_possible_ || shared_open()) return;
    std::vector<std::size_t> list;
    for (std::size_t u = 0; u < units(); ++u)
      if (unit_fast_ok_[u] && !open_keys(u).empty()) list.push_back(u);
    if (list.empty()) return;
    for_each_parallel<mpfi_state>(list, req_.threads, {}, [this](std::size_t u, mpfi_state& st) { key_unit(u, st); });
  }

  std::vector<std::size_t> open_keys(std::size_t u) const {
    std::vector<std::size_t> keys;
    for (std::size_t j = 0; j < nk_; ++j) {
      bool open = false;
      for (std::size_t l = 0; l < d_; ++l) open = open || slots_[1].open[(u * nk_ + j) * d_ + l];
      for (std::size_t k = 0; k < dv_; ++k) open = open || slots_[2].open[(u * nk_ + j) * dv_ + k];
      if (open) keys.push_back(j);
    }
    return keys;
  }

  // Two tries: at 128 bits from the fast path's row balls; then at 256 bits from row summaries
  // recomputed in MPFI (for rows whose balls are too wide: weights that underflow binary64).
  void key_unit(std::size_t u, mpfi_state& st) {
    const std::vector<std::size_t> keys = open_keys(u);
    {
      std::lock_guard<std::mutex> lock(mu_);
      res_.keys_escalated += keys.size();
    }
    const std::size_t nkeys = keys.size();
    interval_array dk, dv;
    std::vector<mpfi_ptr*> dkp(nkeys), dvp(nkeys);
    std::vector<row_summary> mpfi_rows(group_ * nq_);
    for (const bool from_mpfi : {false, true}) {
      const unsigned prec = from_mpfi ? 2 * first_mpfi_bits : first_mpfi_bits;
      if (prec > req_.max_bits) break;
      dk.reset(nkeys * d_, prec);
      dv.reset(nkeys * dv_, prec);
      for (std::size_t x = 0; x < nkeys; ++x) {
        dkp[x] = dk.p.data() + x * d_;
        dvp[x] = dv.p.data() + x * dv_;
      }
      std::vector<std::size_t> row_keys;  // the open keys among the row's, as its own indices
      std::vector<mpfi_ptr*> row_dk, row_dv;
      for_used_rows(u, st.scratch, [&](std::size_t r, row_job& job) {
        row_keys.clear();
        row_dk.clear();
        row_dv.clear();
        for (std::size_t x = 0; x < nkeys; ++x)
          if (keys[x] >= job.k0 && keys[x] < job.k0 + job.nk) {
            row_keys.push_back(keys[x] - job.k0);
            row_dk.push_back(dkp[x]);
            row_dv.push_back(dvp[x]);
          }
        if (row_keys.empty()) return true;
        const double* dO = g_.dO.data() + r * dv_;
        row_summary& rs = from_mpfi ? mpfi_rows[(job.h % group_) * nq_ + job.i] : summary_[r];
        if (from_mpfi) mpfi_row_summary(job.ctx, dO, g_.dLSE.empty() ? nullptr : &g_.dLSE[r], prec, rs);
        mpfi_key_columns(job.ctx, rs, dO, row_keys, prec, row_dk.data(), row_dv.data());
        return true;
      });
      std::size_t open = 0;
      for (std::size_t x = 0; x < nkeys; ++x) {
        for (std::size_t l = 0; l < d_; ++l) {
          const std::size_t e = (u * nk_ + keys[x]) * d_ + l;
          if (slots_[1].open[e] && !decide_interval(slots_[1], e, dkp[x][l], prec, false)) ++open;
        }
        for (std::size_t k = 0; k < dv_; ++k) {
          const std::size_t e = (u * nk_ + keys[x]) * dv_ + k;
          if (slots_[2].open[e] && !decide_interval(slots_[2], e, dvp[x][k], prec, false)) ++open;
        }
      }
      if (open == 0) break;
    }
  }

  void choose_mpfi_units() {
    unit_mpfi_.assign(units(), shared_open() ? 1 : 0);
    for (std::size_t u = 0; u < units(); ++u) {
      if (!unit_fast_ok_[u]) unit_mpfi_[u] = 1;
      for (std::size_t e = u * nk_ * d_; e < (u + 1) * nk_ * d_ && !unit_mpfi_[u]; ++e) unit_mpfi_[u] = slots_[1].open[e];
      for (std::size_t e = u * nk_ * dv_; e < (u + 1) * nk_ * dv_ && !unit_mpfi_[u]; ++e) unit_mpfi_[u] = slots_[2].open[e];
    }
  }

  void escalate_rows() {
    std::vector<std::size_t> list;
    std::vector<std::uint8_t> allowed;
    for (std::size_t r = 0; r < rows(); ++r) {
      if (unit_mpfi_[unit_of_row(r)] || !in_block(r)) continue;
      bool open = false;
      for (std::size_t l = 0; l < d_; ++l) open = open || slots_[0].open[r * d_ + l];
      if (!open) continue;
      if (!used_row(r, allowed)) throw internal_error("backward: an unused row has an undecided dq");
      list.push_back(r);
    }
    res_.rows_escalated = list.size();
    if (list.empty()) return;
    for_each_parallel<mpfi_state>(list, req_.threads, {}, [this](std::size_t r, mpfi_state& st) { escalate_row(r, st); });
  }

  // One row's dq in MPFI at 128, 256, ... bits until every open element is decided.
  void escalate_row(std::size_t r, mpfi_state& st) {
    row_job job;
    src_.locate(r, job);
    src_.allowed_row(job, st.scratch.allowed);
    job.allowed = st.scratch.allowed.data();
    src_.build_job(job, st.scratch);
    interval_array dq;
    ziv_escalate(precision_schedule{first_mpfi_bits, req_.max_bits}, [&](unsigned prec) {
      dq.reset(d_, prec);
      row_grad_sinks out;
      out.dq = dq.p.data();
      mpfi_row_backward(job.ctx, g_.dO.data() + r * dv_, g_.dLSE.empty() ? nullptr : &g_.dLSE[r], prec, out);
      std::size_t open = 0;
      for (std::size_t l = 0; l < d_; ++l) {
        const std::size_t e = r * d_ + l;
        if (slots_[0].open[e] && !decide_interval(slots_[0], e, dq.p[l], prec)) ++open;
      }
      return open == 0 ? ziv_decided(open) : ziv_more(open);
    });
  }

  void escalate_units() {
    std::vector<std::size_t> list;
    for (std::size_t u = 0; u < units(); ++u)
      if (unit_mpfi_[u]) list.push_back(u);
    res_.units_escalated = list.size();
    if (list.empty()) return;
    const auto outcome = ziv_escalate(precision_schedule{first_mpfi_bits, req_.max_bits}, [&](unsigned prec) {
      ++res_.passes;
      for (auto& s : slots_) s.enc.reset(s.out->size(), prec);
      for_each_parallel<mpfi_state>(list, req_.threads, req_.progress,
                                    [this, prec](std::size_t u, mpfi_state& st) { mpfi_unit(u, prec, st); });
      std::size_t open = 0;
      for (auto& s : slots_)
        for (std::size_t e = 0; e < s.out->size(); ++e)
          if (s.open[e] && !decide_interval(s, e, s.enc.p[e], prec)) ++open;
      return open == 0 ? ziv_decided(open) : ziv_more(open);
    });
    if (!outcome.decided) throw internal_error("backward: undecided elements after the cap");  // decide_interval throws first
  }

  // Every used row of unit u adds its contributions at `prec` bits; the unit owns its rows' dq and
  // its kv head's dk, dv; dbias and dsink are summed under the lock (any order encloses).
  void mpfi_unit(std::size_t u, unsigned prec, mpfi_state& st) {
    interval_array ds;
    mpfi_var dsink(prec);
    if (var_.has_bias) ds.reset(nk_, prec);
    for_used_rows(u, st.scratch, [&](std::size_t r, row_job& job) {
      row_grad_sinks out;
      out.dq = slots_[0].enc.p.data() + r * d_;
      out.dk = slots_[1].enc.p.data() + (u * nk_ + job.k0) * d_;  // the row's keys k0 .. k0 + nk - 1
      out.dv = slots_[2].enc.p.data() + (u * nk_ + job.k0) * dv_;
      if (var_.has_bias) out.ds = ds.p.data();
      if (res_.has_dsink) out.dsink = dsink.v;
      mpfi_row_backward(job.ctx, g_.dO.data() + r * dv_, g_.dLSE.empty() ? nullptr : &g_.dLSE[r], prec, out);
      if (!var_.has_bias && !res_.has_dsink) return true;
      std::lock_guard<std::mutex> lock(mu_);
      if (var_.has_bias)
        for (std::size_t j = 0; j < job.nk; ++j) {
          if (!st.scratch.allowed[j]) continue;
          mpfi_ptr e = slots_[3].enc.p[bias_index(job.s, job.h, job.il, j)];
          mpfi_add(e, e, ds.p[j]);
        }
      if (res_.has_dsink) {
        mpfi_ptr t = slots_.back().enc.p[job.h];
        mpfi_add(t, t, dsink.v);
      }
      return true;
    });
  }

  // Rounds an element whose MPFI enclosure decides it; at the cap, faithfully when the enclosure
  // lies strictly between two adjacent target numbers, else "precision too low".  Thread-safe for
  // distinct elements (the counters are under the lock).
  bool decide_interval(gradient_slot& s, std::size_t e, mpfi_srcptr x, unsigned prec, bool may_be_final = true) {
    const target_format t = req_.target;
    gradient_tensor& out = *s.out;
    mpfr_var L(prec), U(prec);
    mpfi_get_left(L.v, x);
    mpfi_get_right(U.v, x);
    enclosure_to_dd(x, out.hi[e], out.lo[e], out.rad[e]);
    const double fl = round_mpfr_to_target(L.v, t), fu = round_mpfr_to_target(U.v, t);
    out.bits_used[e] = static_cast<std::uint16_t>(std::min(prec, 65535u));
    if (fl == fu) {
      out.reference[e] = fl == 0 ? 0.0 : fl;
      out.how[e] = decided_by::mpfi;
      s.open[e] = 0;
      std::lock_guard<std::mutex> lock(mu_);
      add_mpfi_count(prec);
      if (mpfr_zero_p(L.v) && mpfr_zero_p(U.v)) ++res_.exact_zeros;
      return true;
    }
    if (prec < req_.max_bits || !may_be_final) return false;
    if (!(adjacent_or_equal(fl, fu, t) && !std::isnan(fl) && mpfr_cmp_d(L.v, std::min(fl, fu)) > 0 &&
          mpfr_cmp_d(U.v, std::max(fl, fu)) < 0))
      throw input_error(std::string(s.name) + " element " + std::to_string(e) +
                        " could not be enclosed within one ulp of the target at " + std::to_string(prec) +
                        " bits (precision too low: raise " + field("max_precision") + ")");
    mpfr_var mid(prec);
    mpfi_mid(mid.v, x);
    out.reference[e] = round_mpfr_to_target(mid.v, t);
    out.how[e] = decided_by::faithful_only;
    s.open[e] = 0;
    std::lock_guard<std::mutex> lock(mu_);
    ++res_.faithful_only;
    return true;
  }

  void add_mpfi_count(unsigned bits) {
    for (auto& pr : res_.by_mpfi)
      if (pr.first == bits) {
        ++pr.second;
        return;
      }
    res_.by_mpfi.push_back({bits, 1});
  }

  void finish() {
    res_.elements = 0;
    for (const auto& s : slots_) res_.elements += s.out->size();
    res_.correctly_rounded = res_.elements - res_.faithful_only;
    for (std::size_t u = 0; u < units(); ++u) res_.units_declined += fast_possible_ && !unit_fast_ok_[u] ? 1 : 0;
    res_.fast_path = fast_possible_;
    std::sort(res_.by_mpfi.begin(), res_.by_mpfi.end());
  }

  const oracle_request& req_;
  const backward_inputs& g_;
  const attention_variant& var_;
  const row_source src_;
  const std::size_t B_, H_, Hkv_, group_, nq_, nk_, d_, dv_;
  backward_result res_;
  std::vector<gradient_slot> slots_;  // dq, dk, dv, then dbias and dsink when present
  detail::dd_ball scale_, inv_ln2_;
  bool fast_possible_ = false, fast_shared_ok_ = true;
  std::vector<std::uint8_t> unit_fast_ok_, unit_mpfi_;
  std::vector<detail::dd_ball> fast_dbias_, fast_dsink_;
  std::vector<row_summary> summary_;  // per row, from the fast stage (escalate_keys)
  std::mutex mu_;  // guards the shared sums, the counters
  static constexpr std::size_t all_rows = std::numeric_limits<std::size_t>::max();
  std::size_t block_begin_ = 0, block_end_ = all_rows;  // run_block's rows; the whole call: every row
  backward_block_result block_;
};

}  // namespace

backward_result run_oracle_backward(const oracle_request& req, const backward_inputs& g) {
  validate_request(req);
  if (!req.row_sample.empty())
    throw input_error("the backward needs every query row (dK and dV sum over them): a row sample is for the forward only");
  deadline_scope budget(req.max_seconds);  // all or nothing: time_limit_reached past it
  return backward_run(req, g).run();
}

backward_block_result run_oracle_backward_block(const oracle_request& req, const backward_inputs& g,
                                                std::size_t row_begin, std::size_t row_end) {
  validate_request(req);
  if (!req.row_sample.empty()) throw input_error("a backward block takes its rows as [begin, end), not a row sample");
  deadline_scope budget(req.max_seconds);  // as run_oracle_backward: time_limit_reached past it
  return backward_run(req, g).run_block(row_begin, row_end);
}

reduced_gradient reduce_backward_blocks(const std::vector<const partial_sums*>& parts, const double* scale,
                                        target_format t) {
  if (parts.empty()) throw input_error("reduce_backward_blocks: no partial sums");
  const std::size_t n = parts[0]->hi.size();
  for (const partial_sums* p : parts)
    if (p->hi.size() != n || p->lo.size() != n || p->rad.size() != n)
      throw input_error("reduce_backward_blocks: the partial sums have different sizes");
  reduced_gradient out;
  out.reference.assign(n, 0.0);
  out.decided.assign(n, 0);
  const detail::dd_ball s = scale ? detail::dd_ball{scale[0], scale[1], scale[2]} : detail::dd_ball{1.0, 0.0, 0.0};
  for (std::size_t e = 0; e < n; ++e) {
    bool ok = true;
    detail::dd_ball x{parts[0]->hi[e], parts[0]->lo[e], parts[0]->rad[e]};
    for (std::size_t b = 1; b < parts.size(); ++b) x = detail::ball_add(x, {parts[b]->hi[e], parts[b]->lo[e], parts[b]->rad[e]}, ok);
    if (scale) x = detail::ball_mul(x, s, ok);
    if (ok && detail::round_ball(x.hi, x.lo, x.rad, t, out.reference[e])) out.decided[e] = 1;
    else ++out.undecided;
  }
  return out;
}

}  // namespace attncert::oracle
