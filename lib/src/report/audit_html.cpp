// lib/src/report/audit_html.cpp — the audit as one self-contained HTML page with figures (inline SVG,
// no script, no external resource), drawn from the JSON contract (audit_json): it computes nothing.
// The figures are drawings: positions come from the report's decimal strings read as binary64; the
// certified numbers are the JSON's and the tables'.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

#include "attncert/report/audit.hpp"

namespace attncert::report {

namespace {

using ojson = nlohmann::ordered_json;

std::string esc(const std::string& t) {
  std::string o;
  for (char c : t) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string num(double x) {
  std::ostringstream os;
  os.precision(4);
  os << x;
  return os.str();
}

double as_double(const ojson& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) return std::strtod(v.get<std::string>().c_str(), nullptr);
  return 0;
}

}  // namespace

const char* outcome_color(const std::string& outcome) {
  if (outcome == "rank-kept/within-tolerance") return "#2e7d32";
  if (outcome == "rank-kept/exceeds-tolerance") return "#c62828";
  if (outcome == "rank-reduced/adequate") return "#1565c0";
  if (outcome == "rank-reduced/inadequate") return "#ef6c00";
  return "#9e9e9e";
}

namespace {

const char* kAgree = "#a5d6a7";     // numerical rank inside the exact [lo, hi]
const char* kDiverge = "#ffab91";   // outside it
const char* kBand = "#6a1b9a";      // certified singular-value bands
const char* kThreshold = "#d81b60"; // declared thresholds

struct cell {
  std::string row, fill, text, title;
};

// A grid of rows × columns of labelled cells.
std::string grid_svg(const std::vector<std::string>& rows, std::size_t cols, const std::vector<std::vector<cell>>& cells,
                     const std::string& id) {
  const int cw = 92, ch = 30, left = 230, top = 24;
  const int w = left + static_cast<int>(cols) * cw + 10, h = top + static_cast<int>(rows.size()) * ch + 10;
  std::ostringstream o;
  o << "<svg id=\"" << id << "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h << "\" font-family=\"sans-serif\" font-size=\"11\">";
  for (std::size_t j = 0; j < cols; ++j)
    o << "<text x=\"" << left + static_cast<int>(j) * cw + cw / 2 << "\" y=\"16\" text-anchor=\"middle\">head " << j << "</text>";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const int y = top + static_cast<int>(i) * ch;
    o << "<text x=\"" << left - 6 << "\" y=\"" << y + ch / 2 + 4 << "\" text-anchor=\"end\">" << esc(rows[i]) << "</text>";
    for (std::size_t j = 0; j < cells[i].size(); ++j) {
      const cell& c = cells[i][j];
      const int x = left + static_cast<int>(j) * cw;
      o << "<g><title>" << esc(c.title) << "</title><rect x=\"" << x + 1 << "\" y=\"" << y + 1 << "\" width=\"" << cw - 2 << "\" height=\"" << ch - 2
        << "\" fill=\"" << c.fill << "\"/><text x=\"" << x + cw / 2 << "\" y=\"" << y + ch / 2 + 4 << "\" text-anchor=\"middle\">" << esc(c.text)
        << "</text></g>";
    }
  }
  o << "</svg>";
  return o.str();
}

std::string short_outcome(const std::string& o) {
  if (o == "rank-kept/within-tolerance") return "kept / within";
  if (o == "rank-kept/exceeds-tolerance") return "kept / exceeds";
  if (o == "rank-reduced/adequate") return "reduced / adequate";
  if (o == "rank-reduced/inadequate") return "reduced / inadeq.";
  return "undecided";
}

std::string range_text(const ojson& e) {
  const auto lo = e["lo"].get<std::size_t>(), hi = e["hi"].get<std::size_t>();
  return lo == hi ? std::to_string(lo) : "[" + std::to_string(lo) + "," + std::to_string(hi) + "]";
}

// σ_i with certified bands (log scale) and each format's threshold (first policy) as a dashed line.
std::string spectrum_svg(const ojson& obj, const std::string& policy, const std::string& title) {
  const ojson& sv = obj["singular_values"];
  const int w = 300, h = 180, l = 44, r = 8, t = 18, b = 22;
  std::vector<std::pair<double, double>> bands;
  for (const auto& x : sv) bands.emplace_back(as_double(x["lo"]), as_double(x["hi"]));
  std::vector<std::pair<std::string, double>> thresholds;
  for (const auto& e : obj["numerical_ranks"])
    if (e["policy"] == policy) thresholds.emplace_back(e["format"].get<std::string>(), as_double(e["threshold"]));
  double top = 0, bottom = HUGE_VAL;
  for (const auto& [lo, hi] : bands) {
    top = std::max(top, hi);
    if (lo > 0) bottom = std::min(bottom, lo);
  }
  for (const auto& [f, th] : thresholds)
    if (th > 0) bottom = std::min(bottom, th);
  std::ostringstream o;
  o << "<svg class=\"spectrum\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h << "\" font-family=\"sans-serif\" font-size=\"10\">"
    << "<text x=\"" << l << "\" y=\"12\">" << esc(title) << "</text>";
  if (bands.empty() || !(top > 0)) {
    o << "<text x=\"" << l << "\" y=\"" << h / 2 << "\">no singular value</text></svg>";
    return o.str();
  }
  if (!std::isfinite(bottom) || bottom >= top) bottom = top / 10;
  const double ltop = std::log10(top) + 0.1, lbot = std::log10(bottom) - 0.5;
  auto Y = [&](double v) { return t + (ltop - std::log10(std::max(v, std::pow(10.0, lbot)))) / (ltop - lbot) * (h - t - b); };
  const double step = static_cast<double>(w - l - r) / static_cast<double>(bands.size());
  o << "<rect x=\"" << l << "\" y=\"" << t << "\" width=\"" << w - l - r << "\" height=\"" << h - t - b << "\" fill=\"none\" stroke=\"#888\"/>";
  for (int e = static_cast<int>(std::ceil(lbot)); e <= static_cast<int>(std::floor(ltop)); e += std::max(1, static_cast<int>((ltop - lbot) / 5)))
    o << "<text x=\"" << l - 3 << "\" y=\"" << Y(std::pow(10.0, e)) + 3 << "\" text-anchor=\"end\">1e" << e << "</text>";
  for (std::size_t i = 0; i < bands.size(); ++i) {
    const double x = l + (static_cast<double>(i) + 0.5) * step, y1 = Y(bands[i].second), y0 = bands[i].first > 0 ? Y(bands[i].first) : h - b;
    const double bw = std::max(2.0, step * 0.6);
    o << "<rect x=\"" << num(x - bw / 2) << "\" y=\"" << num(y1 - 1.5) << "\" width=\"" << num(bw) << "\" height=\"" << num(std::max(3.0, y0 - y1 + 3))
      << "\" fill=\"" << kBand << "\"><title>sigma_" << i + 1 << " in [" << esc(sv[i]["lo"].get<std::string>()) << ", "
      << esc(sv[i]["hi"].get<std::string>()) << "]</title></rect>";
  }
  int k = 0;
  for (const auto& [f, th] : thresholds) {
    if (!(th > 0)) continue;
    const double y = Y(th);
    o << "<line x1=\"" << l << "\" x2=\"" << w - r << "\" y1=\"" << num(y) << "\" y2=\"" << num(y) << "\" stroke=\"" << kThreshold
      << "\" stroke-width=\"2\" stroke-dasharray=\"5,3\"><title>" << esc(f) << " threshold " << num(th) << "</title></line>"
      << "<text x=\"" << w - r - 2 << "\" y=\"" << num(y - 3 - 10 * k) << "\" text-anchor=\"end\" fill=\"" << kThreshold << "\">" << esc(f) << "</text>";
    ++k;
  }
  o << "<text x=\"" << (w + l) / 2 << "\" y=\"" << h - 6 << "\" text-anchor=\"middle\">i (sigma_i, certified band)</text></svg>";
  return o.str();
}

// One line per head: its numerical rank (first policy) in each format, the exact [lo, hi] as a band.
std::string drift_svg(const ojson& layer, const std::string& object, const std::string& policy) {
  std::vector<std::string> formats;
  std::size_t ymax = 1;
  for (const auto& h : layer["heads"]) {
    if (!h["objects"].contains(object)) continue;
    const ojson& o = h["objects"][object];
    ymax = std::max(ymax, o["exact_rank"]["hi"].get<std::size_t>());
    for (const auto& e : o["numerical_ranks"])
      if (e["policy"] == policy && std::find(formats.begin(), formats.end(), e["format"].get<std::string>()) == formats.end())
        formats.push_back(e["format"].get<std::string>());
  }
  if (formats.empty()) return "";
  const int w = 420, hgt = 200, l = 40, r = 20, t = 14, b = 26;
  auto X = [&](std::size_t i) { return formats.size() == 1 ? (w + l - r) / 2.0 : l + static_cast<double>(i) * (w - l - r) / static_cast<double>(formats.size() - 1); };
  auto Y = [&](double v) { return t + (1.0 - v / static_cast<double>(ymax)) * (hgt - t - b); };
  std::ostringstream o;
  o << "<svg class=\"drift\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << hgt << "\" font-family=\"sans-serif\" font-size=\"10\">"
    << "<rect x=\"" << l << "\" y=\"" << t << "\" width=\"" << w - l - r << "\" height=\"" << hgt - t - b << "\" fill=\"none\" stroke=\"#888\"/>";
  o << "<text x=\"" << l - 4 << "\" y=\"" << num(Y(0) + 3) << "\" text-anchor=\"end\">0</text><text x=\"" << l - 4 << "\" y=\"" << num(Y(static_cast<double>(ymax)) + 3)
    << "\" text-anchor=\"end\">" << ymax << "</text>";
  for (std::size_t i = 0; i < formats.size(); ++i)
    o << "<text x=\"" << num(X(i)) << "\" y=\"" << hgt - 8 << "\" text-anchor=\"middle\">" << esc(formats[i]) << "</text>";
  for (const auto& h : layer["heads"]) {
    if (!h["objects"].contains(object)) continue;
    const ojson& ob = h["objects"][object];
    const double lo = static_cast<double>(ob["exact_rank"]["lo"].get<std::size_t>()), hi = static_cast<double>(ob["exact_rank"]["hi"].get<std::size_t>());
    o << "<rect x=\"" << l << "\" y=\"" << num(Y(hi) - 1) << "\" width=\"" << w - l - r << "\" height=\"" << num(Y(lo) - Y(hi) + 2)
      << "\" fill=\"" << kAgree << "\" fill-opacity=\"0.35\"/>";
    std::string pts;
    for (std::size_t i = 0; i < formats.size(); ++i)
      for (const auto& e : ob["numerical_ranks"])
        if (e["policy"] == policy && e["format"] == formats[i]) pts += num(X(i)) + "," + num(Y(static_cast<double>(e["rank"].get<std::size_t>()))) + " ";
    o << "<polyline points=\"" << pts << "\" fill=\"none\" stroke=\"#37474f\" stroke-width=\"1.5\"><title>batch " << h["batch"].get<std::size_t>()
      << " head " << h["head"].get<std::size_t>() << "</title></polyline>";
  }
  o << "</svg>";
  return o.str();
}

}  // namespace

namespace {

// The page's head, the criteria and the controls.
void criteria_html(std::ostringstream& o, const ojson& j) {
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>attncert audit</title><style>"
       "body{font-family:sans-serif;margin:24px;max-width:1400px;color:#212121}table{border-collapse:collapse;margin:8px 0}"
       "td,th{border:1px solid #bbb;padding:3px 7px;font-size:13px}pre{background:#f5f5f5;padding:8px;overflow:auto}"
       ".figs{display:flex;flex-wrap:wrap;gap:8px}.legend span{display:inline-block;padding:2px 8px;margin-right:6px;color:#fff}"
       "</style></head><body>\n";
  o << "<h1>attncert audit</h1><p><code>" << esc(j["command"].get<std::string>()) << "</code> (attncert " << esc(j["version"].get<std::string>())
    << ")</p>\n";
  o << "<h2>Criteria, fixed before the measurements</h2><p>spec SHA-256 <code>" << esc(j["spec_sha256"].get<std::string>()) << "</code>"
    << (j["spec_is_default"].get<bool>() ? " (the default spec: no criteria were given)" : "") << "</p><pre>" << esc(j["spec_text"].get<std::string>())
    << "</pre>\n";
  o << "<h2>Negative controls</h2><table><tr><th>control</th><th>object</th><th>statement</th><th>expected</th><th>certified</th><th>passed</th></tr>";
  for (const auto& c : j["controls"])
    o << "<tr><td>" << esc(c["name"].get<std::string>()) << "</td><td>" << esc(c["object"].get<std::string>()) << "</td><td>"
      << esc(c["statement"].get<std::string>()) << "</td><td>" << c["expected"].get<std::size_t>() << "</td><td>" << range_text(c["exact_rank"])
      << "</td><td>" << (c["passed"].get<bool>() ? "yes" : "NO") << "</td></tr>";
  o << "</table>\n";

}

// Figures 1 and 2: the outcome per layer × head; exact against numerical rank, one grid per format.
void grids_html(std::ostringstream& o, const ojson& j, const std::string& policy) {
  std::vector<std::string> rows;
  std::vector<std::vector<cell>> outcomes;
  std::map<std::string, std::vector<std::vector<cell>>> ranks;  // per format
  std::vector<std::string> formats;
  std::size_t cols = 0;
  for (const auto& l : j["layers"]) {
    std::map<std::size_t, std::size_t> row_of_batch;
    for (const auto& h : l["heads"]) {
      const std::size_t b = h["batch"].get<std::size_t>();
      if (!row_of_batch.count(b)) {
        row_of_batch[b] = rows.size();
        rows.push_back(l["name"].get<std::string>() + (l["shape"]["batch"].get<std::size_t>() > 1 ? " (batch " + std::to_string(b) + ")" : ""));
        outcomes.emplace_back();
      }
      const std::size_t row = row_of_batch[b];
      const std::string oc = h["outcome"].get<std::string>();
      outcomes[row].push_back({rows[row], outcome_color(oc), short_outcome(oc), oc + ": " + h["why"].get<std::string>()});
      cols = std::max(cols, outcomes[row].size());
      if (h["objects"].contains("attention")) {
        const ojson& a = h["objects"]["attention"];
        for (const auto& e : a["numerical_ranks"]) {
          if (e["policy"] != policy) continue;
          const std::string f = e["format"].get<std::string>();
          if (std::find(formats.begin(), formats.end(), f) == formats.end()) formats.push_back(f);
          auto& g = ranks[f];
          if (g.size() < rows.size()) g.resize(rows.size());
          const bool div = e["diverges"].get<bool>();
          g[row].push_back({rows[row], div ? kDiverge : kAgree,
                            range_text(a["exact_rank"]) + " | " + std::to_string(e["rank"].get<std::size_t>()),
                            "exact rank " + range_text(a["exact_rank"]) + ", numerical rank " + std::to_string(e["rank"].get<std::size_t>()) + " (" + f +
                                ", " + policy + ", threshold " + e["threshold"].get<std::string>() + ")" + (div ? ": DIVERGES" : "")});
        }
      }
    }
  }
  o << "<h2>Outcome per layer and head</h2><p class=\"legend\">";
  for (const char* k : {"rank-kept/within-tolerance", "rank-kept/exceeds-tolerance", "rank-reduced/adequate", "rank-reduced/inadequate", "undecided"})
    o << "<span style=\"background:" << outcome_color(k) << "\">" << k << "</span>";
  o << "</p>";
  if (rows.empty()) o << "<p>No head was audited.</p>";
  else o << grid_svg(rows, cols, outcomes, "fig-outcomes");
  o << "\n<h2>Exact rank against numerical rank (attention object, policy " << esc(policy) << ")</h2>"
    << "<p>Each cell: certified exact rank | numerical rank in the format; <span style=\"background:" << kAgree
    << "\">agrees</span> <span style=\"background:" << kDiverge << "\">DIVERGES</span>.</p>";
  for (const auto& f : formats) {
    auto g = ranks[f];
    g.resize(rows.size());
    o << "<h3>" << esc(f) << "</h3>" << grid_svg(rows, cols, g, "fig-ranks-" + f);
  }

}

// Figures 3 and 4: each head's certified singular values; the numerical rank across formats.
void spectra_html(std::ostringstream& o, const ojson& j, const std::string& policy) {
  o << "\n<h2>Singular values of each head's attention (certified bands; declared thresholds dashed)</h2>";
  std::size_t drawn = 0, heads = 0;
  const std::size_t max_spectra = 64;
  o << "<div class=\"figs\">";
  for (const auto& l : j["layers"])
    for (const auto& h : l["heads"]) {
      if (!h["objects"].contains("attention")) continue;
      ++heads;
      if (drawn >= max_spectra) continue;
      o << spectrum_svg(h["objects"]["attention"], policy,
                        l["name"].get<std::string>() + " b" + std::to_string(h["batch"].get<std::size_t>()) + " h" + std::to_string(h["head"].get<std::size_t>()));
      ++drawn;
    }
  o << "</div>";
  if (heads > drawn) o << "<p>" << heads - drawn << " more heads are not drawn (the first " << max_spectra << " are); report.json holds every spectrum.</p>";
  o << "\n<h2>Numerical rank across formats (attention object; shaded: the certified exact rank)</h2><div class=\"figs\">";
  for (const auto& l : j["layers"]) {
    const std::string svg = drift_svg(l, "attention", policy);
    if (!svg.empty()) o << "<div><p>" << esc(l["name"].get<std::string>()) << "</p>" << svg << "</div>";
  }
  o << "</div>\n";

}

// One table per layer, then the multi-head and residual objects.
void tables_html(std::ostringstream& o, const ojson& j) {
  for (const auto& l : j["layers"]) {
    o << "<h2>" << esc(l["name"].get<std::string>()) << "</h2><p>" << esc(l["kind"].get<std::string>()) << ", " << esc(l["dtype"].get<std::string>())
      << ", mask " << esc(l["mask_kind"].get<std::string>()) << "</p>";
    for (const auto& n : l["notes"]) o << "<p>" << esc(n.get<std::string>()) << "</p>";
    o << "<table><tr><th>batch</th><th>head</th><th>exact rank per object</th><th>max ‖v‖₂</th><th>output error / max‖v‖₂</th><th>outcome</th><th>why</th></tr>";
    for (const auto& h : l["heads"]) {
      std::string ex;
      for (const auto& [name, ob] : h["objects"].items()) ex += (ex.empty() ? "" : ", ") + name + " " + range_text(ob["exact_rank"]);
      const ojson& e = h["output_error"];
      const std::string err = e["computed"].get<bool>()
                                  ? "[" + e["relative"]["lo"].get<std::string>() + ", " + e["relative"]["hi"].get<std::string>() + "]"
                                  : std::string("not computed");
      o << "<tr><td>" << h["batch"].get<std::size_t>() << "</td><td>" << h["head"].get<std::size_t>() << "</td><td>" << esc(ex) << "</td><td>["
        << esc(h["value_scale"]["lo"].get<std::string>()) << ", " << esc(h["value_scale"]["hi"].get<std::string>()) << "]</td><td>" << esc(err)
        << "</td><td style=\"color:" << outcome_color(h["outcome"].get<std::string>()) << "\">" << esc(h["outcome"].get<std::string>()) << "</td><td>"
        << esc(h["why"].get<std::string>()) << "</td></tr>";
    }
    o << "</table>";
    for (const char* key : {"multi_head", "residual"})
      for (const auto& m : l[key]) {
        o << "<p>" << key << ", batch " << m["batch"].get<std::size_t>() << ": ";
        if (!m["computed"].get<bool>()) o << "not computed: " << esc(m["why"].get<std::string>());
        else {
          o << "exact rank " << range_text(m["exact_rank"]);
          for (const auto& e : m["numerical_ranks"])
            o << "; numerical " << e["rank"].get<std::size_t>() << " (" << esc(e["format"].get<std::string>()) << ", " << esc(e["policy"].get<std::string>()) << ")";
        }
        o << "</p>";
      }
  }
}

// The spec's target contrast per head, as the Markdown's table: the exact and the model's contrast, and for two tokens
// the gain through A with the side of float32's numerical-rank threshold (§5, proofs/L6).
void contrast_html(std::ostringstream& o, const ojson& j) {
  const ojson& tc = j["spec"]["target_contrast"];
  if (tc.is_null()) return;
  auto range = [](const ojson& r) { return "[" + esc(r["lo"].get<std::string>()) + ", " + esc(r["hi"].get<std::string>()) + "]"; };
  o << "\n<h2>Target contrast</h2><p>" << esc(tc.dump()) << "; the gain is ‖A_p − A_q‖₂/√2 through the exact attention (§5), "
    << "and float32 says whether a float32 numerical rank discards the directions that carry it (proofs/L6).</p>"
    << "<table><tr><th>layer</th><th>batch</th><th>head</th><th>exact A V</th><th>model A_model V</th><th>gain</th><th>float32</th></tr>";
  for (const auto& l : j["layers"])
    for (const auto& h : l["heads"]) {
      if (!h.contains("target_contrast")) continue;
      const ojson& c = h["target_contrast"];
      o << "<tr><td>" << esc(l["name"].get<std::string>()) << "</td><td>" << h["batch"].get<std::size_t>() << "</td><td>"
        << h["head"].get<std::size_t>() << "</td><td>" << range(c["exact"]) << "</td><td>"
        << (c["model"].is_null() ? std::string("not measured") : range(c["model"])) << "</td><td>"
        << (c.contains("gain") ? range(c["gain"]) : std::string("—")) << "</td><td>"
        << (c.contains("gain") ? esc(c["float32_rank_threshold"].get<std::string>()) : std::string("—")) << "</td></tr>";
    }
  o << "</table>";
}

}  // namespace

std::string audit_html(const nlohmann::ordered_json& j) {
  std::ostringstream o;
  const std::string policy = [&] {
    const std::string p = j["spec"]["policies"].get<std::string>();
    return p.substr(0, p.find(','));
  }();
  criteria_html(o, j);
  grids_html(o, j, policy);
  spectra_html(o, j, policy);
  tables_html(o, j);
  contrast_html(o, j);
  if (j["partial"].get<bool>()) o << "<p><b>PARTIAL</b>: stopped at the budget; the heads not computed are named above.</p>";
  o << "</body></html>\n";
  return o.str();
}

}  // namespace attncert::report
