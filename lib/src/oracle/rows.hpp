// lib/src/oracle/rows.hpp — what the forward and the backward oracle share about rows (not
// installed, not API): where row r lies, which keys it may attend (every mask of P14 step 4), its
// inputs for the fast path and for the MPFI stage (GQA head, additive terms, sink, dropout), and
// whether it touches a non-finite value.  Built once per run from a validated request.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attncert/oracle/oracle.hpp"
#include "ziv_stage.hpp"

namespace attncert::oracle::internal {

/// One row: where it is, its allowed keys and its inputs.
struct row_job {
  std::size_t b = 0, h = 0, i = 0, base = 0;  ///< base: index of element (b, h, i, 0)
  std::size_t row = 0;                        ///< (b·H + h)·nq + i: index of the row's LSE
  std::size_t hk = 0;                         ///< the kv head of query head h (GQA)
  /// The row in its sequence's own coordinates (b = s, i = il; packed requests: oracle_request::
  /// packed_cu_q) and its keys: the head's keys k0 .. k0 + nk - 1 (dense: 0 .. n_k - 1).  Every
  /// per-key array of the row (allowed, row_inputs, mpfi_row_ctx) is indexed from k0.
  std::size_t s = 0, il = 0, k0 = 0, nk = 0;
  const std::uint8_t* allowed = nullptr;
  detail::row_inputs in{};
  mpfi_row_ctx ctx{};                         ///< the same row for the MPFI stage
};

/// A worker's per-row buffers that a row_job points into.
struct row_scratch {
  std::vector<std::uint8_t> allowed, keep;
  std::vector<double> bias, add_hi, add_lo, add_rad;
};

/// The rows of a request: internal row r = (b·H + h)·nq + i (query head h, kv head h / group).
class row_source {
 public:
  explicit row_source(const oracle_request& req);
  row_source(const row_source&) = delete;
  row_source& operator=(const row_source&) = delete;

  std::size_t rows() const { return B_ * H_ * nq_; }
  /// b, h, i, hk, base (= r·dv), row (= r), and s, il, k0, nk of row r.
  void locate(std::size_t r, row_job& job) const;
  /// Which of its keys the located row may attend (a[j] != 0 for key k0 + j, j < job.nk), every mask
  /// AND-combined, and a bias of -inf.
  void allowed_row(const row_job& job, std::vector<std::uint8_t>& a) const;
  /// "(b, h, i) = (s, h, il)": the row in the caller's coordinates, for messages.
  static std::string row_text(const row_job& job);
  /// The key segments of every head: keys key_cuts()[s] .. key_cuts()[s+1] - 1 (dense: {0, n_k}).
  /// Transposed per-head arrays (KT, VT) are stored segment after segment, each (width × its keys).
  const std::vector<std::size_t>& key_cuts() const { return key_cuts_; }
  static bool none_allowed(const std::vector<std::uint8_t>& a);
  /// Whether the located row may attend some key: O(1) when its keys form an interval (causal,
  /// bottom-right, window; no explicit mask, no bias), else through allowed_row (`a` is scratch).
  bool any_allowed(const row_job& job, std::vector<std::uint8_t>& a) const;
  /// Fills job.in and job.ctx (job located, job.allowed set); the pointers go into w.
  void build_job(row_job& job, row_scratch& w) const;
  /// Does the row use a non-finite value (P14)?  Values no allowed score uses do not count.
  bool touches_nonfinite(const row_job& job, const row_scratch& w) const;

  const scale_value& scale() const { return sv_; }
  const variant_values& values() const { return vv_; }
  bool all_finite() const { return all_finite_; }

 private:
  void prepare_heads();
  void additive_terms(const row_job& job, row_scratch& w) const;

  const oracle_request& req_;
  const attention_variant& var_;

 public:
  const std::size_t B_, H_, Hkv_, group_, nq_, nk_, d_, dv_;

 private:
  scale_value sv_;
  variant_values vv_;
  bool all_finite_ = true;
  std::vector<head_data> heads_;
  std::vector<std::size_t> key_cuts_;
};

}  // namespace attncert::oracle::internal
