// tools/attncert/oracle_command.cpp — `attncert oracle`.  Thin: parse, load, call lib, write.
#include "oracle_command.hpp"

#include <chrono>
#include <filesystem>
#include <sstream>

#include "attncert/deadline.hpp"
#include "attncert/error.hpp"
#include "attncert/grading/grading.hpp"
#include "attncert/io/npy.hpp"
#include "attncert/oracle/backward.hpp"
#include "attncert/oracle/spec.hpp"
#include "attncert/report/oracle.hpp"
#include "cli_common.hpp"
#include "cli_options.hpp"

namespace attncert::cli {

namespace {

// The file of gradient `name` (dq, dk, ...) under a --write-grad-references / --candidate-grads
// PREFIX: PREFIX.dq.npy, or DIR/dq.npy for a prefix ending in '/' (a directory, which must
// exist; "gdir/" once meant the hidden file gdir/.dq.npy).
std::string gradient_file(const std::string& prefix, const std::string& name) {
  if (!prefix.empty() && prefix.back() == '/') return prefix + name + ".npy";
  return prefix + "." + name + ".npy";
}

// The attention variants of real kernels (proofs/P14-oracle-variants.md).
void add_variant_options(CLI::App* o, oracle_args& a) {
  o->add_option("--layout", a.layout, "Layout of Q, K, V: bhsd ((n,d), (h,n,d), (b,h,n,d)), bshd ((b,n,h,d)) or thd "
                                      "(packed (t,h,d) with --cu-seqlens-q/-k)")
      ->capture_default_str();
  o->add_option("--cu-seqlens-q", a.cu_seqlens_q, "thd: query offsets (.npy int32/int64, b + 1 entries from 0)");
  o->add_option("--cu-seqlens-k", a.cu_seqlens_k, "thd: key offsets (.npy int32/int64, b + 1 entries from 0)");
  o->add_option("--seqlens-k", a.seqlens_k, "Keys used per sequence (.npy int, (b,)): key padding; n_k(b) for alignment");
  o->add_option("--block-table", a.block_table, "Paged K/V: block table (.npy int, (b, m)); K, V are (pages, page_size, h_kv, d)");
  o->add_option("--page-size", a.page_size, "Paged K/V: rows per page");
  o->add_option("--window", a.window, "LEFT,RIGHT: key j allowed iff i+n_k-n_q-LEFT <= j <= i+n_k-n_q+RIGHT (-1 = unbounded)");
  o->add_option("--softcap", a.softcap, "Softcap C > 0 (exact decimal): scores become C·tanh(s/C)");
  o->add_option("--alibi-slopes", a.alibi_slopes, "ALiBi slopes (.npy, (h_q,) or (b, h_q)): adds -slope·|i + n_k - n_q - j|");
  o->add_option("--alibi", a.alibi,
                "ALiBi's form: distance (default, -slope·|i + n_k - n_q - j|) or flash2 (+slope·j, what FlashAttention 2's\n"
                "kernel and reference add under a causal mask: the same output, an LSE larger by slope·(i + n_k - n_q))")
      ->check(CLI::IsMember({"distance", "flash2"}));
  o->add_option("--bias", a.bias, "Additive bias (.npy float, broadcastable to (b, h_q, n_q, n_k)); -inf masks the key");
  o->add_option("--sink", a.sink, "Sink logits (.npy, (h_q,)): added to the softmax denominator only");
  o->add_flag("--sink-off-by-one", a.sink_off_by_one, "A sink of logit 0 in every head (softmax_1)");
  o->add_option("--sink-token-length", a.sink_token_length,
                "FlashAttention's sink_token_length (StreamingLLM): the first N key positions stay allowed beside a left window\n"
                "(the right side, causal masks and chunks still apply)");
  o->add_option("--attention-chunk", a.attention_chunk,
                "FlashAttention's attention_chunk C (chunked local attention): key position j' allowed only in the chunk of C\n"
                "keys holding p = i + n_k' - n_q (C·floor(p/C) <= j' < C·floor(p/C) + C); 0 = no chunks");
  o->add_option("--key-leftpad", a.key_leftpad,
                "FlashAttention's cache_leftpad (.npy int, (b,)): keys j < L[b] are padding; positions j' = j - L[b] and\n"
                "n_k' = n_k(b) - L[b] align masks, windows, chunks, sinks and ALiBi");
  o->add_option("--qv", a.qv,
                "FlashAttention 3's qv (.npy, q's shape with v's feature size): scores scale·(q·k + qv·v), default scale\n"
                "1/sqrt(d + d_v); forward only");
  o->add_option("--dropout-mask", a.dropout_mask, "Dropout keep-mask (.npy bool, (b, h_q, n_q, n_k)); needs --dropout-p");
  o->add_option("--dropout-p", a.dropout_p, "Dropout probability P in [0, 1) (exact decimal): kept weights × 1/(1 - P)");
  o->add_option("--qkv-format", a.qkv_format, "FP8 inputs: e4m3fn or e5m2 (Q, K, V as uint8 .npy), decoded exactly");
  o->add_option("--q-descale", a.q_descale, "FP8: descale of Q (a decimal exact in binary64, or .npy of shape () or (b, h_kv))");
  o->add_option("--k-descale", a.k_descale, "FP8: descale of K");
  o->add_option("--v-descale", a.v_descale, "FP8: descale of V");
  o->add_option("--write-lse", a.write_lse, "Write the correctly rounded log-sum-exp of every row (sink included) to LSE.npy")
      ->check(writable_file());
  o->add_option("--lse-base", a.lse_base, "LSE base: e (natural log) or 2")->capture_default_str();
  o->add_option("--empty-lse", a.empty_lse, "LSE of a row without keys, graded exactly in a candidate LSE: -inf (FlashAttention 3), +inf (FlashAttention 2),\n0 or nan")->capture_default_str();
  o->add_option("--lse-target", a.lse_target, "Format of the LSE (default binary32; binary64 when --target binary64)");
}

// The backward pass (proofs/P15-oracle-backward.md).
void add_backward_options(CLI::App* o, oracle_args& a) {
  o->add_option("--grad-out", a.grad_out, "Backward: the output gradient dO (.npy, the output's shape and layout)");
  o->add_option("--grad-lse", a.grad_lse, "Backward: the LSE gradient dLSE (.npy, the --write-lse shape; base as --lse-base)");
  o->add_option("--write-grad-references", a.write_grad_references,
                "Backward: write PREFIX.dq.npy, PREFIX.dk.npy, PREFIX.dv.npy (DIR/dq.npy, ... for a PREFIX DIR/ ending in /; the layouts of Q, K, V; paged K/V: their pages, unused slots 0), and "
                "PREFIX.dbias.npy (the bias's shape) / PREFIX.dsink.npy ((h_q,)) with a bias / sink; correctly rounded");
  grading_args& g = a.grading;
  o->add_option("--candidate-grads", g.candidate_grads,
                "Backward: grade a kernel's PREFIX.dq.npy, PREFIX.dk.npy, PREFIX.dv.npy (+ .dbias.npy with --bias, "
                ".dsink.npy with --sink), laid out as the references, against the exact gradients by --rule (flash: "
                "k = 3; torch-sdpa: fudge dq 180, dk 16, dv 4, dbias 45, dsink 45); repeatable");
  o->add_option("--baseline-grads", g.baseline_grads,
                "Backward: the baseline's gradients PREFIX.*.npy (needed by flash and torch-sdpa on --candidate-grads), "
                "e.g. FlashAttention's: the same math in the kernel's dtype, the scale applied to K");
  o->add_option("--rerun-grads", g.rerun_grads,
                "Backward: a second run PREFIX.*.npy of the first --candidate-grads kernel: the run-to-run spread per "
                "gradient (atomics make FlashAttention's dQ nondeterministic)");
}

// The grading rules of the published test suites (grading/grading.hpp), the LSE candidate and reruns.
void add_grading_options(CLI::App* o, grading_args& g) {
  o->add_option("--rule", g.rule,
                "How candidates are judged against the exact values o: ulp (max |c-o|/ulp(o) <= --max-ulp), flash "
                "(max|c-o| <= k·max|b-o| + atol, FlashAttention's), torch-sdpa (PyTorch's SDPA tests: atol/rtol from "
                "the baseline's errors × fudge), assert-close (torch.testing's rtol/atol per dtype)")
      ->capture_default_str();
  o->add_option("--baseline", g.baseline,
                "The baseline's output (.npy, e.g. the same math in fp32 / the input dtype): needed by flash and torch-sdpa");
  o->add_option("--flash-k", g.flash_k, "flash: the factor k (default 2)");
  o->add_option("--fudge", g.fudge, "torch-sdpa: the fudge factor F (default 4, PyTorch's for the output)");
  o->add_option("--atol", g.atol, "flash: added to the threshold (default 0); assert-close: atol (default per dtype)");
  o->add_option("--rtol", g.rtol, "assert-close: rtol (default per dtype)");
  o->add_option("--candidate-lse", g.candidate_lse, "A kernel's LSE (.npy, the --write-lse layout) graded by the same rule");
  o->add_option("--baseline-lse", g.baseline_lse, "The baseline's LSE (for flash / torch-sdpa on --candidate-lse)");
  o->add_option("--rerun", g.rerun,
                "A second run of the first --candidate on the same inputs: reports their spread next to the error");
}

}  // namespace

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
      "  attncert oracle --q Q.npy --k K.npy --v V.npy --attention-candidate A_hat.npy\n"
      "Grading (--rule; o = the exact value, never the rounded reference):\n"
      "  ulp           max |c - o| / ulp(o) <= --max-ulp                     (no --max-ulp: errors only)\n"
      "  flash         max |c - o| <= k·max |b - o| + atol, k = 2, atol = 0   (FlashAttention's tests)\n"
      "  torch-sdpa    |c - o| <= F·max(max|b - o|, atol_dt) + F·max(max|b - o|/|o|, rtol_dt)·|o|, F = 4\n"
      "                (PyTorch test_transformers.py; the report gives the fudge needed)\n"
      "  assert-close  |c - o| <= atol + rtol·|o| with torch.testing's per-dtype defaults\n"
      "  Every rule reports its margin and ratio, and abs, rel and ulp errors side by side with their indices.\n"
      "Variant examples (proofs/P14-oracle-variants.md):\n"
      "  attncert oracle --q Q.npy --k K.npy --v V.npy --mask causal-bottom-right --window 128,0 --softcap 30 \\\n"
      "      --target bfloat16 --write-lse lse.npy --candidate out_bf16.npy --rule flash --baseline out_ref_bf16.npy\n"
      "  attncert oracle --layout thd --cu-seqlens-q cq.npy --cu-seqlens-k ck.npy --q Q.npy --k K.npy --v V.npy \\\n"
      "      --sink sinks.npy --candidate-lse lse_kernel.npy --rule assert-close --target binary32\n"
      "Backward (proofs/P15-oracle-backward.md): dQ, dK, dV (and dBias, dSink) of the same attention for a given dO\n"
      "(and dLSE), each element correctly rounded; exact zeros (keys no query attends, rows with constant dO·v_j)\n"
      "come out as exact zeros:\n"
      "  attncert oracle --q Q.npy --k K.npy --v V.npy --mask causal --grad-out dO.npy --write-grad-references ref\n"
      "Grading gradients: --candidate-grads PREFIX reads PREFIX.dq.npy, .dk.npy, .dv.npy (and .dbias.npy / .dsink.npy)\n"
      "in the layouts of Q, K, V and grades each by --rule against the exact gradient (flash: k = 3, FlashAttention's\n"
      "test_flash_attn_output; torch-sdpa: PyTorch's fudge per gradient; --flash-k / --fudge override them):\n"
      "  attncert oracle --q Q.npy --k K.npy --v V.npy --mask causal --target binary32 --grad-out dO.npy \\\n"
      "      --candidate-grads torch32 --rule flash --baseline-grads torch32_reordered --rerun-grads torch32_run2\n" +
      exit_codes_text({{exit_ok, "done (every graded candidate passes its rule)"},
                       {exit_failed, "a candidate, LSE candidate or gradient fails its rule (NaN/Inf where the truth "
                                     "is finite fails every rule), or the output bound is refuted"},
                       {3, "undecided: rows or the backward not computed within --max-seconds (PARTIAL), and nothing failed"}}));
  o->add_option("--q", a.q, "Queries Q (.npy: float16/32/64 or int)")->required();
  o->add_option("--k", a.k, "Keys K (.npy)")->required();
  o->add_option("--v", a.v, "Values V (.npy)")->required();
  o->add_option("--mask", a.masks,
                "Repeatable, combined by AND: causal (top-left: key j allowed for query i iff j <= i), "
                "causal-bottom-right (j <= i + n_k - n_q, FlashAttention's), or a bool .npy (true = attend)")
;
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
  o->add_option("--max-seconds", a.max_seconds,
                "Budget of the command, in [0, 1e7] (0: none): past it no row is started and a row under way stops\n"
                "at its next escalation step; those rows are undecided (NaN in the reference, not graded), the report\n"
                "is PARTIAL and lists them, and the exit status is 3 unless something failed.  The backward (--grad-out)\n"
                "runs within what is left, all or nothing: past the budget no gradient is written or graded (exit 3)")
      ->check(cli::seconds_budget())
      ->capture_default_str();
  o->add_flag("--allow-nonfinite", a.allow_nonfinite,
              "Accept NaN/Inf inputs: rows touching them follow IEEE binary64 semantics (not certified, counted)");
  add_variant_options(o, a);
  add_grading_options(o, a.grading);
  add_backward_options(o, a);
  add_format_option(o, a.out_format, {"text", "json"});
  add_out_option(o, a.out_path);
  return o;
}

namespace {

nlohmann::json describe(const std::string& file, const io::npy_array& a) {
  return {{"file", file}, {"shape", a.shape}, {"dtype", io::dtype_descr(a.type)}};
}

// The call as the library describes it: the arrays read from their files (described in `inputs`)
// and the options' texts.  The library builds and validates the request (oracle/spec.hpp).
oracle::attention_spec make_spec(const oracle_args& a, nlohmann::json& inputs) {
  oracle::attention_spec s;
  // NaN/Inf are read as they are: only values an allowed score uses count (P14), judged per row.
  s.q = io::read_npy(a.q, io::nonfinite::allow);
  s.k = io::read_npy(a.k, io::nonfinite::allow);
  s.v = io::read_npy(a.v, io::nonfinite::allow);
  inputs["q"] = describe(a.q, s.q);
  inputs["k"] = describe(a.k, s.k);
  inputs["v"] = describe(a.v, s.v);
  auto read = [&](const std::string& file, const char* key, io::nonfinite policy = io::nonfinite::reject) {
    std::optional<io::npy_array> arr;
    if (file.empty()) return arr;
    arr = io::read_npy(file, policy);
    inputs[key] = describe(file, *arr);
    return arr;
  };
  s.layout = a.layout;
  s.cu_seqlens_q = read(a.cu_seqlens_q, "cu_seqlens_q");
  s.cu_seqlens_k = read(a.cu_seqlens_k, "cu_seqlens_k");
  s.seqlens_k = read(a.seqlens_k, "seqlens_k");
  s.block_table = read(a.block_table, "block_table");
  s.page_size = a.page_size;
  for (const auto& m : a.masks) {
    if (m == "none") continue;
    if (m == "causal") {
      s.causal = true;
    } else if (m == "causal-bottom-right") {
      s.causal_bottom_right = true;
    } else {
      if (s.mask) throw input_error("give at most one mask file");
      s.mask = read(m, "mask");
      s.mask_name = m;
    }
  }
  if (!scale_is_default(a.scale)) s.scale = a.scale;
  s.empty_rows = a.empty_rows;
  s.target = a.target;
  s.window = a.window;
  s.softcap = a.softcap;
  s.alibi = a.alibi;
  s.alibi_slopes = read(a.alibi_slopes, "alibi_slopes");
  s.bias = read(a.bias, "bias", io::nonfinite::allow);
  s.sink = read(a.sink, "sink", io::nonfinite::allow);
  s.sink_off_by_one = a.sink_off_by_one;
  s.sink_token_length = a.sink_token_length;
  s.attention_chunk = a.attention_chunk;
  s.key_leftpad = read(a.key_leftpad, "key_leftpad");
  s.qv = read(a.qv, "qv", io::nonfinite::allow);
  s.dropout_mask = read(a.dropout_mask, "dropout_mask");
  s.dropout_p = a.dropout_p;
  s.qkv_format = a.qkv_format;
  // A descale is a decimal or a .npy file: the file is read here, the library takes the array.
  const auto descale = [](const std::string& text, std::string& number, std::optional<io::npy_array>& array) {
    if (text.size() > 4 && text.compare(text.size() - 4, 4, ".npy") == 0) array = io::read_npy(text, io::nonfinite::allow);
    else number = text;
  };
  descale(a.q_descale, s.q_descale, s.q_descale_array);
  descale(a.k_descale, s.k_descale, s.k_descale_array);
  descale(a.v_descale, s.v_descale, s.v_descale_array);
  s.want_lse = !a.write_lse.empty() || !a.grading.candidate_lse.empty() || !a.grad_lse.empty();
  s.lse_base = a.lse_base;
  s.empty_lse = a.empty_lse;
  s.lse_target = a.lse_target;
  s.max_bits = a.max_precision;
  s.threads = a.threads;
  s.max_seconds = a.max_seconds;
  s.allow_nonfinite = a.allow_nonfinite;
  return s;
}

nlohmann::json settings(const oracle_args& a, const oracle::oracle_request& req) {
  nlohmann::json s = {{"target", to_string(req.target)},
                      {"scale", req.scale.inv_sqrt_d ? "1/sqrt(d) (d = " + std::to_string(req.Q.d) + ")" : a.scale},
                      {"mask", a.masks.empty() ? std::vector<std::string>{"none"} : a.masks},
                      {"layout", a.layout},
                      {"empty_rows", a.empty_rows},
                      {"max_precision_bits", req.max_bits},
                      {"threads", req.threads},
                      {"max_seconds", req.max_seconds},
                      {"allow_nonfinite", req.allow_nonfinite},
                      {"rounding", "to nearest, ties to even"},
                      {"softmax", "exact: weights e^{s(q.k_j - q.k_r)} with an exactly computed difference; no overflow"}};
  const auto& v = req.variant;
  nlohmann::json var = nlohmann::json::object();
  if (v.window_left != -1 || v.window_right != -1) var["window"] = {v.window_left, v.window_right};
  if (v.softcap) var["softcap"] = a.softcap;  // as the user wrote it
  if (!v.alibi_slopes.empty()) var["alibi"] = v.alibi_key_position ? "flash2 (+slope j)" : "distance (-slope |i + n_k - n_q - j|)";
  if (v.has_bias) var["bias"] = true;
  if (!v.sink.empty()) var["sink"] = a.sink_off_by_one ? "off-by-one (logit 0)" : "per head";
  if (v.has_dropout) var["dropout_p"] = a.dropout_p;
  if (v.sink_tokens) var["sink_token_length"] = v.sink_tokens;
  if (v.chunk) var["attention_chunk"] = v.chunk;
  if (!v.key_leftpad.empty()) var["key_leftpad"] = v.key_leftpad;
  if (!a.qv.empty()) var["qv"] = true;
  if (!a.qkv_format.empty()) var["qkv_format"] = a.qkv_format;
  if (req.K.H != req.Q.H) var["gqa"] = {{"h_q", req.Q.H}, {"h_kv", req.K.H}};
  if (!var.empty()) s["variant"] = var;
  if (req.lse.want)
    s["lse"] = {{"base", req.lse.base2 ? "2" : "e"}, {"empty", oracle::empty_lse_text(req.lse.empty_value)},
                {"target", to_string(req.lse.target)}};
  s["semantics"] = "proofs/P14-oracle-variants.md (order: scale, softcap, ALiBi + bias, mask, softmax + sink, dropout, V)";
  if (req.allow_nonfinite)
    s["nonfinite_semantics"] = "rows touching NaN/Inf inputs follow IEEE binary64 arithmetic; not certified";
  return s;
}

// ---- a kernel's gradients (--candidate-grads, --baseline-grads, --rerun-grads) -------------------

std::string shape_text(const std::vector<std::size_t>& s) {
  std::string t;
  for (auto x : s) t += (t.empty() ? "" : ", ") + std::to_string(x);
  return "(" + t + ")";
}

// A gradient the call grades: which, the shape of its file (the written reference's), whose shape that is.
struct gradient_spec {
  grading::gradient_kind kind;
  std::vector<std::size_t> shape;
  std::string shape_is;
};

// The arrays PREFIX.<gradient>.npy of one kernel (or of the baseline, or of the rerun), one per spec.
struct gradient_set_files {
  std::string prefix;
  std::vector<std::string> files;
  std::vector<io::npy_array> arrays;
};

struct gradient_inputs {
  std::vector<gradient_spec> specs;
  std::vector<gradient_set_files> candidates;
  std::optional<gradient_set_files> baseline, rerun;
};

// dq, dk, dv always; dbias with --bias; dsink with --sink (not with --sink-off-by-one: a constant).
std::vector<gradient_spec> gradient_specs(const oracle_args& a, const oracle::oracle_request& req, const io::npy_array& qa,
                                          const io::npy_array& ka, const io::npy_array& va, const nlohmann::json& inputs) {
  using grading::gradient_kind;
  std::vector<gradient_spec> s = {{gradient_kind::dq, qa.shape, "Q's"}, {gradient_kind::dk, ka.shape, "K's"},
                                  {gradient_kind::dv, va.shape, "V's"}};
  if (req.variant.has_bias)
    s.push_back({gradient_kind::dbias, inputs.at("bias").at("shape").get<std::vector<std::size_t>>(), "the bias's"});
  if (!a.sink.empty()) s.push_back({gradient_kind::dsink, {req.Q.H}, "(h_q,)"});
  return s;
}

gradient_set_files read_gradient_set(const std::string& prefix, const std::string& option,
                                     const std::vector<gradient_spec>& specs) {
  gradient_set_files f;
  f.prefix = prefix;
  for (const auto& sp : specs) {
    const std::string name = to_string(sp.kind), file = gradient_file(prefix, name);
    std::error_code ec;
    if (!std::filesystem::exists(file, ec))
      throw input_error(option + " " + prefix + ": " + file + " is missing (" + name + " is graded" +
                        (sp.kind == grading::gradient_kind::dbias   ? " when the call has --bias)"
                         : sp.kind == grading::gradient_kind::dsink ? " when the call has --sink)"
                                                                   : " in every backward call)"));
    io::npy_array arr = io::read_npy(file, io::nonfinite::allow);
    if (arr.shape != sp.shape)
      throw input_error(file + ": shape " + shape_text(arr.shape) + " is not that of " + name + ", " + sp.shape_is + " " +
                        shape_text(sp.shape));
    if (arr.type == io::dtype::b1) throw input_error(file + ": a gradient must be a float array");
    f.files.push_back(file);
    f.arrays.push_back(std::move(arr));
  }
  return f;
}

// Checks the gradient options and reads every file, before any work.
gradient_inputs read_gradient_inputs(const oracle_args& a, const grading::rule_settings& rules, std::vector<gradient_spec> specs) {
  const grading_args& g = a.grading;
  if (!g.baseline_grads.empty() && g.candidate_grads.empty()) throw input_error("--baseline-grads needs --candidate-grads");
  if (!g.rerun_grads.empty() && g.candidate_grads.empty())
    throw input_error("--rerun-grads is a second run of the first --candidate-grads kernel: give --candidate-grads");
  gradient_inputs in;
  if (g.candidate_grads.empty()) return in;
  if (a.grad_out.empty()) throw input_error("--candidate-grads grades the gradients of a backward call: give --grad-out dO.npy");
  if (grading::rule_needs_baseline(rules.rule) && g.baseline_grads.empty())
    throw input_error("--rule " + g.rule + " on --candidate-grads compares with a baseline: give --baseline-grads PREFIX");
  in.specs = std::move(specs);
  for (const auto& p : g.candidate_grads) in.candidates.push_back(read_gradient_set(p, "--candidate-grads", in.specs));
  if (!g.baseline_grads.empty()) in.baseline = read_gradient_set(g.baseline_grads, "--baseline-grads", in.specs);
  if (!g.rerun_grads.empty()) in.rerun = read_gradient_set(g.rerun_grads, "--rerun-grads", in.specs);
  return in;
}

const oracle::gradient_tensor& tensor_of(const oracle::backward_result& r, grading::gradient_kind k) {
  switch (k) {
    case grading::gradient_kind::dq: return r.dq;
    case grading::gradient_kind::dk: return r.dk;
    case grading::gradient_kind::dv: return r.dv;
    case grading::gradient_kind::dbias: return r.dbias;
    case grading::gradient_kind::dsink: return r.dsink;
  }
  throw internal_error("unknown gradient");
}

// Grades every kernel's gradients against the exact ones (specs 0-2, dq dk dv, are converted from the
// inputs' layouts with `glay`; dbias and dsink are stored as written).
void grade_gradients(const gradient_inputs& gi, const oracle::backward_result& r, const std::vector<oracle::output_layout>& glay,
                     const grading::rule_settings& rules, const grading_args& g, report::oracle_report_input& ri) {
  using namespace attncert::oracle;
  using namespace attncert::grading;
  if (gi.candidates.empty()) return;
  auto internal = [&](std::size_t s, const io::npy_array& arr) {
    return s < 3 ? glay[s].output_to_internal(arr.values) : arr.values;
  };
  std::vector<truth_view> truths;
  std::vector<std::vector<double>> base;
  if (gi.baseline) ri.gradient_baseline = gradient_set_grade{"b", gi.baseline->prefix, {}};
  for (std::size_t s = 0; s < gi.specs.size(); ++s) {
    const gradient_kind kind = gi.specs[s].kind;
    truths.push_back(gradient_truth(tensor_of(r, kind), r.target, to_string(kind)));
    if (s < 3) skip_absent_rows(truths.back(), glay[s]);
    if (!gi.baseline) continue;
    base.push_back(internal(s, gi.baseline->arrays[s]));
    ri.gradient_baseline->gradients.push_back(
        {kind, gi.baseline->files[s], approx_errors(truths[s], base[s], "b." + to_string(kind)), rules, std::nullopt, ""});
  }
  for (std::size_t c = 0; c < gi.candidates.size(); ++c) {
    const gradient_set_files& f = gi.candidates[c];
    gradient_set_grade set{"g" + std::to_string(c + 1), f.prefix, {}};
    for (std::size_t s = 0; s < gi.specs.size(); ++s) {
      gradient_grade gg;
      gg.gradient = gi.specs[s].kind;
      gg.file = f.files[s];
      gg.rules = gradient_rule_settings(rules, gg.gradient, g.flash_k.has_value(), g.fudge.has_value());
      const std::vector<double> ci = internal(s, f.arrays[s]);
      gg.grade = approx_grade(truths[s], ci, gi.baseline ? &base[s] : nullptr, gg.rules, set.name + "." + to_string(gg.gradient));
      if (c == 0 && gi.rerun) {
        gg.rerun = approx_rerun_spread(truths[s], ci, internal(s, gi.rerun->arrays[s]));
        gg.rerun_file = gi.rerun->files[s];
      }
      set.gradients.push_back(std::move(gg));
    }
    ri.gradient_candidates.push_back(std::move(set));
  }
  if (gi.rerun) ri.gradient_rerun_prefix = gi.rerun->prefix;
}

}  // namespace

namespace {

// The grading rule and its settings from the options (each option belongs to one rule).
grading::rule_settings make_rule_settings(const oracle_args& a) {
  using namespace attncert::grading;
  if (a.max_ulp != -1 && !(a.max_ulp >= 0)) throw input_error("--max-ulp must be >= 0");
  const grading_args& g = a.grading;
  rule_settings rules;
  rules.rule = parse_grading_rule(g.rule);
  if (a.max_ulp >= 0) {
    if (rules.rule != grading_rule::ulp) throw input_error("--max-ulp belongs to --rule ulp (got --rule " + g.rule + ")");
    rules.max_ulp = a.max_ulp;
  }
  if (g.flash_k) {
    if (rules.rule != grading_rule::flash) throw input_error("--flash-k belongs to --rule flash");
    rules.flash_k = *g.flash_k;
  }
  if (g.fudge) {
    if (rules.rule != grading_rule::torch_sdpa) throw input_error("--fudge belongs to --rule torch-sdpa");
    rules.fudge = *g.fudge;
  }
  if (g.atol && rules.rule != grading_rule::flash && rules.rule != grading_rule::assert_close)
    throw input_error("--atol belongs to --rule flash or assert-close");
  if (g.rtol && rules.rule != grading_rule::assert_close) throw input_error("--rtol belongs to --rule assert-close");
  rules.atol = g.atol;
  rules.rtol = g.rtol;
  validate_rule_settings(rules);
  return rules;
}

}  // namespace

namespace {

// The forward's candidate arrays (--candidate, --attention-candidate, --baseline, --rerun, --candidate-lse,
// --baseline-lse), every one read and checked against the request's shapes before any work.
struct forward_files {
  std::vector<io::npy_array> cands;
  std::optional<io::npy_array> att, base, rerun, cand_lse, base_lse;
};

std::optional<io::npy_array> read_checked(const std::string& file, const std::vector<std::size_t>& shape) {
  if (file.empty()) return std::nullopt;
  io::npy_array arr = io::read_npy(file, io::nonfinite::allow);
  oracle::check_candidate_array(arr, shape, file);
  return arr;
}

forward_files read_forward_files(const oracle_args& a, const oracle::attention_spec& spec, const oracle::built_request& built,
                                 const grading::rule_settings& rules) {
  using namespace attncert::oracle;
  using grading::rule_needs_baseline;
  const oracle_request& req = built.req;
  const output_layout& olay = built.olay;
  forward_files f;
  for (const auto& c : a.candidates) f.cands.push_back(*read_checked(c, olay.out_shape));
  if (!a.attention_candidate.empty()) {
    const bool plain = req.K.H == req.Q.H && built.lay.layout == qkv_layout::bhsd && !built.lay.paged &&
                       req.seqlens_k.empty() && !req.variant.softcap && req.variant.alibi_slopes.empty() &&
                       !req.variant.has_bias && req.variant.sink.empty() && !req.variant.has_dropout &&
                       !req.variant.causal_bottom_right && req.variant.window_left == -1 && req.variant.window_right == -1 &&
                       req.variant.chunk == 0 && req.variant.key_leftpad.empty() && a.qv.empty();
    if (!plain) throw input_error("--attention-candidate supports plain attention only (no variant options)");
    f.att = io::read_npy(a.attention_candidate);
    check_attention_array(*f.att, spec.q, spec.k, a.attention_candidate);
  }
  const grading_args& g = a.grading;
  const bool need_base = rule_needs_baseline(rules.rule);
  if (need_base && !f.cands.empty() && g.baseline.empty())
    throw input_error("--rule " + g.rule + " compares with a baseline: give --baseline B.npy");
  if (need_base && !g.candidate_lse.empty() && g.baseline_lse.empty())
    throw input_error("--rule " + g.rule + " on --candidate-lse compares with a baseline: give --baseline-lse B.npy");
  if (!g.baseline.empty() && f.cands.empty()) throw input_error("--baseline needs a --candidate to compare");
  if (!g.baseline_lse.empty() && g.candidate_lse.empty()) throw input_error("--baseline-lse needs --candidate-lse");
  if (!g.rerun.empty() && f.cands.empty()) throw input_error("--rerun is a second run of the first --candidate: give --candidate");
  f.base = read_checked(g.baseline, olay.out_shape);
  f.rerun = read_checked(g.rerun, olay.out_shape);
  if (!g.candidate_lse.empty() && !req.lse.want) throw internal_error("--candidate-lse without an LSE request");
  f.cand_lse = read_checked(g.candidate_lse, olay.lse_shape);
  f.base_lse = read_checked(g.baseline_lse, olay.lse_shape);
  return f;
}

// The backward's cotangents (--grad-out, --grad-lse), the gradient layouts and the gradient candidates,
// read and checked before any work.  No --grad-out: no backward call.
struct backward_files {
  std::optional<io::npy_array> dout, dlse;
  std::vector<oracle::output_layout> glay;
  gradient_inputs grad_in;
};

backward_files read_backward_files(const oracle_args& a, const oracle::attention_spec& spec, const oracle::built_request& built,
                                   const grading::rule_settings& rules, nlohmann::json& inputs) {
  if (a.grad_out.empty() && (!a.grad_lse.empty() || !a.write_grad_references.empty()))
    throw input_error("--grad-lse and --write-grad-references belong to a backward call: give --grad-out dO.npy");
  backward_files b;
  b.grad_in = read_gradient_inputs(a, rules, gradient_specs(a, built.req, spec.q, spec.k, spec.v, inputs));
  if (a.grad_out.empty()) return b;
  if (a.write_grad_references.empty() && b.grad_in.candidates.empty())
    throw input_error("--grad-out needs --write-grad-references PREFIX or --candidate-grads PREFIX");
  b.dout = read_checked(a.grad_out, built.olay.out_shape);
  inputs["grad_out"] = describe(a.grad_out, *b.dout);
  if (!a.grad_lse.empty()) {
    b.dlse = read_checked(a.grad_lse, built.olay.lse_shape);
    inputs["grad_lse"] = describe(a.grad_lse, *b.dlse);
  }
  b.glay = gradient_layouts(spec, built);
  return b;
}

// Grades the forward's candidates, baseline, rerun and LSE against the exact values, and the
// attention-matrix candidate, into the report's input.
void grade_forward(const forward_files& f, const oracle_args& a, const oracle::built_request& built,
                   const oracle::oracle_result& res, const grading::rule_settings& rules, report::oracle_report_input& ri) {
  using namespace attncert::oracle;
  using namespace attncert::grading;
  const output_layout& olay = built.olay;
  const grading_args& g = a.grading;
  const truth_view out_truth = output_truth(res, built.req.target);
  const std::vector<double> base_int = f.base ? olay.output_to_internal(f.base->values) : std::vector<double>{};
  const std::vector<double>* base_ptr = f.base ? &base_int : nullptr;
  std::vector<double> first_run;
  for (std::size_t c = 0; c < f.cands.size(); ++c) {
    std::vector<double> ci = olay.output_to_internal(f.cands[c].values);
    ri.candidates.push_back(approx_grade(out_truth, ci, base_ptr, rules, "c" + std::to_string(c + 1)));
    ri.candidate_files.push_back(a.candidates[c]);
    if (c == 0) first_run = std::move(ci);
  }
  if (f.base) {
    ri.baseline = approx_errors(out_truth, base_int, "b");
    ri.baseline_file = g.baseline;
  }
  if (f.rerun) {
    ri.rerun = approx_rerun_spread(out_truth, first_run, olay.output_to_internal(f.rerun->values));
    ri.rerun_file = g.rerun;
  }
  if (f.cand_lse) {
    const truth_view lt = lse_truth(res);
    const std::vector<double> bl = f.base_lse ? olay.lse_to_internal(f.base_lse->values) : std::vector<double>{};
    ri.lse_candidate = approx_grade(lt, olay.lse_to_internal(f.cand_lse->values), f.base_lse ? &bl : nullptr, rules, "lse");
    ri.lse_candidate_file = g.candidate_lse;
    if (f.base_lse) {
      ri.lse_baseline = approx_errors(lt, bl, "b_lse");
      ri.lse_baseline_file = g.baseline_lse;
    }
  }
  if (f.att) ri.attention = grade_attention(built.req, f.att->values);
}

// Stages the reference files the options ask for (--write-reference, --write-lse, --write-grad-references)
// and names them in the report; they are committed with the report.
void stage_references(const oracle_args& a, const oracle::attention_spec& spec, const oracle::built_request& built,
                      const oracle::oracle_result& res, const oracle::backward_result* grads,
                      const std::vector<oracle::output_layout>& glay, const nlohmann::json& inputs, command_output& out,
                      report::oracle_report_input& ri) {
  using namespace attncert::oracle;
  const oracle_request& req = built.req;
  if (!a.write_reference.empty()) {
    const io::npy_array ref = reference_array(res, req.target, built.olay);
    out.files.stage_file(a.write_reference, io::serialize_npy(ref));
    ri.reference = {{"file", a.write_reference}, {"dtype", io::dtype_descr(ref.type)}, {"shape", built.olay.out_shape}};
    if (req.target == target_format::bfloat16) ri.reference["note"] = "bfloat16 values stored exactly as float32";
  }
  if (!a.write_lse.empty()) {
    const io::npy_array l = lse_array(res, built.olay);
    out.files.stage_file(a.write_lse, io::serialize_npy(l));
    ri.lse_file = {{"file", a.write_lse}, {"dtype", io::dtype_descr(l.type)}, {"shape", built.olay.lse_shape},
                   {"base", req.lse.base2 ? "2" : "e"}};
  }
  if (!grads || a.write_grad_references.empty()) return;
  auto stage = [&](const std::string& name, const gradient_tensor& g, const output_layout* gl,
                   const std::vector<std::size_t>& shape) {
    const std::string file = gradient_file(a.write_grad_references, name);
    const io::npy_array arr = target_array(gl ? gl->output_to_external(g.reference) : g.reference, req.target, shape);
    out.files.stage_file(file, io::serialize_npy(arr));
    ri.gradient_files[name] = {{"file", file}, {"dtype", io::dtype_descr(arr.type)}, {"shape", shape}};
  };
  stage("dq", grads->dq, &glay[0], spec.q.shape);
  stage("dk", grads->dk, &glay[1], spec.k.shape);
  stage("dv", grads->dv, &glay[2], spec.v.shape);
  if (grads->has_dbias) stage("dbias", grads->dbias, nullptr, inputs.at("bias").at("shape").get<std::vector<std::size_t>>());
  if (grads->has_dsink) stage("dsink", grads->dsink, nullptr, {req.Q.H});
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

// Read and check everything, run the forward (and the backward), grade, stage the files, write the report.
int run_oracle_command(const oracle_args& a, const std::string& command) {
  using namespace attncert::oracle;
  const auto t0 = std::chrono::steady_clock::now();
  nlohmann::json inputs;
  const attention_spec spec = make_spec(a, inputs);
  built_request built = build_request(spec);
  oracle_request& req = built.req;
  req.progress = progress_reporter("oracle", "rows", false);
  const grading::rule_settings rules = make_rule_settings(a);
  const forward_files ff = read_forward_files(a, spec, built, rules);
  const backward_files bf = read_backward_files(a, spec, built, rules, inputs);

  deadline_scope budget(req.max_seconds);  // one budget for the command: the forward, then the backward
  const oracle_result res = run_oracle(req);
  clear_progress();
  std::optional<backward_result> grads;
  double backward_seconds = 0;
  std::string backward_not_computed;
  if (bf.dout) {
    const auto tb = std::chrono::steady_clock::now();
    backward_inputs gi;
    gi.dO = built.olay.output_to_internal(bf.dout->values);
    if (bf.dlse) gi.dLSE = built.olay.lse_to_internal(bf.dlse->values);
    try {
      grads = run_oracle_backward(req, gi);
    } catch (const time_limit_reached&) {  // all or nothing: no gradient file, exit 3 (UNDECIDED)
      std::ostringstream why;
      why << "the backward was not computed within --max-seconds " << a.max_seconds << ": no gradient is written or graded";
      backward_not_computed = why.str();
    }
    clear_progress();
    backward_seconds = seconds_since(tb);
  }

  report::oracle_report_input ri;
  ri.command = command;
  ri.inputs = inputs;
  ri.settings = settings(a, req);
  ri.result = &res;
  ri.rules = rules;
  grade_forward(ff, a, built, res, rules, ri);
  ri.backward_not_computed = backward_not_computed;
  ri.backward_seconds = backward_seconds;
  if (grads) {
    ri.backward = &*grads;
    ri.backward_seconds = backward_seconds;
    ri.gradient_files = nlohmann::json::object();
    grade_gradients(bf.grad_in, *grads, bf.glay, rules, a.grading, ri);
  }
  command_output out;
  stage_references(a, spec, built, res, grads ? &*grads : nullptr, bf.glay, inputs, out, ri);
  ri.seconds = seconds_since(t0);
  grading::graded_call call;
  call.result = &res;
  call.candidates = &ri.candidates;
  call.lse_candidate = ri.lse_candidate ? &*ri.lse_candidate : nullptr;
  call.gradient_candidates = &ri.gradient_candidates;
  call.attention = ri.attention ? &*ri.attention : nullptr;
  call.backward_not_computed = backward_not_computed;
  ri.verdict = grading::decide_oracle_verdict(call);
  const nlohmann::json doc = report::oracle_report(ri);
  std::ostringstream os;
  if (a.out_format == "json") os << doc.dump(2) << "\n";
  else report::write_oracle_text(os, doc);
  out.report(a.out_path, os.str());
  out.commit();
  return ri.verdict.exit_status();
}

}  // namespace attncert::cli
