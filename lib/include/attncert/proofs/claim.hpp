// attncert/proofs/claim.hpp — claim files and `attncert certify` (the prover).
// Format and examples: proofs/README.md.  Parameter families: proofs/P09-parameter-families.md.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace attncert::proofs {

/// A malformed claim: `pointer` is the JSON pointer of the problem ("/objects/S/1/2").
struct claim_error {
  std::string pointer, message;
};

enum class claim_verdict { certified, refuted, undecided };
const char* to_string(claim_verdict v);

struct certify_result {
  claim_verdict verdict = claim_verdict::undecided;
  std::string summary;        ///< one paragraph for humans
  nlohmann::json certificate; ///< the certificate (null when undecided)
  nlohmann::json report;      ///< JSON report (verdict, summary, details, certificate_check)
  bool disagreement = false;  ///< the checker rejected the prover's certificate (verdict is then UNDECIDED)
  double check_seconds = 0;   ///< time the independent checker took
  int exit_code() const { return verdict == claim_verdict::certified ? 0 : verdict == claim_verdict::refuted ? 1 : 3; }
};

/// Parse a claim file's text keeping every non-integer JSON number as its decimal text (a
/// string), so that 0.1 is read as 1/10 exactly and the literal 1e100000 is read like the
/// string "1e100000" (both subject to the digit and exponent limits of number/traits.hpp).
/// Errors: input_error with the byte offset; input_error for nesting deeper than
/// io::max_json_depth (64) levels, rejected before anything deeper is built.
nlohmann::json parse_claim_text(const std::string& text);

/// Certify the claim in `claim` (already parsed JSON; `base_dir` resolves relative .npy /
/// .json matrix paths).  Throws input_error with the message "POINTER: why" when the claim
/// is malformed or asks for a quantity not supported yet.  Guarantee: CERTIFIED only when
/// the exact computation proves the claim; REFUTED only with an exact counterexample; both
/// come with a certificate that the independent checker (`verify_certificate`) has already
/// re-checked: a certificate it does not call VALID turns the verdict into UNDECIDED
/// (`disagreement` when it calls it INVALID/MALFORMED).  No option turns the check off.
/// `max_seconds` > 0 bounds the wall-clock time of the prover and of the checker's re-check
/// together (then UNDECIDED, "time limit"; a re-check stopped by it: `certificate_check.stopped`).
/// Never a verdict from floats.
certify_result certify(const nlohmann::json& claim, const std::string& base_dir, unsigned max_precision_bits = 4096,
                       double max_seconds = 0);

/// The translation-validation step of `certify`, exposed for tests: runs the independent
/// checker (cap max(8192, 2·max_precision_bits)) on a prover result's certificate; a
/// CERTIFIED/REFUTED whose certificate is not VALID comes back UNDECIDED (with `disagreement`
/// when the checker calls it INVALID or MALFORMED).  Adds `certificate_check` to the report.
/// The checker stops when this thread's deadline passes (deadline.hpp; then UNDECIDED, the
/// certificate UNCHECKED, `certificate_check.stopped`); throws `interrupted` after an interruption.
certify_result validate_with_checker(certify_result prover_result, unsigned max_precision_bits = 4096);

}  // namespace attncert::proofs
