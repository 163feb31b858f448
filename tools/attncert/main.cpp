// tools/attncert/main.cpp — the command-line front end.  Thin: parse, call checks, write.
//
// Exit status: 0 every claim holds; 1 a claim failed (or is undecided); 2 bad input or usage
// (one line on stderr, no partial output file left behind).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

#include "attncert/io/bounded_input.hpp"
#include "attncert/io/matrix_input.hpp"
#include "attncert/rank/numerical.hpp"
#include "attncert/report/rank.hpp"
#include "attncert/report/writers.hpp"
#include "certify_command.hpp"
#include "checks/common.hpp"
#include "cli_common.hpp"
#include "oracle_command.hpp"
#include "drift_command.hpp"

namespace {

using namespace attncert;

using cli::emit;
using cli::join_args;

int run_check_command(const std::vector<std::string>& ids, bool list, const std::string& formats_text,
                      const std::string& policies_text, const std::string& out_format, const std::string& out_path,
                      std::uint64_t seed, unsigned certify_bits, unsigned certify_max_bits, const std::string& command,
                      bool verbose) {
  const auto& reg = checks::registry();
  if (list) {
    std::ostringstream os;
    for (const auto& c : reg) os << c.id << "\t" << c.section << "\t" << c.title << "\t" << c.proof << "\n";
    emit(out_path, os.str());
    return 0;
  }
  std::vector<const checks::check_entry*> chosen;
  if (ids.empty()) {
    for (const auto& c : reg) chosen.push_back(&c);
  } else {
    for (const auto& id : ids) {
      const auto* c = checks::find_check(id);
      if (!c) {
        std::string known;
        for (const auto& k : reg) known += (known.empty() ? "" : ", ") + k.id;
        throw input_error("unknown check '" + id + "' (known: " + known + ")");
      }
      chosen.push_back(c);
    }
  }
  checks::run_settings rs;
  rs.formats = parse_formats(formats_text);
  rs.policies = parse_policies(policies_text);
  rs.seed = seed;
  if (certify_bits < min_precision_bits || certify_bits > certify_max_bits || certify_max_bits > max_precision_bits)
    throw input_error("--certify-bits must satisfy " + std::to_string(min_precision_bits) +
                      " <= certify-bits <= certify-max-bits <= " + std::to_string(max_precision_bits));
  rs.certify_bits = certify_bits;
  rs.certify_max_bits = certify_max_bits;
  const auto fmt = report::parse_output_format(out_format);

  report::document doc;
  doc.version = ATTNCERT_VERSION;
  doc.command = command;
  nlohmann::json fs = nlohmann::json::array();
  for (const auto& f : rs.formats)
    fs.push_back({{"name", f.name}, {"tier", to_string(f.number_tier())}, {"precision_bits_requested", f.requested_bits},
                  {"precision_bits_used", f.precision_bits()},
                  {"svd", svd_description(f)}});
  nlohmann::json ps = nlohmann::json::array();
  for (const auto& p : rs.policies) ps.push_back({{"name", p.name()}, {"rule", p.formula()}});
  doc.settings = {{"formats", fs},
                  {"policies", ps},
                  {"policy_epsilon", "eps = 2^(1-p) of the format the matrix was formed in"},
                  {"seed", rs.seed},
                  {"certify_bits", rs.certify_bits},
                  {"certify_max_bits", rs.certify_max_bits},
                  {"softmax", "row maximum subtracted; masks applied before normalization; fully masked rows: error"},
                  {"tolerances", "fixed per claim from each check's error model before computing (see error_model)"}};
  const bool tty = ::isatty(2);
  for (std::size_t k = 0; k < chosen.size(); ++k) {
    if (tty) std::cerr << "\r[" << (k + 1) << "/" << chosen.size() << "] " << chosen[k]->id << "            " << std::flush;
    doc.checks.push_back(checks::run_check(*chosen[k], rs));
  }
  if (tty) std::cerr << "\r" << std::string(40, ' ') << "\r" << std::flush;
  std::ostringstream os;
  report::write(os, doc, fmt, report::write_options{verbose});
  emit(out_path, os.str());
  const auto s = doc.totals();
  return (s.fail == 0 && s.undecided == 0) ? 0 : 1;
}

struct rank_args {
  std::string scores, q, k, scale, mask = "none", v, x, object = "attention", formats = "binary16,bfloat16,binary32,binary64,mpfr256";
  std::string policies = "numpy,matlab,torch,lapack,eigen", out_format = "text", out_path;
  unsigned max_precision = 4096;
  std::uint64_t seed = 20261129;
};

int run_rank_command(const rank_args& a, const std::string& command) {
  rank_request req;
  nlohmann::json inputs;
  auto load = [&](const std::string& path, const char* what) {
    matrix<mpq_rational> m = io::read_exact_matrix(path, what);
    inputs[what] = {{"file", path}, {"shape", {m.rows(), m.cols()}}};
    return m;
  };
  if (!a.scores.empty() && (!a.q.empty() || !a.k.empty())) throw input_error("give either --scores or --q/--k, not both");
  if (!a.scores.empty()) req.S = load(a.scores, "--scores");
  else if (!a.q.empty() && !a.k.empty()) {
    req.Q = load(a.q, "--q");
    req.K = load(a.k, "--k");
  } else {
    throw input_error("give --scores S, or --q Q and --k K");
  }
  if (!a.scale.empty()) {
    if (req.S) throw input_error("--scale applies to --q/--k (scores given with --scores are used as they are)");
    if (a.scale == "default" || a.scale == "1/sqrt(d)") req.inv_sqrt_d = true;
    else req.scale = number_traits<mpq_rational>::from_string(a.scale);
  } else if (!req.S) {
    req.inv_sqrt_d = true;
  }
  if (!a.v.empty()) req.V = load(a.v, "--v");
  if (!a.x.empty()) req.X = load(a.x, "--x");
  if (a.mask == "none") req.M = mask::none();
  else if (a.mask == "causal") req.M = mask::causal();
  else {
    req.M = mask::from_matrix(io::read_bool_matrix(a.mask, "--mask"));
    inputs["--mask"] = a.mask;
  }
  req.object = parse_layer_object(a.object);
  req.formats = parse_formats(a.formats);
  req.policies = parse_policies(a.policies);
  if (a.max_precision < 128 || a.max_precision > max_precision_bits)
    throw input_error("--max-precision must be in [128, " + std::to_string(max_precision_bits) + "]");
  req.max_bits = a.max_precision;
  req.seed = a.seed;
  req.inputs = inputs;
  const auto fmt = report::parse_output_format(a.out_format);
  if (fmt != report::output_format::text && fmt != report::output_format::json)
    throw input_error("attncert rank writes --format text or json");
  const rank_analysis analysis = analyse_rank(req);
  std::ostringstream os;
  if (fmt == report::output_format::json) os << to_json(analysis, command).dump(2) << "\n";
  else write_rank_text(os, analysis);
  emit(a.out_path, os.str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = join_args(argc, argv);
  CLI::App app{
      "attncert — exact and arbitrary-precision verification of claims about transformer attention.\n"
      "Verdicts: a claim passes only if the computed error is within a tolerance fixed before computing;\n"
      "a numerical rank that differs from the exact rank is a measured divergence, not a failure.\n"
      "Exit status: 0 success (every claim holds, the candidate passes), 1 a claim failed or is undecided / a\n"
      "candidate exceeds --max-ulp, 2 bad input or usage; certify also uses 3 (UNDECIDED). See SUBCOMMAND --help."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("attncert ") + ATTNCERT_VERSION);

  auto* check = app.add_subcommand("check", "Run the article's constructions (all, or the IDs given) and report every claim.");
  check->footer(
      "Examples:\n"
      "  attncert check                               all checks in binary64 and mpfr256\n"
      "  attncert check two-token --formats binary16,bfloat16,binary32,binary64,mpfr256\n"
      "  attncert check causal-mask --policies numpy,absolute:1e-6 --format json --out report.json\n"
      "  attncert check --list\n"
      "Formats: binary16, bfloat16, binary32, binary64, mpfrN, mpfiN (N bits, >= 24).\n"
      "Policies: numpy, matlab, torch[:RTOL[:ATOL]], lapack[:RCOND], eigen, absolute:TAU, relative:TAU\n"
      "  (eps is the machine epsilon of the format the matrix was formed in).");
  std::vector<std::string> ids;
  bool list = false;
  std::string formats = "binary64,mpfr256", policies = "numpy,matlab,torch,lapack,eigen", out_format = "text", out_path;
  std::uint64_t seed = 20261129;
  unsigned certify_bits = 128, certify_max_bits = 4096;
  bool verbose = false;
  check->add_option("ids", ids, "Check IDs (default: all; see --list)");
  check->add_flag("--list", list, "List the checks with their sections and proof files, then exit");
  check->add_option("--formats", formats, "Comma-separated evaluation formats")->capture_default_str();
  check->add_option("--policies", policies, "Comma-separated numerical-rank policies")->capture_default_str();
  check->add_option("--format", out_format, "Report format: text, json, md or csv")->capture_default_str();
  check->add_option("--out", out_path, "Write the report to FILE (atomically) instead of stdout");
  check->add_option("--seed", seed, "Seed of the random instances")->capture_default_str();
  check->add_option("--certify-bits", certify_bits, "Starting MPFI precision of certified witnesses")->capture_default_str();
  check->add_option("--certify-max-bits", certify_max_bits, "Escalation cap of certified witnesses")->capture_default_str();
  check->add_flag("--verbose", verbose, "Text report: the settings and every claim (default: a one-screen summary per check)");

  auto* rank = app.add_subcommand("rank", "Certified rank of scores, attention, output or residual of one attention layer.");
  rank->footer(
      "The exact rank is an interval [lo, hi] with witnesses (the transcendence method, proofs/P08):\n"
      "lo from a nonzero minor modulo a prime, hi from structure or a verified polynomial kernel.\n"
      "Matrices: FILE.npy (float16/32/64, int, bool) or FILE.json ([[\"3/7\", 0.5], ...], read exactly).\n"
      "Examples:\n"
      "  attncert rank --scores S.json --mask causal\n"
      "  attncert rank --q Q.npy --k K.npy --v V.npy --object output --format json\n"
      "  attncert rank --q Q.npy --k K.npy --v V.npy --x X.npy --object residual --formats binary16,binary64");
  rank_args ra;
  rank->add_option("--scores", ra.scores, "Score matrix S (used as given)");
  rank->add_option("--q", ra.q, "Queries Q (n_q x d)");
  rank->add_option("--k", ra.k, "Keys K (n_k x d)");
  rank->add_option("--scale", ra.scale, "Scale of QK^T: a rational (\"1/8\", \"0.125\") or 1/sqrt(d) (default)");
  rank->add_option("--mask", ra.mask, "none, causal, or a boolean matrix file (true = allowed)")->capture_default_str();
  rank->add_option("--v", ra.v, "Values V (n_k x d_v), for output and residual");
  rank->add_option("--x", ra.x, "Residual stream X (n_q x d_v), for residual");
  rank->add_option("--object", ra.object, "scores, attention, output or residual")->capture_default_str();
  rank->add_option("--formats", ra.formats, "Formats in which the matrix is formed for numerical ranks")->capture_default_str();
  rank->add_option("--policies", ra.policies, "Numerical-rank policies")->capture_default_str();
  rank->add_option("--max-precision", ra.max_precision, "Cap (bits) of the singular-value enclosures")->capture_default_str();
  rank->add_option("--seed", ra.seed, "Seed of the modular evaluation points")->capture_default_str();
  rank->add_option("--format", ra.out_format, "text or json")->capture_default_str();
  rank->add_option("--out", ra.out_path, "Write the report to FILE (atomically) instead of stdout");

  attncert::cli::oracle_args oa;
  auto* oracle = attncert::cli::add_oracle_subcommand(app, oa);
  auto run_certify_commands = attncert::cli::add_certify_commands(app);
  const auto drift_commands = attncert::cli::add_drift_commands(app);  // drift, figures

  // Every subcommand that reads files takes the one limit on input files (README "Limits on input").
  std::size_t max_input_bytes = io::default_max_input_bytes;
  for (const char* name : {"rank", "oracle", "certify", "verify-certificate"})
    app.get_subcommand(name)
        ->add_option("--max-input-bytes", max_input_bytes, "Largest input file read, in bytes (more is rejected, exit 2)")
        ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "attncert: " << e.what() << " (see attncert --help)\n";
    return 2;
  }
  try {
    io::set_max_input_bytes(max_input_bytes);
    if (const int rc = run_certify_commands(); rc >= 0) return rc;
    if (*rank) return run_rank_command(ra, command);
    if (*oracle) return attncert::cli::run_oracle_command(oa, command);
    if (const int rc = drift_commands->run(command); rc >= 0) return rc;
    if (*check)
      return run_check_command(ids, list, formats, policies, out_format, out_path, seed, certify_bits, certify_max_bits,
                               command, verbose);
  } catch (const attncert::input_error& e) {  // messages may echo input: kept on one line
    std::cerr << "attncert: " << one_line(e.what(), 4096) << "\n";
    return 2;
  } catch (const std::invalid_argument& e) {
    std::cerr << "attncert: " << one_line(e.what(), 4096) << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "attncert: internal error: " << one_line(e.what(), 4096) << "\n";
    return 70;  // EX_SOFTWARE: a bug, not bad input
  }
  return 2;
}
