// attncert/verify/certificate.hpp — the independent checker of `attncert certify`
// certificates (`attncert verify-certificate`).
//
// Independence, by construction: lib/src/verify/ is its own library (CMake target
// attncert_verify) compiled with an include path that holds only this module's headers, linked
// only with the number libraries (GMP through Boost.Multiprecision, MPFR, MPFI) and the JSON
// parser; the CTest verify.independence fails if that ever changes.  It rebuilds the polynomial matrix
// M(u) from the claim's own data (S0, mask, V, X), recomputes every stated polynomial (minors
// by Laplace expansion over ℤ[u], the gcd by Euclid over ℚ, the Sturm sequence), re-derives
// the Sturm sign-variation counts, checks kernel vectors by polynomial multiplication, and
// re-derives the verdict.  FLINT is not used.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace attncert::verify {

struct verification {
  /// valid: every stated fact re-derived; invalid: a stated fact is false; malformed: not a
  /// certificate; unchecked: checking needs more than the precision cap (or a range end beyond
  /// |a/q| <= 10^4), or the caller stopped it (verify_options::stop) — the certificate may be
  /// valid, nothing is concluded.
  enum class status { valid, invalid, malformed, unchecked } result = status::invalid;
  std::vector<std::string> notes;  ///< what was checked (valid) or what failed (invalid / malformed)
  bool stopped = false;            ///< unchecked because verify_options::stop returned true
  int exit_code() const {
    return result == status::valid ? 0 : result == status::invalid ? 1 : result == status::malformed ? 2 : 3;
  }
};

struct verify_options {
  unsigned max_precision_bits = 8192;  ///< cap of the MPFI enclosures of e^{a/q}
  /// The caller's budget, without any dependency of the checker on it: polled in every loop whose
  /// length a certificate controls (Euclid and Sturm sequences over Q, Horner evaluations, products
  /// of large polynomials, Laplace expansions, minor enumeration, MPFI escalation); when it returns
  /// true the check stops with status unchecked and `stopped` set.  Between two polls the checker
  /// does one step of such a loop; the longest are MPFI exponentials near max_precision_bits
  /// (measured on 2 cores: 0.2 s at 2^18 bits, 1.9 s at 2^20, 8 s at 2^22; microseconds at the
  /// default 8192), which a stop cannot cut short.  Empty: never stops.  (The CLI passes
  /// deadline_passed() || interrupt_requested().)
  std::function<bool()> stop;
};

/// Parse a certificate file's text.  Errors: std::invalid_argument with a one-line message
/// on malformed JSON or nesting deeper than 64 levels (rejected while parsing, before the
/// document is built).  Numbers in certificates are strings or integers (README "Limits on
/// input": at most 100 000 digits, |decimal exponent| <= 100 000, else `malformed`).
nlohmann::json parse_certificate_text(const std::string& text);

/// Re-check a certificate.  Guarantee: `valid` only if every stated fact was re-derived
/// exactly (MPFI only for the enclosures of e^{a/q} at range ends and of a* = q·log u*) and the
/// stated verdict follows from them.  Small matrices only (minors by Laplace expansion; the
/// rank at a drop enumerates all minors of one size): size ≤ 8.
verification verify_certificate(const nlohmann::json& certificate, const verify_options& options = {});

/// A certificate field whose value does not enter the verdict: descriptive text that no check
/// could re-derive, or claim data the claimed quantity never reads.  `path` is a JSON pointer
/// with every array index written `#` (e.g. "/counterexample/why"); `quantity`, when not empty,
/// restricts the entry to certificates whose claim has that quantity; `when` restricts it
/// further: "" always, "masked" only the entries /claim/S0/i/j (or S_hat0) that the claim's mask
/// removes, "other_rows" only the rows i other than /claim/row.
struct irrelevant_field {
  std::string path;
  std::string quantity;
  std::string when;
  std::string reason;
};

/// The one list of verdict-irrelevant fields (documented in proofs/README.md, "Certificates").
/// Every other field of a certificate is a stated fact that verify_certificate re-derives
/// (tests/verify/tampering.cpp).
const std::vector<irrelevant_field>& verdict_irrelevant_fields();

/// Is the field at `pointer` (a JSON pointer into `certificate`, e.g. "/claim/S0/0/2") one of
/// verdict_irrelevant_fields()?  False for anything it cannot read.
bool verdict_irrelevant(const nlohmann::json& certificate, const std::string& pointer);

}  // namespace attncert::verify
