// tests/verify/certificate.cpp — the independent checker on hostile certificates
// (issue 11, item 4): numbers that are not exact rationals ("1/0", "abc", null, arrays,
// exponents beyond the limit or at LLONG_MIN, 10^6 digits) and a numerical-rank claim.point
// that is not a number are MALFORMED (exit 2), never VALID or INVALID; deep nesting is
// rejected while parsing; a stop asked by the caller's hook (verify_options::stop) at any of
// the checker's polls is UNCHECKED (exit 3).  Certificates come from `certify` on small claims.
#define BOOST_TEST_MODULE proofs_certificate_verify
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "attncert/verify/certificate.hpp"
#include "attncert/proofs/claim.hpp"

using namespace attncert::proofs;
using namespace attncert::verify;
using nlohmann::json;

namespace {

json certificate_of(const std::string& claim_text) {
  const certify_result r = certify(parse_claim_text(claim_text), ".");
  BOOST_TEST_REQUIRE(!r.certificate.is_null());
  BOOST_TEST_REQUIRE(verify_certificate(r.certificate).exit_code() == 0);
  return r.certificate;
}

json rank_certificate() {
  return certificate_of(R"J({"objects": {"S": [[1, -1], [-1, 1]]}, "family": {"at": "1/2"}, "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 2})J");
}

json numerical_rank_certificate() {
  return certificate_of(R"J({"objects": {"S": [[1, -1], [-1, 1]]}, "family": {"at": "1/1099511627776"}, "quantity": {"kind": "numerical_rank", "object": "attention", "recipe": "fp32", "policy": "numpy"}, "relation": "=", "value": 1})J");
}

const std::vector<json> bad_numbers = {"1/0", "-3/0", "abc", nullptr, json::array({1, 2}), "1e-9223372036854775808", "1.5e-9223372036854775808",
                                       "1e9223372036854775807", "1e100001", "0x10", "1/-2", "1/2/3", "", "1e", "1.2.3"};

}  // namespace

BOOST_AUTO_TEST_CASE(bad_rationals_are_malformed) {
  const json good = rank_certificate();
  BOOST_TEST_REQUIRE(good["claim"].contains("point"));
  for (const json& b : bad_numbers) {
    json c = good;
    c["claim"]["point"] = b;
    const verification v = verify_certificate(c);
    BOOST_TEST(v.exit_code() == 2, "point " << b.dump() << ": exit " << v.exit_code());
    c = good;
    c["claim"]["S0"][0][0] = b;
    BOOST_TEST(verify_certificate(c).exit_code() == 2, "S0 entry " << b.dump());
    c = good;
    c["q"] = b;
    BOOST_TEST(verify_certificate(c).exit_code() == 2, "q " << b.dump());
  }
}

BOOST_AUTO_TEST_CASE(numerical_rank_point_must_be_a_number) {
  const json good = numerical_rank_certificate();
  BOOST_TEST_REQUIRE(good["claim"].contains("point"));
  for (const json& b : bad_numbers) {
    json c = good;
    c["claim"]["point"] = b;
    BOOST_TEST(verify_certificate(c).exit_code() == 2, "point " << b.dump());
  }
  json c = good;
  c["claim"]["policy"] = "absolute:1e999";  // out of binary64: malformed, not an exception
  BOOST_TEST(verify_certificate(c).exit_code() == 2);
  c["claim"]["policy"] = "absolute:abc";
  BOOST_TEST(verify_certificate(c).exit_code() == 2);
}

// Integers in certificates are bounded only by the file size (a claim's 1e100000 is an integer
// of 100 001 digits there, and minors multiply entries): a 10^6-digit entry is read in
// milliseconds and the tampered certificate is rejected quickly (here MALFORMED: the exponent
// spread of the attention family exceeds 1000).  Decimal mantissas keep the claims' limit.
BOOST_AUTO_TEST_CASE(huge_numbers_are_rejected_quickly) {
  json c = rank_certificate();
  c["claim"]["S0"][0][0] = "1" + std::string(1000000, '0');
  const auto t0 = std::chrono::steady_clock::now();
  BOOST_TEST(verify_certificate(c).exit_code() != 0);
  c["claim"]["S0"][0][0] = "1/" + std::string(1000000, '7');
  BOOST_TEST(verify_certificate(c).exit_code() != 0);
  c["claim"]["S0"][0][0] = "1." + std::string(1000000, '7');
  BOOST_TEST(verify_certificate(c).exit_code() == 2);
  BOOST_TEST(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 1.0);
}

BOOST_AUTO_TEST_CASE(malformed_messages_are_one_line) {
  json c = rank_certificate();
  c["claim"]["S0"][0][0] = "1\n2";
  const verification v = verify_certificate(c);
  BOOST_TEST_REQUIRE(v.exit_code() == 2);
  BOOST_TEST(v.notes.back().find('\n') == std::string::npos, v.notes.back());
}

BOOST_AUTO_TEST_CASE(parse_certificate_text_limits_nesting) {
  BOOST_TEST(parse_certificate_text(rank_certificate().dump()) == rank_certificate());
  BOOST_CHECK_NO_THROW(parse_certificate_text(std::string(64, '[') + std::string(64, ']')));
  BOOST_CHECK_THROW(parse_certificate_text(std::string(65, '[') + std::string(65, ']')), std::invalid_argument);
  const auto t0 = std::chrono::steady_clock::now();
  BOOST_CHECK_THROW(parse_certificate_text(std::string(160000, '[') + std::string(160000, ']')), std::invalid_argument);
  BOOST_TEST(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 1.0);
  BOOST_CHECK_THROW(parse_certificate_text("{"), std::invalid_argument);
}

// fuzz_verify finding: an integer field given as a huge JSON float (1.8e105) was converted with
// nlohmann's get<long>(), an undefined conversion (UBSan).  Every integer field is now checked.
BOOST_AUTO_TEST_CASE(integer_fields_must_be_integers_in_range) {
  const json good = rank_certificate();
  BOOST_TEST_REQUIRE(verify_certificate(good).exit_code() == 0);
  for (const json& bad : {json(1.7777e105), json(-1e300), json(2.5), json("2"), json(nullptr)}) {
    json c = good;
    c["generic_rank"] = bad;
    BOOST_TEST(verify_certificate(c).exit_code() == 2, "generic_rank " << bad.dump());
    json d = good;
    d["claim"]["value"] = bad;
    BOOST_TEST(verify_certificate(d).exit_code() == 2, "value " << bad.dump());
  }
}

// verify_options::stop, the caller's budget (verify-certificate --max-seconds, certify's re-check):
// the checker polls it in its long loops, and a stop at any poll is UNCHECKED (exit 3) with the
// reason, never VALID, INVALID or MALFORMED (the checker catches std::runtime_error as malformed:
// a stop is not one).  Every poll of each certificate below is made the stopping one in turn.
namespace {

json range_refutation_certificate() {  // the isolated drop (P09): gcd, Sturm, MPFI enclosures, minors at a drop
  const certify_result r = certify(
      parse_claim_text(R"J({"objects": {"S": [[0, 2, -2], [1, 2, 1], [1, 0, 2]]}, "family": {"range": "(0, inf)"}, "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 3})J"),
      ".");
  BOOST_TEST_REQUIRE(r.exit_code() == 1);  // REFUTED
  return r.certificate;
}

json determinant_range_certificate() {  // a ratio over a range: H, its squarefree part, Sturm, samples
  return certificate_of(R"J({"objects": {"S": [[0, 3, 7], [5, 0, 2], [4, 6, 0]]}, "family": {"range": "(-1, 2)"}, "quantity": {"kind": "determinant", "object": "attention"}, "relation": ">=", "value": "1/5"})J");
}

json singular_value_certificate() {  // Laplace expansion over Z[u][lambda], signs at the point
  return certificate_of(R"J({"objects": {"S": [[1, -1], [-1, 1]]}, "family": {"at": "1/2"}, "quantity": {"kind": "singular_value", "object": "attention", "index": 2}, "relation": ">=", "value": "1/10"})J");
}

// Polls of one unbudgeted check (the verdict must not change: the hook only counts).
std::size_t polls_of(const json& cert, int expected_exit) {
  std::size_t calls = 0;
  verify_options o;
  o.stop = [&calls] {
    ++calls;
    return false;
  };
  const verification v = verify_certificate(cert, o);
  BOOST_TEST(v.exit_code() == expected_exit);
  BOOST_TEST(!v.stopped);
  return calls;
}

void every_stop_is_unchecked(const json& cert, int expected_exit, const std::string& name) {
  const std::size_t total = polls_of(cert, expected_exit);
  BOOST_TEST_MESSAGE(name << ": " << total << " polls");
  BOOST_TEST_REQUIRE(total >= 10, name << ": the checker polls the stop hook " << total << " times");
  const std::size_t stride = std::max<std::size_t>(1, total / 400);  // at most ~400 checks per certificate
  for (std::size_t n = 1; n <= total; n += stride) {
    std::size_t calls = 0;
    verify_options o;
    o.stop = [&calls, n] { return ++calls >= n; };
    const verification v = verify_certificate(cert, o);
    BOOST_TEST_REQUIRE((v.result == verification::status::unchecked), name << ": stopped at poll " << n << " of " << total << ": exit " << v.exit_code());
    BOOST_TEST_REQUIRE(v.stopped);
    BOOST_TEST_REQUIRE(v.exit_code() == 3);
    BOOST_TEST_REQUIRE(calls == n, name << ": polled again after the stop");
    BOOST_TEST_REQUIRE(v.notes.back().find("not checked within the caller's budget") != std::string::npos, v.notes.back());
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(stop_hook_is_polled_and_a_stop_is_unchecked) {
  every_stop_is_unchecked(rank_certificate(), 0, "rank at a point");
  every_stop_is_unchecked(range_refutation_certificate(), 0, "rank over a range (refuted)");
  every_stop_is_unchecked(determinant_range_certificate(), 0, "determinant over a range");
  every_stop_is_unchecked(singular_value_certificate(), 0, "singular value at a point");
  every_stop_is_unchecked(numerical_rank_certificate(), 0, "numerical rank");
  // a tampered certificate stopped before the false fact is reached is unchecked too, and without
  // the hook it is still INVALID
  json t = range_refutation_certificate();
  t["gcd"][0] = "12345";
  every_stop_is_unchecked(t, 1, "tampered gcd");
}

// The hook is asked before anything is checked: a budget already spent gives UNCHECKED even for a
// certificate that is not one (nothing is concluded about it), and an empty hook never stops.
BOOST_AUTO_TEST_CASE(stop_hook_edges) {
  verify_options o;
  o.stop = [] { return true; };
  const verification v = verify_certificate(json{{"format", "nonsense"}}, o);
  BOOST_TEST(v.exit_code() == 3);
  BOOST_TEST(v.stopped);
  verify_options empty;
  BOOST_TEST(!empty.stop);
  BOOST_TEST(verify_certificate(rank_certificate(), empty).exit_code() == 0);
}
