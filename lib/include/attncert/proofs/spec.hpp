// attncert/proofs/spec.hpp — a certify call as its caller states it (the claim's text, where its files
// are, the caps), turned into one validated certify_request by one function; the same for a
// verify-certificate call (verify_spec).  The CLI fills a spec from its options (the file read), the
// Python extension from its arguments; both get the same validation and the same one-line errors,
// which name the caller's fields with field() (field.hpp).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "attncert/proofs/claim.hpp"
#include "attncert/verify/certificate.hpp"

namespace attncert::proofs {

/// Everything a certify call says.  Field names (field.hpp) are the members' names.
struct certify_spec {
  std::string claim_text;         ///< the claim as JSON text (a claim file's content)
  std::string base_dir;           ///< where relative matrix paths resolve ("": ".")
  unsigned max_precision = 4096;  ///< cap (bits) of the enclosures, in [64, 2^20]
  double max_seconds = 60;        ///< in [0, 1e7] (0: no limit)
};

/// What proofs::certify takes, validated.
struct certify_request {
  nlohmann::json claim;  ///< parse_claim_text's
  std::string base_dir;
  unsigned max_bits = 4096;
  double max_seconds = 60;
};

/// The request of `s`.  Errors (input_error, one line, fields named with field()): max_seconds or
/// max_precision out of range; what parse_claim_text rejects.
certify_request build_certify_request(const certify_spec& s);

/// proofs::certify of a built request.
certify_result certify(const certify_request& r);

/// Everything a verify-certificate call says.
struct verify_spec {
  std::string certificate_text;   ///< the certificate as JSON text (a certificate file's content)
  std::string certificate;        ///< what the caller calls it (a file name): heads a parse error, named in reports
  unsigned max_precision = 8192;  ///< cap (bits) of the checker's enclosures of e^{a/q}, in [64, 2^22]
  double max_seconds = 0;         ///< in [0, 1e7] (0: no limit)
};

/// What the independent checker takes (verify/certificate.hpp), validated.
struct verify_request {
  nlohmann::json certificate;  ///< verify::parse_certificate_text's
  std::string name;            ///< verify_spec::certificate
  unsigned max_precision_bits = 8192;
  double max_seconds = 0;
};

/// The request of `s`.  Errors (input_error, one line): max_seconds or max_precision out of range
/// (naming the field); text that is not JSON ("NAME: ...", as parse_certificate_text says).
verify_request build_verify_request(const verify_spec& s);

/// verify::verify_certificate of a built request.  The checker includes no attncert header: the
/// caller's budget (deadline.hpp: the caller's deadline_scope, which may cover reading the file too)
/// and interruptions reach it through its stop hook.  A check stopped there is UNCHECKED, with a last
/// note saying so (naming max_seconds).
verify::verification verify(const verify_request& r);

/// The verification as the reports show it: "VALID", "INVALID", "MALFORMED" or "UNCHECKED".
const char* status_text(const verify::verification& v);
/// The report of a verification: JSON (certificate, status, checks, max_seconds when given, why when
/// stopped) and text (the status and the name, then one note per line).
nlohmann::json verification_json(const verify_request& r, const verify::verification& v);
std::string verification_text(const verify_request& r, const verify::verification& v);

}  // namespace attncert::proofs
