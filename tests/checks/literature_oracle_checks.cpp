// tests/checks/literature_oracle_checks.cpp — linear-attention and random-features: the
// identity, the negative controls and the oracle-certified output bound, in every format.
#define BOOST_TEST_MODULE literature_oracle_checks
#include <boost/test/unit_test.hpp>

#include "../support.hpp"
#include "checks/common.hpp"
#include "check_support.hpp"

using namespace attncert;
using namespace attncert::checks;

namespace {
run_settings settings(const std::string& formats) {
  run_settings rs = testing::settings(formats, 0, "numpy");
  rs.seed = test_seed();
  return rs;
}
const report::claim_row* find(const report::check_report& r, const std::string& claim, const std::string& tier = "") {
  for (const auto& c : r.claims)
    if (c.claim == claim && (tier.empty() || c.tier == tier)) return &c;
  return nullptr;
}
}  // namespace

BOOST_AUTO_TEST_CASE(linear_attention_in_every_format) {
  const auto r = run_check(*find_check("linear-attention"), settings("binary16,bfloat16,binary32,binary64,mpfr128"));
  for (const auto& c : r.claims) BOOST_TEST((c.result == verdict::pass), c.claim << " " << c.format << " " << c.instance);
  const auto* exact = find(r, "recurrent-equals-parallel", "exact");
  const auto* encl = find(r, "recurrent-equals-parallel", "enclosure");
  const auto* control = find(r, "control-late-recurrence-differs");
  BOOST_TEST_REQUIRE((exact && encl && control));
  BOOST_TEST(encl->format.rfind("mpfi", 0) == 0u);
  std::size_t accuracy = 0;
  for (const auto& c : r.claims) accuracy += c.claim.find("form-accuracy") != std::string::npos;
  BOOST_TEST(accuracy == 10u);  // two forms x five formats
}

BOOST_AUTO_TEST_CASE(random_features_controls_and_output_bound) {
  const auto r = run_check(*find_check("random-features"), settings("binary64,mpfr256"));
  for (const auto& c : r.claims) BOOST_TEST((c.result == verdict::pass), c.claim << " " << c.instance);
  const auto* control = find(r, "control-swapped-norm-rejected");
  const auto* bound = find(r, "performer-output-bound");
  const auto* ineq = find(r, "positive-beats-trig");
  BOOST_TEST_REQUIRE((control && bound && ineq));
  BOOST_TEST(bound->tier == "enclosure");
  BOOST_TEST(ineq->tier == "enclosure");
  // The control's Monte Carlo estimate is far (> 5 standard errors) from the wrong formula.
  BOOST_TEST(control->note.find("deviation") != std::string::npos);
  // Monte Carlo claims say they are statistical.
  BOOST_TEST(find(r, "positive-mse")->tolerance_rule.rfind("statistical:", 0) == 0u);
}
