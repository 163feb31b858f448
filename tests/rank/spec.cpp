// Tests of attncert/rank/spec.hpp: build_rank_request, the one validation of a rank call that the
// command line and Python share.  Its messages name the caller's fields with field() (field.hpp), never
// a front end's spelling: each front end spells them (the CLI as --options, Python as keyword=).
#define BOOST_TEST_MODULE rank_spec
#include <boost/test/unit_test.hpp>


#include <string>

#include "../support.hpp"
#include "attncert/field.hpp"
#include "attncert/rank/spec.hpp"

using namespace attncert;

namespace {

matrix<mpq_rational> exact(Eigen::Index rows, Eigen::Index cols, int first) {
  matrix<mpq_rational> m(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j) m(i, j) = mpq_rational(first + static_cast<int>(i * cols + j), 3);
  return m;
}

// A valid spec: q, k and v (3 x 2), attention, binary64 with numpy.
rank_spec valid() {
  rank_spec s;
  s.q.exact = exact(3, 2, 1);
  s.k.exact = exact(3, 2, 2);
  s.v.exact = exact(3, 2, 3);
  s.formats = "binary64";
  s.policies = "numpy";
  return s;
}

std::string error_of(const rank_spec& s) {
  // the library's own text, fields marked (field.hpp), not a front end's spelling
  try {
    (void)build_rank_request(s);
  } catch (const input_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_valid_spec_builds_its_request) {
  rank_spec s = valid();
  s.scale = "1/8";
  s.mask = "causal";
  s.object = "output";
  s.max_seconds = 5;
  s.deflate_max_k = 7;
  s.max_precision = 512;
  const rank_request r = build_rank_request(s);
  BOOST_TEST(r.Q.has_value());
  BOOST_TEST(!r.S.has_value());
  BOOST_TEST(!r.inv_sqrt_d);
  BOOST_TEST((r.scale && *r.scale == mpq_rational(1, 8)));
  BOOST_TEST((r.object == layer_object::output));
  BOOST_TEST((r.M.type() == mask::kind::causal));
  BOOST_TEST(r.formats.size() == 1u);
  BOOST_TEST(r.max_seconds == 5.0);
  BOOST_TEST(r.deflation_max_k == 7u);
  BOOST_TEST(r.max_bits == 512u);
  // the default scale is 1/sqrt(d)
  BOOST_TEST(build_rank_request(valid()).inv_sqrt_d);
}

BOOST_AUTO_TEST_CASE(an_array_is_taken_exactly) {
  rank_spec s;
  s.scores.array = tensor{};
  s.scores.array->shape = {2, 2};
  s.scores.array->values = {0.1, 1, -2.5, 3};
  s.formats = "binary64";
  s.policies = "numpy";
  const rank_request r = build_rank_request(s);
  BOOST_TEST(r.S.has_value());
  BOOST_TEST(((*r.S)(0, 0) == mpq_rational(0.1)));  // the binary64 number 0.1, not 1/10
  BOOST_TEST(((*r.S)(1, 0) == mpq_rational(-5, 2)));
}

BOOST_AUTO_TEST_CASE(bad_specs_name_their_fields) {
  rank_spec s = valid();
  s.scores.exact = exact(3, 4, 1);
  BOOST_TEST(error_of(s) == "give either " + field("scores") + " or " + field("q") + "/" + field("k") + ", not both");

  s = valid();
  s.k = {};
  BOOST_TEST(error_of(s) == "give " + field("scores") + " S, or " + field("q") + " Q and " + field("k") + " K");

  s = rank_spec{};
  s.scores.exact = exact(3, 3, 1);
  s.scale = "1/2";
  BOOST_TEST(error_of(s).find(field("scale") + " applies to " + field("q") + "/" + field("k")) == 0u);

  s = valid();
  s.scale = "one half";
  BOOST_TEST(error_of(s).find(field("scale") + ": ") == 0u);

  s = valid();
  s.object = "output";
  s.v = {};
  BOOST_TEST(error_of(s) == field("object") + " output needs " + field("v"));

  s = valid();
  s.object = "residual";
  BOOST_TEST(error_of(s) == field("object") + " residual needs " + field("x"));

  s = valid();
  s.max_seconds = -1;
  BOOST_TEST(error_of(s).find(field("max_seconds") + " must be in [0, 1e7]") == 0u);
  s.max_seconds = 2e7;
  BOOST_TEST(error_of(s).find(field("max_seconds") + " must be in [0, 1e7]") == 0u);

  s = valid();
  s.sigma_rel_width = -0.5;
  BOOST_TEST(error_of(s).find(field("sigma_rel_width") + " must be >= 0") == 0u);

  s = valid();
  s.deflate_max_k = 4097;
  BOOST_TEST(error_of(s).find(field("deflate_max_k") + " must be in [0, 4096]") == 0u);
  s.deflate_max_k = -1;
  BOOST_TEST(error_of(s).find(field("deflate_max_k") + " must be in [0, 4096]") == 0u);

  s = valid();
  s.deflate_seconds = -1;
  BOOST_TEST(error_of(s).find(field("deflate_seconds") + " must be >= 0") == 0u);

  s = valid();
  s.max_precision = 64;
  BOOST_TEST(error_of(s).find(field("max_precision") + " must be in [128, ") == 0u);

  s = valid();
  s.mask = "diagonal";
  BOOST_TEST(error_of(s).find(field("mask") + ": ") == 0u);
}

BOOST_AUTO_TEST_CASE(parse_errors_are_named_only_when_asked) {
  rank_spec s = valid();
  s.formats = "fp7";
  const std::string plain = error_of(s);
  BOOST_TEST(!plain.empty());
  BOOST_TEST(plain.find('\x1e') == std::string::npos, plain);  // the command line prints it as it is
  s.name_parse_errors = true;
  BOOST_TEST(error_of(s) == field("formats") + ": " + plain);  // Python names its keyword
}

BOOST_AUTO_TEST_CASE(arrays_are_taken_exactly_and_inputs_passed_through) {
  // a binary64 array: each value exactly (1/3 rounded to binary64 is a dyadic rational, not 1/3)
  rank_spec s = rank_spec{};
  tensor a;
  a.shape = {2, 2};
  a.values = {1.0 / 3, 0.5, 2, -1};
  s.scores.array = a;
  s.mask = "causal";
  s.inputs["scores"] = {{"file", "S.json"}, {"shape", {2, 2}}};  // the caller's description, as it is
  const rank_request r = build_rank_request(s);
  BOOST_TEST(((*r.S)(0, 0) != mpq_rational(1, 3)));
  BOOST_TEST(static_cast<double>((*r.S)(0, 0)) == 1.0 / 3);
  BOOST_TEST(((*r.S)(0, 1) == mpq_rational(1, 2)));
  BOOST_TEST(r.inputs["scores"]["file"] == "S.json");
  // an array that is not 2-D is named by its field
  a.shape = {4};
  s.scores.array = a;
  BOOST_TEST(error_of(s).find(field("scores") + ": must be a 2-D array") == 0u, error_of(s));
  // a matrix mask: given as the matrix of allowed keys; "matrix" without one is refused
  s = valid();
  s.mask = "matrix";
  BOOST_TEST(error_of(s).find(field("mask") + ": ") == 0u);
}
