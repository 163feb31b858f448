// tests/verify/certificate.cpp — the independent checker on hostile certificates
// (issue 11, item 4): numbers that are not exact rationals ("1/0", "abc", null, arrays,
// exponents beyond the limit or at LLONG_MIN, 10^6 digits) and a numerical-rank claim.point
// that is not a number are MALFORMED (exit 2), never VALID or INVALID; deep nesting is
// rejected while parsing.  Certificates come from `certify` on small claims.
#define BOOST_TEST_MODULE proofs_certificate_verify
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <stdexcept>

#include "attncert/verify/certificate.hpp"
#include "attncert/proofs/claim.hpp"

using namespace attncert::proofs;
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
