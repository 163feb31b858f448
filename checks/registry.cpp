// checks/registry.cpp — the list of checks and the shared escalation helper.
#include "checks/common.hpp"

#include "attncert/error.hpp"

namespace attncert::checks {

// The one instance of measure_rank per format type (checks/common.hpp declares them extern).
ATTNCERT_CHECKS_MEASURE_RANK(, binary16)
ATTNCERT_CHECKS_MEASURE_RANK(, bfloat16)
ATTNCERT_CHECKS_MEASURE_RANK(, float)
ATTNCERT_CHECKS_MEASURE_RANK(, double)
ATTNCERT_CHECKS_MEASURE_RANK(, mpfr_float)
ATTNCERT_CHECKS_MEASURE_RANK(, mpfi_float)

check_entry make_two_token();
check_entry make_identical_values();
check_entry make_causal_mask();
check_entry make_output_bound();
check_entry make_log_odds();
check_entry make_residual();
check_entry make_multi_head();
check_entry make_nearest_neighbour();
check_entry make_head_size_bottleneck();
check_entry make_rank_collapse();
check_entry make_linear_attention();
check_entry make_random_features();

const std::vector<check_entry>& registry() {
  static const std::vector<check_entry> all = {make_two_token(), make_identical_values(), make_causal_mask(),
                                               make_output_bound(), make_log_odds(), make_residual(),
                                               make_multi_head(),   make_nearest_neighbour(),
                                               make_head_size_bottleneck(), make_rank_collapse(),
                                               make_linear_attention(), make_random_features()};
  return all;
}

const check_entry* find_check(const std::string& id) {
  for (const auto& c : registry())
    if (c.id == id) return &c;
  return nullptr;
}

std::vector<const check_entry*> select_checks(const std::vector<std::string>& ids) {
  std::vector<const check_entry*> chosen;
  if (ids.empty())
    for (const auto& c : registry()) chosen.push_back(&c);
  for (const auto& id : ids) {
    const auto* c = find_check(id);
    if (!c) {
      std::string known;
      for (const auto& k : registry()) known += (known.empty() ? "" : ", ") + k.id;
      throw input_error("unknown check '" + id + "' (known: " + known + ")");
    }
    chosen.push_back(c);
  }
  return chosen;
}

certified_sign certify_sign(const std::function<mpfi_float()>& f, unsigned start, unsigned cap, bool want_positive) {
  return ziv_escalate(precision_schedule{start, cap}, [&](unsigned bits) {
           precision_guard g(bits);
           const mpfi_float x = f();
           certified_sign out;
           out.bits = g.bits();
           out.enclosure = number_traits<mpfi_float>::to_string(x, 20);
           out.answer = want_positive ? certainly_positive(x) : certainly_nonzero(x);
           const bool decided = out.answer != truth::unknown;
           return ziv_step<certified_sign>{std::move(out), decided};
         })
      .value;
}

}  // namespace attncert::checks

namespace attncert::checks {
report::check_report run_check(const check_entry& c, const run_settings& rs) {
  report::check_report rep = c.run(rs);
  rep.id = c.id;
  rep.title = c.title;
  rep.section = c.section;
  rep.proof = c.proof;
  rep.error_model = c.error_model;
  return rep;
}
}  // namespace attncert::checks
