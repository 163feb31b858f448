#include "attncert/report/drift.hpp"

#include "attncert/field.hpp"
#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

namespace attncert::report {

namespace {

// Shortest decimal that reads back as the same binary64 (std::to_chars).
void put17(std::ostream& os, double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  os.write(buf, r.ptr - buf);
}
std::string num17(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

// A binary64 as a JSON number, as nlohmann::json writes it (".0" on integers, null when not
// finite).
void put_json_double(std::ostream& os, double x) {
  if (!std::isfinite(x)) {
    os << "null";
    return;
  }
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  os.write(buf, r.ptr - buf);
  if (std::find_if(buf, r.ptr, [](char c) { return c == '.' || c == 'e'; }) == r.ptr) os << ".0";
}
void put_json_string(std::ostream& os, const std::string& s) { os << nlohmann::json(s).dump(); }

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string pad(const std::string& s, std::size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); }

// Policies in name order (the order of the per-point rows of text and CSV).
std::vector<std::size_t> policies_by_name(const drift_request& r) {
  std::vector<std::size_t> idx(r.policies.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  std::sort(idx.begin(), idx.end(), [&](std::size_t x, std::size_t y) { return r.policies[x].name() < r.policies[y].name(); });
  return idx;
}

nlohmann::json settings_json(const drift_request& r) {
  nlohmann::json recipes = nlohmann::json::array();
  for (const auto& rc : r.recipes)
    recipes.push_back({{"name", rc.name},
                       {"storage", rc.storage.name},
                       {"scores", rc.scores.name},
                       {"softmax", rc.softmax.name},
                       {"output", rc.output.name},
                       {"result", rc.result.name},
                       {"policy_epsilon_bits", rc.result.precision_bits()}});
  nlohmann::json policies = nlohmann::json::array();
  for (const auto& p : r.policies) policies.push_back({{"name", p.name()}, {"rule", p.formula()}});
  const bool fast = drift_uses_closed_form(r);
  nlohmann::json j = {{"param", "a"},
          {"from", r.from},
          {"to", r.to},
          {"points", r.points},
          {"spacing", r.log ? "log" : "linear"},
          {"recipes", recipes},
          {"policies", policies},
          {"policy_epsilon", "eps = 2^(1-p) of the recipe's result format"},
          {"svd", "in the result format: LAPACK dgesdd/sgesdd for binary64/binary32 (binary32 for binary16/bfloat16 results), Householder bidiagonalization and tridiagonal QR in MPFR for mpfrN"},
          {"resolution", r.resolution},
          {"max_seconds", r.max_seconds},
          {"resolution_rule", drift_resolution_rule(r)},
          {"bisection_assumption", "the divergence status changes at most once between adjacent grid points"},
          {"exact_rank_method", fast ? "closed form: det A = tanh a (proofs/P01-two-token.md)"
                                     : "transcendence method on the exact scores a*QK^T (proofs/P08-transcendence-rank.md)"},
          {"enclosure_method", !r.enclosures ? "not computed"
                               : fast        ? "sigma = {1, tanh|a|} (P01); tanh|a| by mpfr_tanh rounded down and up, 64 bits"
                               : drift_uses_binary64_enclosures(r)
                                   ? "binary64 path: LAPACK SVD of the object enclosed in binary64 and a rigorous residual bound "
                                     "(proofs/P16), above " + std::to_string(drift_mpfi_max_n) + " tokens; no MPFI escalation"
                                   : "Rump 2011 certified singular values in MPFI, escalating from " +
                                                   std::to_string(r.start_bits) + " to " + std::to_string(r.max_bits) + " bits"},
          {"enclosure_ends", "decimal strings rounded outward"}};
  if (!r.diagnostics.empty()) {
    nlohmann::json d = nlohmann::json::array();
    for (const auto& u : r.diagnostics)
      d.push_back({{"name", "diagnostic:" + u.name},
                   {"rule", "the caller's own rank function on the formed matrix (binary64 numbers; approx tier)"}});
    j["diagnostics"] = d;
  }
  return j;
}

std::size_t diverging_points(const drift_result& res) {
  std::size_t n = 0;
  for (const auto& p : res.points) n += p.diverges;
  return n;
}

// ---- columnar per-point JSON ---------------------------------------------------------------

// `"key": [f(0), f(1), ...]` on one line, at the given indentation.
template <class F>
void column(std::ostream& os, const std::string& indent, const char* key, std::size_t n, F&& put, bool last = false) {
  os << indent << '"' << key << "\": [";
  for (std::size_t i = 0; i < n; ++i) {
    if (i) os << ',';
    put(i);
  }
  os << (last ? "]\n" : "],\n");
}

void recipe_columns(std::ostream& os, const drift_request& r, const drift_result& res, std::size_t ri) {
  const auto& P = res.points;
  const std::size_t n = P.size();
  const std::string in = "        ";
  auto m = [&](std::size_t i) -> const recipe_measurement& { return P[i].recipes[ri]; };
  os << "      {\n" << in << "\"recipe\": ";
  put_json_string(os, r.recipes[ri].name);
  os << ",\n" << in << "\"svd\": ";
  put_json_string(os, drift_svd_label(r.recipes[ri]));
  os << ",\n";
  column(os, in, "formed", n, [&](std::size_t i) { os << (m(i).formed ? "true" : "false"); });
  os << in << "\"failures\": {";
  bool first = true;
  for (std::size_t i = 0; i < n; ++i)
    if (!m(i).formed) {
      os << (first ? "" : ",") << '"' << i << "\":";
      put_json_string(os, m(i).failure);
      first = false;
    }
  os << "},\n" << in << "\"numerical_rank\": {\n";
  // the policies, then the caller's diagnostics ("diagnostic:NAME")
  const std::size_t entries = r.policies.size() + r.diagnostics.size();
  for (std::size_t pi = 0; pi < entries; ++pi) {
    const bool policy = pi < r.policies.size();
    os << in << "  ";
    put_json_string(os, policy ? r.policies[pi].name() : "diagnostic:" + r.diagnostics[pi - r.policies.size()].name);
    os << ": [";
    for (std::size_t i = 0; i < n; ++i) {
      if (i) os << ',';
      if (m(i).formed) os << (policy ? m(i).ranks[pi] : m(i).diagnostic_ranks[pi - r.policies.size()]);
      else os << "null";
    }
    os << (pi + 1 < entries ? "],\n" : "]\n");
  }
  os << in << "},\n";
  column(os, in, "sigma_min", n, [&](std::size_t i) {
    if (!m(i).formed) os << "null";
    else if (!m(i).sigma_min_text.empty()) put_json_string(os, m(i).sigma_min_text);
    else put_json_double(os, m(i).sigma_min);
  });
  column(os, in, "condition_number", n, [&](std::size_t i) {
    if (!m(i).formed) os << "null";
    else if (std::isfinite(m(i).condition_number)) put_json_double(os, m(i).condition_number);
    else os << "\"inf\"";
  });
  column(os, in, "diverges", n, [&](std::size_t i) { os << (m(i).diverges ? "true" : "false"); }, true);
  os << "      }";
}

void point_columns(std::ostream& os, const drift_request& r, const drift_result& res) {
  const auto& P = res.points;
  const std::size_t n = P.size();
  const std::string in = "    ";
  auto str = [&](const std::string& s) { put_json_string(os, s); };
  os << "{\n" << in << "\"layout\": \"columnar: one array per column; index i is grid point i\",\n";
  column(os, in, "a", n, [&](std::size_t i) { put_json_double(os, P[i].a); });
  column(os, in, "exact_rank_lo", n, [&](std::size_t i) { os << P[i].exact.lo; });
  column(os, in, "exact_rank_hi", n, [&](std::size_t i) { os << P[i].exact.hi; });
  if (r.enclosures) {
    column(os, in, "sigma_min_enclosure_lo", n, [&](std::size_t i) { str(P[i].smin_lo); });
    column(os, in, "sigma_min_enclosure_hi", n, [&](std::size_t i) { str(P[i].smin_hi); });
    column(os, in, "condition_number_enclosure_lo", n, [&](std::size_t i) { str(P[i].cond_lo); });
    column(os, in, "condition_number_enclosure_hi", n, [&](std::size_t i) { str(P[i].cond_hi); });
    column(os, in, "enclosure_bits", n, [&](std::size_t i) { os << P[i].enclosure_bits; });
  }
  column(os, in, "diverges", n, [&](std::size_t i) { os << (P[i].diverges ? "true" : "false"); });
  os << in << "\"recipes\": [\n";
  for (std::size_t ri = 0; ri < r.recipes.size(); ++ri) {
    recipe_columns(os, r, res, ri);
    os << (ri + 1 < r.recipes.size() ? ",\n" : "\n");
  }
  os << in << "]\n  }";
}

// ---- text ----------------------------------------------------------------------------------

void text_point(std::ostream& os, const drift_request& r, const drift_point& p, const std::vector<std::size_t>& order) {
  os << "a = ";
  put17(os, p.a);
  os << "  exact rank ";
  if (p.exact.lo == p.exact.hi) os << p.exact.lo;
  else os << "[" << p.exact.lo << ", " << p.exact.hi << "]";
  if (r.enclosures)
    os << "  sigma_min in [" << p.smin_lo << ", " << p.smin_hi << "]  cond in [" << p.cond_lo << ", " << p.cond_hi << "]";
  os << (p.diverges ? "  DIVERGES" : "") << "\n";
  for (std::size_t ri = 0; ri < p.recipes.size(); ++ri) {
    const auto& m = p.recipes[ri];
    os << "    " << pad(r.recipes[ri].name, 14);
    for (std::size_t pi : order) {
      os << " " << r.policies[pi].name() << " ";
      if (m.formed) os << m.ranks[pi];
      else os << "-";
    }
    for (std::size_t k = 0; k < r.diagnostics.size(); ++k) {
      os << " diagnostic:" << r.diagnostics[k].name << " ";
      if (m.formed) os << m.diagnostic_ranks[k];
      else os << "-";
    }
    if (m.formed) {
      os << "  sigma_min ";
      if (m.sigma_min_text.empty()) put17(os, m.sigma_min);
      else os << m.sigma_min_text;
      os << "  cond ";
      if (std::isfinite(m.condition_number)) put17(os, m.condition_number);
      else os << "inf";
    } else {
      os << "  not formed: " << m.failure;
    }
    os << (m.diverges ? "  *\n" : "\n");
  }
}

// What a partial sweep left out (res.not_computed): "stopped at max_seconds S after N of M grid points",
// then `sep` and the stretch it covers when it stopped at its end, or the gaps when they lie anywhere
// (a sweep merged from runs, drift/runs.hpp).
std::string not_computed_text(const drift_request& r, const drift_result& res, const char* sep) {
  std::string s = "stopped at " + field("max_seconds") + " " + num17(r.max_seconds) + " after " + std::to_string(res.points.size()) +
                  " of " + std::to_string(res.points_planned) + " grid points";
  const auto& gaps = res.not_computed;
  if (gaps.size() == 1 && !res.grid.empty() && gaps[0].first > res.grid.back())
    return s + sep + "the sweep and its intervals cover a in [" + num17(res.grid.front()) + ", " + num17(res.grid.back()) + "] only";
  s += ": not computed: ";
  for (std::size_t i = 0; i < gaps.size(); ++i) {
    const grid_gap& g = gaps[i];
    s += (i ? ", " : "") + (g.points == 1 ? "a = " + num17(g.first)
                                          : "a in [" + num17(g.first) + ", " + num17(g.last) + "] (" + std::to_string(g.points) + " points)");
  }
  return s + "; the sweep and its intervals cover the other grid points only";
}

}  // namespace

nlohmann::json drift_json(const drift_request& r, const drift_result& res, const std::string& command) {
  nlohmann::json j;
  j["tool"] = "attncert";
  j["version"] = ATTNCERT_VERSION;
  j["command"] = command;
  j["inputs"] = drift_family_description(r);
  j["settings"] = settings_json(r);
  nlohmann::json div = nlohmann::json::array();
  std::size_t nint = 0;
  for (const auto& d : res.divergence) {
    nlohmann::json iv = nlohmann::json::array();
    for (const auto& [a, b] : d.intervals) iv.push_back({a, b});
    nint += d.intervals.size();
    div.push_back({{"recipe", d.recipe}, {"policy", d.policy}, {"intervals", iv},
                   {"bisection_evaluations", d.bisection_evaluations}});
  }
  j["divergence"] = div;
  j["summary"] = {{"points", res.points.size()}, {"diverging_points", diverging_points(res)}, {"intervals", nint},
                  {"partial", res.partial || res.bisection_stopped}, {"points_planned", res.points_planned}};
  if (res.bisection_stopped)
    j["summary"]["bisection"] = "stopped at " + field("max_seconds") + ": some interval ends are not bisected to the resolution (each is the "
                                "last point seen diverging; the boundary lies between it and the previous point seen quiet)";
  if (res.partial) j["summary"]["not_computed"] = not_computed_text(r, res, ": ");
  return j;
}

void write_drift_json(std::ostream& os, const drift_request& r, const drift_result& res, const std::string& command,
                      const drift_write_options& opt) {
  std::string head = drift_json(r, res, command).dump(2);  // "{\n  ...\n}"
  if (!opt.per_point) {
    os << head << "\n";
    return;
  }
  head.resize(head.size() - 2);  // drop "\n}": "points" is the last member
  os << head << ",\n  \"points\": ";
  point_columns(os, r, res);
  os << "\n}\n";
}

void write_drift_text(std::ostream& os, const drift_request& r, const drift_result& res, const drift_write_options& opt) {
  os << "attncert " << ATTNCERT_VERSION << " — drift of the numerical rank, family " << to_string(r.family) << ", object "
     << to_string(r.object) << "\n";
  const nlohmann::json s = settings_json(r);
  os << "a from " << num17(r.from) << " to " << num17(r.to) << ", " << r.points << " points (" << (r.log ? "log" : "linear")
     << "); exact rank: " << s["exact_rank_method"].get<std::string>() << "\n";
  os << "recipes (storage/scores/softmax/output/result):";
  for (const auto& rc : r.recipes)
    os << "  " << rc.name << " = " << rc.storage.name << "/" << rc.scores.name << "/" << rc.softmax.name << "/"
       << rc.output.name << "/" << rc.result.name;
  os << "\npolicies:";
  for (const auto& p : r.policies) os << "  " << p.name() << " (" << p.formula() << ")";
  os << "\n\ndivergence intervals (ends bisected; " << drift_resolution_rule(r) << ", resolution " << num17(r.resolution)
     << "):\n";
  std::size_t nint = 0;
  for (const auto& d : res.divergence) {
    os << "  " << pad(d.recipe, 14) << " " << pad(d.policy, 16);
    if (d.intervals.empty()) os << " none";
    for (const auto& [a, b] : d.intervals) os << " [" << num17(a) << ", " << num17(b) << "]";
    os << "\n";
    nint += d.intervals.size();
  }
  os << "summary: " << res.points.size() << " points, " << diverging_points(res) << " diverging, " << nint
     << " divergence intervals\n";
  if (res.bisection_stopped)
    os << "PARTIAL: the bisection stopped at " << field("max_seconds") << ": some interval ends are the last point seen diverging, not bisected "
          "to the resolution\n";
  if (res.partial) os << "PARTIAL: " << not_computed_text(r, res, "; ") << "\n";
  if (!opt.per_point) return;
  os << "\nper point (numerical rank per recipe and policy; * = some rank outside the exact rank):\n";
  const auto order = policies_by_name(r);
  for (const auto& p : res.points) text_point(os, r, p, order);
}

void write_drift_csv(std::ostream& os, const drift_request& r, const drift_result& res, const drift_write_options& opt) {
  os << "kind,a,exact_lo,exact_hi,sigma_min_lo,sigma_min_hi,cond_lo,cond_hi,recipe,policy,rank,sigma_min,"
        "condition_number,diverges,from,to\n";
  for (const auto& d : res.divergence)
    for (const auto& [a, b] : d.intervals)
      os << "divergence,,,,,,,," << csv_field(d.recipe) << "," << csv_field(d.policy) << ",,,,true," << num17(a) << ","
         << num17(b) << "\n";
  if (!opt.per_point) return;
  const auto order = policies_by_name(r);
  std::vector<std::string> recipe_names, policy_names;
  for (const auto& rc : r.recipes) recipe_names.push_back(csv_field(rc.name));
  for (const auto& p : r.policies) policy_names.push_back(csv_field(p.name()));
  for (const auto& p : res.points) {
    std::string lead = "point," + num17(p.a) + "," + std::to_string(p.exact.lo) + "," + std::to_string(p.exact.hi) + ",";
    lead += r.enclosures ? p.smin_lo + "," + p.smin_hi + "," + p.cond_lo + "," + p.cond_hi + "," : std::string(",,,,");
    for (std::size_t ri = 0; ri < p.recipes.size(); ++ri) {
      const auto& m = p.recipes[ri];
      std::string tail = ",";
      if (m.formed) {
        tail += m.sigma_min_text.empty() ? num17(m.sigma_min) : m.sigma_min_text;
        tail += ",";
        tail += std::isfinite(m.condition_number) ? num17(m.condition_number) : std::string("inf");
      } else {
        tail += ",";
      }
      tail += m.diverges ? ",true,,\n" : ",false,,\n";
      for (std::size_t pi : order) {
        os << lead << recipe_names[ri] << "," << policy_names[pi] << ",";
        if (m.formed) os << m.ranks[pi];
        os << tail;
      }
    }
  }
}

}  // namespace attncert::report
