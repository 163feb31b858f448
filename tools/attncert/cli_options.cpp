// tools/attncert/cli_options.cpp — shared options of the subcommands, see cli_options.hpp.
#include "cli_options.hpp"

#include <cstdlib>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "attncert/error.hpp"
#include "cli_common.hpp"

namespace attncert::cli {

namespace fs = std::filesystem;

const CLI::Validator& non_negative_integer() {
  static const CLI::Validator v(
      [](std::string& s) -> std::string {
        if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
          return "'" + one_line(s) + "' is not a non-negative integer";
        return {};
      },
      "");  // the option's type already reads UINT
  return v;
}

const CLI::Validator& seconds_budget() {
  static const CLI::Validator v(
      [](std::string& s) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !(x >= 0 && x <= 1e7))
          return "'" + one_line(s) + "' is not a number of seconds in [0, 1e7] (0: no limit)";
        return {};
      },
      "in [0, 1e7]");
  return v;
}

const CLI::Validator& writable_file() {
  static const CLI::Validator v(
      [](std::string& s) -> std::string {
        if (s == "-") return {};
        if (s.empty()) return "an empty file name";
        const fs::path p(s);
        std::error_code ec;
        if (fs::is_directory(p, ec)) return "cannot write '" + one_line(s, 4096) + "': it is a directory";
        const fs::path dir = p.parent_path();
        if (!dir.empty() && !fs::is_directory(dir, ec)) return "cannot write '" + one_line(s, 4096) + "': no such directory";
        return {};
      },
      "FILE");
  return v;
}

namespace {

CLI::Validator non_empty(const std::string& what) {  // check() keeps a copy
  return CLI::Validator(
      [what](std::string& s) -> std::string { return s.empty() ? "an empty value is not " + what : std::string(); }, "");
}

std::string join(const std::vector<std::string>& v, const char* last) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : i + 1 == v.size() ? last : ", ") + v[i];
  return s;
}

}  // namespace

CLI::Option* add_format_option(CLI::App* app, std::string& format, const std::vector<std::string>& allowed) {
  format = allowed.front();
  return app->add_option("--format", format, "Report format: " + join(allowed, " or "))
      ->check(CLI::IsMember(allowed))
      ->capture_default_str();
}

CLI::Option* add_out_option(CLI::App* app, std::string& out) {
  return app->add_option("--out", out, "Write the report to FILE (atomically) instead of stdout")->check(writable_file());
}

CLI::Option* add_mask_option(CLI::App* app, std::string& mask, const std::string& files) {
  return app->add_option("--mask", mask, "none, causal, or " + files)->check(non_empty("a mask"))->capture_default_str();
}

CLI::Option* add_scale_option(CLI::App* app, std::string& scale, const std::string& description) {
  return app->add_option("--scale", scale, description)->check(non_empty("a scale (give default or 1/sqrt(d))"));
}

CLI::Option* add_max_precision_option(CLI::App* app, unsigned& bits, unsigned lo, unsigned hi,
                                      const std::string& description) {
  return app->add_option("--max-precision", bits, description)
      ->check(non_negative_integer())
      ->check(CLI::Range(lo, hi))
      ->capture_default_str();
}

CLI::Option* add_threads_option(CLI::App* app, unsigned& threads) {
  return app->add_option("--threads", threads, "Worker threads")
      ->check(non_negative_integer())
      ->check(CLI::Range(1u, 256u))
      ->capture_default_str();
}

CLI::Option* add_seed_option(CLI::App* app, std::uint64_t& seed, const std::string& description) {
  return app->add_option("--seed", seed, description)->check(non_negative_integer())->capture_default_str();
}

mask_choice parse_mask(const std::string& mask) {
  if (mask == "none") return {};
  if (mask == "causal") return {mask_choice::kind::causal, {}};
  return {mask_choice::kind::file, mask};
}

bool scale_is_default(const std::string& scale) { return scale.empty() || scale == "default" || scale == "1/sqrt(d)"; }

std::string exit_codes_text(const std::vector<std::pair<int, std::string>>& own) {
  std::vector<std::pair<int, std::string>> rows = own;
  if (own.empty())
    rows = {{0, "success: every claim holds, CERTIFIED, a valid certificate, the candidates pass, done"},
            {1, "refuted or failed: a claim fails or is undecided (check), REFUTED, an invalid certificate,\n"
                "       a candidate exceeds --max-ulp"},
            {3, "undecided / cannot check / PARTIAL (certify, verify-certificate; check, oracle, figures past --max-seconds)"}};
  rows.emplace_back(exit_usage, "bad input or usage, or an input too large for this machine's memory\n"
                                   "       (one line on stderr; no output file left behind)");
  rows.emplace_back(exit_internal, "internal error (a bug in attncert: please report it; no output file left behind)");
  rows.emplace_back(exit_interrupted, "interrupted by SIGINT or SIGTERM (no output file left behind)");
  std::stable_sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::ostringstream os;
  os << "Exit status:";
  for (const auto& [code, text] : rows) {
    std::string c = std::to_string(code);
    os << "\n  " << c << std::string(5 - c.size(), ' ') << text;
  }
  return os.str();
}

}  // namespace attncert::cli
