// python/src/child.hpp — a computation that Ctrl-C can stop at once, even inside a foreign library.
//
// The library polls for Ctrl-C in every loop of its own (deadline.hpp), but one call of a foreign
// library cannot be stopped from inside: an Eigen Jacobi SVD in MPFR (minutes at 300 x 300), a
// LAPACK SVD of a large matrix, one FLINT elimination.  run_in_child runs such a computation in a
// forked child process and waits for its result on a pipe, polling every 50 ms; on Ctrl-C the child
// is killed (SIGKILL) and the call raises KeyboardInterrupt at once.  Nothing is half-written: the
// child writes only to the pipe, and the caller builds its result from the complete message.
//
// Protocol: the child writes one tag byte and a text, then _exit(0) (no Python finalization, no
// static destructors in the copy of the process): 'R' the result; 'I' input_error, 'M' out of memory,
// 'T' time_limit_reached, 'K' interrupted, 'E' internal_error, 'X' any other error, each with its
// message.  The parent rethrows the same exception type, so the exception translator maps it as if
// the computation had run in-process.  A child that dies otherwise (a signal) is reported: SIGKILL
// that we did not send is taken for the kernel's out-of-memory killer (MemoryError).
//
// A parent that dies otherwise (SIGKILL, SIGTERM) takes the child with it (PR_SET_PDEATHSIG).
//
// The fork happens with the GIL held and Python's fork hooks run (PyOS_BeforeFork / AfterFork_*),
// so the child's copy of the interpreter is consistent; the child never calls Python.  When fork
// fails (no memory for the page tables, a process limit), the computation runs in-process under
// interruptible_nogil, interruptible at its polls only.
#pragma once

#include <poll.h>
#include <pybind11/pybind11.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>

#include "arrays.hpp"
#include "attncert/deadline.hpp"
#include "attncert/error.hpp"
#include "attncert/number/precision_guard.hpp"
#include "interrupt.hpp"

namespace attncert::python {

namespace child_detail {

inline void write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) ::_exit(3);  // the parent is gone: nobody reads the result
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

[[noreturn]] inline void child_main(int fd, const std::function<std::string()>& work) {
  char tag = 'R';
  std::string text;
  try {
    text = work();
  } catch (const interrupted& e) {
    tag = 'K';
    text = e.what();
  } catch (const time_limit_reached& e) {
    tag = 'T';
    text = e.what();
  } catch (const input_error& e) {
    tag = 'I';
    text = e.what();
  } catch (const conversion_memory_error& e) {
    tag = 'M';
    text = e.what();
  } catch (const std::bad_alloc&) {
    tag = 'M';
    text = "out of memory: an allocation failed (the input is too large for this machine's memory)";
  } catch (const internal_error& e) {
    tag = 'E';
    text = e.what();
  } catch (const std::exception& e) {
    tag = 'X';
    text = e.what();
  } catch (...) {
    tag = 'X';
    text = "unknown error";
  }
  write_all(fd, &tag, 1);
  write_all(fd, text.data(), text.size());
  ::close(fd);
  ::_exit(0);
}

[[noreturn]] inline void rethrow(char tag, const std::string& text) {
  switch (tag) {
    case 'K': throw interrupted();
    case 'T': throw time_limit_reached(text);
    case 'I': throw input_error(text);
    case 'M': throw conversion_memory_error(text);
    case 'E': throw internal_error(text);
    default: throw std::runtime_error(text);
  }
}

}  // namespace child_detail

/// work() in a forked child (see above); its result, or its exception rethrown.  Called with the GIL
/// held; releases it while waiting.  Ctrl-C: the child is killed, `interrupted` (KeyboardInterrupt).
inline std::string run_in_child(const std::function<std::string()>& work) {
  int fds[2];
  if (::pipe(fds) != 0) {
    interruptible_nogil nogil;
    return work();
  }
  const pid_t parent = ::getpid();
  PyOS_BeforeFork();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // A parent that dies (killed, not only interrupted) takes the child with it: nothing computes
    // on for nobody.  getppid() covers a parent that died before prctl took effect.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(3);
    PyOS_AfterFork_Child();
    attncert::reset_precision_lock_after_fork();  // another thread of the parent may have held it
    ::close(fds[0]);
    ::signal(SIGINT, SIG_DFL);  // the parent decides: a terminal's Ctrl-C reaches the group
    child_detail::child_main(fds[1], work);
  }
  PyOS_AfterFork_Parent();
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    interruptible_nogil nogil;
    return work();
  }
  std::string message;
  bool killed = false;
  {
    interruptible_nogil nogil;  // our SIGINT handler sets the flag polled below
    char buf[65536];
    for (;;) {
      if (interrupt_requested()) {
        ::kill(pid, SIGKILL);
        killed = true;
        break;
      }
      pollfd p{fds[0], POLLIN, 0};
      const int r = ::poll(&p, 1, 50);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) continue;
      const ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // EOF: the child is done
      message.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (killed) throw interrupted();
    if (WIFSIGNALED(status)) {
      const int sig = WTERMSIG(status);
      if (sig == SIGKILL)
        throw conversion_memory_error("the computation was killed (SIGKILL), most likely by the system's out-of-memory killer");
      if (sig == SIGINT) throw interrupted();
      throw internal_error("the computation's process ended by signal " + std::to_string(sig));
    }
  }
  if (message.empty()) throw internal_error("the computation's process ended without a result");
  if (message[0] != 'R') child_detail::rethrow(message[0], message.substr(1));
  return message.substr(1);
}

}  // namespace attncert::python
