// tests/fuzz/certify.cxx — libFuzzer harness: a claim (parse_claim_text), then certify, then
// the independent checker on the certificate certify produced.  Findings (abort): a crash or
// sanitizer report; an exception other than input_error / std::invalid_argument (the CLI
// would exit 70 "internal error" instead of 2); a CERTIFIED or REFUTED verdict whose
// certificate verify_certificate does not find VALID.
//
// Bounded work (the prover is exact, hence exponential in the worst case): run.sh caps inputs
// at 512 bytes (-max_len=512); skipped are claims with an array longer than 3 (matrices at
// most 3x3), a string longer than 16 characters, or in "objects" / "family" an integer beyond
// +-32 or a number p/q with |p| > 32 or q > 16 (small exponent spreads: a 2x2 singular-value
// claim with entries up to 127 takes ~25 s even in a release build, see the issue 11
// report); certify runs with a 256-bit precision cap; claims naming a file (".npy" /
// ".json") are skipped, so no file is read.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

#include "attncert/error.hpp"
#include "attncert/number/traits.hpp"
#include "attncert/verify/certificate.hpp"
#include "attncert/proofs/claim.hpp"

namespace {
bool small_number(const std::string& s) {
  try {
    const attncert::mpq_rational v = attncert::number_traits<attncert::mpq_rational>::from_string(s);
    return abs(numerator(v)) <= 32 && denominator(v) <= 16;
  } catch (const attncert::input_error&) {
    return true;  // not a number: only its length counts
  }
}

// `numbers`: also bound the values (for the objects and the family, which set the spreads).
bool small(const nlohmann::json& j, bool numbers) {
  if (j.is_array() && j.size() > 3) return false;
  if (j.is_string() && j.get_ref<const std::string&>().size() > 16 && j.get_ref<const std::string&>() != "rank_heads_lower_bound") return false;
  if (numbers && j.is_string() && !small_number(j.get_ref<const std::string&>())) return false;
  if (numbers && j.is_number_integer() && (j.get<long long>() > 32 || j.get<long long>() < -32)) return false;
  if (numbers && j.is_number_unsigned() && j.get<unsigned long long>() > 32) return false;
  if (j.is_structured())
    for (const auto& e : j)
      if (!small(e, numbers)) return false;
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace attncert;
  using namespace attncert::proofs;
  using namespace attncert::verify;
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (text.find(".npy") != std::string::npos || text.find(".json") != std::string::npos) return 0;
  nlohmann::json claim;
  try {
    claim = parse_claim_text(text);
  } catch (const input_error&) {
    return 0;
  }
  if (!small(claim, false)) return 0;
  for (const char* key : {"objects", "family"})
    if (claim.is_object() && claim.contains(key) && !small(claim[key], true)) return 0;
  // rank_heads_lower_bound: d <= 16 and max_degree <= 81 (the checker re-run below has no budget)
  if (claim.is_object() && claim.contains("quantity") && claim["quantity"].is_object()) {
    const nlohmann::json& q = claim["quantity"];
    for (const char* key : {"d", "max_degree"})
      if (q.contains(key) && q[key].is_number() && !(q[key].is_number_integer() && q[key].get<long long>() <= (key[0] == 'd' ? 16 : 81)))
        return 0;
  }
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
