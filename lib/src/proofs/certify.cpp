// `attncert certify`: the dispatch from a parsed claim to its prover, and the translation
// validation of every verdict by the independent checker.  See attncert/proofs/claim.hpp.
#include <chrono>

#include "attncert/deadline.hpp"
#include "attncert/field.hpp"
#include "attncert/verify/certificate.hpp"
#include "provers.hpp"

namespace attncert::proofs {

const char* to_string(claim_verdict v) {
  switch (v) {
    case claim_verdict::certified: return "CERTIFIED";
    case claim_verdict::refuted: return "REFUTED";
    default: return "UNDECIDED";
  }
}

namespace detail {

poly_family build_claim_family(const family_input& in) {
  try {
    return build_family(in);
  } catch (const family_too_large&) {
    throw;
  } catch (const input_error& e) {
    fail("/objects", e.what());
  }
}

}  // namespace detail

namespace {

using namespace detail;

// The family a·(1/sqrt(d))·QKᵀ with d not a square is not of the form a·S0 with S0 rational.
certify_result irrational_family_result(const layer_claim& c, const nlohmann::json& claim) {
  certify_result res;
  res.report = report_header(claim);
  res.report["claim"] = layer_claim_text(c);
  const std::string summary = "UNDECIDED: the family a * (1/sqrt(d)) * Q K^T with irrational scale is not of the form a * S0 with S0 rational; "
                              "only rational scales are supported for parameter ranges";
  return mark_undecided(res, summary, summary);
}

certify_result prove_layer_claim(const layer_claim& c, const nlohmann::json& claim, unsigned max_bits) {
  if (!c.algebraic_point.empty() && c.has_family) return irrational_family_result(c, claim);
  switch (c.kind) {
    case quantity_kind::singular_value: return prove_singular_value(c, claim, max_bits);
    case quantity_kind::determinant:
    case quantity_kind::output_value: return prove_ratio(c, claim, max_bits);
    default: return prove_rank(c, claim, max_bits);
  }
}

// The prover: a verdict and its certificate, not yet checked (certify() below checks it).
certify_result prove_claim(const nlohmann::json& claim, const std::string& base_dir, unsigned max_bits) {
  const parsed_claim parsed = parse_claim(claim, base_dir);
  if (!parsed.not_supported.empty()) return undecided_result(claim, parsed.not_supported);
  try {
    if (const auto* c = std::get_if<output_bound_claim>(&parsed.body)) return prove_output_bound(*c, claim, max_bits);
    if (const auto* c = std::get_if<numerical_rank_claim>(&parsed.body)) return prove_numerical_rank(*c, claim);
    if (const auto* c = std::get_if<rank_heads_claim>(&parsed.body)) return prove_rank_heads(*c, claim, max_bits);
    if (const auto* c = std::get_if<rank_heads_vote_claim>(&parsed.body)) return prove_rank_heads_vote(*c, claim);
    if (const auto* c = std::get_if<rank_heads_full_rank_claim>(&parsed.body)) return prove_rank_heads_full_rank(*c, claim);
    if (const auto* c = std::get_if<rank_heads_hardmax_claim>(&parsed.body)) return prove_rank_heads_hardmax(*c, claim, max_bits);
    if (const auto* c = std::get_if<rank_heads_directions_claim>(&parsed.body)) return prove_rank_heads_directions(*c, claim);
    if (const auto* c = std::get_if<rank_heads_context_claim>(&parsed.body)) return prove_rank_heads_context(*c, claim);
    if (const auto* c = std::get_if<rank_heads_pair_hit_claim>(&parsed.body)) return prove_rank_heads_pair_hit(*c, claim, max_bits);
    if (const auto* c = std::get_if<nearest_neighbour_model_claim>(&parsed.body)) return prove_nearest_neighbour_model(*c, claim);
    return prove_layer_claim(std::get<layer_claim>(parsed.body), claim, max_bits);
  } catch (const family_too_large& e) {
    return undecided_result(claim, e.what());  // a valid claim whose polynomials would be too large
  }
}

}  // namespace

// Translation validation (as CompCert does it): every CERTIFIED or REFUTED verdict of the prover
// is re-derived by the independent checker from the certificate just written, before anyone
// sees it.  A rejected certificate turns the verdict into UNDECIDED ("internal disagreement"),
// keeping the prover's verdict, the certificate and the checker's notes in the report.
// One budget for the command (deadline.hpp): the prover, then the checker's re-check of its
// certificate.
certify_result certify(const nlohmann::json& claim, const std::string& base_dir, unsigned max_bits, double max_seconds) {
  deadline_scope limit(max_seconds);
  certify_result res;
  try {
    res = prove_claim(claim, base_dir, max_bits);
  } catch (const time_limit_reached& e) {
    res = undecided_result(claim, std::string(e.what()) + " (raise it with " + field("max_seconds") + ")");
    res.report["max_seconds"] = max_seconds;
    return res;
  } catch (const method_limit& e) {
    return undecided_result(claim, e.what());
  }
  res = validate_with_checker(std::move(res), max_bits);
  if (res.report.contains("certificate_check") && res.report["certificate_check"].value("stopped", false)) res.report["max_seconds"] = max_seconds;
  return res;
}

certify_result validate_with_checker(certify_result res, unsigned max_bits) {
  if (res.verdict == claim_verdict::undecided) return res;
  const auto t0 = std::chrono::steady_clock::now();
  verify::verify_options vo;
  vo.max_precision_bits = std::max(8192u, max_bits > (1u << 30) ? max_bits : 2 * max_bits);
  // the caller's budget and interruptions reach the checker through its own hook (it includes
  // no attncert header)
  vo.stop = [] { return deadline_passed() || interrupt_requested(); };
  const verify::verification v = verify::verify_certificate(res.certificate, vo);
  check_interrupt();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const char* status = v.result == verify::verification::status::valid       ? "VALID"
                       : v.result == verify::verification::status::invalid   ? "INVALID"
                       : v.result == verify::verification::status::malformed ? "MALFORMED"
                                                                     : "UNCHECKED";
  res.report["certificate_check"] = {{"status", status}, {"seconds", secs}, {"checker_precision_cap_bits", vo.max_precision_bits}};
  if (v.stopped) res.report["certificate_check"]["stopped"] = true;
  res.check_seconds = secs;
  if (v.result == verify::verification::status::valid) return res;
  const std::string prover = to_string(res.verdict);
  const std::string why_checker = v.notes.empty() ? std::string("no reason given") : v.notes.back();
  std::string why;
  if (v.stopped) {
    why = "the prover answered " + prover + " but the time limit was reached while the independent checker re-checked the certificate "
          "(raise it with " + field("max_seconds") + ")";
  } else if (v.result == verify::verification::status::unchecked) {
    why = "the prover answered " + prover + " but the independent checker could not re-check the certificate within its cap (" +
          why_checker + ")";
  } else {
    res.disagreement = true;
    why = "internal disagreement: the prover answered " + prover + " but the independent checker calls its certificate " + status + " (" +
          why_checker + ")";
  }
  res.verdict = claim_verdict::undecided;
  res.report["prover_verdict"] = prover;
  res.report["verdict"] = "UNDECIDED";
  res.report["why"] = why;
  res.report["checker_notes"] = v.notes;
  res.report["rejected_certificate"] = res.certificate;
  res.summary = "UNDECIDED: " + why + "\n  the prover's summary was:\n" + res.summary;
  res.report["summary"] = res.summary;
  return res;
}

}  // namespace attncert::proofs
