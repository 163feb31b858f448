// tools/attncert/audit_command.cpp — `attncert audit CAPTURE_DIR`: read a capture directory
// (attncert.capture's save: manifest.json and .npy files), call lib (audit/audit.hpp), write the
// report (report/audit.hpp).  Thin: the library decides every number and every outcome.
#include "audit_command.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "attncert/audit/audit.hpp"
#include "attncert/error.hpp"
#include "attncert/io/bounded_input.hpp"
#include "attncert/io/npy.hpp"
#include "attncert/report/audit.hpp"
#include "cli_common.hpp"
#include "cli_options.hpp"

namespace attncert::cli {

namespace {

namespace fs = std::filesystem;

struct audit_args {
  std::string dir, spec, out_format = "json", out_path, registered;
  double max_seconds = 0;
};

// --registered: a SHA-256 (64 hex digits) or the path of an earlier audit report (its spec_sha256 and
// spec.fixed_at).
audit::registered_criteria registered_spec(const std::string& value) {
  audit::registered_criteria r;
  if (value.size() == 64 && value.find_first_not_of("0123456789abcdef") == std::string::npos) {
    r.sha256 = value;
    r.source = "--registered";
    return r;
  }
  if (!fs::exists(value))
    throw input_error("--registered '" + one_line(value, 200) + "': neither a SHA-256 (64 lowercase hex digits) nor an existing report file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(io::read_file_bounded(value));
    r.sha256 = j.at("spec_sha256").get<std::string>();
    const auto& f = j.at("spec").at("fixed_at");
    r.fixed_at = f.is_string() ? f.get<std::string>() : "";
  } catch (const nlohmann::json::exception& e) {
    throw input_error(one_line(value, 4096) + ": not an attncert audit report (" + one_line(e.what(), 120) + ")");
  }
  r.source = one_line(value, 4096);
  return r;
}

// The calls of a capture directory.  Errors (input_error, one line naming the file or key): no
// manifest, a manifest that is not one, a file it names that is missing or malformed.
std::vector<audit::captured_call> read_capture(const std::string& dir) {
  const fs::path root(dir);
  if (!fs::is_directory(root)) throw input_error(one_line(dir, 4096) + ": not a capture directory");
  const fs::path mpath = root / "manifest.json";
  if (!fs::exists(mpath)) throw input_error(one_line(mpath.string(), 4096) + ": missing (a capture directory holds manifest.json)");
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(io::read_file_bounded(mpath.string()));
  } catch (const nlohmann::json::exception& e) {
    throw input_error(one_line(mpath.string(), 4096) + ": not JSON: " + one_line(e.what(), 200));
  }
  if (!m.is_object() || m.value("format", "") != "attncert-capture 1")
    throw input_error(one_line(mpath.string(), 4096) + ": not an attncert capture manifest (format \"attncert-capture 1\")");
  std::vector<audit::captured_call> calls;
  try {
    for (const auto& c : m.at("calls")) {
      audit::captured_call cc;
      cc.name = c.at("name").get<std::string>();
      cc.kind = c.at("kind").get<std::string>();
      cc.dtype = c.at("dtype").get<std::string>();
      cc.scale = c.at("scale").get<std::string>();
      cc.mask_kind = c.at("mask_kind").get<std::string>();
      const auto& files = c.at("files");
      auto array = [&](const char* key) -> std::optional<tensor> {
        if (!files.contains(key) || files[key].is_null()) return std::nullopt;
        const fs::path p = root / files[key].get<std::string>();
        if (!fs::exists(p)) throw input_error(one_line(p.string(), 4096) + ": missing (named in manifest.json)");
        return io::read_npy(p.string());
      };
      for (const char* key : {"q", "k", "v"})
        if (!files.contains(key)) throw input_error(one_line(mpath.string(), 4096) + ": call '" + one_line(cc.name, 80) + "' names no " + key + " file");
      cc.q = *array("q");
      cc.k = *array("k");
      cc.v = *array("v");
      cc.allowed = array("allowed");
      cc.bias = array("bias");
      cc.weights = array("weights");
      cc.output = array("output");
      cc.w_o = array("w_o");
      cc.b_o = array("b_o");
      cc.residual = array("residual");
      calls.push_back(std::move(cc));
    }
  } catch (const nlohmann::json::exception& e) {
    throw input_error(one_line(mpath.string(), 4096) + ": malformed: " + one_line(e.what(), 200));
  }
  return calls;
}

int run_audit_command(const audit_args& a, const std::string& command) {
  audit::audit_spec spec;
  if (a.spec.empty()) {
    spec = audit::parse_audit_spec(audit::default_audit_spec_text());
    spec.is_default = true;
  } else {
    spec = audit::parse_audit_spec(io::read_file_bounded(a.spec));
  }
  if (!a.registered.empty()) audit::check_registered(spec, registered_spec(a.registered));
  const std::vector<audit::captured_call> calls = read_capture(a.dir);
  audit::audit_spec run = spec;  // --max-seconds bounds this run; the criteria (and their hash) stay the spec's
  if (a.max_seconds > 0) run.max_seconds = spec.max_seconds > 0 ? std::min(spec.max_seconds, a.max_seconds) : a.max_seconds;
  audit::audit_result r = audit::run_audit(run, calls, stage_progress("audit"));
  r.spec = spec;
  if (a.max_seconds > 0) {
    char buf[32];
    const auto end = std::to_chars(buf, buf + sizeof buf, a.max_seconds).ptr;
    r.notes.push_back("budget of this run: --max-seconds " + std::string(buf, end) + " (not one of the criteria)");
  }
  clear_progress();
  const nlohmann::ordered_json j = report::audit_json(r, command);
  command_output out;
  out.report(a.out_path, a.out_format == "md" ? report::audit_markdown(j) : a.out_format == "html" ? report::audit_html(j) : j.dump(2) + "\n");
  out.commit();
  return r.partial ? exit_undecided : exit_ok;
}

}  // namespace

std::function<int(const std::string& command)> add_audit_command(CLI::App& app) {
  auto a = std::make_shared<audit_args>();
  auto* c = app.add_subcommand("audit", "Audit every attention head of a captured model (attncert.capture) with the article's protocol.");
  c->footer(
      "The criteria are fixed first: the spec (JSON; --spec, else the default spec, which the report says) and its\n"
      "SHA-256 head the report, before any result.  Exact negative controls (two-token, identical values, causal)\n"
      "run through the same code first; per head the objects scores, attention, values and output are measured\n"
      "separately (certified exact rank, certified singular values, numerical ranks per format and policy), with\n"
      "the value scale max|v_j| and the article's §11 bound of the output error when the weights were captured;\n"
      "each head gets one of the article's outcome classes, or undecided with the reason.\n"
      "Example:\n"
      "  python: with attncert.capture(model) as cap: model(x)   then cap.save('cap')\n"
      "  attncert audit cap --spec spec.json --format md --out audit.md\n"
      "  attncert audit cap --spec spec.json --registered SHA256 --format html --out audit.html\n"
      "Objects: scores, attention, values, output (per head), multi_head (concat_h(A_h V_h) W_O^T per batch),\n"
      "residual (X + the multi-head output + b_O, where the capture knows the residual stream X).\n"
      "Spec keys: objects, formats, policies, allowable_output_error, target_contrast ({\"tokens\": [i, j],\n"
      "\"margin\": m} or {\"batches\": [b1, b2], \"margin\": m}), fixed_at (YYYY-MM-DDTHH:MM:SSZ), bypass,\n"
      "max_precision, max_seconds (an unknown key is an error).\n" +
      exit_codes_text({{exit_ok, "audited"}, {exit_undecided, "PARTIAL: past max_seconds (the spec's or --max-seconds)"}}));
  c->add_option("capture", a->dir, "Capture directory (manifest.json and .npy files, from attncert.capture(...).save)")->required();
  c->add_option("--spec", a->spec, "The audit's criteria (JSON), fixed before the audit; default: attncert's default spec");
  c->add_option("--registered", a->registered,
                 "The criteria registered before the audit: a SHA-256 or an earlier report.json; a spec whose hash (or\n"
                 "fixed_at) differs is refused (exit 2), so no threshold is changed after the fact");
  c->add_option("--max-seconds", a->max_seconds,
                 "Bound this run (seconds; the spec's max_seconds, when smaller, still applies); the report names the\n"
                 "heads and objects not computed.  Not one of the criteria: the spec's hash is unchanged")
      ->check(seconds_budget());
  add_format_option(c, a->out_format, {"json", "md", "html"});
  add_out_option(c, a->out_path);
  return [c, a](const std::string& command) -> int { return *c ? run_audit_command(*a, command) : -1; };
}

}  // namespace attncert::cli
