// Tests of attncert/number/parallel.hpp: parallel_for runs every index once, rethrows what the
// plain loop would throw, and gives each worker the caller's MPFR/MPFI precision and deadline;
// MPFR flags raised on a worker reach the caller.
#define BOOST_TEST_MODULE number_parallel
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "attncert/deadline.hpp"
#include "attncert/number/parallel.hpp"
#include "attncert/number/precision_guard.hpp"

using namespace attncert;

BOOST_AUTO_TEST_CASE(every_index_runs_once) {
  for (std::size_t count : {0u, 1u, 2u, 7u, 100u, 1001u})
    for (unsigned threads : {1u, 2u, 3u, 8u})
      for (std::size_t grain : {0u, 1u, 3u, 16u, 2000u}) {
        std::vector<std::atomic<int>> hits(count);
        parallel_for(count, threads, [&](std::size_t i) { hits[i].fetch_add(1); }, grain);
        std::size_t wrong = 0;
        for (auto& h : hits) wrong += h.load() != 1;
        BOOST_TEST(wrong == 0u, count << " indices, " << threads << " threads, grain " << grain);
      }
}

// Indices 37 and 90 throw; whatever the order in time, the exception of 37 (the plain loop's) is
// the one rethrown, and every index below 37 ran.  37 waits, so the other thread reaches 90 in the
// meantime; in even repetitions 90 throws first, in odd ones it waits longer and throws after 37.
BOOST_AUTO_TEST_CASE(the_smallest_throwing_index_is_rethrown) {
  for (int rep = 0; rep < 10; ++rep)
    for (std::size_t grain : {1u, 5u}) {
      std::vector<std::atomic<int>> hits(200);
      std::string what;
      try {
        parallel_for(200, 2, [&](std::size_t i) {
          hits[i].fetch_add(1);
          if (i == 90) {
            if (rep % 2 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(60));
            throw std::runtime_error("90");
          }
          if (i == 37) {
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
            throw std::runtime_error("37");
          }
        }, grain);
      } catch (const std::runtime_error& e) {
        what = e.what();
      }
      BOOST_TEST(what == "37");
      std::size_t below = 0;
      for (std::size_t i = 0; i < 37; ++i) below += hits[i].load() == 1;
      BOOST_TEST(below == 37u);
    }
}

BOOST_AUTO_TEST_CASE(workers_compute_at_the_callers_precision) {
  precision_guard g(300);
  const unsigned want_r = mpfr_float::default_precision(), want_i = mpfi_float::default_precision();
  const auto caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0}, wrong{0};
  parallel_for(200, 2, [&](std::size_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (std::this_thread::get_id() != caller) ++elsewhere;
    mpfr_float x(1);
    mpfi_float y(1);
    if (mpfr_float::default_precision() != want_r || mpfi_float::default_precision() != want_i ||
        mpfr_get_prec(x.backend().data()) != mpfr_get_prec(mpfr_float(2).backend().data()) ||
        mpfr_get_prec(x.backend().data()) < 300)
      ++wrong;
    (void)y;
  });
  BOOST_TEST(elsewhere.load() > 0);  // else the test proves nothing
  BOOST_TEST(wrong.load() == 0);
}

BOOST_AUTO_TEST_CASE(flags_raised_on_a_worker_reach_the_caller) {
  const auto caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  mpfr_clear_flags();
  parallel_for(200, 2, [&](std::size_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (std::this_thread::get_id() != caller) {
      ++elsewhere;
      mpfr_set_underflow();
    }
  });
  BOOST_TEST(elsewhere.load() > 0);
  BOOST_TEST(mpfr_underflow_p() != 0);
  mpfr_clear_flags();
}

// Only the workers poll the deadline here: the budget is reached only if they adopted it.
BOOST_AUTO_TEST_CASE(workers_keep_the_callers_deadline) {
  const auto caller = std::this_thread::get_id();
  deadline_scope budget(0.05);
  bool stopped = false;
  try {
    parallel_for(400, 2, [&](std::size_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      if (std::this_thread::get_id() != caller) check_deadline();
    });
  } catch (const time_limit_reached&) {
    stopped = true;
  }
  BOOST_TEST(stopped);
}
