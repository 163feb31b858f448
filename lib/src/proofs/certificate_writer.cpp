// The certificate writer: report and certificate headers and the JSON encodings shared by
// the provers.  The certificate format is read by the independent checker
// (attncert/verify/certificate.hpp); this file writes it and computes nothing.
#include "provers.hpp"

namespace attncert::proofs::detail {

nlohmann::json report_header(const nlohmann::json& claim, bool with_title) {
  nlohmann::json report = {{"tool", "attncert"}, {"version", ATTNCERT_VERSION}};
  if (with_title && claim.is_object() && claim.contains("title")) report["title"] = claim["title"];
  return report;
}

nlohmann::json certificate_header(nlohmann::json claim_section, claim_verdict verdict) {
  return {{"format", "attncert-certificate/1"},
          {"tool", "attncert"},
          {"version", ATTNCERT_VERSION},
          {"claim", std::move(claim_section)},
          {"verdict", to_string(verdict)}};
}

certify_result undecided_result(const nlohmann::json& claim, const std::string& why) {
  certify_result res;
  res.summary = "UNDECIDED: " + why + "\n";
  res.report = report_header(claim);
  res.report["verdict"] = "UNDECIDED";
  res.report["why"] = why;
  res.report["summary"] = res.summary;
  return res;
}

certify_result& mark_undecided(certify_result& res, const std::string& summary, const std::string& why) {
  res.verdict = claim_verdict::undecided;
  res.summary = summary;
  res.report["verdict"] = "UNDECIDED";
  res.report["why"] = why;
  return res;
}

nlohmann::json matrix_json(const matrix<mpq_rational>& m) {
  nlohmann::json a = nlohmann::json::array();
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    nlohmann::json r = nlohmann::json::array();
    for (Eigen::Index j = 0; j < m.cols(); ++j) r.push_back(m(i, j).str());
    a.push_back(r);
  }
  return a;
}

nlohmann::json poly_json(const int_poly& p) { return to_strings(p); }

nlohmann::json sturm_json(const int_poly& squarefree) {
  nlohmann::json st = nlohmann::json::array();
  for (const auto& p : sturm_sequence(squarefree)) st.push_back(poly_json(p));
  return st;
}

namespace {

nlohmann::json mask_json(const mask& M, Eigen::Index rows, Eigen::Index cols) {
  if (M.type() == mask::kind::none) return "none";
  if (M.type() == mask::kind::causal) return "causal";
  nlohmann::json mm = nlohmann::json::array();
  for (Eigen::Index i = 0; i < rows; ++i) {
    nlohmann::json r = nlohmann::json::array();
    for (Eigen::Index j = 0; j < cols; ++j) r.push_back(M.allows(i, j) ? 1 : 0);
    mm.push_back(r);
  }
  return mm;
}

}  // namespace

nlohmann::json layer_claim_json(const layer_claim& c, const nlohmann::json& claim) {
  const family_input& in = c.in;
  nlohmann::json cl;
  if (claim.contains("title")) cl["title"] = claim["title"];
  cl["S0"] = matrix_json(in.S0);
  cl["mask"] = mask_json(in.M, in.S0.rows(), in.S0.cols());
  if (in.V) cl["V"] = matrix_json(*in.V);
  if (in.X) cl["X"] = matrix_json(*in.X);
  cl["object"] = to_string(c.object);
  if (!c.algebraic_point.empty()) cl["point_algebraic_nonzero"] = c.algebraic_point;
  else if (c.range.is_point()) cl["point"] = rational_string(*c.range.lo);
  else cl["range"] = c.range.describe();
  return cl;
}

}  // namespace attncert::proofs::detail
