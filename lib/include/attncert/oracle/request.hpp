// attncert/oracle/request.hpp — building and validating an oracle request: tensors and
// masks from .npy arrays (PyTorch's layouts), and the one validation of a request.
#pragma once

#include <string>

#include "attncert/io/npy.hpp"
#include "attncert/oracle/oracle.hpp"

namespace attncert::oracle {

/// A (n, d), (h, n, d) or (b, h, n, d) array as a tensor4.  Errors: input_error naming `what`
/// for other ranks or an empty dimension.
tensor4 to_tensor4(const io::npy_array& a, const std::string& what);

/// A boolean mask of shape (nq, nk), (h, nq, nk) or (b, h, nq, nk) (dtype bool; true = the key
/// may be attended, as PyTorch's boolean attn_mask).  Errors: input_error naming `what`.
bool_mask to_bool_mask(const io::npy_array& a, const std::string& what);

/// The one validation of a request (run_oracle calls it first).  Errors (input_error): empty
/// tensors, Q/K/V batch, head, feature or length mismatch, max_bits outside [128, 65536], a
/// mask whose shape does not broadcast, NaN/Inf inputs without allow_nonfinite.
void validate_request(const oracle_request& req);

}  // namespace attncert::oracle
