// attncert/memory.hpp — allocation failures inside GMP, MPFR and FLINT as std::bad_alloc.
//
// By default GMP (and MPFR, which allocates through it) prints "GNU MP: Cannot allocate memory"
// and aborts, and FLINT prints "Unable to allocate memory" on stdout and aborts: a signal death
// of the CLI and of any Python interpreter that loaded the module.  These handlers make the
// allocation functions throw std::bad_alloc instead, which the CLI reports in one line (exit 2)
// and pybind11 turns into MemoryError.
//
// This is the last resort, not the guard: GMP's manual leaves a throw out of an allocation
// function undefined in general (the C frames it unwinds may leak what they held; Debian builds
// them with unwind tables, so the throw itself is well formed).  Stages that allocate large
// matrices estimate their memory from the shapes first and refuse before allocating
// (rank/analyse_rank.cpp: plan_memory).
#pragma once

namespace attncert {

/// Installs the throwing allocation functions in GMP and FLINT (malloc/realloc/free
/// underneath, so blocks allocated before stay valid).  Idempotent; the library calls it from
/// a static initializer, the CLI and the Python module call it again at start-up.
void install_allocation_failure_handlers() noexcept;

}  // namespace attncert
