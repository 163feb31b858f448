// Tests of attncert/number/parallel.hpp: parallel_for runs every index once, rethrows what the
// plain loop would throw, and gives each worker the caller's MPFR/MPFI precision and deadline;
// MPFR flags raised on a worker reach the caller; and of precision_guard's process-wide lock.
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

// Boost 1.74 keeps one default precision for the whole process, so precision_guard serializes
// guards of different threads (precision_guard.hpp).  Thread A opens a 512-bit guard and, after
// thread B has tried to open a 64-bit one, creates a value: it must get 512 bits, and B's guard
// must open only after A's has closed.  Without the lock B's guard would open at once, and A's
// value would get 64 bits (both checks fail: the test was run against a guard without the lock).
BOOST_AUTO_TEST_CASE(guards_of_two_threads_do_not_mix_their_precisions) {
  std::atomic<bool> a_open{false}, b_trying{false}, a_closing{false}, b_saw_a_closed{false};
  long a_bits = 0, b_bits = 0;
  std::thread a([&] {
    precision_guard g(512);
    a_open = true;
    while (!b_trying) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // B is now blocked (or, unlocked, inside)
    mpfr_float x(1);
    x /= 3;
    a_bits = mpfr_get_prec(x.backend().data());
    a_closing = true;
  });
  std::thread b([&] {
    while (!a_open) std::this_thread::yield();
    b_trying = true;
    precision_guard g(64);
    b_saw_a_closed = a_closing.load();
    b_bits = mpfr_get_prec(mpfr_float(1).backend().data());
  });
  a.join();
  b.join();
  BOOST_TEST(a_bits >= 512);
  BOOST_TEST(b_saw_a_closed.load());
  BOOST_TEST(b_bits >= 64);
  BOOST_TEST(b_bits < 100);
}

namespace {
std::atomic<int> hook_calls{0};
void counting_wait(std::recursive_mutex& m) {
  ++hook_calls;
  m.lock();
}
}  // namespace

// A thread that finds the lock taken waits through the installed hook (the Python binding's
// releases the GIL there); an uncontended guard does not call it.
BOOST_AUTO_TEST_CASE(a_contended_guard_waits_through_the_hook) {
  set_precision_wait_hook(&counting_wait);
  hook_calls = 0;
  { precision_guard g(128); }
  BOOST_TEST(hook_calls.load() == 0);
  std::atomic<bool> held{false};
  std::thread owner([&] {
    precision_guard g(256);
    held = true;
    // hold the lock until the waiter has called the hook (or 10 s: then the check below fails)
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (hook_calls.load() == 0 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  });
  while (!held) std::this_thread::yield();
  std::thread waiter([&] { precision_guard g(128); });
  owner.join();
  waiter.join();
  set_precision_wait_hook(nullptr);
  BOOST_TEST(hook_calls.load() == 1);
}

// On parallel_for's workers the caller holds the lock: a guard at the caller's precision changes
// nothing (and does not wait for the lock, which would deadlock); one at another precision throws.
BOOST_AUTO_TEST_CASE(a_guard_on_a_worker_must_keep_the_callers_precision) {
  precision_guard g(300);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> on_workers{0}, wrong{0};
  parallel_for(64, 2, [&](std::size_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (std::this_thread::get_id() != caller) ++on_workers;
    precision_guard same(300);
    if (mpfr_get_prec(mpfr_float(1).backend().data()) < 300 || same.bits() != g.bits()) ++wrong;
  });
  BOOST_TEST(on_workers.load() > 0);
  BOOST_TEST(wrong.load() == 0);
  BOOST_TEST(current_mpfr_bits() == g.bits());
  bool threw = false;
  try {
    parallel_for(64, 2, [&](std::size_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (std::this_thread::get_id() != caller) precision_guard other(64);
    });
  } catch (const std::logic_error&) {
    threw = true;
  }
  BOOST_TEST(threw);
  BOOST_TEST(current_mpfr_bits() == g.bits());
}
