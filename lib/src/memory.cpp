// lib/src/memory.cpp — see attncert/memory.hpp.
#include "attncert/memory.hpp"

#include <flint/flint.h>
#include <gmp.h>

#include <cstdlib>
#include <new>

namespace attncert {
namespace {

void* alloc_or_throw(std::size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* calloc_or_throw(std::size_t n, std::size_t size) {
  void* p = std::calloc(n == 0 ? 1 : n, size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* realloc_or_throw(void* old, std::size_t n) {
  void* p = std::realloc(old, n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* gmp_realloc_or_throw(void* old, std::size_t, std::size_t n) { return realloc_or_throw(old, n); }
void gmp_free(void* p, std::size_t) { std::free(p); }

struct installer {
  installer() { install_allocation_failure_handlers(); }
} const at_load;

}  // namespace

void install_allocation_failure_handlers() noexcept {
  mp_set_memory_functions(alloc_or_throw, gmp_realloc_or_throw, gmp_free);
  __flint_set_memory_functions(alloc_or_throw, calloc_or_throw, realloc_or_throw, std::free);
}

}  // namespace attncert
