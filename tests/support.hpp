// tests/support.hpp — what every randomized test shares: the seed (printed, overridable
// with ATTNCERT_SEED) and independent random streams derived from it.
#pragma once

#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>

#include "attncert/error.hpp"
#include "attncert/field.hpp"

/// The run's seed: ATTNCERT_SEED if set, else a fixed default; printed once.
inline std::uint64_t test_seed() {
  static const std::uint64_t s = [] {
    std::uint64_t v = 20261129ULL;
    if (const char* e = std::getenv("ATTNCERT_SEED"); e != nullptr && *e != '\0') v = std::strtoull(e, nullptr, 0);
    std::cout << boost::unit_test::framework::master_test_suite().p_name.value << ": random seed " << v
              << " (override with ATTNCERT_SEED)" << std::endl;
    return v;
  }();
  return s;
}

/// An independent stream for one test case, derived from the seed and a salt.
inline std::mt19937_64 make_rng(std::uint64_t salt) {
  const std::uint64_t s = test_seed();
  BOOST_TEST_MESSAGE("seed " << s << ", stream " << salt);
  return std::mt19937_64(s ^ (0x9E3779B97F4A7C15ULL * (salt + 1)));
}

/// The message of the input_error that f() throws, as the command line prints it (fields spelled as
/// its options, field.hpp), or "" when it throws none.
template <class F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const attncert::input_error& e) {
    return attncert::spell_fields(e.what(), attncert::cli_spelling);
  }
  return "";
}
