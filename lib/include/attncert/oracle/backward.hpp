// attncert/oracle/backward.hpp — the certified backward pass of the oracle: dQ, dK, dV, dBias and
// dSink of every variant of oracle.hpp, each element correctly rounded to the target format.
// Semantics and error analysis: proofs/P15-oracle-backward.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "attncert/oracle/oracle.hpp"

namespace attncert::oracle {

/// The cotangents of a backward call, in the oracle's internal layout.
struct backward_inputs {
  /// dL/dO, (B, H_q, nq, dv) as oracle_result's outputs.  Values at padding rows and at fully masked
  /// rows are not used (those outputs are constants).
  std::vector<double> dO;
  /// dL/dLSE, (B, H_q, nq) as the LSE (natural log, or base 2 with req.lse.base2); empty: none.
  std::vector<double> dLSE;
};

/// One gradient: the rounded values in the target format (as binary64 numbers) with an enclosure
/// |g - (hi + lo)| <= rad of each exact value, in C order of `shape`.
struct gradient_tensor {
  std::vector<std::size_t> shape;
  std::vector<double> reference, hi, lo, rad;
  std::vector<decided_by> how;  ///< mpfi (correctly rounded) or faithful_only (at the cap)
  std::vector<std::uint16_t> bits_used;
  std::size_t size() const { return reference.size(); }
};

/// The gradients.  dq (B, H_q, nq, d), dk (B, H_kv, nk, d), dv (B, H_kv, nk, dv) in the internal
/// layout (oracle/request.hpp converts); dbias in the bias's shape (mb, mh, mq, mk), summed over its
/// broadcast dimensions; dsink (H_q), summed over batches and rows.  Inputs no used score touches
/// (padding rows, keys no query attends) get exact zeros.
struct backward_result {
  target_format target = target_format::binary64;
  gradient_tensor dq, dk, dv, dbias, dsink;
  bool has_dbias = false, has_dsink = false;
  std::size_t elements = 0, correctly_rounded = 0, faithful_only = 0, exact_zeros = 0;
  std::size_t double_double = 0;                          ///< elements decided by the fast path
  std::vector<std::pair<unsigned, std::size_t>> by_mpfi;  ///< (bits, elements decided at those bits)
  bool fast_path = false;          ///< the request allowed the fast path (binary64 scale, softcap, keep factor)
  std::size_t keys_escalated = 0;  ///< keys whose dK/dV column was recomputed in MPFI from the fast row data
  std::size_t rows_escalated = 0;  ///< rows whose dq was recomputed alone in MPFI
  std::size_t units_escalated = 0; ///< (batch, kv head) units recomputed whole in MPFI
  std::size_t units_declined = 0;  ///< of those, units the fast path declined (a range condition)
  unsigned passes = 0;             ///< Ziv passes over the escalated units
};

/// The certified backward of run_oracle(req) for the cotangents `g`.  Errors (input_error, one
/// line): everything run_oracle rejects; dO or dLSE of the wrong size; NaN/Inf in dO or dLSE at a
/// row that is used; a NaN/Inf input that a used score touches (there is no IEEE fallback here);
/// an element the cap cannot enclose within two adjacent target numbers ("precision too low").
/// Past req.max_seconds (or an enclosing deadline_scope) it throws time_limit_reached: the sums
/// over rows leave no partial gradient to return.  Ctrl-C (request_interrupt): `interrupted`.
backward_result run_oracle_backward(const oracle_request& req, const backward_inputs& g);

/// Enclosures of exact values, C order: |x - (hi + lo)| <= rad for each element.
struct partial_sums {
  std::vector<double> hi, lo, rad;
};

/// One block of query rows of a backward split across processes (attncert.distributed).
struct backward_block_result {
  /// False when the block cannot be combined with others (`declined` says why: the fast path does
  /// not hold the request or declined a row, a dBias/dSink, a dq element only faithful at the cap):
  /// the caller then runs run_oracle_backward on the whole request instead.
  bool complete = false;
  std::string declined;
  target_format target = target_format::binary64;
  /// dq of the block's rows (rows [begin, end) × d), each element correctly rounded to `target`.
  std::vector<double> dq;
  /// Σ over the block's used rows of dU_ij q_i (dK before the scale; (B, H_kv, nk, d)) and of
  /// a_ij dO_i (dV; (B, H_kv, nk, dv)): P15 step F's enclosures (exact zeros for keys no row of
  /// the block attends).
  partial_sums dk, dv;
  double scale_hi = 0, scale_lo = 0, scale_rad = 0;  ///< |s - (hi + lo)| <= rad: the same for every block
};

/// The backward of the internal query rows [row_begin, row_end) of run_oracle_backward(req, g):
/// their dq, and the partial sums of dK and dV over them.  Tier: enclosure (dq correctly rounded).
/// Errors: as run_oracle_backward, for the block's rows; a block not within the rows.  Proof:
/// proofs/P15-oracle-backward.md ("Split by blocks of rows").
backward_block_result run_oracle_backward_block(const oracle_request& req, const backward_inputs& g,
                                                std::size_t row_begin, std::size_t row_end);

/// dK or dV from the partial sums of blocks that together hold every query row once.
struct reduced_gradient {
  std::vector<double> reference;      ///< where decided: the exact sum (times the scale) correctly rounded
  std::vector<std::uint8_t> decided;  ///< 1 where the enclosure decided the rounding
  std::size_t undecided = 0;          ///< elements left: recompute the unit with run_oracle_backward
};

/// Adds `parts` by ball sums (P15 step A), multiplies by the scale ball (hi, lo, rad; null for dV)
/// and rounds each element whose enclosure decides it (P11's rule).  Tier: enclosure.  A decided
/// element is the correctly rounded exact value, hence run_oracle_backward's unless that call
/// reports it faithful_only (an exact value at a rounding boundary, which an enclosure of positive
/// width never decides; P15 "Split by blocks of rows").  Errors: input_error when `parts` is empty
/// or its sizes differ.
reduced_gradient reduce_backward_blocks(const std::vector<const partial_sums*>& parts, const double* scale,
                                        target_format t);

}  // namespace attncert::oracle
