// tests/number/ziv.cpp — the escalation primitive (number/ziv.hpp): the schedule doubles and
// ends exactly at the cap, a deciding step stops the loop, an undecided cap is returned as
// undecided with the cap's precision, and the counters count.
#define BOOST_TEST_MODULE number_ziv
#include <boost/test/unit_test.hpp>
#include <vector>

#include "attncert/number/ziv.hpp"

using namespace attncert;

BOOST_AUTO_TEST_CASE(schedule_doubles_and_ends_at_the_cap) {
  std::vector<unsigned> seen;
  const auto out = ziv_escalate(precision_schedule{100, 300}, [&](unsigned bits) {
    seen.push_back(bits);
    return ziv_more(static_cast<int>(bits));
  });
  BOOST_TEST((seen == std::vector<unsigned>{100, 200, 300}));
  BOOST_TEST(!out.decided);
  BOOST_TEST(out.bits == 300u);
  BOOST_TEST(out.steps == 3u);
  BOOST_TEST(out.value == 300);
}

BOOST_AUTO_TEST_CASE(a_deciding_step_stops_the_loop) {
  std::vector<unsigned> seen;
  const auto out = ziv_escalate(precision_schedule{64, 4096}, [&](unsigned bits) {
    seen.push_back(bits);
    return bits >= 256 ? ziv_decided(bits * 10) : ziv_more(0u);
  });
  BOOST_TEST((seen == std::vector<unsigned>{64, 128, 256}));
  BOOST_TEST(out.decided);
  BOOST_TEST(out.bits == 256u);
  BOOST_TEST(out.steps == 3u);
  BOOST_TEST(out.value == 2560u);
}

BOOST_AUTO_TEST_CASE(start_at_or_above_the_cap_runs_once) {
  unsigned calls = 0;
  const auto out = ziv_escalate(precision_schedule{512, 512}, [&](unsigned) {
    ++calls;
    return ziv_more(1);
  });
  BOOST_TEST(calls == 1u);
  BOOST_TEST(out.bits == 512u);
  BOOST_TEST(!out.decided);
}

BOOST_AUTO_TEST_CASE(powers_of_two_reach_a_power_of_two_cap) {
  std::vector<unsigned> seen;
  ziv_escalate(precision_schedule{64, 1024}, [&](unsigned bits) {
    seen.push_back(bits);
    return ziv_more(0);
  });
  BOOST_TEST((seen == std::vector<unsigned>{64, 128, 256, 512, 1024}));
}

BOOST_AUTO_TEST_CASE(doubling_within_stays_on_the_powers_of_two) {
  std::vector<unsigned> seen;
  ziv_escalate(precision_schedule::doubling_within(64, 1000), [&](unsigned bits) {
    seen.push_back(bits);
    return ziv_more(0);
  });
  BOOST_TEST((seen == std::vector<unsigned>{64, 128, 256, 512}));
  BOOST_TEST(precision_schedule::doubling_within(64, 4096).cap == 4096u);
  BOOST_TEST(precision_schedule::doubling_within(64, 64).cap == 64u);
}
