// Tests of the report writers (text, JSON, Markdown, CSV) on a small hand-built document.
#define BOOST_TEST_MODULE report_writers
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "attncert/error.hpp"
#include "attncert/field.hpp"
#include "attncert/report/model.hpp"
#include "attncert/report/writers.hpp"

using namespace attncert;
using namespace attncert::report;

namespace {

const std::string interval = "[1.0e-01, 2.0e-01]";
const std::string tricky_instance = "a=\"1\", b=2";
const std::string tricky_note = "line one\nline two, with comma and \"quotes\"";
const std::string pipe_statement = "det A = tanh a | a > 0";
const std::string pipe_object = "X+AV|concat";

claim_row make_claim(std::string claim, std::string statement, std::string instance, std::string format,
                     std::string tier, std::string expected, std::string computed, std::string abs_error,
                     std::string rel_error, std::string tolerance, std::string rule, verdict v,
                     std::string note = {}) {
  claim_row r;
  r.claim = std::move(claim);
  r.statement = std::move(statement);
  r.instance = std::move(instance);
  r.format = std::move(format);
  r.tier = std::move(tier);
  r.expected = std::move(expected);
  r.computed = std::move(computed);
  r.abs_error = std::move(abs_error);
  r.rel_error = std::move(rel_error);
  r.tolerance = std::move(tolerance);
  r.tolerance_rule = std::move(rule);
  r.result = v;
  r.note = std::move(note);
  return r;
}

document sample() {
  document doc;
  doc.version = "0.1.0";
  doc.command = "attncert check --format binary64,mpfi128 --output \"report, final.json\"";
  doc.settings = {{"formats", {"binary64", "binary32", "mpfi128", "binary16"}},
                  {"rank_policies", {"numpy", "matlab"}},
                  {"seed", 7}};

  check_report a;
  a.id = "two-token";
  a.title = "Two tokens, \"closed form\"";
  a.section = "§4–6";
  a.proof = "proofs/two_token.md";
  a.error_model = "Each operation rounds once (|delta| <= u).\nTolerances are fixed before computing.";
  a.claims.push_back(make_claim("det-equals-tanh", pipe_statement, "a=1e-20", "binary64", "approx",
                                "1.0000000000000000000e-20", "1.0000000000000000209e-20", "2.09e-37",
                                "2.0900000000000000000e-17", "4.4408920985006262e-16", "relative 2*eps",
                                verdict::pass));
  a.claims.push_back(make_claim("p-squared, cancellation", "p^2 - (1-p)^2 = 2p - 1", tricky_instance, "binary32",
                                "approx", "0.5", "0.50000011920928955078125", "1.1920928955078125e-07",
                                "2.384185791015625e-07", "5.9604645e-08", "absolute 1*eps (cancellation)",
                                verdict::fail, tricky_note));
  a.claims.push_back(make_claim("det-equals-tanh", pipe_statement, "a=1e-20", "mpfi128", "enclosure", "0.15",
                                interval, "[0, 5.0e-02]", "[0, 3.4e-01]", "1e-2", "absolute 1e-2", verdict::undecided));
  a.claims.push_back(make_claim("det-equals-tanh", pipe_statement, "a=1e-20", "binary16", "approx", "", "", "", "",
                                "", "", verdict::skipped, "1e-20 underflows in binary16 | skipped"));

  check_report b;
  b.id = "identical-values";
  b.title = "Identical value vectors";
  b.section = "§7";
  b.proof = "proofs/identical_values.md";
  b.error_model = "SVD backward stable.";
  rank_row s;
  s.object = "S";
  s.instance = "n=4, d=2";
  s.format = "binary64";
  s.svd_type = "binary64";
  s.rows = 4;
  s.cols = 4;
  s.exact_rank = 2;
  s.exact_rank_source = "exact elimination over Q";
  s.numerical = {{"numpy", "1.7763568394002505e-15", 3}, {"matlab", "8.8817841970012523e-16", 2}};
  s.singular_values = {"2.0", "1.0", "3.1e-16", "1.2345678901234567890e-17"};
  s.condition_number = "1.62e+17";
  s.diverges = true;
  rank_row x;
  x.object = pipe_object;
  x.instance = "n=4";
  x.format = "binary16";
  x.svd_type = "binary32";
  x.rows = 4;
  x.cols = 6;
  x.exact_rank = 4;
  x.exact_rank_source = "analytic: det A = tanh a > 0";
  x.numerical = {{"numpy", "2.9e-06", 4}, {"matlab", "2.9e-06", 4}};
  x.singular_values = {"3.0", "2.0", "1.0", "0.5"};
  x.condition_number = "6";
  x.diverges = false;
  b.ranks = {s, x};
  b.claims.push_back(make_claim("rank-s", "rank S = 2", "n=4, d=2", "exact", "exact", "2", "2", "0", "0", "0",
                                "exact", verdict::pass));

  doc.checks = {a, b};
  return doc;
}

// The text report in its two modes.
void write_text_summary(std::ostream& os, const document& doc) { write_text(os, doc, write_options{false}); }
void write_text_verbose(std::ostream& os, const document& doc) { write_text(os, doc, write_options{true}); }

std::string render(void (*writer)(std::ostream&, const document&), const document& doc) {
  std::ostringstream os;
  writer(os, doc);
  return os.str();
}

/// A small RFC 4180 reader: fields separated by commas, records by CRLF or LF, fields in
/// double quotes may contain commas, line breaks and doubled quotes.
std::vector<std::vector<std::string>> read_csv(const std::string& text) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false, field_started = false;
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          i += 2;
          continue;
        }
        quoted = false;
        ++i;
        continue;
      }
      field += c;
      ++i;
      continue;
    }
    if (c == '"') {
      BOOST_REQUIRE_MESSAGE(!field_started, "quote inside an unquoted field at offset " << i);
      quoted = true;
      field_started = true;
      ++i;
    } else if (c == ',') {
      record.push_back(field);
      field.clear();
      field_started = false;
      ++i;
    } else if (c == '\r' || c == '\n') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      ++i;
      record.push_back(field);
      records.push_back(record);
      record.clear();
      field.clear();
      field_started = false;
    } else {
      field += c;
      field_started = true;
      ++i;
    }
  }
  BOOST_REQUIRE_MESSAGE(!quoted, "unterminated quoted field");
  if (field_started || !record.empty()) {
    record.push_back(field);
    records.push_back(record);
  }
  return records;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream is(text);
  std::string line;
  while (std::getline(is, line)) out.push_back(line);
  return out;
}

std::size_t code_points(const std::string& s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0u) != 0x80u; }));
}

/// Number of '|' in a Markdown line that are not preceded by a backslash escape.
std::size_t unescaped_pipes(const std::string& line) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\') {
      ++i;  // skip the escaped character
      continue;
    }
    if (line[i] == '|') ++n;
  }
  return n;
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

}  // namespace

// ---- JSON ----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(json_structure_and_summary) {
  const document doc = sample();
  const nlohmann::json j = to_json(doc);
  for (const char* key : {"tool", "version", "command", "settings", "checks", "summary"})
    BOOST_TEST(j.contains(key), "missing top-level key " << key);
  BOOST_TEST(j["tool"] == "attncert");
  BOOST_TEST(j["settings"]["seed"] == 7);
  BOOST_REQUIRE(j["checks"].is_array());
  BOOST_REQUIRE_EQUAL(j["checks"].size(), 2u);

  const auto& c0 = j["checks"][0];
  for (const char* key : {"id", "title", "section", "proof", "error_model", "claims", "ranks"})
    BOOST_TEST(c0.contains(key), "missing check key " << key);
  BOOST_REQUIRE_EQUAL(c0["claims"].size(), 4u);
  const auto& claim = c0["claims"][0];
  for (const char* key : {"claim", "statement", "instance", "format", "tier", "expected", "computed", "abs_error",
                          "rel_error", "tolerance", "tolerance_rule", "verdict"})
    BOOST_TEST(claim.contains(key), "missing claim key " << key);
  BOOST_TEST(!claim.contains("note"), "an empty note is omitted");
  BOOST_TEST(c0["claims"][1]["note"] == tricky_note);
  BOOST_TEST(c0["claims"][0]["verdict"] == "pass");
  BOOST_TEST(c0["claims"][1]["verdict"] == "fail");
  BOOST_TEST(c0["claims"][2]["verdict"] == "undecided");
  BOOST_TEST(c0["claims"][3]["verdict"] == "skipped");
  BOOST_TEST(c0["claims"][0]["computed"] == "1.0000000000000000209e-20", "numbers are never re-rounded");

  const auto& ranks = j["checks"][1]["ranks"];
  BOOST_REQUIRE_EQUAL(ranks.size(), 2u);
  for (const char* key : {"object", "instance", "format", "svd_type", "shape", "exact_rank", "exact_rank_source",
                          "numerical", "singular_values", "condition_number", "diverges"})
    BOOST_TEST(ranks[0].contains(key), "missing rank key " << key);
  BOOST_TEST(ranks[0]["diverges"].is_boolean());
  BOOST_TEST(ranks[0]["diverges"].get<bool>() == true);
  BOOST_TEST(ranks[1]["diverges"].is_boolean());
  BOOST_TEST(ranks[1]["diverges"].get<bool>() == false);
  BOOST_TEST(ranks[0]["exact_rank"].is_number_integer());
  BOOST_TEST(ranks[0]["exact_rank"].get<int>() == 2);
  BOOST_TEST(ranks[1]["shape"] == nlohmann::json::array({4, 6}));
  BOOST_REQUIRE_EQUAL(ranks[0]["numerical"].size(), 2u);
  BOOST_TEST(ranks[0]["numerical"][0]["policy"] == "numpy");
  BOOST_TEST(ranks[0]["numerical"][0]["threshold"] == "1.7763568394002505e-15");
  BOOST_TEST(ranks[0]["numerical"][0]["rank"].is_number_integer());
  BOOST_TEST(ranks[0]["numerical"][0]["rank"].get<int>() == 3);
  BOOST_TEST(ranks[0]["singular_values"].is_array());
  BOOST_TEST(ranks[0]["singular_values"][3] == "1.2345678901234567890e-17");
  BOOST_TEST(ranks[1]["object"] == pipe_object);

  const auto& s = j["summary"];
  for (const char* key : {"claims", "pass", "fail", "undecided", "skipped", "rank_rows", "divergences"}) {
    BOOST_TEST(s.contains(key), "missing summary key " << key);
    BOOST_TEST(s[key].is_number_integer(), key << " is an integer");
  }
  BOOST_TEST(s["pass"].get<int>() == 2);
  BOOST_TEST(s["fail"].get<int>() == 1);
  BOOST_TEST(s["undecided"].get<int>() == 1);
  BOOST_TEST(s["skipped"].get<int>() == 1);
  BOOST_TEST(s["claims"].get<int>() == 4, "claims = pass + fail + undecided, skipped excluded");
  BOOST_TEST(s["rank_rows"].get<int>() == 2);
  BOOST_TEST(s["divergences"].get<int>() == 1);
}

BOOST_AUTO_TEST_CASE(json_round_trip_and_layout) {
  const document doc = sample();
  const std::string text = render(write_json, doc);
  BOOST_REQUIRE(!text.empty());
  BOOST_TEST(text.back() == '\n', "trailing newline");
  BOOST_TEST(contains(text, "\n  \"tool\": \"attncert\""), "2-space indent");
  const nlohmann::json parsed = nlohmann::json::parse(text);
  BOOST_TEST(parsed == to_json(doc));

  // top-level keys in the documented order
  const auto ordered = nlohmann::ordered_json::parse(text);
  std::vector<std::string> keys;
  for (const auto& item : ordered.items()) keys.push_back(item.key());
  const std::vector<std::string> want = {"tool", "version", "command", "settings", "checks", "summary"};
  BOOST_TEST(keys == want, boost::test_tools::per_element());
}

// ---- CSV -----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(csv_parses_back) {
  const document doc = sample();
  const std::string text = render(write_csv, doc);
  const auto rows = read_csv(text);
  // header + 5 claims + 2 rank rows x 2 policies
  BOOST_REQUIRE_EQUAL(rows.size(), 1u + 5u + 4u);
  for (const auto& r : rows) BOOST_TEST(r.size() == 17u);
  const std::vector<std::string> header = {"kind", "check", "claim_or_object", "instance", "format", "tier",
                                           "expected", "computed", "abs_error", "rel_error", "tolerance", "verdict",
                                           "exact_rank", "policy", "threshold", "numerical_rank", "diverges"};
  BOOST_TEST(rows[0] == header, boost::test_tools::per_element());

  // claims of check one, in order
  BOOST_TEST(rows[1][0] == "claim");
  BOOST_TEST(rows[1][1] == "two-token");
  BOOST_TEST(rows[1][11] == "pass");
  BOOST_TEST(rows[1][7] == "1.0000000000000000209e-20");
  BOOST_TEST(rows[2][2] == "p-squared, cancellation");
  BOOST_TEST(rows[2][3] == tricky_instance);
  BOOST_TEST(rows[2][11] == "fail");
  BOOST_TEST(rows[3][7] == interval);
  BOOST_TEST(rows[3][11] == "undecided");
  BOOST_TEST(rows[4][11] == "skipped");
  for (std::size_t k = 1; k <= 5; ++k)
    for (std::size_t col = 12; col < 17; ++col) BOOST_TEST(rows[k][col].empty(), "rank columns empty for claims");

  // rank rows: (S, numpy), (S, matlab), (X+AV|concat, numpy), (X+AV|concat, matlab)
  std::size_t rank_rows = 0;
  for (const auto& r : rows)
    if (r[0] == "rank") ++rank_rows;
  BOOST_TEST(rank_rows == 4u);
  BOOST_TEST(rows[6][0] == "rank");
  BOOST_TEST(rows[6][1] == "identical-values");
  BOOST_TEST(rows[6][2] == "S");
  BOOST_TEST(rows[6][3] == "n=4, d=2");
  BOOST_TEST(rows[6][12] == "2");
  BOOST_TEST(rows[6][13] == "numpy");
  BOOST_TEST(rows[6][14] == "1.7763568394002505e-15");
  BOOST_TEST(rows[6][15] == "3");
  BOOST_TEST(rows[6][16] == "true");
  BOOST_TEST(rows[7][13] == "matlab");
  BOOST_TEST(rows[7][16] == "true");
  BOOST_TEST(rows[8][2] == pipe_object);
  BOOST_TEST(rows[8][16] == "false");
  BOOST_TEST(rows[9][15] == "4");
  for (std::size_t col = 5; col < 12; ++col) BOOST_TEST(rows[6][col].empty(), "claim columns empty for ranks");

  // a field with a line break, commas and quotes survives (notes are not in the CSV, so
  // put the tricky note into a claim id of a copy of the document)
  document d2 = sample();
  d2.checks[0].claims[0].claim = tricky_note;
  const auto rows2 = read_csv(render(write_csv, d2));
  BOOST_REQUIRE_EQUAL(rows2.size(), rows.size());
  BOOST_TEST(rows2[1][2] == tricky_note);
  BOOST_TEST(contains(render(write_csv, d2), "\"line one\nline two, with comma and \"\"quotes\"\"\""));
}

// ---- intervals are never touched in JSON / CSV ------------------------------------------

BOOST_AUTO_TEST_CASE(interval_strings_unchanged) {
  document doc;
  doc.version = "0.1.0";
  check_report c;
  c.id = "interval";
  c.claims.push_back(make_claim("enclosure", "x in X", "i", "mpfi64", "enclosure", interval, interval, interval,
                                interval, "1.0e-01", "absolute", verdict::undecided));
  doc.checks = {c};

  const auto rows = read_csv(render(write_csv, doc));
  BOOST_REQUIRE_EQUAL(rows.size(), 2u);
  for (std::size_t col = 6; col <= 9; ++col) BOOST_TEST(rows[1][col] == interval);
  BOOST_TEST(contains(render(write_csv, doc), "\"" + interval + "\""), "quoted because of the comma");

  const auto j = nlohmann::json::parse(render(write_json, doc));
  const auto& cl = j["checks"][0]["claims"][0];
  for (const char* key : {"expected", "computed", "abs_error", "rel_error"}) BOOST_TEST(cl[key] == interval);
  BOOST_TEST(to_json(doc)["checks"][0]["claims"][0]["computed"] == interval);
}

// ---- Markdown ------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(markdown_escapes_pipes) {
  const document doc = sample();
  const std::string md = render(write_markdown, doc);
  BOOST_TEST(contains(md, "## two-token"));
  BOOST_TEST(contains(md, "det A = tanh a \\| a \\> 0"));
  BOOST_TEST(contains(md, "X+AV\\|concat"));
  BOOST_TEST(contains(md, "underflows in binary16 \\| skipped"));
  BOOST_TEST(!contains(md, "X+AV|concat"));
  BOOST_TEST(contains(md, "line one<br>line two"), "line breaks inside a cell become <br>");
  BOOST_TEST(contains(md, "**DIVERGES**"));
  BOOST_TEST(contains(md, "summary: 4 claims"));

  // every row of a table has as many (unescaped) cell separators as its header
  const auto lines = lines_of(md);
  std::size_t tables = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty() || lines[i][0] != '|') continue;
    if (i > 0 && !lines[i - 1].empty() && lines[i - 1][0] == '|') continue;  // not a table start
    ++tables;
    const std::size_t n = unescaped_pipes(lines[i]);
    for (std::size_t k = i + 1; k < lines.size() && !lines[k].empty() && lines[k][0] == '|'; ++k)
      BOOST_TEST(unescaped_pipes(lines[k]) == n, "table row '" << lines[k] << "'");
  }
  BOOST_TEST(tables == 6u);  // 4 claim formats + 1 exact format + 1 rank table
}

// ---- text ----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(text_report) {
  const document doc = sample();
  const std::string text = render(write_text_verbose, doc);
  const auto lines = lines_of(text);
  BOOST_REQUIRE(!lines.empty());
  BOOST_TEST(lines.back() ==
             "summary: 4 claims, 2 pass, 1 fail, 1 undecided, 1 skipped; 2 rank measurements, 1 divergences "
             "(numerical rank != exact rank; measured, not failures)");
  BOOST_TEST(contains(text, "== two-token — Two tokens, \"closed form\" (§4–6; proof: proofs/two_token.md)\n"));
  BOOST_TEST(contains(text, "error model: Each operation rounds once"));

  for (const char* tag : {"[PASS]", "[FAIL]", "[UNDECIDED]", "[SKIP]"}) BOOST_TEST(contains(text, tag), tag);

  // DIVERGES exactly on the row of S and on no other line
  std::size_t marked = 0;
  for (const auto& line : lines) {
    const bool is_s = line.rfind("    S ", 0) == 0;
    const bool is_x = line.rfind("    X+AV|concat ", 0) == 0;
    if (contains(line, "DIVERGES")) {
      ++marked;
      BOOST_TEST(is_s, "DIVERGES on an unexpected line: " << line);
    }
    if (is_s) BOOST_TEST(contains(line, "DIVERGES"));
    if (is_x) BOOST_TEST(!contains(line, "DIVERGES"));
  }
  BOOST_TEST(marked == 1u);

  // long numbers shortened to 12 significant digits; short intervals left alone
  BOOST_TEST(contains(text, "computed=1.00000000000000000209e-20") == false);
  BOOST_TEST(contains(text, "computed=1e-20 "), "rounded to 12 digits, trailing zeros dropped");
  BOOST_TEST(contains(text, "tol=4.44089209850e-16") == false);
  BOOST_TEST(contains(text, "tol=4.4408920985e-16"));
  BOOST_TEST(!contains(text, "1.0000000000000000209e-20"));
  BOOST_TEST(contains(text, "computed=" + interval));
  BOOST_TEST(contains(text, "computed=0.500000119209"));
  BOOST_TEST(contains(text, "1.23456789012e-17"), "sigma_min abbreviated");

  // readable at 100 columns
  for (const auto& line : lines) {
    if (line.rfind("summary:", 0) == 0) continue;
    BOOST_TEST(code_points(line) <= 100u, "too wide: " << line);
  }
  // the multi-line note is indented, not a bare line
  BOOST_TEST(contains(text, "note: line one\n"));
}

BOOST_AUTO_TEST_CASE(text_interval_rounded_outward) {
  document doc;
  check_report c;
  c.id = "outward";
  c.claims.push_back(make_claim("enc", "", "i", "mpfi128", "enclosure", "0.1",
                                "[0.12345678901234567, 0.12345678901234567]", "[-9.99999999999999e-01, 0]", "0",
                                "1e-2", "absolute", verdict::pass));
  doc.checks = {c};
  const std::string text = render(write_text_verbose, doc);
  BOOST_TEST(contains(text, "computed=[0.123456789012, 0.123456789013]"), text);
  // 15 significant digits, lower endpoint rounded toward -inf: the carry reaches the exponent
  BOOST_TEST(contains(text, "err=[-1e+00, 0]"), text);
}

// ---- text: the one-screen summary (default) ---------------------------------------------------

namespace {
/// The summary table's row of check `id`: its numbers (claims, pass, fail, undecided, skipped,
/// rank rows, divergences), parsed back from the text.
std::vector<std::size_t> summary_row(const std::string& text, const std::string& id) {
  for (const auto& line : lines_of(text)) {
    std::istringstream in(line);
    std::string first;
    if (!(in >> first) || first != id) continue;
    std::vector<std::size_t> out;
    for (std::size_t v; in >> v;) out.push_back(v);
    return out;
  }
  return {};
}

/// The same numbers counted here, independently of the writer and of document::totals().
std::vector<std::size_t> expected_row(const check_report& c) {
  std::vector<std::size_t> v(7, 0);
  for (const auto& r : c.claims) {
    if (r.result != verdict::skipped) ++v[0];
    ++v[r.result == verdict::pass ? 1 : r.result == verdict::fail ? 2 : r.result == verdict::undecided ? 3 : 4];
  }
  v[5] = c.ranks.size();
  for (const auto& r : c.ranks) v[6] += r.diverges;
  return v;
}
}  // namespace

BOOST_AUTO_TEST_CASE(text_summary_counts_per_check) {
  const document doc = sample();
  const std::string text = render(write_text_summary, doc);
  for (const auto& c : doc.checks) {
    const auto row = summary_row(text, c.id);
    const auto want = expected_row(c);
    BOOST_TEST(row == want, boost::test_tools::per_element());
  }
  // spelled out for the sample: two-token 3 claims (1 pass, 1 fail, 1 undecided) + 1 skipped;
  // identical-values 1 claim, 2 rank rows, 1 divergence
  BOOST_TEST(summary_row(text, "two-token") == (std::vector<std::size_t>{3, 1, 1, 1, 1, 0, 0}),
             boost::test_tools::per_element());
  BOOST_TEST(summary_row(text, "identical-values") == (std::vector<std::size_t>{1, 1, 0, 0, 0, 2, 1}),
             boost::test_tools::per_element());
  const auto lines = lines_of(text);
  // the library names the fields (field.hpp); the command line spells them as its options
  BOOST_TEST(lines.back() == "(settings and every claim: " + field("verbose") + ", or " + field("format") + " json, md or csv)");
  BOOST_TEST(spell_fields(lines.back(), cli_spelling) == "(settings and every claim: --verbose, or --format json, md or csv)");
  BOOST_TEST(contains(text, "summary: 4 claims, 2 pass, 1 fail, 1 undecided, 1 skipped; 2 rank measurements, 1 divergences"));
  // the claims that did not pass are named; the detail is not there
  BOOST_TEST(contains(text, "[FAIL] two-token: p-squared, cancellation"));
  BOOST_TEST(contains(text, "[UNDECIDED] two-token: det-equals-tanh (a=1e-20, mpfi128)"));
  BOOST_TEST(!contains(text, "[PASS]"));
  BOOST_TEST(!contains(text, "[SKIP]"));
  BOOST_TEST(!contains(text, "error model:"));
  BOOST_TEST(!contains(text, "settings:"));
  BOOST_TEST(!contains(text, "computed="));
  // verbose: the detail, then the same summary table
  const std::string verbose = render(write_text_verbose, doc);
  for (const auto& c : doc.checks)
    BOOST_TEST(summary_row(verbose, c.id) == expected_row(c), boost::test_tools::per_element());
  BOOST_TEST(contains(verbose, "[PASS]"));
  BOOST_TEST(contains(verbose, "settings:"));
}

// Twelve checks of many claims (the size of `attncert check`) fit on one screen; failures
// beyond the first ten are counted, not listed.
BOOST_AUTO_TEST_CASE(text_summary_fits_one_screen) {
  document doc;
  doc.version = "0.1.0";
  doc.command = "attncert check";
  doc.settings = {{"seed", 7}};
  for (int k = 0; k < 12; ++k) {
    check_report c;
    c.id = "check-" + std::to_string(k);
    for (int i = 0; i < 40; ++i)
      c.claims.push_back(make_claim("claim-" + std::to_string(i), "", "i", "binary64", "approx", "1", "1", "0", "0",
                                    "1e-16", "absolute", k == 3 && i < 15 ? verdict::fail : verdict::pass));
    doc.checks.push_back(c);
  }
  const std::string text = render(write_text_summary, doc);
  BOOST_TEST(lines_of(text).size() <= 40u, text);
  BOOST_TEST(summary_row(text, "check-3") == (std::vector<std::size_t>{40, 25, 15, 0, 0, 0, 0}),
             boost::test_tools::per_element());
  std::size_t listed = 0;
  for (const auto& line : lines_of(text)) listed += line.rfind("  [FAIL] check-3: ", 0) == 0;
  BOOST_TEST(listed == 10u);
  BOOST_TEST(contains(text, "... and 5 more (" + field("verbose") + ")"));
}

// ---- format names / dispatch -------------------------------------------------------------

BOOST_AUTO_TEST_CASE(output_format_names) {
  BOOST_TEST((parse_output_format("text") == output_format::text));
  BOOST_TEST((parse_output_format("json") == output_format::json));
  BOOST_TEST((parse_output_format("md") == output_format::md));
  BOOST_TEST((parse_output_format("markdown") == output_format::md));
  BOOST_TEST((parse_output_format("csv") == output_format::csv));
  BOOST_CHECK_THROW(parse_output_format("xml"), attncert::input_error);
  BOOST_CHECK_THROW(parse_output_format(""), attncert::input_error);
  try {
    parse_output_format("xml");
  } catch (const attncert::input_error& e) {
    const std::string msg = e.what();
    BOOST_TEST(!contains(msg, "\n"), "one-line message");
    for (const char* name : {"text", "json", "md", "csv"}) BOOST_TEST(contains(msg, name));
  }
}

BOOST_AUTO_TEST_CASE(write_dispatches) {
  const document doc = sample();
  const std::pair<output_format, void (*)(std::ostream&, const document&)> cases[] = {
      {output_format::text, write_text_summary},
      {output_format::json, write_json},
      {output_format::md, write_markdown},
      {output_format::csv, write_csv}};
  for (const auto& [f, writer] : cases) {
    std::ostringstream os;
    write(os, doc, f);
    BOOST_TEST(os.str() == render(writer, doc));
  }
}
