// tests/checks/check_support.hpp — what the check test programs share: settings, running a
// check by id, counting verdicts, finding rank rows.  Include after <boost/test/unit_test.hpp>.
#pragma once

#include <string>

#include "checks/common.hpp"

namespace attncert::checks::testing {

inline run_settings settings(const std::string& formats, double fault = 0,
                             const std::string& policies = "numpy,matlab,torch,lapack,eigen") {
  run_settings rs;
  rs.formats = parse_formats(formats);
  rs.policies = parse_policies(policies);
  rs.fault = fault;
  return rs;
}

inline report::check_report run_id(const std::string& id, const run_settings& rs) {
  const check_entry* c = find_check(id);
  BOOST_TEST_REQUIRE(c != nullptr, id);
  return run_check(*c, rs);
}

/// Claims with verdict v (in `format` only, when given).
inline std::size_t count(const report::check_report& r, verdict v, const std::string& format = "") {
  std::size_t n = 0;
  for (const auto& c : r.claims)
    if (c.result == v && (format.empty() || c.format == format)) ++n;
  return n;
}

/// The `diverges` flag of one rank row (fails the test if there is no such row).
inline bool rank_diverges(const report::check_report& r, const std::string& object, const std::string& instance,
                          const std::string& format) {
  for (const auto& k : r.ranks)
    if (k.object == object && k.instance == instance && k.format == format) return k.diverges;
  BOOST_FAIL("no rank row " + object + " / " + instance + " / " + format);
  return false;
}

}  // namespace attncert::checks::testing
