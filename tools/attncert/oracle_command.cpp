// tools/attncert/oracle_command.cpp — `attncert oracle`.  Thin: parse, load, call lib, write.
#include "oracle_command.hpp"

#include <chrono>
#include <sstream>

#include "attncert/error.hpp"
#include "attncert/io/npy.hpp"
#include "attncert/report/oracle.hpp"
#include "cli_common.hpp"
#include "cli_options.hpp"

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
      "of the target format.\n"
      "Examples:\n"
      "  attncert oracle --q Q.npy --k K.npy --v V.npy --write-reference ref.npy\n"
      "  attncert oracle --q Q.npy --k K.npy --v V.npy --mask causal --target binary32 \\\n"
      "      --candidate flash.npy --candidate torch_fp32.npy --max-ulp 8 --format json --out report.json\n"
      "  attncert oracle --q Q.npy --k K.npy --v V.npy --attention-candidate A_hat.npy\n" +
      exit_codes_text({{exit_ok, "done (every candidate within --max-ulp)"},
                       {exit_failed, "a candidate exceeds --max-ulp (or has NaN/Inf where the truth is finite)"}}));
  o->add_option("--q", a.q, "Queries Q (.npy: float16/32/64 or int)")->required();
  o->add_option("--k", a.k, "Keys K (.npy)")->required();
  o->add_option("--v", a.v, "Values V (.npy)")->required();
  add_mask_option(o, a.mask, "a bool .npy (true = attend); causal: key j allowed for query i iff j <= i");
  add_scale_option(o, a.scale, "Exact scale s: \"0.125\", \"1/8\", \"1e300\" (default: 1/sqrt(d), irrational in general)");
  o->add_option("--empty-rows", a.empty_rows, "Fully masked rows: error, zeros or nan")->capture_default_str();
  o->add_option("--target", a.target, "Format of the reference: binary64, binary32, binary16 or bfloat16")->capture_default_str();
  o->add_option("--write-reference", a.write_reference,
                "Write the reference to REF.npy (float64/32/16; bfloat16 is written as float32, exactly)")
      ->check(writable_file());
  o->add_option("--candidate", a.candidates, "An implementation's output to grade (.npy; repeatable: the first is "
                                             "compared with the second, FlashAttention-style)");
  o->add_option("--attention-candidate", a.attention_candidate,
                "An implementation's attention probabilities Â (…, n_q, n_k): row-L1 error and the output bound");
  o->add_option("--max-ulp", a.max_ulp, "Exit 1 when a candidate's max error exceeds N ulps (or it has NaN/Inf where the truth is finite)");
  add_max_precision_option(o, a.max_precision, 128, 1u << 16, "Precision cap of the MPFI stage, bits");
  add_threads_option(o, a.threads);
  o->add_flag("--allow-nonfinite", a.allow_nonfinite,
              "Accept NaN/Inf inputs: rows touching them follow IEEE binary64 semantics (not certified, counted)");
  add_format_option(o, a.out_format, {"text", "json"});
  add_out_option(o, a.out_path);
  return o;
}

namespace {

nlohmann::json describe(const std::string& file, const io::npy_array& a) {
  return {{"file", file}, {"shape", a.shape}, {"dtype", io::dtype_descr(a.type)}};
}

// The request from the options and the arrays read (shapes are checked by the library).
oracle::oracle_request make_request(const oracle_args& a, const io::npy_array& qa, const io::npy_array& ka,
                                    const io::npy_array& va, nlohmann::json& inputs) {
  using namespace attncert::oracle;
  oracle_request req;
  set_qkv(req, qa, ka, va);
  const mask_choice mc = parse_mask(a.mask);
  if (mc.type == mask_choice::kind::none) req.mask = mask_kind::none;
  else if (mc.type == mask_choice::kind::causal) req.mask = mask_kind::causal;
  else {
    const io::npy_array ma = io::read_npy(mc.file);
    req.mask = mask_kind::explicit_mask;
    req.M = to_bool_mask(ma, mc.file);
    inputs["mask"] = describe(mc.file, ma);
  }
  if (!scale_is_default(a.scale)) {
    req.scale.inv_sqrt_d = false;
    req.scale.rational = a.scale;
  }
  req.empty_rows = parse_empty_row_policy(a.empty_rows);
  req.target = parse_target(a.target);
  req.max_bits = a.max_precision;
  req.threads = a.threads;
  req.allow_nonfinite = a.allow_nonfinite;
  req.progress = progress_reporter("oracle", "rows", false);
  return req;
}

nlohmann::json settings(const oracle_args& a, const oracle::oracle_request& req) {
  nlohmann::json s = {{"target", to_string(req.target)},
                      {"scale", req.scale.inv_sqrt_d ? "1/sqrt(d) (d = " + std::to_string(req.Q.d) + ")" : req.scale.rational},
                      {"mask", a.mask},
                      {"empty_rows", a.empty_rows},
                      {"max_precision_bits", req.max_bits},
                      {"threads", req.threads},
                      {"allow_nonfinite", req.allow_nonfinite},
                      {"rounding", "to nearest, ties to even"},
                      {"softmax", "exact: weights e^{s(q.k_j - q.k_r)} with an exactly computed difference; no overflow"}};
  if (req.allow_nonfinite)
    s["nonfinite_semantics"] = "rows touching NaN/Inf inputs follow IEEE binary64 arithmetic; not certified";
  return s;
}

}  // namespace

int run_oracle_command(const oracle_args& a, const std::string& command) {
  using namespace attncert::oracle;
  const auto t0 = std::chrono::steady_clock::now();
  const io::nonfinite nf = a.allow_nonfinite ? io::nonfinite::allow : io::nonfinite::reject;
  nlohmann::json inputs;
  const io::npy_array qa = io::read_npy(a.q, nf), ka = io::read_npy(a.k, nf), va = io::read_npy(a.v, nf);
  inputs["q"] = describe(a.q, qa);
  inputs["k"] = describe(a.k, ka);
  inputs["v"] = describe(a.v, va);
  const oracle_request req = make_request(a, qa, ka, va, inputs);
  // Candidates are read and checked before any work.
  const auto out_shape = output_shape(qa, va);
  std::vector<io::npy_array> cands;
  for (const auto& c : a.candidates) {
    cands.push_back(io::read_npy(c, io::nonfinite::allow));
    check_candidate_array(cands.back(), out_shape, c);
  }
  std::optional<io::npy_array> att;
  if (!a.attention_candidate.empty()) {
    att = io::read_npy(a.attention_candidate);
    check_attention_array(*att, qa, ka, a.attention_candidate);
  }
  if (a.max_ulp != -1 && !(a.max_ulp >= 0)) throw input_error("--max-ulp must be >= 0");

  const oracle_result res = run_oracle(req);
  clear_progress();

  oracle_report_input ri;
  ri.command = command;
  ri.inputs = inputs;
  ri.settings = settings(a, req);
  ri.result = &res;
  for (std::size_t c = 0; c < cands.size(); ++c) {
    ri.candidates.push_back(grade_candidate(res, cands[c].values, req.target, "c" + std::to_string(c + 1)));
    ri.candidate_files.push_back(a.candidates[c]);
  }
  if (att) ri.attention = grade_attention(req, att->values);
  if (a.max_ulp >= 0) ri.max_ulp = a.max_ulp;
  command_output out;
  if (!a.write_reference.empty()) {
    const io::npy_array ref = reference_array(res, req.target, out_shape);
    out.files.stage_file(a.write_reference, io::serialize_npy(ref));
    ri.reference = {{"file", a.write_reference}, {"dtype", io::dtype_descr(ref.type)}, {"shape", out_shape}};
    if (req.target == target_format::bfloat16) ri.reference["note"] = "bfloat16 values stored exactly as float32";
  }
  ri.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const nlohmann::json report = oracle_report(ri);
  std::ostringstream os;
  if (a.out_format == "json") os << report.dump(2) << "\n";
  else write_oracle_text(os, report);
  out.report(a.out_path, os.str());
  out.commit();
  return oracle_exit_code(report);
}

}  // namespace attncert::cli
