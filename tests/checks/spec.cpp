// Tests of checks/spec.hpp: build_check_run, the one validation of a check run that the command line
// and Python share.  Its messages name the caller's fields with field() (attncert/field.hpp).
#define BOOST_TEST_MODULE check_spec
#include <boost/test/unit_test.hpp>

#include <string>

#include "../support.hpp"
#include "attncert/field.hpp"
#include "checks/spec.hpp"

using namespace attncert;

namespace {

std::string error_of(const checks::check_spec& s) {
  // the library's own text, fields marked (field.hpp), not a front end's spelling
  try {
    (void)checks::build_check_run(s);
  } catch (const input_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_valid_spec_builds_its_run) {
  checks::check_spec s;
  s.ids = {"two-token", "residual"};
  s.formats = "binary64";
  s.policies = "numpy,absolute:1e-6";
  s.seed = 7;
  s.certify_bits = 64;
  s.certify_max_bits = 512;
  s.max_seconds = 9;
  const checks::check_run r = checks::build_check_run(s);
  BOOST_TEST_REQUIRE(r.chosen.size() == 2u);
  BOOST_TEST(r.chosen[0]->id == "two-token");
  BOOST_TEST(r.chosen[1]->id == "residual");
  BOOST_TEST(r.settings.formats.size() == 1u);
  BOOST_TEST(r.settings.policies.size() == 2u);
  BOOST_TEST(r.settings.seed == 7u);
  BOOST_TEST(r.settings.certify_bits == 64u);
  BOOST_TEST(r.settings.certify_max_bits == 512u);
  BOOST_TEST(r.settings.max_seconds == 9.0);
  BOOST_TEST(checks::build_check_run(checks::check_spec{}).chosen.size() == checks::registry().size());  // no IDs: all
}

BOOST_AUTO_TEST_CASE(bad_specs_name_their_fields) {
  const std::string bits = field("certify_bits") + " must satisfy 24 <= certify-bits <= certify-max-bits <= 1048576";
  checks::check_spec s;
  s.certify_bits = 30;
  s.certify_max_bits = 25;
  BOOST_TEST(error_of(s) == bits);
  s.certify_bits = 16;
  s.certify_max_bits = 4096;
  BOOST_TEST(error_of(s) == bits);
  s.certify_bits = 128;
  s.certify_max_bits = 2000000;
  BOOST_TEST(error_of(s) == bits);

  s = {};
  s.max_seconds = -1;
  BOOST_TEST(error_of(s) == field("max_seconds") + " must be in [0, 1e7] (0: no limit)");
  s.max_seconds = 1e8;
  BOOST_TEST(error_of(s) == field("max_seconds") + " must be in [0, 1e7] (0: no limit)");
}

BOOST_AUTO_TEST_CASE(parse_errors_are_named_only_when_asked) {
  checks::check_spec s;
  s.ids = {"no-such-check"};
  const std::string plain = error_of(s);
  BOOST_TEST(plain.find("unknown check 'no-such-check'") == 0u, plain);
  s.name_parse_errors = true;
  BOOST_TEST(error_of(s) == field("ids") + ": " + plain);

  s = {};
  s.policies = "nope";
  const std::string policy = error_of(s);
  BOOST_TEST(policy.find("unknown rank policy 'nope'") == 0u, policy);
  s.name_parse_errors = true;
  BOOST_TEST(error_of(s) == field("policies") + ": " + policy);
}
