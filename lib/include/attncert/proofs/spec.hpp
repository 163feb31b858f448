// attncert/proofs/spec.hpp — a certify call as its caller states it (the claim's text, where its files
// are, the caps), turned into one validated certify_request by one function.  The CLI fills a
// certify_spec from its options (the claim file read), the Python extension from its arguments; both
// get the same validation and the same one-line errors, which name the caller's fields with field()
// (field.hpp).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "attncert/proofs/claim.hpp"

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

}  // namespace attncert::proofs
