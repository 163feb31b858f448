// lib/src/proofs/spec.cpp — a certify call as its caller states it, into one validated request.
#include "attncert/proofs/spec.hpp"

#include "attncert/error.hpp"
#include "attncert/field.hpp"

namespace attncert::proofs {

certify_request build_certify_request(const certify_spec& s) {
  if (!(s.max_seconds >= 0) || s.max_seconds > 1e7) throw input_error(field("max_seconds") + " must be in [0, 1e7] (0: no limit)");
  if (s.max_precision < 64 || s.max_precision > (1u << 20))
    throw input_error(field("max_precision") + " must be in [64, 1048576], got " + std::to_string(s.max_precision));
  certify_request r;
  r.claim = parse_claim_text(s.claim_text);
  r.base_dir = s.base_dir.empty() ? "." : s.base_dir;
  r.max_bits = s.max_precision;
  r.max_seconds = s.max_seconds;
  return r;
}

certify_result certify(const certify_request& r) { return certify(r.claim, r.base_dir, r.max_bits, r.max_seconds); }

}  // namespace attncert::proofs
