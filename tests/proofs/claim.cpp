// tests/proofs/claim.cpp — `certify` on claim JSON and the independent certificate checker:
// verdicts with known answers, false claims never CERTIFIED (checked against the
// transcendence method and an MPFR evaluation), tampered certificates rejected, malformed
// claims reported with their JSON pointer.
#define BOOST_TEST_MODULE proofs_claim
#include <boost/test/unit_test.hpp>

#include <chrono>

#include "../random_matrices.hpp"
#include "../support.hpp"
#include "attncert/attention/softmax.hpp"
#include "attncert/deadline.hpp"
#include "attncert/rank/exact_rank.hpp"
#include "attncert/linalg/exact.hpp"
#include "attncert/linalg/spectra.hpp"
#include "attncert/number/precision_guard.hpp"
#include "attncert/verify/certificate.hpp"
#include "attncert/proofs/claim.hpp"
#include "attncert/proofs/spec.hpp"
#include "attncert/field.hpp"

using namespace attncert;
using namespace attncert::proofs;
using namespace attncert::verify;
using nlohmann::json;

namespace {

json claim(const std::string& text) { return parse_claim_text(text); }

certify_result cert(const std::string& text) { return certify(claim(text), "."); }

std::string expect_error(const std::string& text) {
  try {
    cert(text);
  } catch (const input_error& e) {
    return e.what();
  }
  return "no error";
}

json matrix_json(const matrix<mpq_rational>& m) {
  json a = json::array();
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    json r = json::array();
    for (Eigen::Index j = 0; j < m.cols(); ++j) r.push_back(m(i, j).str());
    a.push_back(r);
  }
  return a;
}

const std::string drop_family = R"J({"objects": {"S": [[0, 2, -2], [1, 2, 1], [1, 0, 2]]}, "family": {"range": "(0, inf)"},
  "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 3})J";

}  // namespace

BOOST_AUTO_TEST_CASE(known_verdicts_and_valid_certificates) {
  struct row {
    std::string text;
    claim_verdict v;
  };
  const std::vector<row> rows = {
      {R"J({"objects": {"S": [[1, -1], [-1, 1]]}, "family": {"range": "(0, inf)"}, "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 2})J",
       claim_verdict::certified},
      {R"J({"objects": {"S": [[1, -1], [-1, 1]]}, "family": {"at": 0}, "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 1})J",
       claim_verdict::certified},
      {R"J({"objects": {"S": [[1, -1], [-1, 1]]}, "family": {"range": "[0, inf)"}, "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 2})J",
       claim_verdict::refuted},
      {R"J({"objects": {"S": [[1, -1], [-1, 1]]}, "family": {"range": "[0, inf)"}, "quantity": {"kind": "rank", "object": "scores"}, "relation": "<=", "value": 1})J",
       claim_verdict::certified},
      {R"J({"objects": {"Q": [[1], [-1]], "K": [[1], [-1]], "scale": "0.5"}, "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 2})J",
       claim_verdict::certified},
      {R"J({"objects": {"Q": [[1, 0], [0, 1]], "K": [[1, 0], [0, 1]]}, "quantity": {"kind": "rank", "object": "attention"}, "relation": ">=", "value": 2})J",
       claim_verdict::certified},
      {drop_family, claim_verdict::refuted},
      {R"J({"objects": {"S": [[0, 2, -2], [1, 2, 1], [1, 0, 2]]}, "family": {"range": "(0, inf)"}, "quantity": {"kind": "rank", "object": "attention"}, "relation": ">=", "value": 2})J",
       claim_verdict::certified},
      {R"J({"objects": {"S": [[3, 1, 4], [1, 5, 9], [2, 6, 5]], "mask": "causal"}, "family": {"range": "(-inf, inf)"}, "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 3})J",
       claim_verdict::certified},
      {R"J({"objects": {"S": [[3, 1, 4], [1, 5, 9], [2, 6, 5]], "V": [[1, 2], [1, 2], [1, 2]]}, "family": {"range": "(-inf, inf)"}, "quantity": {"kind": "rank", "object": "output"}, "relation": "=", "value": 1})J",
       claim_verdict::certified},
      {R"J({"objects": {"S": [[3, 1, 4], [1, 5, 9], [2, 6, 5]], "V": [[1, 2], [1, 2], [1, 2]], "X": [[1, 0], [0, 1], [1, 1]]}, "family": {"range": "(0, inf)"}, "quantity": {"kind": "rank", "object": "residual"}, "relation": "=", "value": 2})J",
       claim_verdict::certified},
  };
  for (const auto& r : rows) {
    const auto res = cert(r.text);
    BOOST_TEST_INFO(r.text << "\n" << res.summary);
    BOOST_TEST(static_cast<int>(res.verdict) == static_cast<int>(r.v));
    const auto v = verify_certificate(res.certificate);
    BOOST_TEST_INFO(v.notes.back());
    BOOST_TEST(v.exit_code() == 0);
  }
}

BOOST_AUTO_TEST_CASE(drop_family_refuted_with_the_drop_as_counterexample) {
  const auto res = cert(drop_family);
  BOOST_TEST(res.exit_code() == 1);
  BOOST_TEST(res.certificate["counterexample"]["rank"] == 2);
  BOOST_TEST(res.certificate["drops"].size() == 1u);
}

// Soundness: for random families, a claim "rank = k for all a in (0, inf)" is CERTIFIED only
// when k is the rank at a = 1 by the transcendence method (an independent FLINT code path)
// and no drop was found; every other k is REFUTED, and all certificates verify.
BOOST_AUTO_TEST_CASE(false_claims_are_never_certified) {
  auto rng = make_rng(11);
  for (int t = 0; t < 24; ++t) {
    const Eigen::Index n = 2 + t % 3;
    matrix<mpq_rational> S0 = random_int(rng, n, n, 2);
    if (t % 4 == 1) S0.row(1) = S0.row(0);
    const auto truth = layer_rank(S0, mask::none(), layer_object::attention);
    BOOST_TEST_REQUIRE(truth.exact());
    for (long k = 0; k <= n; ++k) {
      json c = {{"objects", {{"S", matrix_json(S0)}}}, {"family", {{"range", "(0, inf)"}}},
                {"quantity", {{"kind", "rank"}, {"object", "attention"}}}, {"relation", "="}, {"value", k}};
      const auto res = certify(c, ".");
      BOOST_TEST_INFO("S0 = " << c["objects"]["S"].dump() << ", k = " << k << ": " << res.summary);
      if (static_cast<std::size_t>(k) != truth.lo) BOOST_TEST(static_cast<int>(res.verdict) == static_cast<int>(claim_verdict::refuted));
      if (res.verdict == claim_verdict::certified) BOOST_TEST(res.certificate["drops"].empty());
      BOOST_TEST(verify_certificate(res.certificate).exit_code() == 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(tampered_certificates_are_rejected) {
  const json good = cert(drop_family).certificate;
  BOOST_TEST_REQUIRE(verify_certificate(good).exit_code() == 0);
  auto bump = [](json& coeff) { coeff = (mpq_rational(coeff.get<std::string>()) + 1).str(); };
  std::vector<std::pair<std::string, std::function<void(json&)>>> edits = {
      {"minor coefficient", [&](json& c) { bump(c["minors"][0]["poly"][2]); }},
      {"gcd coefficient", [&](json& c) { bump(c["gcd"][0]); }},
      {"Sturm coefficient", [&](json& c) { bump(c["sturm"][2][0]); }},
      {"witness coefficient", [&](json& c) { bump(c["drops"][0]["witness"]["poly"][0]); }},
      {"drop rank", [](json& c) { c["drops"][0]["rank"] = 1; }},
      {"drop removed", [](json& c) { c["drops"] = json::array(); }},
      {"verdict", [](json& c) { c["verdict"] = "CERTIFIED"; }},
      {"generic rank", [](json& c) { c["generic_rank"] = 2; }},
      {"claim matrix", [](json& c) { c["claim"]["S0"][0][0] = "1"; }},
      {"a enclosure", [](json& c) { c["drops"][0]["a"][0] = "0.49"; }},
      {"u interval", [](json& c) { c["drops"][0]["u"][1] = "2"; }},
  };
  for (auto& [name, edit] : edits) {
    json c = good;
    edit(c);
    const auto v = verify_certificate(c);
    BOOST_TEST_INFO(name << ": " << v.notes.back());
    BOOST_TEST(v.exit_code() != 0);
  }
  json m = good;
  m["minors"][0]["poly"][0] = "x";
  BOOST_TEST(verify_certificate(m).exit_code() == 2);
  BOOST_TEST(verify_certificate(json::object()).exit_code() == 2);
  // A kernel certificate (rank-deficient family) with a tampered kernel entry.
  const json k = cert(R"J({"objects": {"S": [[1, 2, 0], [1, 2, 0], [0, 1, 3]]}, "family": {"range": "(0, inf)"},
    "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 2})J")
                     .certificate;
  BOOST_TEST_REQUIRE(k["upper_bound"]["method"] == "kernel");
  BOOST_TEST(verify_certificate(k).exit_code() == 0);
  json k2 = k;
  for (auto& e : k2["upper_bound"]["vectors"][0])
    if (!e.empty()) { bump(e[0]); break; }
  BOOST_TEST(verify_certificate(k2).exit_code() == 1);
}

BOOST_AUTO_TEST_CASE(malformed_claims_name_the_json_pointer) {
  BOOST_TEST(expect_error(R"J({"objects": {"S": [[1, 2], [3, "x"]]}, "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 2})J")
                 .rfind("/objects/S/1/1: not a number", 0) == 0);
  BOOST_TEST(expect_error(R"J({"objects": {"S": [[1, 2], [3]]}, "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 2})J")
                 .rfind("/objects/S/1:", 0) == 0);
  BOOST_TEST(expect_error(R"J({"objects": {"S": [[1]]}, "quantity": {"kind": "numerical_rank"}, "relation": "=", "value": 2})J")
                 .rfind("/quantity/object:", 0) == 0);
  BOOST_TEST(expect_error(R"J({"objects": {"S": [[1]], "heads": []}, "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 1})J")
                 .find("not supported yet") != std::string::npos);
  BOOST_TEST(expect_error(R"J({"objects": {"S": [[1]]}, "quantity": {"kind": "rank", "object": "attention"}, "relation": "~", "value": 1})J")
                 .rfind("/relation:", 0) == 0);
  BOOST_TEST(expect_error(R"J({"objects": {"S": [[1]]}, "family": {"range": "(1, 0)"}, "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 1})J")
                 .rfind("/family/range:", 0) == 0);
  BOOST_TEST(expect_error(R"J({"objects": {"S": [[1]]}, "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 1, "extra": 1})J")
                 .rfind("/extra:", 0) == 0);
  BOOST_TEST(expect_error(R"J({"objects": {"S": [[1, 2], [3, 4]], "mask": [[false, false], [true, true]]}, "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 1})J")
                 .rfind("/objects:", 0) == 0);
  BOOST_CHECK_THROW(parse_claim_text("{\"objects\": "), input_error);
  BOOST_TEST(expect_error(R"J({"objects": {"S": [[1]]}, "quantity": {"kind": "determinant", "object": "attention"}, "relation": "within", "value": 1})J")
                 .rfind("/tolerance:", 0) == 0);
  BOOST_TEST(expect_error(R"J({"objects": {"S": [[1, 2]], "V": [[1], [2]]}, "quantity": {"kind": "determinant", "object": "attention"}, "relation": "=", "value": 1})J")
                 .rfind("/quantity/object: the determinant needs a square matrix", 0) == 0);
}

BOOST_AUTO_TEST_CASE(decimals_are_read_exactly) {
  // 0.1 is 1/10, not the binary64 value: S0 = 0.1*[[1, -1], [-1, 1]] gives q = 10.
  const auto res = cert(R"J({"objects": {"S": [[0.1, -0.1], [-0.1, 0.1]]}, "family": {"range": "(0, inf)"}, "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 2})J");
  BOOST_TEST(res.certificate["q"] == "10");
  BOOST_TEST(res.certificate["claim"]["S0"][0][0] == "1/10");
}

// Issue 11 item 6: the literal 1e100000 overflowed nlohmann's double and was rejected, while
// the string "1e100000" was accepted.  Both are now read from their text, alike.
BOOST_AUTO_TEST_CASE(float_literals_are_read_like_their_strings) {
  const json j = parse_claim_text(R"J({"a": [1e100000, -2.5E-3, 18446744073709551616], "b": 7})J");
  BOOST_TEST(j["a"][0] == "1e100000");
  BOOST_TEST(j["a"][1] == "-2.5E-3");
  BOOST_TEST(j["a"][2] == "18446744073709551616");
  BOOST_TEST(j["b"].is_number_integer());
  const std::string rest = R"J(]]}, "family": {"range": "(0, inf)"}, "quantity": {"kind": "rank", "object": "scores"}, "relation": "=", "value": 1})J";
  const auto lit = cert(R"J({"objects": {"S": [[1e100000, 0.5)J" + rest);
  const auto str = cert(R"J({"objects": {"S": [["1e100000", "0.5")J" + rest);
  BOOST_TEST(lit.exit_code() == str.exit_code());
  BOOST_TEST(lit.certificate == str.certificate);
  // the exponent limit is the same for both
  const std::string e1 = expect_error(R"J({"objects": {"S": [[1e100001, 0.5)J" + rest);
  const std::string e2 = expect_error(R"J({"objects": {"S": [["1e100001", "0.5")J" + rest);
  BOOST_TEST(e1.rfind("/objects/S/0/0: not a number", 0) == 0, e1);
  BOOST_TEST(e1 == e2);
}

// Issue 11 item 1: a claim nested ~160k levels deep crashed (recursive copy of the DOM).
// Nesting beyond io::max_json_depth (64) is rejected by the SAX handler, within milliseconds.
BOOST_AUTO_TEST_CASE(deep_nesting_is_rejected_while_parsing) {
  const std::size_t deep = 160000;
  const std::string arrays = std::string(deep, '[') + std::string(deep, ']');
  const auto t0 = std::chrono::steady_clock::now();
  try {
    parse_claim_text(arrays);
    BOOST_FAIL("no error");
  } catch (const input_error& e) {
    BOOST_TEST(std::string(e.what()).find("nested deeper than 64 levels") != std::string::npos, e.what());
  }
  std::string objects;
  for (std::size_t k = 0; k < deep; ++k) objects += "{\"a\":";
  BOOST_CHECK_THROW(parse_claim_text(objects + "1" + std::string(deep, '}')), input_error);
  BOOST_TEST(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 2.0);
  // 64 levels are accepted, 65 are not
  BOOST_CHECK_NO_THROW(parse_claim_text(std::string(64, '[') + std::string(64, ']')));
  BOOST_CHECK_THROW(parse_claim_text(std::string(65, '[') + std::string(65, ']')), input_error);
}

// The one mask parser of claim files: "none", "causal", or a boolean matrix with entries
// true/false or 0/1; anything else is rejected with the same list of accepted forms.
BOOST_AUTO_TEST_CASE(claim_masks_accept_none_causal_and_boolean_matrices) {
  auto rank_claim = [](const std::string& mask) {
    return R"J({"objects": {"S": [[1, 2, 0], [3, 1, 1], [0, 2, 5]], "mask": )J" + mask +
           R"J(}, "family": {"range": "(0, inf)"}, "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 3})J";
  };
  const auto none = cert(rank_claim(R"J("none")J"));
  BOOST_TEST(none.exit_code() == 0);
  BOOST_TEST(none.certificate["claim"]["mask"] == "none");
  const auto causal = cert(rank_claim(R"J("causal")J"));
  BOOST_TEST(causal.exit_code() == 0);
  BOOST_TEST(causal.certificate["claim"]["mask"] == "causal");
  const json expected = json::parse("[[1, 0, 1], [1, 1, 0], [0, 1, 1]]");
  const auto booleans = cert(rank_claim("[[true, false, true], [true, true, false], [false, true, true]]"));
  BOOST_TEST(booleans.exit_code() != 2);
  BOOST_TEST(booleans.certificate["claim"]["mask"] == expected);
  const auto zero_one = cert(rank_claim("[[1, 0, 1], [1, 1, 0], [0, 1, 1]]"));
  BOOST_TEST(zero_one.certificate == booleans.certificate);
  BOOST_TEST(zero_one.exit_code() == booleans.exit_code());
  // a lower-triangular matrix is the causal mask, verdict for verdict
  BOOST_TEST(cert(rank_claim("[[1, 0, 0], [1, 1, 0], [1, 1, 1]]")).exit_code() == causal.exit_code());

  const std::string forms = "expected \"none\", \"causal\" or a boolean matrix (rows of true/false or 0/1)";
  const std::string bad_name = expect_error(rank_claim(R"J("upper")J"));
  BOOST_TEST(bad_name == "/objects/mask: " + forms, bad_name);
  const std::string bad_type = expect_error(rank_claim("3"));
  BOOST_TEST(bad_type == "/objects/mask: " + forms, bad_type);
  const std::string bad_entry = expect_error(rank_claim("[[1, 0, 1], [1, 2, 0], [0, 1, 1]]"));
  BOOST_TEST(bad_entry.rfind("/objects/mask/1/1: ", 0) == 0, bad_entry);
  BOOST_TEST(bad_entry.find(forms) != std::string::npos, bad_entry);
  const std::string ragged = expect_error(rank_claim("[[1, 0, 1], [1, 1], [0, 1, 1]]"));
  BOOST_TEST(ragged.rfind("/objects/mask/1: ", 0) == 0, ragged);
  BOOST_TEST(ragged.find(forms) != std::string::npos, ragged);

  // output_bound and numerical_rank read the mask with the same parser (same message for an
  // invalid value); their certificates take "none" or "causal" only.
  const std::string bound = R"J({"objects": {"S": [[1, 2], [3, 1]], "S_hat": [[1, 2], [3, 1]], "V": [[1], [2]], "mask": MASK},
    "family": {"at": 1}, "quantity": {"kind": "output_bound", "row": 1}, "relation": "<=", "value": "bound"})J";
  const std::string nrank = R"J({"objects": {"S": [[1, 2], [3, 1]], "mask": MASK},
    "quantity": {"kind": "numerical_rank", "object": "attention", "recipe": "fp32", "policy": "numpy"}, "relation": "=", "value": 2})J";
  for (const std::string& tmpl : {bound, nrank}) {
    auto with = [&](const std::string& m) { return std::string(tmpl).replace(tmpl.find("MASK"), 4, m); };
    BOOST_TEST(cert(with(R"J("causal")J")).certificate["claim"]["mask"] == "causal");
    BOOST_TEST(cert(with(R"J("none")J")).certificate["claim"]["mask"] == "none");
    BOOST_TEST(expect_error(with(R"J("upper")J")) == "/objects/mask: " + forms);
    const std::string matrix_mask = expect_error(with("[[1, 0], [1, 1]]"));
    BOOST_TEST(matrix_mask.rfind("/objects/mask: ", 0) == 0, matrix_mask);
    BOOST_TEST(matrix_mask.find("no mask matrix") != std::string::npos, matrix_mask);
  }
}

BOOST_AUTO_TEST_CASE(irrational_scale_over_a_range_is_undecided) {
  const auto res = cert(R"J({"objects": {"Q": [[1, 0], [0, 1]], "K": [[1, 1], [0, 1]], "scale": "1/sqrt(d)"}, "family": {"range": "(0, inf)"}, "quantity": {"kind": "rank", "object": "attention"}, "relation": "=", "value": 2})J");
  BOOST_TEST(res.exit_code() == 3);
  BOOST_TEST(res.certificate.is_null());
}

namespace {
// det softmax(a S0) in MPFR at 256 bits (approx tier: compared only where far from the value).
mpfr_float approx_det_at(const matrix<mpq_rational>& S0, const mpfr_float& a) {
  matrix<mpfr_float> S(S0.rows(), S0.cols());
  for (Eigen::Index i = 0; i < S0.rows(); ++i)
    for (Eigen::Index j = 0; j < S0.cols(); ++j) S(i, j) = a * mpfr_float(S0(i, j));
  return cofactor_determinant(masked_softmax(S));
}
}  // namespace

BOOST_AUTO_TEST_CASE(determinant_claims_two_token) {
  auto run = [](const std::string& family, const std::string& rel, const std::string& value, const std::string& extra = "") {
    const std::string text = R"J({"objects": {"S": [[1, -1], [-1, 1]]}, "family": {)J" + family + R"J(}, "quantity": {"kind": "determinant", "object": "attention"}, "relation": ")J" +
                             rel + R"J(", "value": )J" + value + extra + "}";
    const auto r = cert(text);
    BOOST_TEST_INFO(text << "\n" << r.summary);
    BOOST_TEST(verify_certificate(r.certificate).exit_code() == 0);
    return r.exit_code();
  };
  // det A = tanh a
  BOOST_TEST(run(R"J("range": "(0, inf)")J", ">=", "0") == 0);
  BOOST_TEST(run(R"J("range": "(0, inf)")J", "<=", "1") == 0);
  BOOST_TEST(run(R"J("range": "(-inf, inf)")J", ">=", "0") == 1);
  // closed at a = 0, where det = 0 exactly (u = 1 is a root): the zero must be listed
  BOOST_TEST(run(R"J("range": "[0, inf)")J", ">=", "0") == 0);
  BOOST_TEST(run(R"J("range": "(-inf, 0]")J", "<=", "0") == 0);
  BOOST_TEST(run(R"J("range": "[-2, 0]")J", ">=", "0") == 1);
  BOOST_TEST(run(R"J("at": 0)J", "=", "0") == 0);
  BOOST_TEST(run(R"J("range": "(0, inf)")J", "=", "0") == 1);
  BOOST_TEST(run(R"J("range": "[4, inf)")J", "within", "1", R"J(, "tolerance": "1e-3")J") == 0);  // 1 - tanh 4 = 6.7e-4
  BOOST_TEST(run(R"J("range": "[3, inf)")J", "within", "1", R"J(, "tolerance": "1e-3")J") == 1);  // 1 - tanh 3 = 4.9e-3
  BOOST_TEST(run(R"J("at": "0.5")J", ">=", "0.462") == 0);  // tanh 0.5 = 0.46211...
  BOOST_TEST(run(R"J("at": "0.5")J", ">=", "0.4622") == 1);
}

// Soundness against MPFR: for random 3x3 families and random thresholds c, a CERTIFIED
// "det >= c on [lo, hi]" never meets an MPFR value clearly below c on a grid, and a REFUTED
// one's counterexample really is below c (MPFR at the enclosure's midpoint).
BOOST_AUTO_TEST_CASE(determinant_verdicts_agree_with_mpfr) {
  auto rng = make_rng(21);
  precision_guard pg(256);
  std::uniform_int_distribution<int> cnum(-30, 30);
  int certified = 0, refuted = 0;
  for (int t = 0; t < 16; ++t) {
    const matrix<mpq_rational> S0 = random_int(rng, 3, 3, 2);
    const mpq_rational c(cnum(rng), 100);
    json cl = {{"objects", {{"S", matrix_json(S0)}}}, {"family", {{"range", "[0, 2]"}}},
               {"quantity", {{"kind", "determinant"}, {"object", "attention"}}}, {"relation", ">="}, {"value", c.str()}};
    const auto r = certify(cl, ".");
    BOOST_TEST_INFO("S0 = " << cl["objects"]["S"].dump() << " c = " << c << ": " << r.summary);
    BOOST_TEST(verify_certificate(r.certificate).exit_code() == 0);
    const mpfr_float cf = mpfr_float(c.convert_to<mpfr_float>());
    if (r.verdict == claim_verdict::certified) {
      ++certified;
      for (int k = 0; k <= 40; ++k) BOOST_TEST(approx_det_at(S0, mpfr_float(k) / 20) > cf - mpfr_float(1e-60));
    } else {
      ++refuted;
      const auto& ce = r.certificate["counterexample"];
      const mpfr_float a = ce.contains("a") ? mpfr_float(mpq_rational(ce["a"].get<std::string>()).convert_to<mpfr_float>())
                                            : (mpfr_float(ce["a_enclosure"][0].get<std::string>()) + mpfr_float(ce["a_enclosure"][1].get<std::string>())) / 2;
      BOOST_TEST((a >= 0 && a <= 2));
      BOOST_TEST(approx_det_at(S0, a) < cf);
    }
  }
  BOOST_TEST_MESSAGE(certified << " certified, " << refuted << " refuted");
  BOOST_TEST(certified > 0);
  BOOST_TEST(refuted > 0);
}

BOOST_AUTO_TEST_CASE(tampered_determinant_certificates_are_rejected) {
  const json good = cert(R"J({"objects": {"S": [[1, -1], [-1, 1]]}, "family": {"range": "[3, inf)"}, "quantity": {"kind": "determinant", "object": "attention"}, "relation": "within", "value": 1, "tolerance": "1e-3"})J").certificate;
  BOOST_TEST_REQUIRE(verify_certificate(good).exit_code() == 0);
  auto bump = [](json& coeff) { coeff = (mpq_rational(coeff.get<std::string>()) + 1).str(); };
  std::vector<std::pair<std::string, std::function<void(json&)>>> edits = {
      {"P coefficient", [&](json& c) { bump(c["ratio"]["P"][0]); }},
      {"R coefficient", [&](json& c) { bump(c["ratio"]["R"][0]); }},
      {"H coefficient", [&](json& c) { bump(c["ratio"]["conditions"][1]["H"][0]); }},
      {"sample sign", [](json& c) { c["ratio"]["conditions"][1]["samples"][0]["sign"] = 1; }},
      {"root removed", [](json& c) { c["ratio"]["conditions"][1]["roots"] = json::array(); }},
      {"tolerance", [](json& c) { c["claim"]["tolerance"] = "1/10"; }},
      {"verdict", [](json& c) { c["verdict"] = "CERTIFIED"; }},
  };
  for (auto& [name, edit] : edits) {
    json c = good;
    edit(c);
    const auto v = verify_certificate(c);
    BOOST_TEST_INFO(name << ": " << v.notes.back());
    BOOST_TEST(v.exit_code() != 0);
  }
}

namespace {
// The quantity in MPFR at a (approx tier): det or entry of attention / AV / X + AV.
mpfr_float approx_quantity(const json& q, const matrix<mpq_rational>& S0, const matrix<mpq_rational>& V, const matrix<mpq_rational>& X,
                           const mpfr_float& a) {
  auto to_f = [](const matrix<mpq_rational>& M) {
    matrix<mpfr_float> F(M.rows(), M.cols());
    for (Eigen::Index i = 0; i < M.rows(); ++i)
      for (Eigen::Index j = 0; j < M.cols(); ++j) F(i, j) = M(i, j).convert_to<mpfr_float>();
    return F;
  };
  matrix<mpfr_float> S = to_f(S0);
  for (Eigen::Index i = 0; i < S.rows(); ++i)
    for (Eigen::Index j = 0; j < S.cols(); ++j) S(i, j) *= a;
  const matrix<mpfr_float> A = masked_softmax(S);
  const std::string obj = q["object"];
  matrix<mpfr_float> O = A;
  if (obj == "output") O = A * to_f(V);
  if (obj == "residual") O = to_f(X) + A * to_f(V);
  if (q["kind"] == "determinant") return cofactor_determinant(O);
  return O(q["row"].get<long>(), q["col"].get<long>());
}
}  // namespace

// Soundness of determinant and output_value claims on outputs and residuals with fractional
// V and X (the integer scale L of M), against MPFR.
BOOST_AUTO_TEST_CASE(values_and_determinants_of_outputs_agree_with_mpfr) {
  auto rng = make_rng(31);
  precision_guard pg(256);
  std::uniform_int_distribution<int> cnum(-60, 60), pick(0, 5), idx(0, 2);
  int certified = 0, refuted = 0;
  for (int t = 0; t < 30; ++t) {
    const matrix<mpq_rational> S0 = random_int(rng, 3, 3, 2), V = random_rational(rng, 3, 3), X = random_rational(rng, 3, 3);
    const int p = pick(rng);
    json q = {{"kind", p < 2 ? "determinant" : "output_value"}, {"object", p % 3 == 0 ? "attention" : p % 3 == 1 ? "output" : "residual"}};
    if (p >= 2) {
      q["row"] = idx(rng);
      q["col"] = idx(rng);
    }
    const mpq_rational c(cnum(rng), 20);
    const std::string rel = t % 2 ? ">=" : "<=";
    json cl = {{"objects", {{"S", matrix_json(S0)}, {"V", matrix_json(V)}, {"X", matrix_json(X)}}}, {"family", {{"range", "[-1, 2]"}}},
               {"quantity", q}, {"relation", rel}, {"value", c.str()}};
    const auto r = certify(cl, ".");
    BOOST_TEST_INFO(cl.dump() << ": " << r.summary);
    BOOST_TEST(verify_certificate(r.certificate).exit_code() == 0);
    const mpfr_float cf = c.convert_to<mpfr_float>();
    auto violates = [&](const mpfr_float& v) { return rel == ">=" ? v < cf - mpfr_float(1e-60) : v > cf + mpfr_float(1e-60); };
    if (r.verdict == claim_verdict::certified) {
      ++certified;
      for (int k = -20; k <= 40; ++k) BOOST_TEST(!violates(approx_quantity(q, S0, V, X, mpfr_float(k) / 20)));
    } else {
      ++refuted;
      const auto& ce = r.certificate["counterexample"];
      const mpfr_float a = (mpfr_float(ce["a_enclosure"][0].get<std::string>()) + mpfr_float(ce["a_enclosure"][1].get<std::string>())) / 2;
      BOOST_TEST(violates(approx_quantity(q, S0, V, X, a)));
    }
  }
  BOOST_TEST_MESSAGE(certified << " certified, " << refuted << " refuted");
  BOOST_TEST(certified > 0);
  BOOST_TEST(refuted > 0);
}

// X belongs to the residual only: an output claim with X present is about AV.
BOOST_AUTO_TEST_CASE(output_rank_ignores_the_residual_stream) {
  const auto with_x = cert(R"J({"objects": {"S": [[1, 0], [0, 2]], "V": [[1], [1]], "X": [[1], [-1]]}, "family": {"range": "(0, inf)"}, "quantity": {"kind": "rank", "object": "output"}, "relation": "=", "value": 1})J");
  BOOST_TEST(with_x.exit_code() == 0);
  BOOST_TEST(verify_certificate(with_x.certificate).exit_code() == 0);
}

// Singular values at a point: the verdict agrees with an MPFR SVD at 256 bits whenever the
// threshold is not within 1e-30 of the singular value, for random layers and thresholds.
BOOST_AUTO_TEST_CASE(singular_value_verdicts_agree_with_mpfr_svd) {
  auto rng = make_rng(41);
  precision_guard pg(256);
  std::uniform_int_distribution<int> pick(0, 2), which(1, 3), anum(-20, 20);
  int certified = 0, refuted = 0;
  for (int t = 0; t < 16; ++t) {
    const matrix<mpq_rational> S0 = random_int(rng, 3, 3, 2), V = random_rational(rng, 3, 3), X = random_rational(rng, 3, 3);
    const int p = pick(rng);
    const std::string obj = p == 0 ? "attention" : p == 1 ? "output" : "residual";
    const long k = which(rng);
    const mpq_rational a(anum(rng), 10);
    json q = {{"kind", "singular_value"}, {"object", obj}, {"index", k}};
    // the reference singular value, then a threshold on a random side of it
    json qv = {{"kind", "output_value"}, {"object", obj}, {"row", 0}, {"col", 0}};
    matrix<mpfr_float> S(3, 3), Vf(3, 3), Xf(3, 3);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        S(i, j) = (S0(i, j) * a).convert_to<mpfr_float>();
        Vf(i, j) = V(i, j).convert_to<mpfr_float>();
        Xf(i, j) = X(i, j).convert_to<mpfr_float>();
      }
    const matrix<mpfr_float> A = masked_softmax(S);
    matrix<mpfr_float> O = A;
    if (obj == "output") O = A * Vf;
    if (obj == "residual") O = Xf + A * Vf;
    const mpfr_float sigma = approx_singular_values(O)[static_cast<std::size_t>(k - 1)];
    const bool above = t % 2 == 0;
    const mpq_rational c = mpq_rational(static_cast<long>(floor(sigma * 1000).convert_to<double>()) + (above ? 1 : 0), 1000);
    const std::string rel = t % 4 < 2 ? ">=" : "<=";
    json cl = {{"objects", {{"S", matrix_json(S0)}, {"V", matrix_json(V)}, {"X", matrix_json(X)}}}, {"family", {{"at", a.str()}}},
               {"quantity", q}, {"relation", rel}, {"value", c.str()}};
    const auto r = certify(cl, ".");
    BOOST_TEST_INFO(cl.dump() << ": sigma = " << sigma << "; " << r.summary);
    BOOST_TEST(verify_certificate(r.certificate).exit_code() == 0);
    const mpfr_float cf = c.convert_to<mpfr_float>();
    if (abs(sigma - cf) < mpfr_float(1e-30)) continue;
    const bool truth = rel == ">=" ? sigma > cf : sigma < cf;
    BOOST_TEST((r.verdict == claim_verdict::certified) == truth);
    (r.verdict == claim_verdict::certified ? certified : refuted)++;
  }
  BOOST_TEST_MESSAGE(certified << " certified, " << refuted << " refuted");
  BOOST_TEST(certified > 0);
  BOOST_TEST(refuted > 0);
}

BOOST_AUTO_TEST_CASE(singular_values_two_token_and_tampering) {
  // sigma(A(a)) = {1, tanh a}: at a = 1/2, sigma_1 = 1 exactly and sigma_2 = 0.46211715...
  const auto one = cert(R"J({"objects": {"S": [[1, -1], [-1, 1]]}, "family": {"at": "0.5"}, "quantity": {"kind": "singular_value", "object": "attention", "index": 1}, "relation": "=", "value": 1})J");
  BOOST_TEST(one.exit_code() == 0);
  const auto two = cert(R"J({"objects": {"S": [[1, -1], [-1, 1]]}, "family": {"at": "0.5"}, "quantity": {"kind": "singular_value", "object": "attention", "index": 2}, "relation": "within", "value": "0.462117", "tolerance": "1e-6"})J");
  BOOST_TEST(two.exit_code() == 0);
  const auto off = cert(R"J({"objects": {"S": [[1, -1], [-1, 1]]}, "family": {"at": "0.5"}, "quantity": {"kind": "singular_value", "object": "attention", "index": 2}, "relation": "within", "value": "0.46212", "tolerance": "1e-6"})J");
  BOOST_TEST(off.exit_code() == 1);
  BOOST_TEST(cert(R"J({"objects": {"S": [[1, -1], [-1, 1]]}, "family": {"range": "(0, inf)"}, "quantity": {"kind": "singular_value", "object": "attention", "index": 2}, "relation": ">=", "value": 0})J")
                 .exit_code() == 3);  // ranges: not supported yet, said so
  const json good = two.certificate;
  BOOST_TEST_REQUIRE(verify_certificate(good).exit_code() == 0);
  auto bump = [](json& coeff) { coeff = (mpq_rational(coeff.get<std::string>()) + 1).str(); };
  std::vector<std::pair<std::string, std::function<void(json&)>>> edits = {
      {"charpoly coefficient", [&](json& c) { bump(c["singular_value"]["conditions"][0]["charpoly"][1]["poly"][0]); }},
      {"sample sign", [](json& c) { auto& s = c["singular_value"]["conditions"][0]["charpoly"][0]["sample"]["sign"]; s = -s.get<int>(); }},
      {"eigenvalue count", [](json& c) { c["singular_value"]["conditions"][1]["positive"] = 2; }},
      {"index", [](json& c) { c["claim"]["index"] = 1; }},
      {"verdict", [](json& c) { c["verdict"] = "REFUTED"; }},
  };
  for (auto& [name, edit] : edits) {
    json c = good;
    edit(c);
    const auto v = verify_certificate(c);
    BOOST_TEST_INFO(name << ": " << v.notes.back());
    BOOST_TEST(v.exit_code() != 0);
  }
}

// P04: the output-error bound is a theorem, so every instance is CERTIFIED; the exact gap
// bound^2 - error^2 is checked against MPFR, and a tampered certificate is rejected.
BOOST_AUTO_TEST_CASE(output_bound_instances_are_certified_and_agree_with_mpfr) {
  auto rng = make_rng(51);
  precision_guard pg(256);
  std::uniform_int_distribution<int> anum(-15, 15), rowd(0, 2);
  json last;
  for (int t = 0; t < 12; ++t) {
    // small exponents (integer scores): the polynomials stay small (degree ~ 4 x spread)
    const matrix<mpq_rational> S0 = random_int(rng, 3, 3, 2), H0 = random_int(rng, 3, 3, 2), V = random_rational(rng, 3, 2);
    const mpq_rational a(anum(rng), 5);
    const long row = rowd(rng);
    json cl = {{"objects", {{"S", matrix_json(S0)}, {"S_hat", matrix_json(H0)}, {"V", matrix_json(V)}}}, {"family", {{"at", a.str()}}},
               {"quantity", {{"kind", "output_bound"}, {"row", row}}}, {"relation", "<="}, {"value", "bound"}};
    const auto r = certify(cl, ".");
    BOOST_TEST_INFO(cl.dump() << ": " << r.summary);
    BOOST_TEST(r.exit_code() == 0);
    BOOST_TEST(verify_certificate(r.certificate).exit_code() == 0);
    // MPFR: the exact G's sign (+ or 0) agrees with bound - error computed in floating point
    auto softrow = [&](const matrix<mpq_rational>& M) {
      matrix<mpfr_float> S(1, 3);
      for (int j = 0; j < 3; ++j) S(0, j) = (M(row, j) * a).convert_to<mpfr_float>();
      return masked_softmax(S);
    };
    const matrix<mpfr_float> A = softrow(S0), Ah = softrow(H0);
    mpfr_float l1 = 0, err2 = 0, mu = 0;
    for (int j = 0; j < 3; ++j) l1 += abs(Ah(0, j) - A(0, j));
    for (int k = 0; k < 2; ++k) {
      mpfr_float e = 0;
      for (int j = 0; j < 3; ++j) e += (Ah(0, j) - A(0, j)) * V(j, k).convert_to<mpfr_float>();
      err2 += e * e;
    }
    for (int j = 0; j < 3; ++j) {
      const mpfr_float n2 = mpq_rational(V(j, 0) * V(j, 0) + V(j, 1) * V(j, 1)).convert_to<mpfr_float>();
      if (n2 > mu) mu = n2;
    }
    const mpfr_float gap = l1 * l1 * mu - err2;
    const int gsign = r.certificate["output_bound"]["G"].contains("sample") ? r.certificate["output_bound"]["G"]["sample"]["sign"].get<int>() : 0;
    if (abs(gap) > mpfr_float(1e-60)) BOOST_TEST(gsign == (gap > 0 ? 1 : -1));
    last = r.certificate;
  }
  // identical values: the error is exactly 0, the bound positive
  const auto iv = cert(R"J({"objects": {"S": [[1, 0], [0, 1]], "S_hat": [[0, 1], [1, 0]], "V": [[1, 2], [1, 2]]}, "family": {"at": 1}, "quantity": {"kind": "output_bound", "row": 0}, "relation": "<=", "value": "bound"})J");
  BOOST_TEST(iv.exit_code() == 0);
  auto bump = [](json& coeff) { coeff = (mpq_rational(coeff.get<std::string>()) + 1).str(); };
  json c1 = last, c2 = last, c3 = last;
  bump(c1["output_bound"]["G"]["poly"][0]);
  c2["output_bound"]["delta"][0]["sample"]["sign"] = -c2["output_bound"]["delta"][0]["sample"]["sign"].get<int>();
  c3["claim"]["V"][0][0] = "100";
  BOOST_TEST(verify_certificate(c1).exit_code() == 1);
  BOOST_TEST(verify_certificate(c2).exit_code() == 1);
  BOOST_TEST(verify_certificate(c3).exit_code() != 0);
}

// ---- Soundness regressions: roots in u ∈ (0, 1) (a < 0), the factor u, rational roots ----------
// Each truth below is derived by hand in the comment and is independent of the prover.
namespace {
double dec(const json& j) { return std::stod(j.get<std::string>()); }
const std::string three_keys = R"J("objects": {"S": [[0, 1, 2]], "V": [[0], [-1], [2]]})J";
}  // namespace

// (AV)(a) = e^a (2e^a − 1) / (1 + e^a + e^{2a}) < 0 exactly for a < −log 2: ">= 0 on (−1, 0)"
// is false (at a = −0.9 the entry is −0.048).  Today's prover certified it.
BOOST_AUTO_TEST_CASE(negative_range_entry_sign_is_refuted) {
  const auto res = cert("{" + three_keys + R"J(, "family": {"range": "(-1, 0)"},
    "quantity": {"kind": "output_value", "object": "output", "row": 0, "col": 0}, "relation": ">=", "value": 0})J");
  BOOST_TEST_INFO(res.summary);
  BOOST_TEST_REQUIRE(res.exit_code() == 1);
  BOOST_TEST(res.report["certificate_check"]["status"] == "VALID");
  const json& ce = res.certificate["counterexample"];
  BOOST_TEST(dec(ce["a_enclosure"][0]) > -1.0);
  BOOST_TEST(dec(ce["a_enclosure"][1]) < -std::log(2.0));
  // true on (−1/2, 0): −log 2 < −1/2
  const auto ok = cert("{" + three_keys + R"J(, "family": {"range": "(-1/2, 0)"},
    "quantity": {"kind": "output_value", "object": "output", "row": 0, "col": 0}, "relation": ">=", "value": 0})J");
  BOOST_TEST(ok.exit_code() == 0);
}

// The same objects: rank (AV) = 1 except at a* = −log 2 (rank 0).
BOOST_AUTO_TEST_CASE(negative_range_rank_drop_is_found_and_placed) {
  for (const std::string range : {"(-1, 0)", "(-inf, inf)", "[-1, -1/2]"}) {
    const auto res = cert("{" + three_keys + R"J(, "family": {"range": ")J" + range + R"J("},
      "quantity": {"kind": "rank", "object": "output"}, "relation": "=", "value": 1})J");
    BOOST_TEST_INFO(range << ": " << res.summary);
    BOOST_TEST_REQUIRE(res.exit_code() == 1);
    BOOST_TEST_REQUIRE(res.certificate["drops"].size() == 1u);
    const json& d = res.certificate["drops"][0];
    BOOST_TEST(d["rank"] == 0);
    BOOST_TEST(dec(d["a"][0]) <= -std::log(2.0));
    BOOST_TEST(dec(d["a"][1]) >= -std::log(2.0));
    BOOST_TEST(dec(d["a"][1]) - dec(d["a"][0]) < 1e-9);
  }
  const auto none = cert("{" + three_keys + R"J(, "family": {"range": "(-inf, -1]"},
    "quantity": {"kind": "rank", "object": "output"}, "relation": "=", "value": 1})J");
  BOOST_TEST(none.exit_code() == 0);
}

// Rows [0,1,2], [2,0,1], [1,2,0], [0,0,0] ... a 2×2 instance is enough for the factor u and a drop
// only at a = 0: S = [[1, -1], [-1, 1]], X = 0, V = I: X + AV = A, det A = tanh(a) (rank 2 for
// every a ≠ 0).  "rank 2 on (−inf, −200)" is true; today's prover invented a drop near −311.
BOOST_AUTO_TEST_CASE(far_negative_range_has_no_invented_drop) {
  const auto res = cert(R"J({"objects": {"S": [[1, -1], [-1, 1]], "V": [[1, 0], [0, 1]], "X": [[0, 0], [0, 0]]},
    "family": {"range": "(-inf, -200)"}, "quantity": {"kind": "rank", "object": "residual"}, "relation": "=", "value": 2})J");
  BOOST_TEST_INFO(res.summary);
  BOOST_TEST(res.exit_code() == 0);
  BOOST_TEST(res.certificate["drops"].empty());
}

// One query, keys with scores (0, 1): AV = (v0 + v1 u)/(1 + u).  V = (2, −1): zero at the
// rational u = 2 (a = log 2).  V = (3, −5): zero at u = 3/5 (a = log 3/5 < 0).
BOOST_AUTO_TEST_CASE(rational_roots_other_than_one_are_accepted_by_the_checker) {
  const auto two = cert(R"J({"objects": {"S": [[0, 1]], "V": [[2], [-1]]}, "family": {"range": "(0, inf)"},
    "quantity": {"kind": "rank", "object": "output"}, "relation": "=", "value": 1})J");
  BOOST_TEST_INFO(two.summary);
  BOOST_TEST_REQUIRE(two.exit_code() == 1);
  BOOST_TEST(two.report["certificate_check"]["status"] == "VALID");
  BOOST_TEST(dec(two.certificate["drops"][0]["a"][0]) <= std::log(2.0));
  BOOST_TEST(dec(two.certificate["drops"][0]["a"][1]) >= std::log(2.0));
  for (const std::string rel : {">=", "<=", "="}) {
    for (const std::string range : {"(-1, 0)", "(-1, -0.6)", "[-0.5, 0]"}) {
      const auto r = cert(R"J({"objects": {"S": [[0, 1]], "V": [[3], [-5]]}, "family": {"range": ")J" + range +
                          R"J("}, "quantity": {"kind": "output_value", "object": "output", "row": 0, "col": 0}, "relation": ")J" + rel +
                          R"J(", "value": 0})J");
      // truth: the entry is > 0 for a < log(3/5) ≈ −0.5108, 0 there, < 0 above
      const bool has_pos = range != "[-0.5, 0]", has_neg = range != "(-1, -0.6)";
      const bool truth = rel == ">=" ? !has_neg : rel == "<=" ? !has_pos : false;
      BOOST_TEST_INFO(rel << " " << range << ": " << r.summary);
      BOOST_TEST(r.exit_code() == (truth ? 0 : 1));
      BOOST_TEST(r.report["certificate_check"]["status"] == "VALID");
    }
  }
}

// A REFUTED certificate states nothing unchecked: moving its counterexample is rejected.
BOOST_AUTO_TEST_CASE(counterexamples_are_checked) {
  json c = cert(drop_family).certificate;
  BOOST_TEST_REQUIRE(verify_certificate(c).exit_code() == 0);
  c["counterexample"]["a_enclosure"] = json::array({"5", "6"});
  BOOST_TEST(verify_certificate(c).exit_code() == 1);
  json e = cert("{" + three_keys + R"J(, "family": {"range": "(-1, 0)"},
    "quantity": {"kind": "output_value", "object": "output", "row": 0, "col": 0}, "relation": ">=", "value": 0})J").certificate;
  BOOST_TEST_REQUIRE(verify_certificate(e).exit_code() == 0);
  json e2 = e;
  e2["counterexample"]["a_enclosure"] = json::array({"5", "6"});
  BOOST_TEST(verify_certificate(e2).exit_code() == 1);
  json e3 = e;
  e3["counterexample"]["u"] = "1/3";
  BOOST_TEST(verify_certificate(e3).exit_code() == 1);
}

// Translation validation: a prover result whose certificate the checker rejects is never shown
// as CERTIFIED/REFUTED.
BOOST_AUTO_TEST_CASE(a_rejected_certificate_gives_undecided_internal_disagreement) {
  certify_result r = cert(drop_family);
  BOOST_TEST_REQUIRE(r.exit_code() == 1);
  r.certificate["drops"] = json::array();  // as a buggy prover would: the drop lost
  r.report.erase("certificate_check");
  const certify_result v = validate_with_checker(r);
  BOOST_TEST(v.exit_code() == 3);
  BOOST_TEST(v.disagreement);
  BOOST_TEST(v.report["prover_verdict"] == "REFUTED");
  BOOST_TEST(v.report["why"].get<std::string>().rfind("internal disagreement", 0) == 0);
  BOOST_TEST(v.report["certificate_check"]["status"] == "INVALID");
  BOOST_TEST(v.report.contains("rejected_certificate"));
}

BOOST_AUTO_TEST_CASE(the_time_limit_gives_undecided) {
  // a 1 ns budget ends the prover at its first poll
  const auto r = certify(claim(drop_family), ".", 4096, 1e-9);
  BOOST_TEST(r.exit_code() == 3);
  BOOST_TEST(r.report["why"].get<std::string>().find("time limit") != std::string::npos);
}

// The budget covers the checker's re-check too (one budget per command): past the deadline the
// checker stops (verify_options::stop), the verdict is UNDECIDED with the reason, and no
// disagreement is claimed.
BOOST_AUTO_TEST_CASE(the_time_limit_covers_the_re_check) {
  certify_result r = cert(drop_family);
  BOOST_TEST_REQUIRE(r.exit_code() == 1);
  r.report.erase("certificate_check");
  {
    deadline_scope spent(1e-9);
    const auto t0 = std::chrono::steady_clock::now();
    while (!deadline_passed() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1)) {
    }
    const certify_result v = validate_with_checker(r);
    BOOST_TEST(v.exit_code() == 3);
    BOOST_TEST(!v.disagreement);
    BOOST_TEST(v.report["certificate_check"]["status"] == "UNCHECKED");
    BOOST_TEST(v.report["certificate_check"].value("stopped", false));
    BOOST_TEST(v.report["prover_verdict"] == "REFUTED");
    BOOST_TEST(v.report["why"].get<std::string>().find("time limit was reached while the independent checker") != std::string::npos,
               v.report["why"]);
  }
  // without a deadline the same re-check is VALID (the budget changes nothing else)
  const certify_result w = validate_with_checker(r);
  BOOST_TEST(w.exit_code() == 1);
  BOOST_TEST(w.report["certificate_check"]["status"] == "VALID");
  BOOST_TEST(!w.report["certificate_check"].contains("stopped"));
}

// verify-certificate's spec: one validation, errors naming the field or the certificate; the report's
// status and notes; the budget stops the checker with a last note naming max_seconds.
BOOST_AUTO_TEST_CASE(verify_spec_builds_checks_and_reports) {
  const certify_result r = cert(drop_family);
  BOOST_TEST_REQUIRE(r.exit_code() == 1);
  verify_spec s;
  s.certificate = "drop.cert.json";
  s.certificate_text = r.certificate.dump();
  const verify_request req = build_verify_request(s);
  const verification v = proofs::verify(req);
  BOOST_TEST(v.exit_code() == 0);
  BOOST_TEST(std::string(status_text(v)) == "VALID");
  BOOST_TEST(verification_json(req, v)["status"] == "VALID");
  BOOST_TEST(!verification_json(req, v).contains("max_seconds"));
  BOOST_TEST(verification_text(req, v).rfind("VALID: drop.cert.json\n", 0) == 0u);
  // a tampered certificate is INVALID through the same path
  nlohmann::json bad = r.certificate;
  bad["claim"]["value"] = 2;
  s.certificate_text = bad.dump();
  const verification vb = proofs::verify(build_verify_request(s));
  BOOST_TEST(vb.exit_code() != 0);
  // errors
  auto error_of = [](const verify_spec& x) {
    try {
      (void)build_verify_request(x);
    } catch (const input_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  verify_spec e = s;
  e.max_seconds = -1;
  BOOST_TEST(error_of(e).find(field("max_seconds") + " must be in [0, 1e7]") == 0u, error_of(e));
  e = s;
  e.max_precision = 32;
  BOOST_TEST(error_of(e).find(field("max_precision") + " must be in [64, 4194304], got 32") == 0u, error_of(e));
  e = s;
  e.certificate_text = "{not json";
  BOOST_TEST(error_of(e).find("drop.cert.json: ") == 0u, error_of(e));
  // a spent budget: UNCHECKED, stopped, the last note names the field
  s.certificate_text = r.certificate.dump();
  s.max_seconds = 1e-9;
  const verify_request rq = build_verify_request(s);
  deadline_scope spent(1e-9);
  const auto t0 = std::chrono::steady_clock::now();
  while (!deadline_passed() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1)) {
  }
  const verification vs = proofs::verify(rq);
  BOOST_TEST(vs.exit_code() == 3);
  BOOST_TEST(vs.stopped);
  BOOST_TEST(vs.notes.back() == "not checked within " + field("max_seconds") + " 1e-09 (raise it; 0: no limit)");
  BOOST_TEST(verification_json(rq, vs)["why"] == vs.notes.back());
  BOOST_TEST(verification_json(rq, vs)["max_seconds"] == 1e-9);
}

// ---- rank_heads_lower_bound (proofs/L4 parts D and F) ----------------------------------------

namespace {
std::string rh_claim(const std::string& quantity, const std::string& value, const std::string& relation = ">=") {
  return R"J({"quantity": {"kind": "rank_heads_lower_bound", )J" + quantity + R"J(}, "relation": ")J" + relation + R"J(", "value": )J" + value + "}";
}
}  // namespace

// Known answers by hand (L = 1, so LB = ½E₁(1 − H/d) + ½(1 − E₁)(1 − H/N(d, 3))):
//   d = 3: E₁ = 3/4, N(3, 3) = 7:  LB = 1/4 + 3/28 = 5/14 (rational: decided exactly);
//   d = 4: E₁ = 64/(9π²), N(4, 3) = 16:  LB = 15/32 − 2/(3π²) ≈ 0.40120 (decided with an enclosure of π²).
BOOST_AUTO_TEST_CASE(rank_heads_lower_bound_known_answers) {
  const certify_result a = cert(rh_claim(R"J("d": 3, "heads": 1, "max_degree": 1)J", "\"5/14\""));
  BOOST_TEST(a.exit_code() == 0);
  BOOST_TEST(a.certificate["rank_heads"]["lower_bound"]["rational"].get<std::string>() == "5/14");
  BOOST_TEST(a.certificate["rank_heads"]["lower_bound"]["over_pi_squared"].get<std::string>() == "0");
  BOOST_TEST(a.certificate["rank_heads"]["terms"][0]["energy"].get<std::string>() == "3/4");
  BOOST_TEST(verify_certificate(a.certificate).exit_code() == 0);
  // just above 5/14: not certified, and not refuted either (LB is a bound, not the minimum)
  const certify_result above = cert(rh_claim(R"J("d": 3, "heads": 1, "max_degree": 1)J", "\"0.35714285715\""));
  BOOST_TEST(above.exit_code() == 3);
  BOOST_TEST(above.certificate.is_null());
  BOOST_TEST(above.report["why"].get<std::string>().find("not a refutation") != std::string::npos);

  const certify_result b = cert(rh_claim(R"J("d": 4, "heads": 1, "max_degree": 1)J", "\"0.4012\""));
  BOOST_TEST(b.exit_code() == 0);
  BOOST_TEST(b.certificate["rank_heads"]["lower_bound"]["rational"].get<std::string>() == "15/32");
  BOOST_TEST(b.certificate["rank_heads"]["lower_bound"]["over_pi_squared"].get<std::string>() == "-2/3");
  BOOST_TEST(b.certificate["rank_heads"]["terms"][0]["energy"].get<std::string>() == "64/9");
  BOOST_TEST(verify_certificate(b.certificate).exit_code() == 0);
  BOOST_TEST(cert(rh_claim(R"J("d": 4, "heads": 1, "max_degree": 1)J", "\"0.4013\"")).exit_code() == 3);  // 0.40120… < 0.4013

  // full rank (r >= d) captures everything: LB = 0, certified for 0, undecided for anything above
  BOOST_TEST(cert(rh_claim(R"J("d": 4, "heads": 1, "rank": 4)J", "0")).exit_code() == 0);
  BOOST_TEST(cert(rh_claim(R"J("d": 4, "heads": 1, "rank": 4)J", "\"1e-9\"")).exit_code() == 3);
}

// The default truncation (L = 81) on the rows of the check, the residual variant below the plain one, and the
// bound falling with H; every certificate re-checked by the independent checker (other formulas for c_d, N, E_ℓ).
BOOST_AUTO_TEST_CASE(rank_heads_lower_bound_rows) {
  const certify_result r1 = cert(rh_claim(R"J("d": 8, "heads": 256, "rank": 1)J", "\"0.09\""));
  BOOST_TEST_REQUIRE(r1.exit_code() == 0);
  const double lb = r1.report["lower_bound_approx"].get<double>();
  BOOST_TEST(lb > 0.0905);
  BOOST_TEST(lb < 0.0910);
  BOOST_TEST(r1.certificate["rank_heads"]["terms"].size() == 41u);
  BOOST_TEST(verify_certificate(r1.certificate).exit_code() == 0);
  const certify_result more = cert(rh_claim(R"J("d": 8, "heads": 512, "rank": 1)J", "0"));
  BOOST_TEST(more.report["lower_bound_approx"].get<double>() < lb);
  // a residual path drops degree 1, which matters only while H < d (H >= d heads capture degree 1 anyway)
  const double lb4 = cert(rh_claim(R"J("d": 8, "heads": 4, "rank": 1)J", "0")).report["lower_bound_approx"].get<double>();
  const certify_result res = cert(rh_claim(R"J("d": 8, "heads": 4, "rank": 1, "residual": true)J", "0"));
  BOOST_TEST_REQUIRE(res.exit_code() == 0);
  BOOST_TEST(res.report["lower_bound_approx"].get<double>() < lb4);
  BOOST_TEST(res.certificate["rank_heads"]["degree_one_dropped"].get<bool>());
  BOOST_TEST(verify_certificate(res.certificate).exit_code() == 0);
  const certify_result res256 = cert(rh_claim(R"J("d": 8, "heads": 256, "rank": 1, "residual": true)J", "0"));
  BOOST_TEST(res256.report["lower_bound_approx"].get<double>() == lb);
  const certify_result r4 = cert(rh_claim(R"J("d": 8, "heads": 2, "rank": 4)J", "\"0.12\""));
  BOOST_TEST(r4.exit_code() == 0);
  BOOST_TEST(!r4.certificate["rank_heads"].contains("tail_N"));
  BOOST_TEST(verify_certificate(r4.certificate).exit_code() == 0);
  // odd d: the bound is rational, decided without pi
  const certify_result d5 = cert(rh_claim(R"J("d": 5, "heads": "1000000000000000000000", "rank": 1)J", "0"));
  BOOST_TEST(d5.exit_code() == 0);
  BOOST_TEST(d5.certificate["rank_heads"]["lower_bound"]["over_pi_squared"].get<std::string>() == "0");
  BOOST_TEST(verify_certificate(d5.certificate).exit_code() == 0);
}

// The checker re-derives every number: a changed energy, dimension, part of LB or claim is rejected.
BOOST_AUTO_TEST_CASE(rank_heads_certificates_are_rechecked) {
  const certify_result r = cert(rh_claim(R"J("d": 6, "heads": 64, "rank": 1, "max_degree": 21)J", "\"0.05\""));
  BOOST_TEST_REQUIRE(r.exit_code() == 0);
  auto status = [](json c) { return verify_certificate(c).exit_code(); };
  json c = r.certificate;
  c["rank_heads"]["terms"][2]["energy"] = "1/3";
  BOOST_TEST(status(c) == 1);
  c = r.certificate;
  c["rank_heads"]["terms"][4]["N"] = "7";
  BOOST_TEST(status(c) == 1);
  c = r.certificate;
  c["rank_heads"]["lower_bound"]["rational"] = "1";
  BOOST_TEST(status(c) == 1);
  c = r.certificate;
  c["claim"]["heads"] = "63";
  BOOST_TEST(status(c) == 1);
  c = r.certificate;
  c["claim"]["value"] = "1/2";  // above LB: the stated verdict no longer follows
  BOOST_TEST(status(c) == 1);
  c = r.certificate;
  c["rank_heads"]["terms"].erase(c["rank_heads"]["terms"].size() - 1);
  BOOST_TEST(status(c) == 1);
  c = r.certificate;
  c["claim"]["residual"] = true;  // then degree 1 would be dropped: the stated flag and LB no longer follow
  BOOST_TEST(status(c) == 1);
  c = r.certificate;
  c["claim"]["d"] = 2;
  BOOST_TEST(status(c) == 2);
}

BOOST_AUTO_TEST_CASE(rank_heads_malformed_claims) {
  auto starts = [](const std::string& msg, const std::string& prefix) { return msg.rfind(prefix, 0) == 0; };
  BOOST_TEST(starts(expect_error(rh_claim(R"J("d": 8, "heads": 4)J", "0", "<=")), "/relation:"));
  BOOST_TEST(starts(expect_error(rh_claim(R"J("d": 8, "heads": 4)J", "0", "=")), "/relation:"));
  BOOST_TEST(starts(expect_error(rh_claim(R"J("d": 2, "heads": 4)J", "0")), "/quantity/d:"));
  BOOST_TEST(starts(expect_error(rh_claim(R"J("heads": 4)J", "0")), "/quantity/d:"));
  BOOST_TEST(starts(expect_error(rh_claim(R"J("d": 8, "heads": 0)J", "0")), "/quantity/heads:"));
  BOOST_TEST(starts(expect_error(rh_claim(R"J("d": 8, "heads": 2.5)J", "0")), "/quantity/heads:"));
  BOOST_TEST(starts(expect_error(rh_claim(R"J("d": 8)J", "0")), "/quantity/heads:"));
  BOOST_TEST(starts(expect_error(rh_claim(R"J("d": 8, "heads": 4, "rank": 2, "residual": true)J", "0")), "/quantity/residual:"));
  BOOST_TEST(starts(expect_error(rh_claim(R"J("d": 8, "heads": 4, "max_degree": 80)J", "0")), "/quantity/max_degree:"));
  BOOST_TEST(starts(expect_error(rh_claim(R"J("d": 8, "heads": 4, "lambda": 3)J", "0")), "/quantity/lambda:"));
  BOOST_TEST(starts(expect_error(R"J({"objects": {}, "quantity": {"kind": "rank_heads_lower_bound", "d": 8, "heads": 4}, "relation": ">=", "value": 0})J"),
                    "/objects:"));
  BOOST_TEST(starts(expect_error(R"J({"quantity": {"kind": "rank_heads_lower_bound", "d": 8, "heads": 4}, "relation": ">="})J"), "/value:"));
}

// ---- rank_heads_vote_mse (proofs/L4 part F) -------------------------------------------------------------------

namespace {
std::string vote_claim(const std::string& quantity, const std::string& value, const std::string& relation = "<=") {
  return R"J({"quantity": {"kind": "rank_heads_vote_mse", )J" + quantity + R"J(}, "relation": ")J" + relation + R"J(", "value": )J" + value + "}";
}
}  // namespace

// Known answer: d = 3, one vote: the mean MSE is 2/π = 0.63661977… (E arccos|t| = 1 for t uniform on [0, 1]).
// Both relations, both verdicts, every certificate re-checked; refinement of the panels where 400 do not decide.
BOOST_AUTO_TEST_CASE(rank_heads_vote_mse_known_answers) {
  const certify_result a = cert(vote_claim(R"J("d": 3, "heads": 1)J", "\"0.64\""));
  BOOST_TEST_REQUIRE(a.exit_code() == 0);
  BOOST_TEST(verify_certificate(a.certificate).exit_code() == 0);
  BOOST_TEST(a.certificate["rank_heads_vote"]["binomial_tails"].size() == 401u);
  const certify_result b = cert(vote_claim(R"J("d": 3, "heads": 1)J", "\"0.63\""));  // below 2/π: refuted
  BOOST_TEST_REQUIRE(b.exit_code() == 1);
  BOOST_TEST(verify_certificate(b.certificate).exit_code() == 0);
  const certify_result c = cert(vote_claim(R"J("d": 3, "heads": 1)J", "\"0.63\"", ">="));
  BOOST_TEST(c.exit_code() == 0);
  BOOST_TEST(verify_certificate(c.certificate).exit_code() == 0);
  // 2/π − 5·10⁻⁴: the 400-panel enclosure (about 2.5·10⁻³ wide) contains it; more panels decide it (the Riemann
  // sums of a monotone integrand narrow like 1/panels)
  const certify_result d = cert(vote_claim(R"J("d": 3, "heads": 1)J", "\"0.6361\"", ">="));
  BOOST_TEST(d.exit_code() == 0);
  BOOST_TEST(d.report["panels"].get<int>() > 400);
  BOOST_TEST(verify_certificate(d.certificate).exit_code() == 0);
  // 2/π itself is never decided (π is transcendental, the enclosure always contains it)
  const certify_result e = cert(vote_claim(R"J("d": 3, "heads": 1, "panels": 3200)J", "\"0.636619772367581343\""));
  BOOST_TEST(e.exit_code() == 3);
  BOOST_TEST(e.certificate.is_null());
}

// The rows of the check: d = 8, 4095 vote heads below one layer's bound with a residual path (0.05, the shipped
// L4 claim); the checker re-derives every binomial tail by another summation, and rejects any changed number.
BOOST_AUTO_TEST_CASE(rank_heads_vote_mse_certificates_are_rechecked) {
  const certify_result r = cert(vote_claim(R"J("d": 8, "heads": 255)J", "\"0.16\""));
  BOOST_TEST_REQUIRE(r.exit_code() == 0);
  BOOST_TEST(!r.certificate["rank_heads_vote"]["whole"].get<bool>());  // t0 = 12/sqrt(255) < 1
  auto status = [](json c) { return verify_certificate(c).exit_code(); };
  BOOST_TEST(status(r.certificate) == 0);
  json c = r.certificate;
  c["rank_heads_vote"]["binomial_tails"][7] = json::array({"0.5", "0.6"});
  BOOST_TEST(status(c) == 1);
  c = r.certificate;
  c["rank_heads_vote"]["mean_mse"] = json::array({"0.01", "0.02"});
  BOOST_TEST(status(c) == 1);
  c = r.certificate;
  c["claim"]["value"] = "0.1";  // below the mean: the stated verdict no longer follows
  BOOST_TEST(status(c) == 1);
  c = r.certificate;
  c["claim"]["heads"] = 253;  // another H: other tails
  BOOST_TEST(status(c) == 1);
  c = r.certificate;
  c["rank_heads_vote"]["whole"] = true;
  BOOST_TEST(status(c) == 1);
  c = r.certificate;
  c["rank_heads_vote"]["binomial_tails"].erase(3);
  BOOST_TEST(status(c) == 2);
  c = r.certificate;
  c["claim"]["heads"] = 254;
  BOOST_TEST(status(c) == 2);
}

BOOST_AUTO_TEST_CASE(rank_heads_vote_mse_malformed_claims) {
  auto starts = [](const std::string& msg, const std::string& prefix) { return msg.rfind(prefix, 0) == 0; };
  BOOST_TEST(starts(expect_error(vote_claim(R"J("d": 8, "heads": 4)J", "0")), "/quantity/heads:"));
  BOOST_TEST(starts(expect_error(vote_claim(R"J("d": 8, "heads": 65537)J", "0")), "/quantity/heads:"));
  BOOST_TEST(starts(expect_error(vote_claim(R"J("d": 2, "heads": 3)J", "0")), "/quantity/d:"));
  BOOST_TEST(starts(expect_error(vote_claim(R"J("d": 8, "heads": 3, "panels": 0)J", "0")), "/quantity/panels:"));
  BOOST_TEST(starts(expect_error(vote_claim(R"J("d": 8, "heads": 3, "rank": 1)J", "0")), "/quantity/rank:"));
  BOOST_TEST(starts(expect_error(vote_claim(R"J("d": 8, "heads": 3)J", "0", "=")), "/relation:"));
  BOOST_TEST(starts(expect_error(R"J({"quantity": {"kind": "rank_heads_vote_mse", "d": 8, "heads": 3}, "relation": "<="})J"), "/value:"));
}

// ---- rank_heads_full_rank_mse (proofs/L4 part A) ----------------------------------------------------------------

namespace {
std::string full_claim(const std::string& quantity, const std::string& value, const std::string& relation = "<=") {
  return R"J({"quantity": {"kind": "rank_heads_full_rank_mse", )J" + quantity + R"J(}, "relation": ")J" + relation + R"J(", "value": )J" + value + "}";
}
}  // namespace

// Known answers: d = 3, λ → 0 gives σ(0)² = 1/4 everywhere, MSE → 4 c_3 · ¼ = ½; at λ = 10⁻⁶ the MSE lies within 10⁻⁵
// of ½ (below it).  At large λ, λ·MSE → K_d = 2√2 c_d (ln 2 − ½) (d = 3: √2 (ln 2 − ½) = 0.273151…, so at λ = 10⁴
// MSE ≈ 2.73151·10⁻⁵, the gap to K_d being O(e^{−√2λ}) for d = 3).  Both relations, both verdicts; the checker re-encloses by another rule.
BOOST_AUTO_TEST_CASE(rank_heads_full_rank_mse_known_answers) {
  const certify_result a = cert(full_claim(R"J("d": 3, "lambda": "1e-6")J", "\"0.49999\"", ">="));
  BOOST_TEST_REQUIRE(a.exit_code() == 0);
  BOOST_TEST(verify_certificate(a.certificate).exit_code() == 0);
  const certify_result b = cert(full_claim(R"J("d": 3, "lambda": "1e-6")J", "\"0.5\"", ">="));  // strictly below ½: refuted
  BOOST_TEST_REQUIRE(b.exit_code() == 1);
  BOOST_TEST(verify_certificate(b.certificate).exit_code() == 0);
  const certify_result c = cert(full_claim(R"J("d": 3, "lambda": 10000)J", "\"2.7318e-5\""));
  BOOST_TEST_REQUIRE(c.exit_code() == 0);
  BOOST_TEST(verify_certificate(c.certificate).exit_code() == 0);
  BOOST_TEST(cert(full_claim(R"J("d": 3, "lambda": 10000)J", "\"2.7314e-5\"")).exit_code() == 1);
  // tampering: another λ, another enclosure, another value, another relation
  auto status = [](json x) { return verify_certificate(x).exit_code(); };
  json t = c.certificate;
  t["claim"]["lambda"] = "20000";
  BOOST_TEST(status(t) == 1);
  t = c.certificate;
  t["rank_heads_full_rank"]["mse"] = json::array({"0.001", "0.002"});
  BOOST_TEST(status(t) == 1);
  t = c.certificate;
  t["claim"]["value"] = "2e-5";
  BOOST_TEST(status(t) == 1);
  t = c.certificate;
  t["claim"]["relation"] = ">=";
  BOOST_TEST(status(t) == 1);
  t = c.certificate;
  t["claim"]["lambda"] = "-1";
  BOOST_TEST(status(t) == 2);
}

BOOST_AUTO_TEST_CASE(rank_heads_full_rank_mse_malformed_claims) {
  auto starts = [](const std::string& msg, const std::string& prefix) { return msg.rfind(prefix, 0) == 0; };
  BOOST_TEST(starts(expect_error(full_claim(R"J("d": 8)J", "0")), "/quantity/lambda:"));
  BOOST_TEST(starts(expect_error(full_claim(R"J("d": 8, "lambda": 0)J", "0")), "/quantity/lambda:"));
  BOOST_TEST(starts(expect_error(full_claim(R"J("d": 8, "lambda": "1e31")J", "0")), "/quantity/lambda:"));
  BOOST_TEST(starts(expect_error(full_claim(R"J("d": 2, "lambda": 1)J", "0")), "/quantity/d:"));
  BOOST_TEST(starts(expect_error(full_claim(R"J("d": 8, "lambda": 1, "panels": 100000)J", "0")), "/quantity/panels:"));
  BOOST_TEST(starts(expect_error(full_claim(R"J("d": 8, "lambda": 1, "heads": 1)J", "0")), "/quantity/heads:"));
  BOOST_TEST(starts(expect_error(full_claim(R"J("d": 8, "lambda": 1)J", "0", "==")), "/relation:"));
}

// ---- rank_heads_hardmax_orthonormal (proofs/L4 part E) ------------------------------------------------------------

namespace {
std::string hard_claim(const std::string& quantity, const std::string& value, const std::string& relation = ">=") {
  return R"J({"quantity": {"kind": "rank_heads_hardmax_orthonormal", )J" + quantity + R"J(}, "relation": ")J" + relation + R"J(", "value": )J" + value +
         "}";
}
}  // namespace

// Known answers (part E): d = 3, M_3 = 1 − 8/π²: one head ½(1 − M_3) = 4/π² = 0.40528…, three orthonormal heads
// ½(1 − 3M_3) = 12/π² − 1 = 0.21585…; just above is UNDECIDED (a lower bound, not the least error).
BOOST_AUTO_TEST_CASE(rank_heads_hardmax_orthonormal_known_answers) {
  const certify_result one = cert(hard_claim(R"J("d": 3, "heads": 1)J", "\"0.4052\""));
  BOOST_TEST_REQUIRE(one.exit_code() == 0);
  BOOST_TEST(one.certificate["rank_heads_hardmax"]["lower_bound"]["rational"].get<std::string>() == "0");
  BOOST_TEST(one.certificate["rank_heads_hardmax"]["lower_bound"]["over_pi_squared"].get<std::string>() == "4");
  BOOST_TEST(verify_certificate(one.certificate).exit_code() == 0);
  BOOST_TEST(cert(hard_claim(R"J("d": 3, "heads": 1)J", "\"0.4053\"")).exit_code() == 3);
  const certify_result three = cert(hard_claim(R"J("d": 3, "heads": 3)J", "\"0.2158\""));
  BOOST_TEST_REQUIRE(three.exit_code() == 0);
  BOOST_TEST(three.certificate["rank_heads_hardmax"]["arcsin_moment"]["rational"].get<std::string>() == "1");
  BOOST_TEST(three.certificate["rank_heads_hardmax"]["arcsin_moment"]["over_pi_squared"].get<std::string>() == "-8");
  BOOST_TEST(three.certificate["rank_heads_hardmax"]["lower_bound"]["rational"].get<std::string>() == "-1");
  BOOST_TEST(three.certificate["rank_heads_hardmax"]["lower_bound"]["over_pi_squared"].get<std::string>() == "12");
  BOOST_TEST(verify_certificate(three.certificate).exit_code() == 0);
  BOOST_TEST(cert(hard_claim(R"J("d": 3, "heads": 3)J", "\"0.2159\"")).exit_code() == 3);
  // every dimension: the checker's Fourier formula agrees with the prover's recurrence
  for (int d = 3; d <= 40; d += 5) {
    const certify_result r = cert(hard_claim("\"d\": " + std::to_string(d) + ", \"heads\": 1", "0"));
    BOOST_TEST(r.exit_code() == 0, d);
    BOOST_TEST(verify_certificate(r.certificate).exit_code() == 0, d);
  }
  auto status = [](json x) { return verify_certificate(x).exit_code(); };
  json t = three.certificate;
  t["rank_heads_hardmax"]["arcsin_moment"]["over_pi_squared"] = "-7";
  BOOST_TEST(status(t) == 1);
  t = three.certificate;
  t["rank_heads_hardmax"]["lower_bound"]["rational"] = "0";
  BOOST_TEST(status(t) == 1);
  t = three.certificate;
  t["claim"]["heads"] = 2;
  BOOST_TEST(status(t) == 1);
  t = three.certificate;
  t["claim"]["value"] = "0.3";
  BOOST_TEST(status(t) == 1);
  t = three.certificate;
  t["claim"]["heads"] = 4;
  BOOST_TEST(status(t) == 2);
}

BOOST_AUTO_TEST_CASE(rank_heads_hardmax_orthonormal_malformed_claims) {
  auto starts = [](const std::string& msg, const std::string& prefix) { return msg.rfind(prefix, 0) == 0; };
  BOOST_TEST(starts(expect_error(hard_claim(R"J("d": 3, "heads": 4)J", "0")), "/quantity/heads:"));
  BOOST_TEST(starts(expect_error(hard_claim(R"J("d": 3, "heads": 0)J", "0")), "/quantity/heads:"));
  BOOST_TEST(starts(expect_error(hard_claim(R"J("d": 2, "heads": 1)J", "0")), "/quantity/d:"));
  BOOST_TEST(starts(expect_error(hard_claim(R"J("d": 3, "heads": 1)J", "0", "<=")), "/relation:"));
  BOOST_TEST(starts(expect_error(hard_claim(R"J("d": 3, "heads": 1, "rank": 1)J", "0")), "/quantity/rank:"));
}

// ---- rank_heads_hardmax_directions (proofs/L4 part E, verified solve) ----------------------------------------------

namespace {
std::string dir_claim(const std::string& quantity, const std::string& value, const std::string& relation = ">=") {
  return R"J({"quantity": {"kind": "rank_heads_hardmax_directions", )J" + quantity + R"J(}, "relation": ")J" + relation + R"J(", "value": )J" + value +
         "}";
}
double end_of(const json& cert, int i) {
  return std::stod(cert["rank_heads_hardmax_directions"]["relaxed_mse"][static_cast<std::size_t>(i)].get<std::string>());
}
}  // namespace

// Known answers (part E): orthonormal directions give ½(1 − H·M_3) in d = 3, M_3 = 1 − 8/π² (three heads: 12/π² − 1,
// two: 8/π² − 1/2); a row parallel or antiparallel to an earlier one is dropped; just above the value is UNDECIDED.
BOOST_AUTO_TEST_CASE(rank_heads_hardmax_directions_known_answers) {
  const double pi2 = M_PI * M_PI;
  const certify_result three = cert(dir_claim(R"J("d": 3, "max_degree": 201, "directions": [[1, 0, 0], [0, 1, 0], [0, 0, 1]])J", "\"0.2158\""));
  BOOST_TEST_REQUIRE(three.exit_code() == 0);
  BOOST_TEST(end_of(three.certificate, 0) <= 12 / pi2 - 1 + 1e-15);
  BOOST_TEST(end_of(three.certificate, 1) >= 12 / pi2 - 1 - 1e-15);
  BOOST_TEST(end_of(three.certificate, 1) - end_of(three.certificate, 0) < 1e-5);
  BOOST_TEST(three.certificate["rank_heads_hardmax_directions"]["distinct"].get<long>() == 3);
  BOOST_TEST(verify_certificate(three.certificate).exit_code() == 0);
  BOOST_TEST(cert(dir_claim(R"J("d": 3, "max_degree": 201, "directions": [[1, 0, 0], [0, 1, 0], [0, 0, 1]])J", "\"0.2159\"")).exit_code() == 3);
  // the same heads with a rotated, rescaled copy and an antiparallel duplicate: two distinct directions
  const certify_result two = cert(dir_claim(R"J("d": 3, "max_degree": 201, "directions": [["3/5", "4/5", 0], [0, 0, 2], ["-0.3", "-0.4", 0]])J", "\"0.31\""));
  BOOST_TEST_REQUIRE(two.exit_code() == 0);
  BOOST_TEST(two.certificate["rank_heads_hardmax_directions"]["distinct"].get<long>() == 2);
  BOOST_TEST(end_of(two.certificate, 0) <= 8 / pi2 - 0.5 + 1e-15);
  BOOST_TEST(end_of(two.certificate, 1) >= 8 / pi2 - 0.5 - 1e-15);
  BOOST_TEST(verify_certificate(two.certificate).exit_code() == 0);
  // d = 8, orthonormal: the closed form ½(1 − 8 M_8) = 98/(9π²) − 5/6 of rank_heads_hardmax_orthonormal
  std::string eye;
  for (int i = 0; i < 8; ++i) {
    eye += i ? ", [" : "[";
    for (int j = 0; j < 8; ++j) eye += std::string(j ? ", " : "") + (i == j ? "1" : "0");
    eye += "]";
  }
  const certify_result eight = cert(dir_claim("\"d\": 8, \"directions\": [" + eye + "]", "\"0.2699\""));
  BOOST_TEST_REQUIRE(eight.exit_code() == 0);
  BOOST_TEST(end_of(eight.certificate, 0) <= 98 / (9 * pi2) - 5.0 / 6 + 1e-15);
  BOOST_TEST(end_of(eight.certificate, 1) >= 98 / (9 * pi2) - 5.0 / 6 - 1e-15);
  BOOST_TEST(verify_certificate(eight.certificate).exit_code() == 0);
  // a value above the relaxed error is UNDECIDED (a lower bound, never a refutation)
  BOOST_TEST(cert(dir_claim(R"J("d": 3, "directions": [[1, 2, 3]])J", "\"0.5\"")).exit_code() == 3);
}

// Soundness of the pair prover/checker: every stated fact is re-derived, so a changed enclosure, direction, count or
// value is rejected; a nearly parallel pair is either certified (and re-checked) or UNDECIDED, never wrong.
BOOST_AUTO_TEST_CASE(rank_heads_hardmax_directions_tampering_and_near_duplicates) {
  const certify_result r = cert(dir_claim(R"J("d": 4, "directions": [[1, 2, 0, -1], [0, 1, 1, 3], ["1/2", 0, -2, 1], [3, -1, 1, 0], [1, 1, 1, 1]])J", "\"0.2\""));
  BOOST_TEST_REQUIRE(r.exit_code() == 0);
  BOOST_TEST_REQUIRE(verify_certificate(r.certificate).exit_code() == 0);
  auto status = [](const json& x) { return verify_certificate(x).exit_code(); };
  const double lo = end_of(r.certificate, 0);
  BOOST_TEST_MESSAGE("5 directions in d = 4: relaxed MSE >= " << lo);
  json t = r.certificate;
  t["rank_heads_hardmax_directions"]["relaxed_mse"] = json::array({"0.9", "0.95"});
  BOOST_TEST(status(t) == 1);
  t = r.certificate;
  t["claim"]["directions"][2][1] = "1";
  BOOST_TEST(status(t) == 1);
  t = r.certificate;
  t["rank_heads_hardmax_directions"]["distinct"] = 4;
  BOOST_TEST(status(t) == 1);
  t = r.certificate;
  t["claim"]["value"] = "0.9";
  BOOST_TEST(status(t) == 1);
  t = r.certificate;
  t["claim"]["directions"][0] = json::array({"0", "0", "0", "0"});
  BOOST_TEST(status(t) == 2);
  t = r.certificate;
  t["rank_heads_hardmax_directions"]["max_degree"] = 40;
  BOOST_TEST(status(t) == 2);
  int certified = 0;
  for (const std::string eps : {"0", "1e-15", "1e-9", "1e-3"}) {
    const certify_result n = cert(dir_claim(R"J("d": 4, "directions": [[1, 2, 0, -1], [0, 1, 1, 3], [1, 2, ")J" + eps + R"J(", -1]])J", "\"0.1\""));
    BOOST_TEST((n.exit_code() == 0 || n.exit_code() == 3), eps);
    if (n.exit_code() != 0) continue;
    ++certified;
    BOOST_TEST(verify_certificate(n.certificate).exit_code() == 0, eps);
  }
  BOOST_TEST(certified >= 2);  // "0" is an exact duplicate (dropped) and 1e-3 is well conditioned
}

BOOST_AUTO_TEST_CASE(rank_heads_hardmax_directions_malformed_claims) {
  auto starts = [](const std::string& msg, const std::string& prefix) { return msg.rfind(prefix, 0) == 0; };
  BOOST_TEST(starts(expect_error(dir_claim(R"J("d": 3, "directions": [[1, 0, 0], [0, 0, 0]])J", "0")), "/quantity/directions/1:"));
  BOOST_TEST(starts(expect_error(dir_claim(R"J("d": 3, "directions": [[1, 0, 0], [0, 1]])J", "0")), "/quantity/directions/1:"));
  BOOST_TEST(starts(expect_error(dir_claim(R"J("d": 3, "directions": [[1, 0, "x"]])J", "0")), "/quantity/directions/0/2:"));
  BOOST_TEST(starts(expect_error(dir_claim(R"J("d": 3, "directions": [])J", "0")), "/quantity/directions:"));
  BOOST_TEST(starts(expect_error(dir_claim(R"J("d": 3, "max_degree": 40, "directions": [[1, 0, 0]])J", "0")), "/quantity/max_degree:"));
  BOOST_TEST(starts(expect_error(dir_claim(R"J("d": 2, "directions": [[1, 0]])J", "0")), "/quantity/d:"));
  BOOST_TEST(starts(expect_error(dir_claim(R"J("d": 3, "directions": [[1, 0, 0]])J", "0", "<=")), "/relation:"));
  BOOST_TEST(starts(expect_error(dir_claim(R"J("d": 3, "heads": 1, "directions": [[1, 0, 0]])J", "0")), "/quantity/heads:"));
  std::string many;
  for (int i = 0; i < 257; ++i) many += std::string(i ? ", " : "") + "[1, " + std::to_string(i) + ", 0]";
  BOOST_TEST(starts(expect_error(dir_claim("\"d\": 3, \"directions\": [" + many + "]", "0")), "/quantity/directions:"));
}

// ---- rank_heads_context_hit_rate and rank_heads_pair_hit_probability (proofs/L4 part G) -----------------------------

namespace {
std::string context_claim(const std::string& quantity, const std::string& relation, const std::string& value) {
  return R"J({"quantity": {"kind": "rank_heads_context_hit_rate", )J" + quantity + R"J(}, "relation": ")J" + relation + R"J(", "value": )J" + value + "}";
}
std::string pair_claim(const std::string& quantity, const std::string& relation, const std::string& value) {
  return R"J({"quantity": {"kind": "rank_heads_pair_hit_probability", )J" + quantity + R"J(}, "relation": ")J" + relation + R"J(", "value": )J" + value +
         "}";
}
}  // namespace

// The exact rate of a small instance: "=" the stated rate is CERTIFIED, "=" anything else REFUTED, and the checker
// (which regenerates the instance and re-counts) accepts both certificates and rejects a changed count.
BOOST_AUTO_TEST_CASE(rank_heads_context_hit_rate_exact_verdicts) {
  const std::string q = R"J("d": 3, "keys": 4, "inputs": 50, "heads": 15, "seed": "12345")J";
  const certify_result first = cert(context_claim(q, "<=", "1"));
  BOOST_TEST_REQUIRE(first.exit_code() == 0);
  const std::string rate = first.certificate["rank_heads_context"]["rate"].get<std::string>();
  const mpq_rational r(rate);
  BOOST_TEST(r > 0);
  BOOST_TEST(r < 1);
  BOOST_TEST_MESSAGE("d = 3, N = 4, 50 inputs x 15 heads, seed 12345: rate " << rate);
  const certify_result same = cert(context_claim(q, "=", "\"" + rate + "\""));
  BOOST_TEST_REQUIRE(same.exit_code() == 0);
  BOOST_TEST(verify_certificate(same.certificate).exit_code() == 0);
  const mpq_rational off = r + mpq_rational(1, 1000000);
  const certify_result other = cert(context_claim(q, "=", "\"" + off.str() + "\""));
  BOOST_TEST_REQUIRE(other.exit_code() == 1);
  BOOST_TEST(verify_certificate(other.certificate).exit_code() == 0);
  BOOST_TEST(cert(context_claim(q, ">=", "\"" + off.str() + "\"")).exit_code() == 1);
  // the JSON integer seed is the same instance as the decimal string
  BOOST_TEST(cert(context_claim(R"J("d": 3, "keys": 4, "inputs": 50, "heads": 15, "seed": 12345)J", "=", "\"" + rate + "\"")).exit_code() == 0);
  // more keys, a lower rate on the same instance (N = 4 -> 16)
  const certify_result sixteen = cert(context_claim(R"J("d": 3, "keys": 16, "inputs": 50, "heads": 15, "seed": "12345")J", "<=", "\"" + rate + "\""));
  BOOST_TEST(sixteen.exit_code() == 0);
  auto status = [](const json& x) { return verify_certificate(x).exit_code(); };
  json t = same.certificate;
  t["rank_heads_context"]["rate"] = off.str();
  BOOST_TEST(status(t) == 1);
  t = same.certificate;
  t["rank_heads_context"]["redrawn"] = same.certificate["rank_heads_context"]["redrawn"].get<long>() + 1;
  BOOST_TEST(status(t) == 1);
  t = same.certificate;
  t["claim"]["seed"] = "12346";
  BOOST_TEST(status(t) == 1);
  t = same.certificate;
  t["verdict"] = "REFUTED";
  BOOST_TEST(status(t) == 1);
}

BOOST_AUTO_TEST_CASE(rank_heads_pair_hit_probability_known_answers) {
  // p2(3) = 1 - 1/pi = 0.68169, p2(4) = 3/4 - 1/pi^2 = 0.64868
  const certify_result three = cert(pair_claim(R"J("d": 3)J", "<=", "\"0.6817\""));
  BOOST_TEST_REQUIRE(three.exit_code() == 0);
  BOOST_TEST(three.certificate["rank_heads_pair_hit"]["rational"].get<std::string>() == "1");
  BOOST_TEST(three.certificate["rank_heads_pair_hit"]["over_pi_power"].get<std::string>() == "-1");
  BOOST_TEST(three.certificate["rank_heads_pair_hit"]["pi_power"].get<int>() == 1);
  BOOST_TEST(verify_certificate(three.certificate).exit_code() == 0);
  const certify_result low = cert(pair_claim(R"J("d": 3)J", "<=", "\"0.6816\""));
  BOOST_TEST_REQUIRE(low.exit_code() == 1);
  BOOST_TEST(verify_certificate(low.certificate).exit_code() == 0);
  const certify_result four = cert(pair_claim(R"J("d": 4)J", ">=", "\"0.6486\""));
  BOOST_TEST_REQUIRE(four.exit_code() == 0);
  BOOST_TEST(four.certificate["rank_heads_pair_hit"]["rational"].get<std::string>() == "3/4");
  BOOST_TEST(four.certificate["rank_heads_pair_hit"]["over_pi_power"].get<std::string>() == "-1");
  BOOST_TEST(four.certificate["rank_heads_pair_hit"]["pi_power"].get<int>() == 2);
  BOOST_TEST(verify_certificate(four.certificate).exit_code() == 0);
  // every dimension: the checker's Fourier formula agrees with the prover's recurrence, and p2 > 1/2
  for (int d = 3; d <= 60; d += 7) {
    const certify_result r = cert(pair_claim("\"d\": " + std::to_string(d), ">=", "\"0.5\""));
    BOOST_TEST(r.exit_code() == 0, d);
    BOOST_TEST(verify_certificate(r.certificate).exit_code() == 0, d);
  }
  auto status = [](const json& x) { return verify_certificate(x).exit_code(); };
  json t = four.certificate;
  t["rank_heads_pair_hit"]["over_pi_power"] = "-2";
  BOOST_TEST(status(t) == 1);
  t = four.certificate;
  t["rank_heads_pair_hit"]["pi_power"] = 1;
  BOOST_TEST(status(t) != 0);
  t = four.certificate;
  t["claim"]["d"] = 5;
  BOOST_TEST(status(t) == 1);
}

BOOST_AUTO_TEST_CASE(rank_heads_context_and_pair_hit_malformed_claims) {
  auto starts = [](const std::string& msg, const std::string& prefix) { return msg.rfind(prefix, 0) == 0; };
  const std::string ok = R"J("d": 3, "inputs": 50, "heads": 15, "seed": "1")J";
  BOOST_TEST(starts(expect_error(context_claim(ok + R"J(, "keys": 3)J", "=", "0")), "/quantity/keys:"));
  BOOST_TEST(starts(expect_error(context_claim(R"J("d": 3, "keys": 4, "inputs": 1, "heads": 15, "seed": "1")J", "=", "0")), "/quantity/inputs:"));
  BOOST_TEST(starts(expect_error(context_claim(R"J("d": 9, "keys": 4, "inputs": 50, "heads": 15, "seed": "1")J", "=", "0")), "/quantity/d:"));
  BOOST_TEST(starts(expect_error(context_claim(R"J("d": 3, "keys": 4, "inputs": 50, "heads": 15, "seed": "18446744073709551616")J", "=", "0")),
                    "/quantity/seed:"));
  BOOST_TEST(starts(expect_error(context_claim(R"J("d": 3, "keys": 4, "inputs": 50, "heads": 15, "seed": -1)J", "=", "0")), "/quantity/seed:"));
  BOOST_TEST(starts(expect_error(context_claim(R"J("d": 3, "keys": 4, "inputs": 50, "heads": 15, "seed": "0x10")J", "=", "0")), "/quantity/seed:"));
  BOOST_TEST(starts(expect_error(context_claim(R"J("d": 3, "keys": 4, "inputs": 50, "heads": 15)J", "=", "0")), "/quantity/seed:"));
  BOOST_TEST(starts(expect_error(context_claim(ok + R"J(, "keys": 4)J", "within", "0")), "/relation:"));
  BOOST_TEST(starts(expect_error(pair_claim(R"J("d": 2)J", "<=", "0")), "/quantity/d:"));
  BOOST_TEST(starts(expect_error(pair_claim(R"J("d": 3)J", "=", "0")), "/relation:"));
  BOOST_TEST(starts(expect_error(pair_claim(R"J("d": 3, "keys": 2)J", "<=", "0")), "/quantity/keys:"));
}

// ---- nearest_neighbour_model_mse (proofs/L4 parts H and I) --------------------------------------------------------

namespace {
// A model of `layers` layers of `heads` heads of rank r with every weight `fill`, and readout Wr = `readout` on the
// content block (Wr[k][k] for k < 8; width 9, no positions).
std::string model_claim(int N, int heads, int r, int layers, const std::string& fill, const std::string& readout, const std::string& relation,
                        const std::string& value, int inputs = 20) {
  const int D = 9;
  std::string w;
  auto add = [&](const std::string& x) { w += (w.empty() ? "\"" : ", \"") + x + "\""; };
  for (int l = 0; l < layers; ++l)
    for (int h = 0; h < heads; ++h)
      for (int k = 0; k < 2 * D * r + D * D; ++k) add(fill);
  for (int i = 0; i < D; ++i)
    for (int j = 0; j < 8; ++j) add(i == j ? readout : "0");
  return R"J({"quantity": {"kind": "nearest_neighbour_model_mse", "keys": )J" + std::to_string(N) + R"J(, "inputs": )J" + std::to_string(inputs) +
         R"J(, "model": {"width": 9, "heads": )J" + std::to_string(heads) + R"J(, "rank": )J" + std::to_string(r) + R"J(, "layers": )J" +
         std::to_string(layers) + R"J(, "encoding": "none", "weights": [)J" + w + R"J(]}}, "relation": ")J" + relation + R"J(", "value": )J" + value + "}";
}
}  // namespace

// Known answers: with every attention weight 0 the layers add nothing (softmax of zeros averages V = 0), so a zero
// readout predicts 0 and the MSE is the mean of ‖x_target‖² = 1 up to the test points' rounding to binary64 (|‖x‖² − 1|
// < 2^-49); the readout Wr = I predicts the query y, an MSE of 2 − 2⟨y, x_t⟩ on average, strictly between 0 and 2.
BOOST_AUTO_TEST_CASE(nearest_neighbour_model_mse_known_answers) {
  const certify_result zero = cert(model_claim(4, 1, 1, 1, "0", "0", "<=", "\"1.000000000001\""));
  BOOST_TEST_REQUIRE(zero.exit_code() == 0);
  BOOST_TEST(verify_certificate(zero.certificate).exit_code() == 0);
  BOOST_TEST(cert(model_claim(4, 1, 1, 1, "0", "0", ">=", "\"0.999999999999\"")).exit_code() == 0);
  const certify_result below = cert(model_claim(4, 1, 1, 1, "0", "0", "<=", "\"0.999\""));
  BOOST_TEST_REQUIRE(below.exit_code() == 1);
  BOOST_TEST(verify_certificate(below.certificate).exit_code() == 0);
  // identity readout, two layers of two heads with weights 1/8 (softmax of equal-looking scores, values mixing the keys)
  const certify_result mixed = cert(model_claim(16, 2, 2, 2, "1/8", "1", "<=", "2"));
  BOOST_TEST_REQUIRE(mixed.exit_code() == 0);
  BOOST_TEST(verify_certificate(mixed.certificate).exit_code() == 0);
  const auto& mse = mixed.certificate["nearest_neighbour_model"]["mse"];
  const double lo = std::stod(mse[0].get<std::string>()), hi = std::stod(mse[1].get<std::string>());
  BOOST_TEST(lo > 0);
  BOOST_TEST(hi - lo < 1e-9);
  BOOST_TEST_MESSAGE("2 layers x 2 heads of rank 2, weights 1/8, N = 16: MSE in [" << lo << ", " << hi << "]");
  auto status = [](const json& x) { return verify_certificate(x).exit_code(); };
  json t = mixed.certificate;
  t["claim"]["model"]["weights"][0] = "1/4";
  BOOST_TEST(status(t) == 1);
  t = mixed.certificate;
  t["nearest_neighbour_model"]["mse"] = json::array({"0.9", "0.95"});
  BOOST_TEST(status(t) == 1);
  t = mixed.certificate;
  t["nearest_neighbour_model"]["redrawn"] = 1;
  BOOST_TEST(status(t) == 1);
  t = mixed.certificate;
  t["claim"]["keys"] = 8;
  BOOST_TEST(status(t) != 0);
}

BOOST_AUTO_TEST_CASE(nearest_neighbour_model_mse_malformed_claims) {
  auto starts = [](const std::string& msg, const std::string& prefix) { return msg.rfind(prefix, 0) == 0; };
  BOOST_TEST(starts(expect_error(model_claim(4, 1, 1, 1, "0.1", "0", "<=", "1")), "/quantity/model/weights/0:"));  // 0.1 is not a binary64
  BOOST_TEST(starts(expect_error(model_claim(17, 1, 1, 1, "0", "0", "<=", "1")), "/quantity/keys:"));
  BOOST_TEST(starts(expect_error(model_claim(4, 1, 1, 1, "0", "0", "=", "1")), "/relation:"));
  BOOST_TEST(starts(expect_error(model_claim(4, 1, 1, 1, "0", "0", "<=", "1", 1001)), "/quantity/inputs:"));
  std::string c = model_claim(4, 1, 1, 1, "0", "0", "<=", "1");
  BOOST_TEST(starts(expect_error(std::string(c).replace(c.find("\"width\": 9"), 10, "\"width\": 8")), "/quantity/model/width:"));
  BOOST_TEST(starts(expect_error(std::string(c).replace(c.find("\"none\""), 6, "\"rotary\"")), "/quantity/model/encoding:"));
  BOOST_TEST(starts(expect_error(std::string(c).replace(c.find("\"weights\": [\"0\", "), 17, "\"weights\": [")), "/quantity/model/weights:"));
}
