// python/src/interrupt.hpp — Ctrl-C during a call into the C++ core: KeyboardInterrupt, soon.
//
// Python's own SIGINT handler only sets a flag that the interpreter checks between bytecodes,
// which never run while a call is inside C++ with the GIL released: Ctrl-C went unnoticed until
// the call ended (60 s and more).  interruptible_nogil replaces py::gil_scoped_release: on the
// main thread (the only one Python delivers SIGINT to) it installs, for the duration of the call,
// a handler that asks the library to stop (attncert::request_interrupt, async-signal-safe); the
// library polls that flag in every long loop (deadline.hpp: oracle rows, escalation steps, MPFI
// products, softmax rows, drift points) and throws attncert::interrupted, which the exception
// translator turns into KeyboardInterrupt.  The previous handler (Python's) is restored when the
// call ends; a Ctrl-C that arrived after the last poll is handed to Python (PyErr_SetInterrupt),
// so it is never lost.  Nothing is written by the bindings, so nothing is left half-written.
//
// Not interruptible inside one call of a foreign library (an Eigen or LAPACK SVD, one FLINT
// elimination): the flag is seen when it returns.
#pragma once

#include <pybind11/pybind11.h>

#include <csignal>
#include <exception>
#include <memory>

#include "attncert/deadline.hpp"

namespace attncert::python {

extern "C" inline void on_sigint_in_core(int) { attncert::request_interrupt(); }

class interruptible_nogil {
 public:
  interruptible_nogil() {
    namespace py = pybind11;
    const py::module_ threading = py::module_::import("threading");
    installed_ = threading.attr("current_thread")().is(threading.attr("main_thread")());
    if (installed_) {
      attncert::clear_interrupt();
      struct sigaction sa {};
      sa.sa_handler = on_sigint_in_core;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = 0;
      installed_ = ::sigaction(SIGINT, &sa, &previous_) == 0;
    }
    release_ = std::make_unique<pybind11::gil_scoped_release>();
  }
  interruptible_nogil(const interruptible_nogil&) = delete;
  interruptible_nogil& operator=(const interruptible_nogil&) = delete;
  ~interruptible_nogil() {
    release_.reset();  // the GIL again
    if (!installed_) return;
    ::sigaction(SIGINT, &previous_, nullptr);
    if (attncert::interrupt_requested()) {
      attncert::clear_interrupt();
      // An exception on its way out (attncert::interrupted) becomes KeyboardInterrupt; otherwise
      // the call finished after the Ctrl-C: Python raises KeyboardInterrupt on return.
      if (std::uncaught_exceptions() == 0) PyErr_SetInterrupt();
    }
  }

 private:
  bool installed_ = false;
  struct sigaction previous_ {};
  std::unique_ptr<pybind11::gil_scoped_release> release_;
};

}  // namespace attncert::python
