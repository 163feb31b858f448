// attncert/oracle/request.hpp — building and validating an oracle request: tensors and
// masks from .npy arrays (PyTorch's layouts), and the one validation of a request.
#pragma once

#include <string>
#include <vector>

#include "attncert/io/npy.hpp"
#include "attncert/oracle/oracle.hpp"

namespace attncert::oracle {

/// A (n, d), (h, n, d) or (b, h, n, d) array as a tensor4.  Errors: input_error naming `what`
/// for other ranks or an empty dimension.
tensor4 to_tensor4(const io::npy_array& a, const std::string& what);

/// A boolean mask of shape (nq, nk), (h, nq, nk) or (b, h, nq, nk) (dtype bool; true = the key
/// may be attended, as PyTorch's boolean attn_mask).  Errors: input_error naming `what`.
bool_mask to_bool_mask(const io::npy_array& a, const std::string& what);

/// Sets req.Q, req.K, req.V from arrays read from .npy files (to_tensor4 on each).  Errors:
/// input_error when they differ in their number of dimensions, or as to_tensor4.
void set_qkv(oracle_request& req, const io::npy_array& q, const io::npy_array& k, const io::npy_array& v);

/// The output's shape as the inputs lay it out: Q's leading dimensions, then (n_q, d_v).
std::vector<std::size_t> output_shape(const io::npy_array& q, const io::npy_array& v);

/// Checks that the array `c` read from `file` can be graded as an output candidate: a float
/// array of shape `out_shape`.  Errors: input_error starting with `file`.
void check_candidate_array(const io::npy_array& c, const std::vector<std::size_t>& out_shape, const std::string& file);

/// Checks that the array `a` read from `file` has an attention candidate's shape
/// (…, n_q, n_k) for the inputs `q`, `k`.  Errors: input_error starting with `file`.
void check_attention_array(const io::npy_array& a, const io::npy_array& q, const io::npy_array& k,
                           const std::string& file);

/// The reference as --write-reference stores it: float64, float32 or float16 as the target
/// format (bfloat16 values are stored exactly as float32), of shape `shape`, NaN/Inf allowed.
io::npy_array reference_array(const oracle_result& r, target_format t, const std::vector<std::size_t>& shape);

/// The one validation of a request (run_oracle calls it first).  Errors (input_error): empty
/// tensors, Q/K/V batch, head, feature or length mismatch, max_bits outside [128, 65536], a
/// mask whose shape does not broadcast, NaN/Inf inputs without allow_nonfinite.
void validate_request(const oracle_request& req);

}  // namespace attncert::oracle
