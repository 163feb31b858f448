// attncert/number/parallel.hpp — the long MPFR/MPFI loops split over threads.
//
// parallel_for(count, threads, body) runs body(i) for every i in [0, count) on at most `threads`
// threads, the calling thread being one of them.  What a body computes must not depend on the
// thread it runs on, and the bodies must write disjoint data (a column of a product each, say):
// then the result is bit for bit the single-threaded one.  Each worker starts with the caller's
// state that MPFR, MPFI and Boost keep (or may keep) per thread — the default precision of
// mpfr_float and mpfi_float, and the command's deadline (deadline.hpp) — and MPFR's exception
// flags raised on
// a worker (underflow, overflow, NaN, inexact, erange, divide-by-zero) are raised on the caller
// when it returns, so a check of mpfr_underflow_p() after the loop sees them.
#pragma once

#include <mpfr.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "attncert/deadline.hpp"
#include "attncert/number/precision_guard.hpp"
#include "attncert/number/types.hpp"

namespace attncert {

/// Runs body(i) once for every i in [0, count), handing the indices out in increasing order, in
/// chunks of `grain` consecutive indices, to min(threads, chunks) threads (threads <= 1: a plain
/// loop on the caller).  A grain keeps the entries one thread writes together: the rows of a
/// column-major matrix interleave in memory, and threads writing neighbouring rows would share
/// every cache line.  An exception stops
/// the threads at their next index; once all have stopped, the exception of the smallest index
/// that threw is rethrown — the one the plain loop would throw, since every smaller index was
/// handed out before it and has run to its end (a chunk runs its indices in order).  If a thread cannot be started, the loop runs on
/// those that were.
template <class Body>
void parallel_for(std::size_t count, unsigned threads, Body&& body, std::size_t grain = 1) {
  grain = std::max<std::size_t>(grain, 1);
  const std::size_t chunks = count / grain + (count % grain != 0);
  if (threads <= 1 || chunks <= 1) {
    for (std::size_t i = 0; i < count; ++i) body(i);
    return;
  }
  const std::size_t workers = std::min<std::size_t>(threads, chunks);
  // The workers share the caller's precision (one process-wide value in Boost 1.74): no other
  // thread's guard may change it while they run (precision_guard.hpp).
  const precision_lock hold;
  const unsigned mpfr_digits = mpfr_float::default_precision(), mpfi_digits = mpfi_float::default_precision();
  const auto budget = current_budget();
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex m;
  std::exception_ptr first;
  std::size_t first_index = count;
  mpfr_flags_t raised = 0;
  auto work = [&] {
    std::size_t i = 0;
    try {
      for (;;) {
        if (stop.load(std::memory_order_relaxed)) return;
        const std::size_t chunk = next.fetch_add(1, std::memory_order_relaxed);
        if (chunk >= chunks) return;
        const std::size_t end = std::min(count, (chunk + 1) * grain);
        for (i = chunk * grain; i < end; ++i) body(i);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(m);
      if (i < first_index) {
        first = std::current_exception();
        first_index = i;
      }
      stop.store(true, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (std::size_t t = 1; t < workers; ++t) {
    try {
      pool.emplace_back([&] {
        // Boost 1.74 keeps these in one global (then nothing is written here); later versions
        // keep them per thread.
        if (mpfr_float::default_precision() != mpfr_digits) mpfr_float::default_precision(mpfr_digits);
        if (mpfi_float::default_precision() != mpfi_digits) mpfi_float::default_precision(mpfi_digits);
        detail::precision_inherited = true;  // the caller holds the precision lock for this thread
        deadline_scope scope(budget);
        mpfr_flags_clear(MPFR_FLAGS_ALL);
        work();
        const mpfr_flags_t mine = mpfr_flags_save();
        std::lock_guard<std::mutex> lock(m);
        raised |= mine;
      });
    } catch (const std::system_error&) {
      break;  // no more threads: the ones started (and the caller) take every index
    }
  }
  work();
  for (auto& th : pool) th.join();
  mpfr_flags_set(raised);
  if (first) std::rethrow_exception(first);
}

}  // namespace attncert
