// tests/audit/audit.cpp — the audit (audit/audit.hpp): the spec fixed first (unknown keys refused, its
// SHA-256 against the standard's test vectors), the negative controls, each head's objects equal to
// analyse_rank on the same matrices, the certified value scale, and the outcome classes decided from
// the spec's allowance (every class reached by a head built for it).
#define BOOST_TEST_MODULE audit
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>

#include "../support.hpp"
#include "attncert/audit/audit.hpp"
#include "attncert/field.hpp"
#include "attncert/number/format.hpp"
#include "attncert/rank/policy.hpp"

using namespace attncert;
using namespace attncert::audit;

namespace {

tensor t4(std::size_t B, std::size_t H, std::size_t n, std::size_t d, std::vector<double> v) {
  tensor t;
  t.shape = {B, H, n, d};
  t.values = std::move(v);
  return t;
}

// The two-token head q = k = (1, -1)ᵀ at scale s: scores s·[[1, -1], [-1, 1]], attention with eigenvalues
// 1 and tanh(s) (proofs/P01): exact rank 2, numerical rank 1 in binary32 for s = 1e-9.
captured_call two_token(const std::string& scale, std::vector<double> weights) {
  captured_call c;
  c.name = "two-token";
  c.kind = "test";
  c.scale = scale;
  c.q = t4(1, 1, 2, 1, {1, -1});
  c.k = t4(1, 1, 2, 1, {1, -1});
  c.v = t4(1, 1, 2, 2, {1, 0, 0, 1});
  if (!weights.empty()) c.weights = t4(1, 1, 2, 2, std::move(weights));
  return c;
}

audit_spec spec_of(const std::string& text) { return parse_audit_spec(text); }

outcome outcome_of_call(const captured_call& c, const std::string& spec = R"({"allowable_output_error": 1e-3})") {
  const audit_result r = run_audit(spec_of(spec), {c});
  BOOST_TEST_REQUIRE(r.calls.size() == 1u);
  BOOST_TEST_REQUIRE(r.calls[0].heads_results.size() == 1u);
  BOOST_TEST_MESSAGE(r.calls[0].heads_results[0].why);
  return r.calls[0].heads_results[0].result;
}

}  // namespace

BOOST_AUTO_TEST_CASE(sha256_matches_the_standards_test_vectors) {
  // FIPS 180-2 appendix B (and `sha256sum`)
  BOOST_TEST(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  BOOST_TEST(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  BOOST_TEST(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  BOOST_TEST(sha256_hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

BOOST_AUTO_TEST_CASE(the_spec_is_fixed_and_refuses_what_it_does_not_know) {
  const audit_spec d = spec_of(default_audit_spec_text());
  BOOST_TEST(d.objects.size() == 6u);
  BOOST_TEST(d.target_contrast.between.empty());
  BOOST_TEST(d.sha256 == sha256_hex(default_audit_spec_text()));
  const audit_spec a = spec_of(R"({"allowable_output_error": 0.5, "objects": ["attention"]})");
  const audit_spec b = spec_of(R"({"allowable_output_error": 0.5,  "objects": ["attention"]})");
  BOOST_TEST(a.allowable_output_error == 0.5);
  BOOST_TEST(a.sha256 != b.sha256);  // the text is hashed, whitespace included: an edit shows
  BOOST_TEST(input_error_of([] { spec_of(R"({"threshold": 1e-6})"); }).find("unknown key 'threshold'") != std::string::npos);
  BOOST_TEST(input_error_of([] { spec_of(R"({"objects": ["keys"]})"); }).find("unknown object 'keys'") != std::string::npos);
  BOOST_TEST(input_error_of([] { spec_of(R"({"allowable_output_error": "small"})"); }).find("wrong type") != std::string::npos);
  BOOST_TEST(input_error_of([] { spec_of(R"({"allowable_output_error": -1})"); }) != "");
  BOOST_TEST(input_error_of([] { spec_of(R"({"policies": "nonsense"})"); }) != "");
  BOOST_TEST(input_error_of([] { spec_of("[1, 2]"); }).find("a JSON object") != std::string::npos);
  BOOST_TEST(input_error_of([] { spec_of("{"); }).find("not JSON") != std::string::npos);
  // the target contrast and fixed_at
  const audit_spec t = spec_of(R"({"target_contrast": {"tokens": [3, 1], "margin": 0.25}, "fixed_at": "2026-12-01T09:30:00Z"})");
  BOOST_TEST(t.target_contrast.between == "tokens");
  BOOST_TEST(t.target_contrast.first == 3u);
  BOOST_TEST(t.target_contrast.second == 1u);
  BOOST_TEST(t.target_contrast.margin == 0.25);
  BOOST_TEST(t.fixed_at == "2026-12-01T09:30:00Z");
  BOOST_TEST(input_error_of([] { spec_of(R"({"target_contrast": {"tokens": [1, 1], "margin": 1}})"); }).find("two different") != std::string::npos);
  BOOST_TEST(input_error_of([] { spec_of(R"({"target_contrast": {"tokens": [0, 1]}})"); }).find("margin") != std::string::npos);
  BOOST_TEST(input_error_of([] { spec_of(R"({"target_contrast": {"rows": [0, 1], "margin": 1}})"); }).find("unknown key 'rows'") != std::string::npos);
  BOOST_TEST(input_error_of([] { spec_of(R"({"target_contrast": {"batches": [0, -1], "margin": 1}})"); }).find("non-negative") != std::string::npos);
  BOOST_TEST(input_error_of([] { spec_of(R"({"target_contrast": "keep the answer"})"); }).find("target_contrast must be") != std::string::npos);
  BOOST_TEST(input_error_of([] { spec_of(R"({"fixed_at": "yesterday"})"); }).find("fixed_at") != std::string::npos);
  BOOST_TEST(input_error_of([] { spec_of(R"({"fixed_at": "2026-13-01T09:30:00Z"})"); }).find("fixed_at") != std::string::npos);
  for (const char* bad : {"2026-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-12-01T23:59:60Z"})
    BOOST_TEST(input_error_of([&] { spec_of(std::string(R"({"fixed_at": ")") + bad + "\"}"); }).find("fixed_at") != std::string::npos, bad);
  BOOST_TEST(spec_of(R"({"fixed_at": "2024-02-29T23:59:59Z"})").fixed_at == "2024-02-29T23:59:59Z");  // a leap day
  BOOST_TEST(spec_of(R"({"fixed_at": "2000-02-29T00:00:00Z"})").fixed_at == "2000-02-29T00:00:00Z");
}

BOOST_AUTO_TEST_CASE(a_spec_that_is_not_the_registered_one_is_refused) {
  const std::string text = R"({"allowable_output_error": 0.01, "fixed_at": "2026-12-01T09:30:00Z"})";
  const audit_spec s = spec_of(text);
  check_registered(s, {sha256_hex(text), "2026-12-01T09:30:00Z", "report.json"});  // the same criteria: accepted
  check_registered(s, {sha256_hex(text), "", "--registered"});
  const audit_spec later = spec_of(R"({"allowable_output_error": 0.02, "fixed_at": "2026-12-01T09:30:00Z"})");
  const std::string e = input_error_of([&] { check_registered(later, {sha256_hex(text), "", "--registered"}); });
  BOOST_TEST(e.find("changed after they were fixed") != std::string::npos);
  BOOST_TEST(e.find(sha256_hex(text)) != std::string::npos);
  BOOST_TEST(input_error_of([&] { check_registered(s, {sha256_hex(text), "2026-11-30T00:00:00Z", "report.json"}); }).find("fixed_at") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(negative_controls_pass_with_their_known_ranks) {
  const auto cs = controls(spec_of(default_audit_spec_text()));
  BOOST_TEST_REQUIRE(cs.size() == 3u);
  const std::size_t expected[] = {2, 1, 5};
  for (std::size_t i = 0; i < 3; ++i) {
    BOOST_TEST(cs[i].passed, cs[i].name);
    BOOST_TEST(cs[i].analysis.exact.lo == expected[i]);
    BOOST_TEST(cs[i].analysis.exact.hi == expected[i]);
  }
}

// Soundness of the measurement: each object of a head is what analyse_rank gives on the same matrices.
BOOST_AUTO_TEST_CASE(objects_are_analyse_rank_on_the_same_head) {
  captured_call c = two_token("0.5", {});
  c.q = t4(1, 2, 3, 2, {1, 0, 0, 1, 1, 1, /* head 1 */ 2, -1, 1, 0, 0, 3});
  c.k = t4(1, 1, 3, 2, {1, 2, -1, 0, 0, 1});
  c.v = t4(1, 1, 3, 2, {1, -2, 3, 0.5, 0, 1});
  const audit_result r = run_audit(spec_of(R"({"formats": "binary32,binary64"})"), {c});
  BOOST_TEST_REQUIRE(r.calls[0].heads_results.size() == 2u);  // GQA: both query heads on kv head 0
  const head_result& h = r.calls[0].heads_results[1];
  BOOST_TEST(h.kv_head == 0u);
  rank_request q;
  q.Q = matrix<mpq_rational>(3, 2);
  *q.Q << 2, -1, 1, 0, 0, 3;
  q.K = matrix<mpq_rational>(3, 2);
  *q.K << 1, 2, -1, 0, 0, 1;
  q.V = matrix<mpq_rational>(3, 2);
  *q.V << 1, -2, 3, mpq_rational(1, 2), 0, 1;
  q.scale = mpq_rational(1, 2);
  q.formats = parse_formats("binary32,binary64");
  q.policies = parse_policies("numpy");
  q.formats_explicit = true;
  for (const auto& o : h.objects) {
    if (o.object == "values") continue;
    q.object = parse_layer_object(o.object);
    const rank_analysis ref = analyse_rank(q);
    BOOST_TEST_CONTEXT(o.object) {
      BOOST_TEST(o.analysis.exact.lo == ref.exact.lo);
      BOOST_TEST(o.analysis.exact.hi == ref.exact.hi);
      BOOST_TEST_REQUIRE(o.analysis.numerical.size() == ref.numerical.size());
      for (std::size_t i = 0; i < ref.numerical.size(); ++i) BOOST_TEST(o.analysis.numerical[i].rank == ref.numerical[i].rank);
      BOOST_TEST_REQUIRE(o.analysis.singular_values.sigma.size() == ref.singular_values.sigma.size());
      for (std::size_t i = 0; i < ref.singular_values.sigma.size(); ++i)
        BOOST_TEST(lower(o.analysis.singular_values.sigma[i]) == lower(ref.singular_values.sigma[i]));
    }
  }
  // the value scale encloses max_j |v_j| = |(3, 1/2)| = sqrt(9.25)
  BOOST_TEST(std::stod(h.value_scale_lo) <= std::sqrt(9.25));
  BOOST_TEST(std::stod(h.value_scale_hi) >= std::sqrt(9.25));
  BOOST_TEST(std::stod(h.value_scale_hi) - std::stod(h.value_scale_lo) < 1e-15);
}

// Each outcome class is reached by a head built for it, and only from the spec's allowance.
BOOST_AUTO_TEST_CASE(outcome_classes) {
  // scale 1e-9: A = (1/2)[[1 + t, 1 - t], [1 - t, 1 + t]], t = tanh(1e-9): exact rank 2, binary32 rank 1
  const double t = std::tanh(1e-9);
  const std::vector<double> exact_weights{(1 + t) / 2, (1 - t) / 2, (1 - t) / 2, (1 + t) / 2};
  BOOST_TEST(to_string(outcome_of_call(two_token("1e-9", exact_weights))) == std::string("rank-reduced/adequate"));
  BOOST_TEST(to_string(outcome_of_call(two_token("1e-9", {1, 0, 0, 1}))) == std::string("rank-reduced/inadequate"));
  // scale 1: A has eigenvalues 1 and tanh 1, numerical rank 2 everywhere
  const double u = std::tanh(1.0);
  const std::vector<double> good{(1 + u) / 2, (1 - u) / 2, (1 - u) / 2, (1 + u) / 2};
  BOOST_TEST(to_string(outcome_of_call(two_token("1", good))) == std::string("rank-kept/within-tolerance"));
  BOOST_TEST(to_string(outcome_of_call(two_token("1", {0.5, 0.5, 0.5, 0.5}))) == std::string("rank-kept/exceeds-tolerance"));
  // the same head judged under a looser allowance is within it: the class follows the spec, fixed first
  BOOST_TEST(to_string(outcome_of_call(two_token("1", {0.5, 0.5, 0.5, 0.5}), R"({"allowable_output_error": 1})")) ==
             std::string("rank-kept/within-tolerance"));
  // no weights: the output error is not bounded, undecided
  BOOST_TEST(to_string(outcome_of_call(two_token("1", {}))) == std::string("undecided"));
  // the relative output error interval contains the exact value for W = [[1/2, 1/2], [1/2, 1/2]], V = I:
  // ((W - A)V)_i has entries ±u/2, norm u/sqrt(2); max|v_j| = 1
  const audit_result r = run_audit(spec_of("{}"), {two_token("1", {0.5, 0.5, 0.5, 0.5})});
  const head_result& h = r.calls[0].heads_results[0];
  BOOST_TEST(std::stod(h.output_error_rel_lo) <= u / std::sqrt(2.0));
  BOOST_TEST(std::stod(h.output_error_rel_hi) >= u / std::sqrt(2.0));
  BOOST_TEST(std::stod(h.output_error_rel_hi) - std::stod(h.output_error_rel_lo) < 1e-12);
}

// The target contrast: enclosed, and it decides adequacy together with the allowance.
BOOST_AUTO_TEST_CASE(target_contrast_is_enclosed_and_decides_adequacy) {
  // scale 1, V = I: (AV)_0 − (AV)_1 = (u, −u), u = tanh 1: the contrast of tokens 0 and 1 is u·sqrt(2) = 1.0771
  const double u = std::tanh(1.0), contrast = u * std::sqrt(2.0);
  const std::vector<double> good{(1 + u) / 2, (1 - u) / 2, (1 - u) / 2, (1 + u) / 2};
  const audit_result r = run_audit(spec_of(R"({"target_contrast": {"tokens": [0, 1], "margin": 1}})"), {two_token("1", good)});
  const head_result& h = r.calls[0].heads_results[0];
  BOOST_TEST(std::stod(h.contrast_exact_lo) <= contrast);
  BOOST_TEST(std::stod(h.contrast_exact_hi) >= contrast);
  BOOST_TEST(std::stod(h.contrast_exact_hi) - std::stod(h.contrast_exact_lo) < 1e-12);
  BOOST_TEST(std::stod(h.contrast_model_lo) <= contrast * (1 + 1e-15));  // the model's weights are A rounded to binary64
  BOOST_TEST(std::stod(h.contrast_model_hi) >= contrast * (1 - 1e-15));
  BOOST_TEST(to_string(h.result) == std::string("rank-kept/within-tolerance"));
  // the same head under a margin it does not reach: the output error is within the allowance, the contrast is not
  BOOST_TEST(to_string(outcome_of_call(two_token("1", good), R"({"target_contrast": {"tokens": [0, 1], "margin": 1.2}})")) ==
             std::string("rank-kept/exceeds-tolerance"));
  // uniform weights keep no contrast at all: model contrast exactly 0
  const audit_result z = run_audit(spec_of(R"({"allowable_output_error": 1, "target_contrast": {"tokens": [0, 1], "margin": 0.1}})"),
                                   {two_token("1", {0.5, 0.5, 0.5, 0.5})});
  BOOST_TEST(std::stod(z.calls[0].heads_results[0].contrast_model_hi) == 0.0);
  BOOST_TEST(to_string(z.calls[0].heads_results[0].result) == std::string("rank-kept/exceeds-tolerance"));
  // batches: two identical inputs have no contrast; only the first batch's heads carry it
  captured_call c = two_token("1", good);
  c.q = t4(2, 1, 2, 1, {1, -1, 1, -1});
  c.k = t4(2, 1, 2, 1, {1, -1, 1, -1});
  c.v = t4(2, 1, 2, 2, {1, 0, 0, 1, 1, 0, 0, 1});
  c.weights = t4(2, 1, 2, 2, {good[0], good[1], good[2], good[3], good[0], good[1], good[2], good[3]});
  const audit_result b = run_audit(spec_of(R"({"target_contrast": {"batches": [0, 1], "margin": 0.5}})"), {c});
  BOOST_TEST_REQUIRE(b.calls[0].heads_results.size() == 2u);
  BOOST_TEST(std::stod(b.calls[0].heads_results[0].contrast_exact_lo) == 0.0);
  BOOST_TEST(to_string(b.calls[0].heads_results[0].result) == std::string("rank-kept/exceeds-tolerance"));
  BOOST_TEST(b.calls[0].heads_results[1].contrast_exact_lo.empty());
  BOOST_TEST(to_string(b.calls[0].heads_results[1].result) == std::string("rank-kept/within-tolerance"));
  // a contrast naming rows the call does not have is refused before anything is computed
  BOOST_TEST(input_error_of([&] { run_audit(spec_of(R"({"target_contrast": {"tokens": [0, 2], "margin": 1}})"), {two_token("1", good)}); })
                 .find("has 2 query rows") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(malformed_calls_are_refused) {
  captured_call c = two_token("1", {});
  c.k = t4(1, 1, 2, 2, {1, 0, 0, 1});  // width 2 against q's 1
  BOOST_TEST(input_error_of([&] { run_audit(spec_of("{}"), {c}); }).find("do not fit") != std::string::npos);
  c = two_token("1", {});
  c.dtype = "int8";
  BOOST_TEST(input_error_of([&] { run_audit(spec_of("{}"), {c}); }).find("int8") != std::string::npos);
  c = two_token("1", {});
  c.q.values[0] = std::nan("");
  BOOST_TEST(input_error_of([&] { run_audit(spec_of("{}"), {c}); }).find("NaN") != std::string::npos);
  BOOST_TEST(input_error_of([&] { run_audit(spec_of("{}"), {}); }).find("no attention call") != std::string::npos);
  c = two_token("1", {});
  c.w_o = t4(1, 1, 3, 1, {1, 0, 0});  // 4-D, not (E, h·d_v)
  BOOST_TEST(input_error_of([&] { run_audit(spec_of("{}"), {c}); }).find("w_o must be (E, h * d_v)") != std::string::npos);
  c.w_o = tensor{};
  c.w_o->shape = {3, 2};
  c.w_o->values = {1, 0, 0, 1, 1, 1};
  c.output = t4(1, 1, 2, 3, {0, 0, 0, 0, 0, 0});  // 4-D, not (b, n_q, E)
  BOOST_TEST(input_error_of([&] { run_audit(spec_of("{}"), {c}); }).find("output must be (b, n_q, E)") != std::string::npos);
}
