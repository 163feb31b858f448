// lib/src/report/oracle.cpp — the report of `attncert oracle` (JSON and text).
#include "attncert/report/oracle.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "attncert/error.hpp"
#include "attncert/number/decimal.hpp"

namespace attncert::oracle {

namespace {

// Numbers that need more than 17 digits are not needed here: every figure is a binary64
// value, printed with 17 significant digits (round-trips); non-finite values as strings.
nlohmann::json num(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

std::string fmt(double x, int prec = 4) {
  std::ostringstream os;
  os << std::setprecision(prec) << x;
  return os.str();
}

// How the LSE of each row was decided.
nlohmann::json lse_summary(const oracle_result& r, const nlohmann::json& file) {
  std::size_t dd = 0, mpfi = 0, faithful = 0, policy = 0, ieee = 0;
  for (auto h : r.lse_how) {
    if (h == decided_by::double_double) ++dd;
    else if (h == decided_by::mpfi) ++mpfi;
    else if (h == decided_by::faithful_only) ++faithful;
    else if (h == decided_by::exact_policy) ++policy;
    else if (h == decided_by::ieee_nonfinite) ++ieee;
  }
  return {{"target", to_string(r.lse_target)},
          {"file", file},
          {"decided_by", {{"fast_path", dd}, {"mpfi", mpfi}, {"faithful_at_cap", faithful}, {"empty_row", policy},
                          {"ieee_nonfinite", ieee}}}};
}

}  // namespace

nlohmann::json oracle_report(const oracle_report_input& in) {
  const oracle_result& r = *in.result;
  nlohmann::json j;
  j["tool"] = "attncert";
  j["version"] = ATTNCERT_VERSION;
  j["command"] = in.command;
  j["inputs"] = in.inputs;
  j["settings"] = in.settings;
  j["guarantee"] =
      "Each correctly_rounded element of the reference is the exact value of softmax(s*Q*K^T + mask)*V, computed from "
      "the exact input values, rounded to nearest (ties to even) in the target format. A faithful_only element is one "
      "of the two target numbers adjacent to the exact value. The sign of a zero result is not certified.";
  nlohmann::json decided = {{"double_double", r.by_double_double}};
  for (const auto& [bits, count] : r.by_mpfi) decided["mpfi_" + std::to_string(bits)] = count;
  if (r.faithful_only) decided["faithful_at_cap"] = r.faithful_only;
  j["summary"] = {{"elements", r.elements},
                  {"correctly_rounded", r.correctly_rounded},
                  {"faithful_only", r.faithful_only},
                  {"empty_row_policy", r.exact_policy},
                  {"ieee_nonfinite", r.ieee_nonfinite},
                  {"decided_by", decided},
                  {"rows", r.B * r.H * r.nq},
                  {"rows_escalated", r.rows_escalated},
                  {"rows_fast_path_declined", r.fast_path_rows_failed},
                  {"empty_rows", r.empty_rows},
                  {"fast_path_vectorized", r.fast_kernel_vectorized},
                  {"seconds", in.seconds}};
  if (r.padding_rows) j["summary"]["padding_rows"] = r.padding_rows;
  if (r.has_lse) j["lse"] = lse_summary(r, in.lse_file);
  j["output_shape"] = {r.B, r.H, r.nq, r.dv};
  j["reference"] = in.reference;
  nlohmann::json faithful = nlohmann::json::array();
  for (std::size_t e = 0; e < r.how.size() && faithful.size() < 100; ++e)
    if (r.how[e] == decided_by::faithful_only) {
      const std::size_t k = e % r.dv, i = (e / r.dv) % r.nq, h = (e / (r.dv * r.nq)) % r.H, b = e / (r.dv * r.nq * r.H);
      faithful.push_back({b, h, i, k});
    }
  j["faithful_only_elements"] = faithful;

  nlohmann::json reasons = nlohmann::json::array();
  nlohmann::json cands = nlohmann::json::array();
  for (std::size_t c = 0; c < in.candidates.size(); ++c) {
    const auto& g = in.candidates[c];
    nlohmann::json beyond;
    for (std::size_t q = 0; q < ulp_thresholds.size(); ++q) beyond[fmt(ulp_thresholds[q])] = g.beyond[q];
    nlohmann::json cj = {{"name", g.name},
                         {"file", c < in.candidate_files.size() ? in.candidate_files[c] : g.name},
                         {"elements", g.elements},
                         {"compared", g.compared},
                         {"max_ulp", num(g.max_ulp)},
                         {"mean_ulp", num(g.mean_ulp)},
                         {"max_abs_error", num(g.max_abs)},
                         {"max_rel_error", num(g.max_rel)},
                         {"beyond_ulps", beyond},
                         {"nonfinite_where_truth_finite", g.nonfinite_where_finite}};
    if (g.has_worst) {
      const std::size_t e = ((g.worst[0] * r.H + g.worst[1]) * r.nq + g.worst[2]) * r.dv + g.worst[3];
      cj["worst"] = {{"index_bhik", g.worst}, {"truth_approx", num(r.t_hi[e] + r.t_lo[e])}, {"reference", num(r.reference[e])}};
    }
    if (in.max_ulp) {
      const bool ok = g.max_ulp <= *in.max_ulp && g.nonfinite_where_finite == 0;
      cj["within_max_ulp"] = ok;
      if (!ok)
        reasons.push_back("candidate " + g.name + ": max error " + fmt(g.max_ulp) + " ulps" +
                          (g.nonfinite_where_finite ? " and " + std::to_string(g.nonfinite_where_finite) + " NaN/Inf" : "") +
                          " exceeds --max-ulp " + fmt(*in.max_ulp));
    }
    cands.push_back(cj);
  }
  j["candidates"] = cands;
  if (in.candidates.size() >= 2) {
    const auto& a = in.candidates[0];
    const auto& b = in.candidates[1];
    const bool pass = a.nonfinite_where_finite == 0 && a.max_ulp <= 2 * b.max_ulp;
    j["comparison"] = {{"rule", "max error of candidate 1 <= 2 x max error of candidate 2 (FlashAttention's acceptance test)"},
                       {"candidate", a.name},
                       {"baseline", b.name},
                       {"candidate_max_ulp", num(a.max_ulp)},
                       {"baseline_max_ulp", num(b.max_ulp)},
                       {"ratio", b.max_ulp > 0 ? num(a.max_ulp / b.max_ulp) : nlohmann::json(nullptr)},
                       {"verdict", pass ? "pass" : "fail"}};
  }
  if (in.attention) {
    const auto& g = *in.attention;
    nlohmann::json rows = nlohmann::json::array();
    for (double x : g.row_l1) rows.push_back(num(x));
    j["attention"] = {{"rows", g.rows},
                      {"max_row_l1_error", num(g.max_row_l1)},
                      {"max_row_l1_error_is", "an upper bound: the largest upper end of the per-row enclosures"},
                      {"row_l1_error", rows},
                      {"row_l1_error_is", "per row, the midpoint of a rigorous enclosure (approx, not a bound)"},
                      {"output_bound",
                       {{"statement", "||((A_hat - A) V)_i||_2 <= ||A_hat_i - A_i||_1 * max_j ||v_j||_2 (article section 11)"},
                        {"certified", g.bound_certified},
                        {"undecided", g.bound_undecided},
                        {"refuted", g.bound_refuted},
                        {"rows_skipped", g.rows_skipped}}}};
    if (g.bound_refuted) reasons.push_back("the output bound was refuted on " + std::to_string(g.bound_refuted) + " rows");
  }
  j["verdict"] = {{"exit_code", reasons.empty() ? 0 : 1}, {"reasons", reasons}};
  return j;
}

int oracle_exit_code(const nlohmann::json& report) { return report.at("verdict").at("exit_code").get<int>(); }

void write_oracle_text(std::ostream& os, const nlohmann::json& j) {
  const auto& s = j.at("summary");
  const auto& st = j.at("settings");
  os << "attncert oracle — certified reference for softmax(s·QKᵀ + mask)·V\n";
  std::string masks = "?";
  if (st.contains("mask")) {
    const auto& m = st.at("mask");
    if (m.is_string()) masks = m.get<std::string>();
    else if (m.is_array()) {
      masks.clear();
      for (const auto& x : m) masks += (masks.empty() ? "" : " + ") + x.get<std::string>();
    }
  }
  os << "  target " << st.value("target", "?") << ", scale " << st.value("scale", "?") << ", mask " << masks
     << ", output shape (b, h, n_q, d_v) = " << j.at("output_shape").dump() << "\n";
  if (st.contains("variant")) os << "  variant " << st.at("variant").dump() << "\n";
  os << "  elements " << s.at("elements") << ": correctly rounded " << s.at("correctly_rounded") << ", faithful only "
     << s.at("faithful_only");
  if (s.at("empty_row_policy").get<std::size_t>()) os << ", empty-row policy " << s.at("empty_row_policy");
  if (s.at("ieee_nonfinite").get<std::size_t>()) os << ", IEEE (non-finite inputs, not certified) " << s.at("ieee_nonfinite");
  os << "\n  decided by:";
  for (auto it = s.at("decided_by").begin(); it != s.at("decided_by").end(); ++it) os << " " << it.key() << " " << it.value();
  os << "\n  rows " << s.at("rows") << " (escalated " << s.at("rows_escalated") << ", fast path declined "
     << s.at("rows_fast_path_declined") << "), " << fmt(s.at("seconds").get<double>(), 3) << " s\n";
  if (!j.at("reference").is_null()) os << "  reference written to " << j.at("reference").value("file", "?") << "\n";
  auto g4 = [](const nlohmann::json& x) { return x.is_number() ? fmt(x.get<double>(), 4) : x.get<std::string>(); };
  for (const auto& c : j.at("candidates")) {
    os << "candidate " << c.at("name").get<std::string>() << " (" << c.at("file").get<std::string>() << "): max "
       << g4(c.at("max_ulp")) << " ulp, mean " << g4(c.at("mean_ulp")) << " ulp, max abs error " << g4(c.at("max_abs_error"))
       << ", max rel error " << g4(c.at("max_rel_error")) << "\n    elements beyond";
    for (double t : ulp_thresholds) os << " " << fmt(t) << " ulp: " << c.at("beyond_ulps").at(fmt(t));
    os << "; NaN/Inf where finite: " << c.at("nonfinite_where_truth_finite");
    if (c.contains("worst")) os << "; worst at (b, h, i, k) = " << c.at("worst").at("index_bhik").dump();
    if (c.contains("within_max_ulp")) os << (c.at("within_max_ulp").get<bool>() ? "; within --max-ulp" : "; EXCEEDS --max-ulp");
    os << "\n";
  }
  if (j.contains("comparison")) {
    const auto& c = j.at("comparison");
    os << "comparison: " << c.at("candidate").get<std::string>() << " max " << g4(c.at("candidate_max_ulp")) << " ulp vs "
       << c.at("baseline").get<std::string>() << " max " << g4(c.at("baseline_max_ulp")) << " ulp: "
       << c.at("verdict").get<std::string>() << " (" << c.at("rule").get<std::string>() << ")\n";
  }
  if (j.contains("attention")) {
    const auto& a = j.at("attention");
    const auto& b = a.at("output_bound");
    // max_row_l1_error is an upper bound: shown rounded up (decimal.hpp), never to nearest.
    const auto& m = a.at("max_row_l1_error");
    os << "attention candidate: max row-L1 error <= "
       << (m.is_number() ? decimal_up(m.get<double>(), 4, decimal_layout::general) : m.get<std::string>())
       << "; output bound certified on "
       << b.at("certified") << " of " << a.at("rows") << " rows (undecided " << b.at("undecided") << ", refuted "
       << b.at("refuted") << ", skipped " << b.at("rows_skipped") << ")\n";
  }
  for (const auto& r : j.at("verdict").at("reasons")) os << "FAIL: " << r.get<std::string>() << "\n";
}

}  // namespace attncert::oracle
