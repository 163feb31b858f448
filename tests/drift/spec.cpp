// Tests of attncert/drift/spec.hpp: build_drift_request, the one validation of a drift sweep that the
// command line and Python share.  Its messages name the caller's fields with field() (field.hpp).
#define BOOST_TEST_MODULE drift_spec
#include <boost/test/unit_test.hpp>

#include <string>

#include "../support.hpp"
#include "attncert/drift/spec.hpp"
#include "attncert/field.hpp"

using namespace attncert;

namespace {

drift_spec valid() {
  drift_spec s;
  s.family = "causal";
  s.from = 0.5;
  s.to = 4;
  s.points = 5;
  s.recipes = "fp64";
  s.policies = "numpy";
  return s;
}

std::string error_of(const drift_spec& s) {
  // the library's own text, fields marked (field.hpp), not a front end's spelling
  try {
    (void)build_drift_request(s);
  } catch (const input_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_valid_spec_builds_its_request) {
  drift_spec s = valid();
  s.n = 6;
  s.max_seconds = 3;
  s.max_precision = 256;
  s.enclosures = false;
  const drift_request r = build_drift_request(s);
  BOOST_TEST((r.family == drift_family::causal));
  BOOST_TEST((r.object == layer_object::attention));
  BOOST_TEST(r.points == 5u);
  BOOST_TEST(r.n == 6);
  BOOST_TEST(r.d == 0);
  BOOST_TEST(r.max_seconds == 3.0);
  BOOST_TEST(r.max_bits == 256u);
  BOOST_TEST(!r.enclosures);
  s.family = "identical-values";
  BOOST_TEST((build_drift_request(s).object == layer_object::output));  // the family's default object
}

BOOST_AUTO_TEST_CASE(bad_specs_name_their_fields) {
  drift_spec s = valid();
  s.from = 5;
  BOOST_TEST(error_of(s) == field("from") + " must be smaller than " + field("to"));

  s = valid();
  s.points = 1;
  BOOST_TEST(error_of(s) == field("points") + " must be in [2, 10000000]");

  s = valid();
  s.from = 0;
  s.log = true;
  BOOST_TEST(error_of(s) == field("log") + " needs " + field("from") + " > 0");

  s = valid();
  s.param = "b";
  BOOST_TEST(error_of(s).find("unknown " + field("param") + " 'b'") == 0u);

  s = valid();
  s.object = "scores";
  BOOST_TEST(error_of(s) == "unknown " + field("object") + " 'scores' (expected attention or output)");

  s = valid();
  s.n = 0;
  BOOST_TEST(error_of(s) == field("n") + " must be in [1, 4096] (got 0)");
  s.n = {};
  s.d = 5000;
  BOOST_TEST(error_of(s) == field("d") + " must be in [1, 4096] (got 5000)");

  s = valid();
  s.d = 2;
  BOOST_TEST(error_of(s) == "the causal family has d = n: " + field("d") + " does not apply");

  s = valid();
  s.resolution = 0.5;
  BOOST_TEST(error_of(s) == field("resolution") + " must be in (0, 0.5)");

  s = valid();
  s.max_seconds = -2;
  BOOST_TEST(error_of(s).find(field("max_seconds") + " must be in [0, 1e7]") == 0u);

  s = valid();
  s.max_precision = 100;
  BOOST_TEST(error_of(s).find(field("max_precision") + " must be in [128, ") == 0u);

  s = valid();
  s.grid = {0.5, 5};
  BOOST_TEST(error_of(s) == "an explicit grid must be strictly increasing within [" + field("from") + ", " + field("to") + "]");
}

BOOST_AUTO_TEST_CASE(parse_errors_are_named_only_when_asked) {
  drift_spec s = valid();
  s.recipes = "fp7";
  const std::string plain = error_of(s);
  BOOST_TEST(!plain.empty());
  BOOST_TEST(plain.find('\x1e') == std::string::npos, plain);
  s.name_parse_errors = true;
  BOOST_TEST(error_of(s) == field("recipes") + ": " + plain);
}
