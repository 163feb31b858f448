// attncert/report/oracle.hpp — inputs and reports of `attncert oracle`: tensors from
// .npy arrays, the JSON report (one data model) and its text rendering.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "attncert/oracle/oracle.hpp"
#include "attncert/io/npy.hpp"

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

/// Everything the report shows.
struct oracle_report_input {
  std::string command;
  nlohmann::json inputs;    ///< description of the input files
  nlohmann::json settings;  ///< every setting that shapes the answer
  const oracle_result* result = nullptr;
  std::vector<candidate_grade> candidates;
  std::vector<std::string> candidate_files;
  std::optional<attention_grade> attention;
  std::optional<double> max_ulp;  ///< --max-ulp, if given
  nlohmann::json reference;       ///< where the reference was written (or null)
  double seconds = 0;
};

/// The JSON report: tool, version, command, inputs, settings, guarantee, summary (elements,
/// correctly_rounded, faithful_only, decided_by{...}, ...), candidates[], comparison (two
/// candidates: max_ulp(c1) <= 2 max_ulp(c2)), attention (with --attention-candidate),
/// faithful_only_elements (first 100 indices), verdict {exit_code, reasons}.
nlohmann::json oracle_report(const oracle_report_input& in);

/// Exit code the report implies: 1 if a candidate exceeds --max-ulp (or has NaN/Inf where
/// the truth is finite, when --max-ulp is given) or the output bound is refuted; else 0.
int oracle_exit_code(const nlohmann::json& report);

/// Human-readable rendering of oracle_report().
void write_oracle_text(std::ostream& os, const nlohmann::json& report);

}  // namespace attncert::oracle
