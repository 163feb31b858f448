// lib/src/report/oracle.cpp — tensors from .npy, and the report of `attncert oracle`.
#include "attncert/report/oracle.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "attncert/error.hpp"
#include "attncert/number/decimal.hpp"

namespace attncert::oracle {

namespace {

std::string shape_text(const std::vector<std::size_t>& s) {
  std::string t = "(";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + (s.size() == 1 ? ",)" : ")");
}

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

}  // namespace

tensor4 to_tensor4(const io::npy_array& a, const std::string& what) {
  tensor4 t;
  const auto& s = a.shape;
  if (a.type == io::dtype::b1) throw input_error(what + ": a bool array cannot be " + what);
  if (s.size() == 2) {
    t.n = s[0];
    t.d = s[1];
  } else if (s.size() == 3) {
    t.H = s[0];
    t.n = s[1];
    t.d = s[2];
  } else if (s.size() == 4) {
    t.B = s[0];
    t.H = s[1];
    t.n = s[2];
    t.d = s[3];
  } else {
    throw input_error(what + ": shape " + shape_text(s) + " is not (n, d), (h, n, d) or (b, h, n, d)");
  }
  if (t.B == 0 || t.H == 0 || t.n == 0 || t.d == 0) throw input_error(what + ": empty tensor, shape " + shape_text(s));
  t.values = a.values;
  return t;
}

bool_mask to_bool_mask(const io::npy_array& a, const std::string& what) {
  if (a.type != io::dtype::b1) throw input_error(what + ": a mask must be a bool array (true = may attend)");
  const auto& s = a.shape;
  bool_mask m;
  if (s.size() == 2) {
    m.nq = s[0];
    m.nk = s[1];
  } else if (s.size() == 3) {
    m.mh = s[0];
    m.nq = s[1];
    m.nk = s[2];
  } else if (s.size() == 4) {
    m.mb = s[0];
    m.mh = s[1];
    m.nq = s[2];
    m.nk = s[3];
  } else {
    throw input_error(what + ": mask shape " + shape_text(s) + " is not (n_q, n_k), (h, n_q, n_k) or (b, h, n_q, n_k)");
  }
  if (m.mb == 0 || m.mh == 0 || m.nq == 0 || m.nk == 0) throw input_error(what + ": empty mask, shape " + shape_text(s));
  m.allowed.resize(a.values.size());
  for (std::size_t i = 0; i < a.values.size(); ++i) m.allowed[i] = a.values[i] != 0;
  return m;
}

void set_qkv(oracle_request& req, const io::npy_array& q, const io::npy_array& k, const io::npy_array& v) {
  if (q.shape.size() != k.shape.size() || q.shape.size() != v.shape.size())
    throw input_error("Q, K and V must have the same number of dimensions (got " + std::to_string(q.shape.size()) + ", " +
                      std::to_string(k.shape.size()) + ", " + std::to_string(v.shape.size()) + ")");
  req.Q = to_tensor4(q, "--q");
  req.K = to_tensor4(k, "--k");
  req.V = to_tensor4(v, "--v");
}

std::vector<std::size_t> output_shape(const io::npy_array& q, const io::npy_array& v) {
  std::vector<std::size_t> s(q.shape.begin(), q.shape.end() - 1);
  s.push_back(v.shape.back());
  return s;
}

void check_candidate_array(const io::npy_array& c, const std::vector<std::size_t>& out_shape, const std::string& file) {
  if (c.shape != out_shape) {
    std::string s;
    for (auto x : out_shape) s += (s.empty() ? "" : ", ") + std::to_string(x);
    throw input_error(file + ": candidate shape does not match the output shape (" + s + ")");
  }
  if (c.type == io::dtype::b1) throw input_error(file + ": a candidate must be a float array");
}

void check_attention_array(const io::npy_array& a, const io::npy_array& q, const io::npy_array& k,
                           const std::string& file) {
  std::vector<std::size_t> want(q.shape.begin(), q.shape.end() - 1);
  want.push_back(k.shape[k.shape.size() - 2]);
  if (a.shape != want) throw input_error(file + ": attention candidate shape must be (…, n_q, n_k)");
}

io::npy_array reference_array(const oracle_result& r, target_format t, const std::vector<std::size_t>& shape) {
  io::npy_array ref;
  ref.type = t == target_format::binary64 ? io::dtype::f8 : t == target_format::binary16 ? io::dtype::f2 : io::dtype::f4;
  ref.shape = shape;
  ref.values = r.reference;
  ref.allow_nonfinite = true;
  return ref;
}

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
  os << "  target " << st.value("target", "?") << ", scale " << st.value("scale", "?") << ", mask " << st.value("mask", "?")
     << ", output shape (b, h, n_q, d_v) = " << j.at("output_shape").dump() << "\n";
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
