// tests/fuzz/verify.cxx — libFuzzer harness: the independent checker on arbitrary
// certificate text (parse_certificate_text, then verify_certificate).  Finding: any crash,
// sanitizer report, or exception escaping verify_certificate (it must answer VALID, INVALID
// or MALFORMED); parse_certificate_text may only throw std::invalid_argument.
//
// Bounded work: the checker is exponential in the matrix size by design (Laplace expansion,
// all minors at a drop, size <= 8) and its polynomial degrees grow with the denominators of
// the claim's entries, so certificates whose "claim" holds an array longer than 4 or a string
// longer than 16 characters are skipped, and run.sh caps inputs at 4 KiB (-max_len=4096).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

#include "attncert/verify/certificate.hpp"

namespace {
bool small(const nlohmann::json& j) {
  if (j.is_array() && j.size() > 4) return false;
  if (j.is_string() && j.get_ref<const std::string&>().size() > 16) return false;
  if (j.is_structured())
    for (const auto& e : j)
      if (!small(e)) return false;
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace attncert::verify;
  nlohmann::json cert;
  try {
    cert = parse_certificate_text(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const std::invalid_argument&) {
    return 0;
  }
  if (cert.is_object() && cert.contains("claim") && !small(cert["claim"])) return 0;
  try {
    (void)verify_certificate(cert).exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "finding: verify_certificate threw: %s\n", e.what());
    std::abort();
  }
  return 0;
}
