// tests/fuzz/certify.cxx — libFuzzer harness: a claim (parse_claim_text), then certify, then
// the independent checker on the certificate certify produced.  Findings (abort): a crash or
// sanitizer report; an exception other than input_error / std::invalid_argument (the CLI
// would exit 70 "internal error" instead of 2); a CERTIFIED or REFUTED verdict whose
// certificate verify_certificate does not find VALID.
//
// Bounded work (the prover is exact, hence exponential in the worst case): run.sh caps inputs
// at 512 bytes (-max_len=512); claims with an array longer than 3 (matrices at most 3x3), a
// string longer than 16 characters (small numerators, denominators and exponents, so small
// exponent spreads) or an integer beyond +-1000 are skipped; certify runs with a 256-bit
// precision cap; claims naming a file (".npy" / ".json") are skipped, so no file is read.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

#include "attncert/error.hpp"
#include "attncert/proofs/certificate_verify.hpp"
#include "attncert/proofs/claim.hpp"

namespace {
bool small(const nlohmann::json& j) {
  if (j.is_array() && j.size() > 3) return false;
  if (j.is_string() && j.get_ref<const std::string&>().size() > 16) return false;
  if (j.is_number_integer() && (j.get<long long>() > 1000 || j.get<long long>() < -1000)) return false;
  if (j.is_number_unsigned() && j.get<unsigned long long>() > 1000) return false;
  if (j.is_structured())
    for (const auto& e : j)
      if (!small(e)) return false;
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace attncert;
  using namespace attncert::proofs;
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (text.find(".npy") != std::string::npos || text.find(".json") != std::string::npos) return 0;
  nlohmann::json claim;
  try {
    claim = parse_claim_text(text);
  } catch (const input_error&) {
    return 0;
  }
  if (!small(claim)) return 0;
  certify_result r;
  try {
    r = certify(claim, "/nonexistent", 256, 10.0);  // 10 s budget: UNDECIDED before libFuzzer's 25 s timeout
  } catch (const input_error&) {
    return 0;
  } catch (const std::invalid_argument&) {
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "finding: certify threw %s (CLI: internal error, exit 70)\n", e.what());
    std::abort();
  }
  if (r.disagreement) {  // certify's own translation validation caught a prover bug
    std::fprintf(stderr, "finding: internal disagreement: %s\n", r.report.dump().c_str());
    std::abort();
  }
  if (r.verdict == claim_verdict::undecided) return 0;
  const verification v = verify_certificate(r.certificate);
  if (v.exit_code() != 0) {
    std::fprintf(stderr, "finding: %s certificate rejected by the checker (%s): %s\n", to_string(r.verdict),
                 v.notes.empty() ? "" : v.notes.back().c_str(), r.certificate.dump().c_str());
    std::abort();
  }
  return 0;
}
