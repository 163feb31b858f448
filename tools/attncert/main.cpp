// tools/attncert/main.cpp — the command-line front end.  Thin: parse, call checks, write.
//
// Exit status (cli_common.hpp, README "Exit status"): 0 success, 1 refuted / failed, 2 bad input
// or usage (one line on stderr, no partial output file left behind), 3 undecided (certify,
// verify-certificate), 70 internal error, 130 interrupted.
#include <CLI/CLI.hpp>
#include <iostream>
#include <sstream>
#include <unistd.h>

#include "attncert/field.hpp"
#include "attncert/io/bounded_input.hpp"
#include "attncert/io/matrix_input.hpp"
#include "attncert/memory.hpp"
#include "attncert/rank/numerical.hpp"
#include "attncert/rank/spec.hpp"
#include "attncert/report/rank.hpp"
#include "attncert/report/writers.hpp"
#include "audit_command.hpp"
#include "block_command.hpp"
#include "certify_command.hpp"
#include "checks/common.hpp"
#include "checks/spec.hpp"
#include "cli_common.hpp"
#include "cli_options.hpp"
#include "oracle_command.hpp"
#include "drift_command.hpp"

namespace {

using namespace attncert;

struct check_args {
  std::vector<std::string> ids;
  bool list = false;
  std::string formats = "binary64,mpfr256", policies = "numpy,matlab,torch,lapack,eigen", out_format = "text", out_path;
  std::uint64_t seed = 20261129;
  unsigned certify_bits = 128, certify_max_bits = 4096;
  bool verbose = false;
  double max_seconds = 0;
};

int run_check_command(const check_args& a, const std::string& command) {
  const auto& ids = a.ids;
  const auto& reg = checks::registry();
  cli::command_output out;
  if (a.list) {
    std::ostringstream os;
    for (const auto& c : reg) os << c.id << "\t" << c.section << "\t" << c.title << "\t" << c.proof << "\n";
    out.report(a.out_path, os.str());
    out.commit();
    return 0;
  }
  checks::check_spec spec;
  spec.ids = ids;
  spec.formats = a.formats;
  spec.policies = a.policies;
  spec.seed = a.seed;
  spec.certify_bits = a.certify_bits;
  spec.certify_max_bits = a.certify_max_bits;
  spec.max_seconds = a.max_seconds;
  const checks::check_run run = checks::build_check_run(spec);
  const std::vector<const checks::check_entry*>& chosen = run.chosen;
  const checks::run_settings& rs = run.settings;
  const auto fmt = report::parse_output_format(a.out_format);

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
  if (a.max_seconds > 0) doc.settings["max_seconds"] = a.max_seconds;
  doc.checks = checks::run_checks(chosen, rs, [&](std::size_t k) {
    if (tty) std::cerr << "\r[" << (k + 1) << "/" << chosen.size() << "] " << chosen[k]->id << "            " << std::flush;
  });
  if (tty) std::cerr << "\r" << std::string(40, ' ') << "\r" << std::flush;
  std::ostringstream os;
  report::write(os, doc, fmt, report::write_options{a.verbose});
  out.report(a.out_path, os.str());
  out.commit();
  const auto s = doc.totals();
  if (s.fail > 0 || s.undecided > s.not_computed) return 1;
  return s.not_computed > 0 ? cli::exit_undecided : cli::exit_ok;  // PARTIAL, nothing failed or undecided in what was computed
}

struct rank_args {
  std::string scores, q, k, scale, mask = "none", v, x, object = "attention", formats = "binary16,bfloat16,binary32,binary64,mpfr256";
  std::string policies = "numpy,matlab,torch,lapack,eigen", out_format = "text", out_path;
  unsigned max_precision = 4096;
  std::uint64_t seed = 20261129;
  bool formats_given = false;
  double max_seconds = 0, sigma_rel_width = 0;
  std::size_t deflate_max_k = 64;
  double deflate_seconds = 120;
  unsigned threads = 2;
};

int run_rank_command(const rank_args& a, const std::string& command) {
  rank_spec spec;
  // The files, read exactly (io/matrix_input.hpp), each described in the report under its field.
  const std::pair<const std::string*, rank_matrix_input*> files[] = {
      {&a.scores, &spec.scores}, {&a.q, &spec.q}, {&a.k, &spec.k}, {&a.v, &spec.v}, {&a.x, &spec.x}};
  const char* names[] = {"scores", "q", "k", "v", "x"};
  for (std::size_t t = 0; t < std::size(files); ++t) {
    const std::string& file = *files[t].first;
    if (file.empty()) continue;
    const matrix<mpq_rational>& m = files[t].second->exact.emplace(io::read_exact_matrix(file, field(names[t])));
    spec.inputs[field(names[t])] = {{"file", file}, {"shape", {m.rows(), m.cols()}}};
  }
  spec.scale = a.scale;
  const cli::mask_choice mc = cli::parse_mask(a.mask);
  spec.mask = mc.type == cli::mask_choice::kind::none ? "none" : mc.type == cli::mask_choice::kind::causal ? "causal" : "matrix";
  if (!mc.file.empty()) {
    spec.mask_matrix = io::read_bool_matrix(mc.file, field("mask"));
    spec.inputs[field("mask")] = mc.file;
  }
  spec.object = a.object;
  spec.formats = a.formats;
  spec.policies = a.policies;
  spec.formats_explicit = a.formats_given;
  spec.max_precision = a.max_precision;
  spec.seed = a.seed;
  spec.max_seconds = a.max_seconds;
  spec.sigma_rel_width = a.sigma_rel_width;
  spec.deflate_max_k = static_cast<long long>(a.deflate_max_k);
  spec.deflate_seconds = a.deflate_seconds;
  spec.threads = a.threads;
  rank_request req = build_rank_request(spec);
  req.progress = cli::stage_progress("rank");
  const rank_analysis analysis = analyse_rank(req);
  cli::clear_progress();
  std::ostringstream os;
  if (a.out_format == "json") os << report::to_json(analysis, command).dump(2) << "\n";
  else report::write_rank_text(os, analysis);
  cli::command_output out;
  out.report(a.out_path, os.str());
  out.commit();
  return 0;
}

CLI::App* add_check_subcommand(CLI::App& app, check_args& a) {
  auto* check = app.add_subcommand("check", "Run the article's constructions (all, or the IDs given) and report every claim.");
  check->footer(
      "Examples:\n"
      "  attncert check                               all checks in binary64 and mpfr256\n"
      "  attncert check two-token --formats binary16,bfloat16,binary32,binary64,mpfr256\n"
      "  attncert check causal-mask --policies numpy,absolute:1e-6 --format json --out report.json\n"
      "  attncert check --list\n"
      "Formats: binary16, bfloat16, binary32, binary64, mpfrN, mpfiN (N bits, >= 24).\n"
      "Policies: numpy, matlab, torch[:RTOL[:ATOL]], lapack[:RCOND], eigen, absolute:TAU, relative:TAU\n"
      "  (eps is the machine epsilon of the format the matrix was formed in).\n" +
      cli::exit_codes_text({{cli::exit_ok, "every claim holds"},
                            {cli::exit_failed, "a claim failed or is undecided"},
                            {cli::exit_undecided, "PARTIAL: checks not computed within --max-seconds, and every computed claim holds"}}));
  check->add_option("ids", a.ids, "Check IDs (default: all; see --list)");
  check->add_flag("--list", a.list, "List the checks with their sections and proof files, then exit");
  check->add_option("--formats", a.formats, "Comma-separated evaluation formats")->capture_default_str();
  check->add_option("--policies", a.policies, "Comma-separated numerical-rank policies")->capture_default_str();
  cli::add_format_option(check, a.out_format, {"text", "json", "md", "csv"});
  cli::add_out_option(check, a.out_path);
  cli::add_seed_option(check, a.seed, "Seed of the random instances");
  check->add_option("--certify-bits", a.certify_bits, "Starting MPFI precision of certified witnesses")
      ->check(cli::non_negative_integer())
      ->capture_default_str();
  check->add_option("--certify-max-bits", a.certify_max_bits, "Escalation cap of certified witnesses")
      ->check(cli::non_negative_integer())
      ->capture_default_str();
  check->add_flag("--verbose", a.verbose, "Text report: the settings and every claim (default: a one-screen summary per check)");
  check->add_option("--max-seconds", a.max_seconds,
                    "Budget of the run, in [0, 1e7] (0: none): past it the check under way stops at its next poll and no\n"
                    "check is started; each is reported as one undecided claim 'not-computed', the report is PARTIAL, and\n"
                    "the exit status is 3 unless a computed claim failed or is undecided")
      ->check(cli::seconds_budget());
  return check;
}

CLI::App* add_rank_subcommand(CLI::App& app, rank_args& a) {
  auto* rank = app.add_subcommand("rank", "Certified rank of scores, attention, output or residual of one attention layer.");
  rank->footer(
      "The exact rank is an interval [lo, hi] with witnesses (the transcendence method, proofs/P08):\n"
      "lo from a nonzero minor modulo a prime, hi from structure or a verified polynomial kernel.\n"
      "Matrices: FILE.npy (float16/32/64, int, bool) or FILE.json ([[\"3/7\", 0.5], ...], read exactly).\n"
      "Examples:\n"
      "  attncert rank --scores S.json --mask causal\n"
      "  attncert rank --q Q.npy --k K.npy --v V.npy --object output --format json\n"
      "  attncert rank --q Q.npy --k K.npy --v V.npy --x X.npy --object residual --formats binary16,binary64\n" +
      cli::exit_codes_text({{cli::exit_ok, "done (the report gives the rank)"}}));
  rank->add_option("--scores", a.scores, "Score matrix S (used as given)");
  rank->add_option("--q", a.q, "Queries Q (n_q x d)");
  rank->add_option("--k", a.k, "Keys K (n_k x d)");
  cli::add_scale_option(rank, a.scale, "Scale of QK^T: a rational (\"1/8\", \"0.125\") or 1/sqrt(d) (default)");
  cli::add_mask_option(rank, a.mask, "a boolean matrix file (true = allowed)");
  rank->add_option("--v", a.v, "Values V (n_k x d_v), for output and residual");
  rank->add_option("--x", a.x, "Residual stream X (n_q x d_v), for residual");
  rank->add_option("--object", a.object, "scores, attention, output or residual")->capture_default_str();
  rank->add_option("--formats", a.formats,
                   "Formats in which the matrix is formed for numerical ranks (mpfrN is left out of the default above "
                   "256 rows or columns, with a time estimate; naming it runs it)")
      ->capture_default_str()
      ->each([&a](const std::string&) { a.formats_given = true; });
  rank->add_option("--max-seconds", a.max_seconds,
                   "Stop after this many seconds: unfinished parts are reported as such (PARTIAL), never silently")
      ->check(cli::seconds_budget());
  rank->add_option("--sigma-rel-width", a.sigma_rel_width,
                   "Relative width asked of every singular value certified > 0 (default: none)")
      ->check(CLI::NonNegativeNumber);
  rank->add_option("--deflate-max-k", a.deflate_max_k,
                   "Above 128 rows, a square object escalates its undecided smallest singular values on a deflated "
                   "subspace (MPFR, doubling from 128 bits to --max-precision; bound it with --max-seconds): at most "
                   "this many of them (0: never, they stay UNDECIDED)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  rank->add_option("--deflate-seconds", a.deflate_seconds,
                   "Time budget of that escalation: a precision is not started when 3x the previous one's time would "
                   "pass it (0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cli::add_threads_option(rank, a.threads)
      ->description("Threads of the MPFI scores and softmax rows and of the deflated escalation's MPFR products (at a given precision the enclosures do not depend on it; faster precisions may leave room in --deflate-seconds for the next one)");
  rank->add_option("--policies", a.policies, "Numerical-rank policies")->capture_default_str();
  cli::add_max_precision_option(rank, a.max_precision, 128, max_precision_bits, "Cap (bits) of the singular-value enclosures");
  cli::add_seed_option(rank, a.seed, "Seed of the modular evaluation points");
  cli::add_format_option(rank, a.out_format, {"text", "json"});
  cli::add_out_option(rank, a.out_path);
  return rank;
}

}  // namespace

int main(int argc, char** argv) {
  attncert::install_allocation_failure_handlers();  // GMP/FLINT out of memory: one line, not an abort
  const std::string command = cli::join_args(argc, argv);
  CLI::App app{
      "attncert — exact and arbitrary-precision verification of claims about transformer attention.\n"
      "Verdicts: a claim passes only if the computed error is within a tolerance fixed before computing;\n"
      "a numerical rank that differs from the exact rank is a measured divergence, not a failure.\n"
      "See SUBCOMMAND --help for each subcommand's options and exit status."};
  app.footer(cli::exit_codes_text({}));
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("attncert ") + ATTNCERT_VERSION);

  check_args ca;
  auto* check = add_check_subcommand(app, ca);
  rank_args ra;
  auto* rank = add_rank_subcommand(app, ra);
  cli::oracle_args oa;
  auto* oracle = cli::add_oracle_subcommand(app, oa);
  auto run_certify_commands = cli::add_certify_commands(app);
  const auto drift_commands = cli::add_drift_commands(app);  // drift, figures
  const auto run_audit_command = cli::add_audit_command(app);
  const auto run_block_command = cli::add_block_command(app);

  // Every subcommand that reads files takes the one limit on input files (README "Limits on input").
  std::size_t max_input_bytes = io::default_max_input_bytes;
  for (const char* name : {"rank", "oracle", "certify", "verify-certificate", "audit"})
    app.get_subcommand(name)
        ->add_option("--max-input-bytes", max_input_bytes, "Largest input file read, in bytes (more is rejected, exit 2)")
        ->check(cli::non_negative_integer())
        ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (...) {
    return cli::exit_code_of_current_exception();
  }
  cli::install_interrupt_handlers();
  try {
    io::set_max_input_bytes(max_input_bytes);
    if (const int rc = run_certify_commands(); rc >= 0) return rc;
    if (*rank) return run_rank_command(ra, command);
    if (*oracle) return cli::run_oracle_command(oa, command);
    if (const int rc = drift_commands->run(command); rc >= 0) return rc;
    if (*check) return run_check_command(ca, command);
    if (const int rc = run_audit_command(command); rc >= 0) return rc;
    if (const int rc = run_block_command(command); rc >= 0) return rc;
  } catch (...) {
    return cli::exit_code_of_current_exception();
  }
  return cli::exit_usage;
}
