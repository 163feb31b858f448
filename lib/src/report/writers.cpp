// lib/src/report/writers.cpp — render a report::document as text, JSON, Markdown or CSV.
//
// The model keeps every number as a decimal string.  JSON and CSV copy those strings
// verbatim.  Markdown copies them too (escaping table syntax only).  The text writer, meant
// for a terminal, abbreviates long numbers to 12 significant digits; interval endpoints are
// rounded outward so that the displayed interval still encloses the exact one.
#include "attncert/report/writers.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <sstream>
#include <utility>

#include "attncert/error.hpp"
#include "attncert/field.hpp"

namespace attncert::report {

namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::size_t text_width = 100;       // target width of the text report
constexpr std::size_t text_sig_digits = 12;   // significant digits kept in the text report
constexpr std::size_t text_max_cell = 40;     // longest non-numeric cell in the text report

// ---- small string helpers --------------------------------------------------------------

/// Width on a terminal, counting UTF-8 code points (good enough for the characters used).
std::size_t display_width(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0u) != 0x80u) ++n;
  return n;
}

/// At most `max` code points, the last one "…" when something was cut.
std::string truncate_display(const std::string& s, std::size_t max) {
  if (display_width(s) <= max || max == 0) return s;
  std::size_t kept = 0, i = 0;
  for (; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0u) != 0x80u) {
      if (kept == max - 1) break;
      ++kept;
    }
  }
  return s.substr(0, i) + "…";
}

std::string pad_right(const std::string& s, std::size_t w) {
  const std::size_t n = display_width(s);
  return n >= w ? s : s + std::string(w - n, ' ');
}

std::string pad_left(const std::string& s, std::size_t w) {
  const std::size_t n = display_width(s);
  return n >= w ? s : std::string(w - n, ' ') + s;
}

/// Line breaks and tabs become spaces: a cell of the text report stays on one line.
std::string one_line(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') continue;
    out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  }
  return out;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\r' || c == '\n') {
      if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

/// Word-wraps `text` to `width` columns; the first line starts with `first`, the others
/// with `cont`.  Line breaks in `text` are kept; over-long words are not split.
void write_wrapped(std::ostream& os, const std::string& first, const std::string& cont,
                   const std::string& text, std::size_t width = text_width) {
  bool first_line = true;
  for (const auto& para : split_lines(text)) {
    std::string line = first_line ? first : cont;
    first_line = false;
    const std::size_t base = display_width(line);
    std::size_t w = base;
    bool empty = true;
    std::istringstream words(para);
    std::string word;
    while (words >> word) {
      const std::size_t ww = display_width(word);
      if (!empty && w + 1 + ww > width) {
        os << line << '\n';
        line = cont;
        w = display_width(cont);
        empty = true;
      }
      if (!empty) {
        line += ' ';
        ++w;
      }
      line += word;
      w += ww;
      empty = false;
    }
    // drop trailing blanks of a prefix-only line
    const auto last = line.find_last_not_of(' ');
    os << (last == std::string::npos ? std::string() : line.substr(0, last + 1)) << '\n';
  }
}

// ---- abbreviation of decimal strings (text report only) ---------------------------------

/// A finite decimal: value = (neg ? -1 : 1) * d0.d1d2... * 10^exp; digits has no leading
/// zero (empty for zero).
struct decimal {
  bool neg = false;
  std::string digits;
  long exp = 0;
  bool had_exponent = false;
};

std::optional<decimal> parse_decimal(const std::string& s) {
  decimal d;
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) d.neg = (s[i++] == '-');
  std::string int_digits, frac_digits;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) int_digits += s[i++];
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) frac_digits += s[i++];
  }
  if (int_digits.empty() && frac_digits.empty()) return std::nullopt;
  long e10 = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    d.had_exponent = true;
    bool eneg = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) eneg = (s[i++] == '-');
    std::size_t nd = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      if (++nd > 15) return std::nullopt;  // absurd exponent: leave the string alone
      e10 = e10 * 10 + (s[i++] - '0');
    }
    if (nd == 0) return std::nullopt;
    if (eneg) e10 = -e10;
  }
  if (i != s.size()) return std::nullopt;
  const std::string all = int_digits + frac_digits;
  const auto k = all.find_first_not_of('0');
  if (k == std::string::npos) {
    d.digits.clear();
    d.exp = 0;
    return d;
  }
  d.digits = all.substr(k);
  d.exp = static_cast<long>(int_digits.size()) - 1 - static_cast<long>(k) + e10;
  return d;
}

enum class rounding { nearest, toward_pos_inf, toward_neg_inf };

/// Rounds d to n significant digits (n >= 1).
void round_decimal(decimal& d, std::size_t n, rounding mode) {
  if (d.digits.size() <= n) return;
  const std::string tail = d.digits.substr(n);
  std::string head = d.digits.substr(0, n);
  bool up = false;
  switch (mode) {
    case rounding::nearest: up = tail[0] >= '5'; break;
    case rounding::toward_pos_inf:
      up = !d.neg && tail.find_first_not_of('0') != std::string::npos;
      break;
    case rounding::toward_neg_inf:
      up = d.neg && tail.find_first_not_of('0') != std::string::npos;
      break;
  }
  if (up) {
    std::size_t i = head.size();
    while (i > 0) {
      --i;
      if (head[i] == '9') {
        head[i] = '0';
      } else {
        ++head[i];
        break;
      }
      if (i == 0) {  // 99..9 -> 100..0
        head = "1" + std::string(n - 1, '0');
        ++d.exp;
      }
    }
  }
  d.digits = head;
}

/// Like printf's %.Ng: trailing zeros dropped; fixed notation for exponents in [-4, N) unless
/// the input was written with an exponent.
std::string format_decimal(const decimal& d) {
  const std::string sign = d.neg ? "-" : "";
  if (d.digits.empty()) return sign + "0";
  std::string g = d.digits;
  while (g.size() > 1 && g.back() == '0') g.pop_back();
  if (!d.had_exponent && d.exp >= -4 && d.exp < static_cast<long>(text_sig_digits)) {
    if (d.exp >= 0) {
      const auto ip = static_cast<std::size_t>(d.exp + 1);
      if (g.size() <= ip) return sign + g + std::string(ip - g.size(), '0');
      return sign + g.substr(0, ip) + "." + g.substr(ip);
    }
    return sign + "0." + std::string(static_cast<std::size_t>(-d.exp - 1), '0') + g;
  }
  std::string out = sign + g.substr(0, 1);
  if (g.size() > 1) out += "." + g.substr(1);
  const long ae = d.exp < 0 ? -d.exp : d.exp;
  std::string es = std::to_string(ae);
  if (es.size() < 2) es = "0" + es;
  return out + "e" + (d.exp < 0 ? "-" : "+") + es;
}

/// One number or endpoint; non-numbers (inf, nan, words) come back unchanged.
std::string abbreviate_scalar(const std::string& s, rounding mode) {
  auto d = parse_decimal(s);
  if (!d || d->digits.size() <= text_sig_digits) {
    if (d && d->digits.empty() && s.size() > text_sig_digits) return format_decimal(*d);
    return s;
  }
  round_decimal(*d, text_sig_digits, mode);
  return format_decimal(*d);
}

/// Shortens a value for the text report: numbers to 12 significant digits (nearest),
/// intervals "[lo, hi]" endpoint by endpoint (outward), anything else to 40 columns.
std::string abbreviate(const std::string& raw) {
  const std::string s = trim(one_line(raw));
  if (s.size() >= 2 && s.front() == '[' && s.back() == ']') {
    const std::string inner = s.substr(1, s.size() - 2);
    const auto comma = inner.find(',');
    if (comma != std::string::npos && inner.find(',', comma + 1) == std::string::npos) {
      const std::string lo = trim(inner.substr(0, comma)), hi = trim(inner.substr(comma + 1));
      if (!lo.empty() && !hi.empty())
        return "[" + abbreviate_scalar(lo, rounding::toward_neg_inf) + ", " +
               abbreviate_scalar(hi, rounding::toward_pos_inf) + "]";
    }
  }
  const std::string a = abbreviate_scalar(s, rounding::nearest);
  return truncate_display(a, text_max_cell);
}

// ---- grouping ------------------------------------------------------------------------------

std::vector<std::string> formats_in_order(const std::vector<claim_row>& claims) {
  std::vector<std::string> out;
  for (const auto& c : claims)
    if (std::find(out.begin(), out.end(), c.format) == out.end()) out.push_back(c.format);
  return out;
}

std::vector<std::string> policies_in_order(const std::vector<rank_row>& ranks) {
  std::vector<std::string> out;
  for (const auto& r : ranks)
    for (const auto& p : r.numerical)
      if (std::find(out.begin(), out.end(), p.policy) == out.end()) out.push_back(p.policy);
  return out;
}

/// The numerical rank of row r under `policy`, or "-" when it was not measured.
std::string rank_under(const rank_row& r, const std::string& policy) {
  for (const auto& p : r.numerical)
    if (p.policy == policy) return std::to_string(p.rank);
  return "-";
}

std::string sigma_min(const rank_row& r) {
  return r.singular_values.empty() ? std::string("-") : r.singular_values.back();
}

/// The tier shared by all claims of one format, or "" when they differ or it merely repeats
/// the format's name (format "exact", tier "exact").
std::string common_tier(const std::vector<claim_row>& claims, const std::string& format) {
  std::optional<std::string> tier;
  for (const auto& c : claims) {
    if (c.format != format) continue;
    if (!tier) tier = c.tier;
    else if (*tier != c.tier) return {};
  }
  if (!tier || *tier == format) return {};
  return *tier;
}

/// Statement of each claim id, in order of first appearance (first non-empty statement).
std::vector<std::pair<std::string, std::string>> statements(const std::vector<claim_row>& claims) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& c : claims) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == c.claim; });
    if (it == out.end()) out.emplace_back(c.claim, c.statement);
    else if (it->second.empty()) it->second = c.statement;
  }
  return out;
}

bool starts_with_relative(const std::string& rule) {
  std::string head = trim(rule).substr(0, 3);
  std::transform(head.begin(), head.end(), head.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return head == "rel";
}

const char* text_tag(verdict v) {
  switch (v) {
    case verdict::pass: return "[PASS]";
    case verdict::fail: return "[FAIL]";
    case verdict::undecided: return "[UNDECIDED]";
    default: return "[SKIP]";
  }
}

const char* md_tag(verdict v) {
  switch (v) {
    case verdict::pass: return "PASS";
    case verdict::fail: return "**FAIL**";
    case verdict::undecided: return "*UNDECIDED*";
    default: return "SKIP";
  }
}

std::string summary_line(const summary& s) {
  std::ostringstream os;
  os << "summary: " << s.claims << " claims, " << s.pass << " pass, " << s.fail << " fail, "
     << s.undecided << " undecided, " << s.skipped << " skipped; " << s.rank_rows
     << " rank measurements, " << s.divergences
     << " divergences (numerical rank != exact rank; measured, not failures)";
  if (s.sigma_min_divergences > 0)
    os << "; " << s.sigma_min_divergences << " sigma_min off the certified sigma_min of the formed matrix (DIVERGES (sigma_min))";
  if (s.not_computed > 0) os << "\nPARTIAL: " << s.not_computed << " checks not computed within " << field("max_seconds") << " (one undecided claim each)";
  return os.str();
}

std::string paren_join(const std::string& section, const std::string& proof) {
  std::string inner = section;
  if (!proof.empty()) inner += (inner.empty() ? "" : "; ") + std::string("proof: ") + proof;
  return inner.empty() ? std::string() : " (" + inner + ")";
}

// ---- JSON ----------------------------------------------------------------------------------

ordered_json claim_json(const claim_row& c) {
  ordered_json j;
  j["claim"] = c.claim;
  j["statement"] = c.statement;
  j["instance"] = c.instance;
  j["format"] = c.format;
  j["tier"] = c.tier;
  j["expected"] = c.expected;
  j["computed"] = c.computed;
  j["abs_error"] = c.abs_error;
  j["rel_error"] = c.rel_error;
  j["tolerance"] = c.tolerance;
  j["tolerance_rule"] = c.tolerance_rule;
  j["verdict"] = to_string(c.result);
  if (!c.note.empty()) j["note"] = c.note;
  return j;
}

ordered_json rank_json(const rank_row& r) {
  ordered_json j;
  j["object"] = r.object;
  j["instance"] = r.instance;
  j["format"] = r.format;
  j["svd_type"] = r.svd_type;
  j["shape"] = ordered_json::array({r.rows, r.cols});
  j["exact_rank"] = r.exact_rank;
  j["exact_rank_source"] = r.exact_rank_source;
  ordered_json num = ordered_json::array();
  for (const auto& p : r.numerical) {
    ordered_json e;
    e["policy"] = p.policy;
    e["threshold"] = p.threshold;
    e["rank"] = p.rank;
    num.push_back(std::move(e));
  }
  j["numerical"] = std::move(num);
  ordered_json sv = ordered_json::array();
  for (const auto& s : r.singular_values) sv.push_back(s);
  j["singular_values"] = std::move(sv);
  j["condition_number"] = r.condition_number;
  j["stable_rank"] = r.stable_rank;
  j["effective_rank"] = r.effective_rank;
  j["diverges"] = r.diverges;
  j["sigma_min_certified"] = r.sigma_min_certified;
  j["sigma_min_certified_how"] = r.sigma_min_certified_how;
  j["sigma_min_tolerance"] = r.sigma_min_tolerance;
  j["sigma_min_diverges"] = r.sigma_min_diverges;
  return j;
}

ordered_json document_json(const document& doc) {
  ordered_json j;
  j["tool"] = doc.tool;
  j["version"] = doc.version;
  j["command"] = doc.command;
  j["settings"] = doc.settings.is_null() ? ordered_json::object() : ordered_json(doc.settings);
  ordered_json checks = ordered_json::array();
  for (const auto& c : doc.checks) {
    ordered_json cj;
    cj["id"] = c.id;
    cj["title"] = c.title;
    cj["section"] = c.section;
    cj["proof"] = c.proof;
    cj["error_model"] = c.error_model;
    ordered_json claims = ordered_json::array();
    for (const auto& r : c.claims) claims.push_back(claim_json(r));
    cj["claims"] = std::move(claims);
    ordered_json ranks = ordered_json::array();
    for (const auto& r : c.ranks) ranks.push_back(rank_json(r));
    cj["ranks"] = std::move(ranks);
    checks.push_back(std::move(cj));
  }
  j["checks"] = std::move(checks);
  const summary s = doc.totals();
  ordered_json sj;
  sj["claims"] = s.claims;
  sj["pass"] = s.pass;
  sj["fail"] = s.fail;
  sj["undecided"] = s.undecided;
  sj["skipped"] = s.skipped;
  sj["rank_rows"] = s.rank_rows;
  sj["divergences"] = s.divergences;
  sj["sigma_min_divergences"] = s.sigma_min_divergences;
  if (s.not_computed > 0) {
    sj["partial"] = true;
    sj["not_computed_checks"] = s.not_computed;
  }
  j["summary"] = std::move(sj);
  return j;
}

// ---- Markdown ------------------------------------------------------------------------------

/// Inline Markdown text: backslash-escapes the characters that would start markup (the
/// pipe included, so the text is safe in a table cell); line breaks become <br>.
std::string md_escape(const std::string& s) {
  static const std::string special = "\\`*_|<>&~$";
  std::string out;
  out.reserve(s.size() + 8);
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\r' || c == '\n') {
      if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      out += "<br>";
    } else if (special.find(c) != std::string::npos) {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  return out;
}

/// A table cell: escaped, "" shown as an empty cell.
std::string md_cell(const std::string& s) { return md_escape(s); }

void md_row(std::ostream& os, const std::vector<std::string>& cells) {
  os << '|';
  for (const auto& c : cells) os << ' ' << c << " |";
  os << '\n';
}

void md_rule(std::ostream& os, const std::vector<bool>& right_aligned) {
  os << '|';
  for (bool r : right_aligned) os << (r ? " ---: |" : " --- |");
  os << '\n';
}

/// A fenced code block whose fence cannot occur in `body`.
void md_code_block(std::ostream& os, const std::string& lang, const std::string& body) {
  std::size_t longest = 0, run = 0;
  for (char c : body) {
    run = (c == '`') ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(std::max<std::size_t>(3, longest + 1), '`');
  os << fence << lang << '\n' << body;
  if (body.empty() || body.back() != '\n') os << '\n';
  os << fence << '\n';
}

/// Free text (may span lines) as a Markdown paragraph with hard line breaks.
std::string md_paragraph(const std::string& s) {
  std::string out;
  const auto lines = split_lines(s);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "<br>\n";
    out += md_escape(lines[i]);
  }
  return out;
}

// ---- CSV -----------------------------------------------------------------------------------

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

void csv_row(std::ostream& os, const std::vector<std::string>& fields) {
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i) os << ',';
    os << csv_field(fields[i]);
  }
  os << '\n';
}

}  // namespace

// ---- public API ------------------------------------------------------------------------------

output_format parse_output_format(const std::string& s) {
  if (s == "text") return output_format::text;
  if (s == "json") return output_format::json;
  if (s == "md" || s == "markdown") return output_format::md;
  if (s == "csv") return output_format::csv;
  throw input_error("unknown output format '" + one_line(s) +
                    "' (valid: text, json, md (or markdown), csv)");
}

nlohmann::json to_json(const document& doc) { return nlohmann::json(document_json(doc)); }

void write_json(std::ostream& os, const document& doc) {
  // Invalid UTF-8 in a string is replaced (U+FFFD) rather than aborting the whole report.
  os << document_json(doc).dump(2, ' ', false, ordered_json::error_handler_t::replace) << '\n';
}

namespace {

void write_settings_text(std::ostream& os, const document& doc) {
  if (doc.settings.is_object() && !doc.settings.empty()) {
    os << "settings:\n";
    for (const auto& [key, value] : doc.settings.items())
      write_wrapped(os, "  " + one_line(key) + " = ", "      ",
                    value.is_string() ? value.get<std::string>()
                                      : value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else if (!doc.settings.is_null() && !(doc.settings.is_array() && doc.settings.empty())) {
    write_wrapped(os, "settings: ", "          ",
                  doc.settings.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
}

/// One claim row of the text report: tag, id, instance, then the numbers, wrapped.
void write_claim_text(std::ostream& os, const claim_row& r, std::size_t wclaim, std::size_t winst) {
  const std::string indent = "    ";
  const std::string cont(indent.size() + 12, ' ');  // under the claim id
  std::string line = indent + pad_right(text_tag(r.result), 11) + ' ' + pad_right(one_line(r.claim), wclaim) + "  " +
                     pad_right(one_line(r.instance), winst);
  std::vector<std::string> fields;
  if (r.result != verdict::skipped || !r.computed.empty() || !r.expected.empty()) {
    fields.push_back("computed=" + abbreviate(r.computed));
    fields.push_back("expected=" + abbreviate(r.expected));
    fields.push_back("err=" + abbreviate(r.abs_error));
    if (starts_with_relative(r.tolerance_rule)) fields.push_back("rel=" + abbreviate(r.rel_error));
    fields.push_back("tol=" + abbreviate(r.tolerance));
  }
  std::size_t w = display_width(line);
  bool line_has_field = false;  // fields are separated by one blank, the first by two
  for (const auto& f : fields) {
    const std::size_t fw = display_width(f);
    const std::size_t gap = line_has_field ? 1 : 2;
    if (w + gap + fw > text_width && (line_has_field || w > cont.size())) {
      os << line << '\n';
      line = cont + f;
      w = cont.size() + fw;
    } else {
      line += std::string(gap, ' ') + f;
      w += gap + fw;
    }
    line_has_field = true;
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  os << line << '\n';
  if (!r.note.empty()) write_wrapped(os, cont + "note: ", cont + "      ", r.note);
}

void write_claims_text(std::ostream& os, const check_report& c) {
  for (const auto& [id, statement] : statements(c.claims))
    if (!statement.empty()) write_wrapped(os, "  claim " + one_line(id) + ": ", "      ", statement);
  for (const auto& format : formats_in_order(c.claims)) {
    const std::string tier = common_tier(c.claims, format);
    os << "  format " << one_line(format) << (tier.empty() ? "" : " (" + one_line(tier) + ")") << ":\n";
    std::size_t wclaim = 0, winst = 0;
    for (const auto& r : c.claims) {
      if (r.format != format) continue;
      wclaim = std::max(wclaim, display_width(one_line(r.claim)));
      winst = std::max(winst, display_width(one_line(r.instance)));
    }
    wclaim = std::min<std::size_t>(wclaim, 28);
    winst = std::min<std::size_t>(winst, 20);
    for (const auto& r : c.claims)
      if (r.format == format) write_claim_text(os, r, wclaim, winst);
  }
}

/// A table whose columns are padded to their widest cell; `right[i]` right-aligns column i.
void write_table(std::ostream& os, const std::string& indent, const std::vector<std::vector<std::string>>& rows,
                 const std::vector<bool>& right, const std::vector<std::string>& markers = {}) {
  if (rows.empty()) return;
  std::vector<std::size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], display_width(row[i]));
  for (std::size_t k = 0; k < rows.size(); ++k) {
    std::string line = indent;
    for (std::size_t i = 0; i < rows[k].size(); ++i)
      line += (i ? "  " : "") + (right[i] ? pad_left(rows[k][i], widths[i]) : pad_right(rows[k][i], widths[i]));
    if (k < markers.size() && !markers[k].empty()) line += "  " + markers[k];
    while (!line.empty() && line.back() == ' ') line.pop_back();
    os << line << '\n';
  }
}

void write_ranks_text(std::ostream& os, const check_report& c) {
  const auto policies = policies_in_order(c.ranks);
  std::vector<std::string> header = {"object", "instance", "format", "exact"};
  for (const auto& p : policies) header.push_back(one_line(p));
  header.push_back("sigma_min");
  std::vector<std::vector<std::string>> rows = {header};
  std::vector<std::string> markers = {""};
  for (const auto& r : c.ranks) {
    std::vector<std::string> row = {truncate_display(one_line(r.object), 24), truncate_display(one_line(r.instance), 20),
                                    truncate_display(one_line(r.format), 16), std::to_string(r.exact_rank)};
    for (const auto& p : policies) row.push_back(rank_under(r, p));
    row.push_back(abbreviate(sigma_min(r)));
    rows.push_back(std::move(row));
    std::string mark = r.diverges ? "DIVERGES" : "";
    if (r.sigma_min_diverges)
      mark += (mark.empty() ? "" : "; ") + std::string("DIVERGES (sigma_min; certified ") + abbreviate(r.sigma_min_certified) + ")";
    markers.push_back(mark);
  }
  // numeric columns (exact rank, policies) are right-aligned
  std::vector<bool> right(header.size(), false);
  for (std::size_t i = 3; i + 1 < header.size(); ++i) right[i] = true;
  os << "  ranks (exact vs numerical, by policy)\n";
  write_table(os, "    ", rows, right, markers);
}

/// Per check: its claims by verdict and its divergences; then the totals and the claims that
/// did not pass (at most `max_listed`).  Counts come from document::totals() per check.
void write_summary_text(std::ostream& os, const document& doc) {
  constexpr std::size_t max_listed = 10;
  std::vector<std::vector<std::string>> rows = {
      {"check", "claims", "pass", "fail", "undecided", "skipped", "rank rows", "divergences"}};
  std::vector<std::string> not_passed;
  for (const auto& c : doc.checks) {
    document one;
    one.checks.push_back(c);
    const summary s = one.totals();
    rows.push_back({truncate_display(one_line(c.id), 28), std::to_string(s.claims), std::to_string(s.pass),
                    std::to_string(s.fail), std::to_string(s.undecided), std::to_string(s.skipped),
                    std::to_string(s.rank_rows), std::to_string(s.divergences)});
    for (const auto& r : c.claims)
      if (r.result == verdict::fail || r.result == verdict::undecided)
        not_passed.push_back(std::string(text_tag(r.result)) + " " + one_line(c.id) + ": " + one_line(r.claim) + " (" +
                             one_line(r.instance) + ", " + one_line(r.format) + ")");
  }
  std::vector<bool> right(rows.front().size(), true);
  right[0] = false;
  os << "checks (claims by verdict; divergences: numerical rank != exact rank, measured, not failures):\n";
  write_table(os, "  ", rows, right);
  for (std::size_t k = 0; k < not_passed.size() && k < max_listed; ++k)
    write_wrapped(os, "  ", "      ", truncate_display(not_passed[k], 2 * text_width));
  if (not_passed.size() > max_listed) os << "  ... and " << not_passed.size() - max_listed << " more (" << field("verbose") << ")\n";
}

}  // namespace

void write_text(std::ostream& os, const document& doc, const write_options& opt) {
  os << one_line(doc.tool) << (doc.version.empty() ? "" : " " + one_line(doc.version)) << " — tolerance report\n";
  if (!doc.command.empty()) write_wrapped(os, "command: ", "         ", doc.command);
  if (!opt.verbose) {
    write_summary_text(os, doc);
    os << summary_line(doc.totals()) << '\n';
    os << "(settings and every claim: " << field("verbose") << ", or " << field("format") << " json, md or csv)\n";
    return;
  }
  write_settings_text(os, doc);
  for (const auto& c : doc.checks) {
    os << '\n'
       << "== " << one_line(c.id) << (c.title.empty() ? "" : " — " + one_line(c.title))
       << one_line(paren_join(c.section, c.proof)) << '\n';
    if (!c.error_model.empty()) write_wrapped(os, "error model: ", std::string(13, ' '), c.error_model);
    if (!c.claims.empty()) write_claims_text(os, c);
    if (!c.ranks.empty()) write_ranks_text(os, c);
  }
  os << '\n';
  write_summary_text(os, doc);
  os << summary_line(doc.totals()) << '\n';
}

namespace {

// The Markdown report's title, command and settings.
void write_markdown_header(std::ostream& os, const document& doc) {
  os << "# " << md_escape(one_line(doc.tool)) << (doc.version.empty() ? "" : " " + md_escape(one_line(doc.version)))
     << " tolerance report\n\n";
  if (!doc.command.empty()) {
    os << "Command:\n\n";
    md_code_block(os, "sh", doc.command);
    os << '\n';
  }
  if (!doc.settings.is_null()) {
    os << "Settings:\n\n";
    md_code_block(os, "json", doc.settings.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    os << '\n';
  }
}

}  // namespace

void write_markdown(std::ostream& os, const document& doc) {
  write_markdown_header(os, doc);
  for (const auto& c : doc.checks) {
    os << "## " << md_escape(one_line(c.id)) << (c.title.empty() ? "" : " — " + md_escape(one_line(c.title)))
       << "\n\n";
    if (!c.section.empty() || !c.proof.empty()) {
      if (!c.section.empty()) os << "Section: " << md_escape(one_line(c.section));
      if (!c.section.empty() && !c.proof.empty()) os << "; ";
      if (!c.proof.empty()) os << "proof: " << md_escape(one_line(c.proof));
      os << "\n\n";
    }
    if (!c.error_model.empty()) os << "Error model: " << md_paragraph(c.error_model) << "\n\n";

    if (!c.claims.empty()) {
      os << "### Claims\n\n";
      for (const auto& [id, statement] : statements(c.claims))
        os << "- " << md_escape(one_line(id)) << (statement.empty() ? "" : ": " + md_escape(statement)) << '\n';
      os << '\n';
      for (const auto& format : formats_in_order(c.claims)) {
        const std::string tier = common_tier(c.claims, format);
        os << "#### " << md_escape(one_line(format)) << (tier.empty() ? "" : " (" + md_escape(one_line(tier)) + ")")
           << "\n\n";
        md_row(os, {"verdict", "claim", "instance", "tier", "computed", "expected", "abs error", "rel error",
                    "tolerance", "tolerance rule", "note"});
        md_rule(os, {false, false, false, false, false, false, false, false, false, false, false});
        for (const auto& r : c.claims) {
          if (r.format != format) continue;
          md_row(os, {md_tag(r.result), md_cell(r.claim), md_cell(r.instance), md_cell(r.tier), md_cell(r.computed),
                      md_cell(r.expected), md_cell(r.abs_error), md_cell(r.rel_error), md_cell(r.tolerance),
                      md_cell(r.tolerance_rule), md_cell(r.note)});
        }
        os << '\n';
      }
    }

    if (!c.ranks.empty()) {
      const auto policies = policies_in_order(c.ranks);
      os << "### Ranks\n\n";
      std::vector<std::string> header = {"object", "instance", "format", "SVD in", "shape", "exact rank"};
      std::vector<bool> right = {false, false, false, false, false, true};
      for (const auto& p : policies) {
        header.push_back(md_escape(one_line(p)));
        right.push_back(true);
      }
      for (const char* h : {"σ_min", "σ_min certified (formed matrix)", "condition number", "stable rank", "effective rank",
                            "diverges", "exact rank witness"}) {
        header.emplace_back(md_escape(h));
        right.push_back(false);
      }
      md_row(os, header);
      md_rule(os, right);
      for (const auto& r : c.ranks) {
        std::vector<std::string> row = {md_cell(r.object), md_cell(r.instance), md_cell(r.format),
                                        md_cell(r.svd_type),
                                        std::to_string(r.rows) + "×" + std::to_string(r.cols),
                                        std::to_string(r.exact_rank)};
        for (const auto& p : policies) row.push_back(rank_under(r, p));
        row.push_back(md_cell(sigma_min(r)));
        row.push_back(md_cell(r.sigma_min_certified));
        row.push_back(md_cell(r.condition_number));
        row.push_back(md_cell(r.stable_rank));
        row.push_back(md_cell(r.effective_rank));
        row.push_back(std::string(r.diverges ? "**DIVERGES**" : "") +
                      (r.sigma_min_diverges ? std::string(r.diverges ? " " : "") + "**DIVERGES (σ_min)**" : ""));
        row.push_back(md_cell(r.exact_rank_source));
        md_row(os, row);
      }
      os << '\n';
      // thresholds, one line per (row, policy), so the table stays narrow
      bool any = false;
      for (const auto& r : c.ranks)
        for (const auto& p : r.numerical)
          if (!p.threshold.empty()) any = true;
      if (any) {
        os << "Thresholds:\n\n";
        for (const auto& r : c.ranks) {
          std::string line;
          for (const auto& p : r.numerical) {
            if (p.threshold.empty()) continue;
            line += (line.empty() ? "" : ", ") + md_escape(one_line(p.policy)) + " " + md_escape(one_line(p.threshold));
          }
          if (!line.empty())
            os << "- " << md_escape(one_line(r.object)) << ", " << md_escape(one_line(r.instance)) << ", "
               << md_escape(one_line(r.format)) << ": " << line << '\n';
        }
        os << '\n';
      }
    }
  }

  os << "## Summary\n\n" << summary_line(doc.totals()) << '\n';
}

void write_csv(std::ostream& os, const document& doc) {
  csv_row(os, {"kind", "check", "claim_or_object", "instance", "format", "tier", "expected", "computed",
               "abs_error", "rel_error", "tolerance", "verdict", "exact_rank", "policy", "threshold",
               "numerical_rank", "diverges"});
  for (const auto& c : doc.checks) {
    for (const auto& r : c.claims)
      csv_row(os, {"claim", c.id, r.claim, r.instance, r.format, r.tier, r.expected, r.computed, r.abs_error,
                   r.rel_error, r.tolerance, to_string(r.result), "", "", "", "", ""});
    for (const auto& r : c.ranks) {
      const std::string diverges = r.diverges ? "true" : "false";
      const std::string exact = std::to_string(r.exact_rank);
      if (r.numerical.empty())  // keep the row visible even without a policy
        csv_row(os, {"rank", c.id, r.object, r.instance, r.format, "", "", "", "", "", "", "", exact, "", "", "",
                     diverges});
      for (const auto& p : r.numerical)
        csv_row(os, {"rank", c.id, r.object, r.instance, r.format, "", "", "", "", "", "", "", exact, p.policy,
                     p.threshold, std::to_string(p.rank), diverges});
    }
  }
}

void write(std::ostream& os, const document& doc, output_format f, const write_options& opt) {
  switch (f) {
    case output_format::text: write_text(os, doc, opt); return;
    case output_format::json: write_json(os, doc); return;
    case output_format::md: write_markdown(os, doc); return;
    case output_format::csv: write_csv(os, doc); return;
  }
  throw input_error("unknown output format");
}

}  // namespace attncert::report
