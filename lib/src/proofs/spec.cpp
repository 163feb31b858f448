// lib/src/proofs/spec.cpp — a certify or verify-certificate call as its caller states it, into one
// validated request.
#include "attncert/proofs/spec.hpp"

#include <sstream>
#include <stdexcept>

#include "attncert/deadline.hpp"
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

verify_request build_verify_request(const verify_spec& s) {
  if (!(s.max_seconds >= 0) || s.max_seconds > 1e7) throw input_error(field("max_seconds") + " must be in [0, 1e7] (0: no limit)");
  if (s.max_precision < 64 || s.max_precision > (1u << 22))
    throw input_error(field("max_precision") + " must be in [64, 4194304], got " + std::to_string(s.max_precision));
  verify_request r;
  try {
    r.certificate = verify::parse_certificate_text(s.certificate_text);
  } catch (const std::invalid_argument& e) {
    throw input_error(one_line(s.certificate, 4096) + ": " + e.what());
  }
  r.name = s.certificate;
  r.max_precision_bits = s.max_precision;
  r.max_seconds = s.max_seconds;
  return r;
}

verify::verification verify(const verify_request& r) {
  verify::verify_options opt;
  opt.max_precision_bits = r.max_precision_bits;
  opt.stop = [] { return deadline_passed() || interrupt_requested(); };
  verify::verification v = verify::verify_certificate(r.certificate, opt);
  check_interrupt();
  if (v.stopped) {
    std::ostringstream os;  // the budget as given, without trailing zeros ("0.5", "60", "1e-06")
    os << r.max_seconds;
    v.notes.push_back("not checked within " + field("max_seconds") + " " + os.str() + " (raise it; 0: no limit)");
  }
  return v;
}

const char* status_text(const verify::verification& v) {
  using st = verify::verification::status;
  return v.result == st::valid ? "VALID" : v.result == st::invalid ? "INVALID" : v.result == st::malformed ? "MALFORMED" : "UNCHECKED";
}

nlohmann::json verification_json(const verify_request& r, const verify::verification& v) {
  nlohmann::json j{{"certificate", r.name}, {"status", status_text(v)}, {"checks", v.notes}};
  if (r.max_seconds > 0) j["max_seconds"] = r.max_seconds;
  if (v.stopped) j["why"] = v.notes.back();
  return j;
}

std::string verification_text(const verify_request& r, const verify::verification& v) {
  std::string text = std::string(status_text(v)) + ": " + r.name + "\n";
  for (const auto& n : v.notes) text += "  " + n + "\n";
  return text;
}

}  // namespace attncert::proofs
