// tools/attncert/oracle_command.hpp — `attncert oracle`: parse, call lib, write.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

namespace attncert::cli {

/// The grading options (--rule and what goes with it; oracle_command.cpp, add_grading_options).
/// Unset optionals: not given (the rule's default applies).
struct grading_args {
  std::string rule = "ulp", baseline, candidate_lse, baseline_lse, rerun;
  std::optional<double> flash_k, fudge, atol, rtol;
  std::vector<std::string> candidate_grads;  ///< --candidate-grads PREFIX (repeatable)
  std::string baseline_grads, rerun_grads;   ///< --baseline-grads PREFIX, --rerun-grads PREFIX
};

struct oracle_args {
  std::string q, k, v, scale, empty_rows = "error", target = "binary64", write_reference;
  std::vector<std::string> candidates;
  std::string attention_candidate, out_format = "text", out_path;
  double max_ulp = -1;
  unsigned max_precision = 4096, threads = 2;
  double max_seconds = 0;
  bool allow_nonfinite = false;
  // variants (proofs/P14-oracle-variants.md)
  std::vector<std::string> masks;  ///< --mask, repeatable (AND)
  std::string alibi = "distance";
  std::string layout = "bhsd", cu_seqlens_q, cu_seqlens_k, seqlens_k, block_table, window, softcap, alibi_slopes, bias,
              sink, dropout_mask, dropout_p, qkv_format, q_descale, k_descale, v_descale, write_lse, lse_base = "e",
              empty_lse = "-inf", lse_target;
  std::size_t page_size = 0, sink_token_length = 0, attention_chunk = 0;
  std::string key_leftpad, qv;
  // backward (proofs/P15-oracle-backward.md)
  std::string grad_out, grad_lse, write_grad_references;
  bool sink_off_by_one = false;
  grading_args grading;
};

/// Adds the `oracle` subcommand with its options bound to `a`.
CLI::App* add_oracle_subcommand(CLI::App& app, oracle_args& a);

/// Runs it.  Returns the exit status grading decided (grading::oracle_verdict: 0, 1 when a candidate
/// fails its grading rule or the output bound is refuted, 3 when rows or the backward are undecided);
/// throws input_error on bad input (exit 2).
int run_oracle_command(const oracle_args& a, const std::string& command);

}  // namespace attncert::cli
