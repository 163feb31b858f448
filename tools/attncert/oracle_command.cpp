// tools/attncert/oracle_command.cpp — `attncert oracle`.  Thin: parse, load, call lib, write.
#include "oracle_command.hpp"

#include <unistd.h>

#include <chrono>
#include <iostream>
#include <sstream>

#include "attncert/error.hpp"
#include "attncert/io/npy.hpp"
#include "attncert/report/oracle.hpp"
#include "cli_common.hpp"

namespace attncert::cli {

CLI::App* add_oracle_subcommand(CLI::App& app, oracle_args& a) {
  auto* o = app.add_subcommand(
      "oracle", "Certified, correctly rounded reference of softmax(s·QKᵀ + mask)·V, and error reports for candidates.");
  o->footer(
      "Guarantee: every element of the reference is the exact value computed from the exact inputs, rounded to\n"
      "nearest-even in the target format; elements the precision cap cannot decide (exact rounding midpoints)\n"
      "are rounded faithfully and counted as faithful_only.  Method: double-double fast path with a rigorous\n"
      "error bound per element, then MPFI at 128, 256, ... bits up to --max-precision (proofs/P11-oracle.md).\n"
      "Shapes: (n, d), (h, n, d) or (b, h, n, d) as PyTorch lays them out; Q may be longer or shorter than K/V.\n"
      "Candidates must have the output's shape (…, n_q, d_v); errors are measured from the exact value in ulps\n"
      "of the target format.  Exit status: 0 done, 1 a candidate exceeds --max-ulp, 2 bad input.\n"
      "Examples:\n"
      "  attncert oracle --q Q.npy --k K.npy --v V.npy --write-reference ref.npy\n"
      "  attncert oracle --q Q.npy --k K.npy --v V.npy --mask causal --target binary32 \\\n"
      "      --candidate flash.npy --candidate torch_fp32.npy --max-ulp 8 --format json --out report.json\n"
      "  attncert oracle --q Q.npy --k K.npy --v V.npy --attention-candidate A_hat.npy");
  o->add_option("--q", a.q, "Queries Q (.npy: float16/32/64 or int)")->required();
  o->add_option("--k", a.k, "Keys K (.npy)")->required();
  o->add_option("--v", a.v, "Values V (.npy)")->required();
  o->add_option("--mask", a.mask, "none, causal (key j allowed for query i iff j <= i), or a bool .npy (true = attend)")
      ->capture_default_str();
  o->add_option("--scale", a.scale, "Exact scale s: \"0.125\", \"1/8\", \"1e300\" (default: 1/sqrt(d), irrational in general)");
  o->add_option("--empty-rows", a.empty_rows, "Fully masked rows: error, zeros or nan")->capture_default_str();
  o->add_option("--target", a.target, "Format of the reference: binary64, binary32, binary16 or bfloat16")->capture_default_str();
  o->add_option("--write-reference", a.write_reference,
                "Write the reference to REF.npy (float64/32/16; bfloat16 is written as float32, exactly)");
  o->add_option("--candidate", a.candidates, "An implementation's output to grade (.npy; repeatable: the first is "
                                             "compared with the second, FlashAttention-style)");
  o->add_option("--attention-candidate", a.attention_candidate,
                "An implementation's attention probabilities Â (…, n_q, n_k): row-L1 error and the output bound");
  o->add_option("--max-ulp", a.max_ulp, "Exit 1 when a candidate's max error exceeds N ulps (or it has NaN/Inf where the truth is finite)");
  o->add_option("--max-precision", a.max_precision, "Precision cap of the MPFI stage, bits (>= 128)")->capture_default_str();
  o->add_option("--threads", a.threads, "Worker threads")->capture_default_str();
  o->add_flag("--allow-nonfinite", a.allow_nonfinite,
              "Accept NaN/Inf inputs: rows touching them follow IEEE binary64 semantics (not certified, counted)");
  o->add_option("--format", a.out_format, "Report format: text or json")->capture_default_str();
  o->add_option("--out", a.out_path, "Write the report to FILE (atomically) instead of stdout");
  return o;
}

namespace {

nlohmann::json describe(const std::string& file, const io::npy_array& a) {
  return {{"file", file}, {"shape", a.shape}, {"dtype", io::dtype_descr(a.type)}};
}

io::dtype reference_dtype(oracle::target_format t) {
  switch (t) {
    case oracle::target_format::binary64: return io::dtype::f8;
    case oracle::target_format::binary16: return io::dtype::f2;
    default: return io::dtype::f4;
  }
}

}  // namespace

int run_oracle_command(const oracle_args& a, const std::string& command) {
  using namespace attncert::oracle;
  const auto t0 = std::chrono::steady_clock::now();
  if (a.out_format != "text" && a.out_format != "json") throw input_error("attncert oracle writes --format text or json");
  const io::nonfinite nf = a.allow_nonfinite ? io::nonfinite::allow : io::nonfinite::reject;
  oracle_request req;
  nlohmann::json inputs;
  const io::npy_array qa = io::read_npy(a.q, nf), ka = io::read_npy(a.k, nf), va = io::read_npy(a.v, nf);
  inputs["q"] = describe(a.q, qa);
  inputs["k"] = describe(a.k, ka);
  inputs["v"] = describe(a.v, va);
  if (qa.shape.size() != ka.shape.size() || qa.shape.size() != va.shape.size())
    throw input_error("Q, K and V must have the same number of dimensions (got " + std::to_string(qa.shape.size()) + ", " +
                      std::to_string(ka.shape.size()) + ", " + std::to_string(va.shape.size()) + ")");
  req.Q = to_tensor4(qa, "--q");
  req.K = to_tensor4(ka, "--k");
  req.V = to_tensor4(va, "--v");
  if (a.mask == "none") req.mask = mask_kind::none;
  else if (a.mask == "causal") req.mask = mask_kind::causal;
  else {
    const io::npy_array ma = io::read_npy(a.mask);
    req.mask = mask_kind::explicit_mask;
    req.M = to_bool_mask(ma, a.mask);
    inputs["mask"] = describe(a.mask, ma);
  }
  if (!a.scale.empty() && a.scale != "default" && a.scale != "1/sqrt(d)") {
    req.scale.inv_sqrt_d = false;
    req.scale.rational = a.scale;
  }
  req.empty_rows = parse_empty_row_policy(a.empty_rows);
  req.target = parse_target(a.target);
  req.max_bits = a.max_precision;
  if (a.threads < 1 || a.threads > 256) throw input_error("--threads must be in [1, 256]");
  req.threads = a.threads;
  req.allow_nonfinite = a.allow_nonfinite;

  // Output shape as the inputs lay it out: Q's leading dimensions, then (n_q, d_v).
  std::vector<std::size_t> out_shape(qa.shape.begin(), qa.shape.end() - 1);
  out_shape.push_back(va.shape.back());
  // Candidates are read and checked before any work (and before REF is written).
  std::vector<io::npy_array> cands;
  for (const auto& c : a.candidates) {
    cands.push_back(io::read_npy(c, io::nonfinite::allow));
    if (cands.back().shape != out_shape) {
      std::string s;
      for (auto x : out_shape) s += (s.empty() ? "" : ", ") + std::to_string(x);
      throw input_error(c + ": candidate shape does not match the output shape (" + s + ")");
    }
    if (cands.back().type == io::dtype::b1) throw input_error(c + ": a candidate must be a float array");
  }
  std::optional<io::npy_array> att;
  if (!a.attention_candidate.empty()) {
    att = io::read_npy(a.attention_candidate);
    std::vector<std::size_t> want(qa.shape.begin(), qa.shape.end() - 1);
    want.push_back(ka.shape[ka.shape.size() - 2]);
    if (att->shape != want) throw input_error(a.attention_candidate + ": attention candidate shape must be (…, n_q, n_k)");
  }
  if (a.max_ulp != -1 && !(a.max_ulp >= 0)) throw input_error("--max-ulp must be >= 0");

  const bool tty = ::isatty(2);
  if (tty)
    req.progress = [](std::size_t done, std::size_t total) {
      std::cerr << "\roracle: " << done << "/" << total << " rows" << std::flush;
    };
  const oracle_result res = run_oracle(req);
  if (tty) std::cerr << "\r" << std::string(40, ' ') << "\r" << std::flush;

  oracle_report_input ri;
  ri.command = command;
  ri.inputs = inputs;
  ri.settings = {{"target", to_string(req.target)},
                 {"scale", req.scale.inv_sqrt_d ? "1/sqrt(d) (d = " + std::to_string(req.Q.d) + ")" : req.scale.rational},
                 {"mask", a.mask},
                 {"empty_rows", a.empty_rows},
                 {"max_precision_bits", req.max_bits},
                 {"threads", req.threads},
                 {"allow_nonfinite", req.allow_nonfinite},
                 {"rounding", "to nearest, ties to even"},
                 {"softmax", "exact: weights e^{s(q.k_j - q.k_r)} with an exactly computed difference; no overflow"}};
  if (req.allow_nonfinite)
    ri.settings["nonfinite_semantics"] = "rows touching NaN/Inf inputs follow IEEE binary64 arithmetic; not certified";
  ri.result = &res;
  for (std::size_t c = 0; c < cands.size(); ++c) {
    ri.candidates.push_back(grade_candidate(res, cands[c].values, req.target, "c" + std::to_string(c + 1)));
    ri.candidate_files.push_back(a.candidates[c]);
  }
  if (att) ri.attention = grade_attention(req, att->values);
  if (a.max_ulp >= 0) ri.max_ulp = a.max_ulp;
  if (!a.write_reference.empty()) {
    io::npy_array ref;
    ref.type = reference_dtype(req.target);
    ref.shape = out_shape;
    ref.values = res.reference;
    ref.allow_nonfinite = true;
    io::write_npy(a.write_reference, ref);
    ri.reference = {{"file", a.write_reference}, {"dtype", io::dtype_descr(ref.type)}, {"shape", out_shape}};
    if (req.target == target_format::bfloat16) ri.reference["note"] = "bfloat16 values stored exactly as float32";
  }
  ri.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const nlohmann::json report = oracle_report(ri);
  std::ostringstream os;
  if (a.out_format == "json") os << report.dump(2) << "\n";
  else write_oracle_text(os, report);
  emit(a.out_path, os.str());
  return oracle_exit_code(report);
}

}  // namespace attncert::cli
