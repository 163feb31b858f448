"""attncert._args: the conversion of every scalar argument of the public entry points, checked before the
C++ library sees it.  Each function names the parameter in its message, with the caller's spelling.

Exceptions (README, "Python: which exception for which bad input"):
    TypeError    the Python type is not one the parameter takes (a str or a float where an integer is
                 required, a bool where a number is, a complex number anywhere)
    ValueError   the type is right but the value is not: out of the parameter's range, NaN or infinite
The limits are those of the command line (tools/attncert/*.cpp: CLI11 ranges and the library's checks);
LIMITS below names each one with the option it mirrors.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

U64 = 2 ** 64 - 1  # seeds: a non-negative integer below 2^64, as --seed
I64 = 2 ** 63 - 1  # counts and indices the library holds as long long / size_t

# name -> (lo, hi): the command line's ranges (the option each mirrors, and where it is checked)
LIMITS = {
    "oracle.max_bits": (128, 1 << 16),      # oracle --max-precision (oracle_command.cpp; oracle/request.cpp)
    "threads": (1, 256),                     # --threads (cli_options.cpp)
    "rank.max_bits": (128, 1 << 20),         # rank --max-precision (main.cpp)
    "deflate_max_k": (0, 4096),              # rank --deflate-max-k (main.cpp)
    "certify.max_bits": (64, 1 << 20),       # certify --max-precision (certify_command.cpp)
    "certify.max_seconds": (0.0, 1e7),       # certify --max-seconds (certify_command.cpp)
    "certify_bits": (24, 1 << 20),           # check --certify-bits / --certify-max-bits (24 <= bits <= max <= 2^20)
    "drift.max_bits": (128, 1 << 20),        # drift --max-precision (drift_command.cpp)
    "points": (2, 10_000_000),               # drift --points (drift_command.cpp; drift/sweep.cpp)
    "drift.a": (-1e30, 1e30),                # drift --from / --to: |a| <= 1e30 (drift/sweep.cpp: validate)
    "drift.n": (1, 4096),                    # drift --n / --d (drift_command.cpp: drift_max_n)
    "seed": (0, U64),                        # --seed (cli_options.cpp)
    "rows": (1, I64),                        # rows=N of the testing helpers (sampled query rows)
    "window": (-1, I64),                     # --window LEFT,RIGHT: each side >= -1 (-1 = unbounded; None in Python)
}


def _type_name(x):
    return type(x).__module__ + "." + type(x).__name__ if type(x).__module__ not in ("builtins",) else type(x).__name__


def _shown(x):
    """repr(x), kept short (a huge integer or a long string is cut)."""
    r = repr(x)
    return r if len(r) <= 60 else r[:57] + "..."


def integer(x, name, lo, hi=None):
    """x as a Python int in [lo, hi] (hi None: no upper bound but I64).  Takes int and NumPy integers; refuses
    bool, float (2.0 too: an integer parameter is not rounded), str and everything else (TypeError)."""
    if hi is None:
        hi = I64
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise TypeError("%s: must be an integer, got %s (%s)" % (name, _shown(x), _type_name(x)))
    v = int(x)
    if not lo <= v <= hi:
        if hi in (I64, U64):  # no bound of its own: the integer type's, said as such
            want = ">= %d" % lo if v < lo else "<= 2^%d - 1" % (63 if hi == I64 else 64)
        else:
            want = "in [%d, %d]" % (lo, hi)
        raise ValueError("%s: must be an integer %s, got %s" % (name, want, _shown(v)))
    return v


def real(x, name, lo=None, hi=None, *, lo_open=False, hi_open=False):
    """x as a finite Python float in the interval lo..hi (closed unless lo_open / hi_open; None: unbounded).
    Takes int, float and NumPy real scalars; refuses bool, complex, str and everything else (TypeError), NaN
    and +-Inf (ValueError)."""
    if isinstance(x, (bool, np.bool_)) or isinstance(x, (complex, np.complexfloating)) or \
            not isinstance(x, (numbers.Real, np.integer, np.floating)):
        raise TypeError("%s: must be a real number, got %s (%s)" % (name, _shown(x), _type_name(x)))
    try:
        v = float(x)
    except OverflowError:  # an int beyond binary64's range
        raise ValueError("%s: %s is beyond the range of binary64 numbers" % (name, _shown(x))) from None
    if not math.isfinite(v):
        raise ValueError("%s: must be a finite number, got %s" % (name, _shown(x)))
    below = lo is not None and (v <= lo if lo_open else v < lo)
    above = hi is not None and (v >= hi if hi_open else v > hi)
    if below or above:
        if hi is None:
            want = "a number %s %g" % (">" if lo_open else ">=", lo)
        elif lo is None:
            want = "a number %s %g" % ("<" if hi_open else "<=", hi)
        else:
            want = "in %s%g, %g%s" % ("(" if lo_open else "[", lo, hi, ")" if hi_open else "]")
        raise ValueError("%s: must be %s, got %s" % (name, want, _shown(x)))
    return v


def optional_real(x, name, lo=None, hi=None):
    return None if x is None else real(x, name, lo, hi)


def flag(x, name):
    """A bool (Python or NumPy): a flag is not read from a string ("no" would be true) or a number."""
    if not isinstance(x, (bool, np.bool_)):
        raise TypeError("%s: must be True or False, got %s (%s)" % (name, _shown(x), _type_name(x)))
    return bool(x)


def text(x, name):
    """A str (a name such as a layout or a format): anything else is a TypeError, never str(x)."""
    if not isinstance(x, str):
        raise TypeError("%s: must be a str, got %s (%s)" % (name, _shown(x), _type_name(x)))
    return x


CAUSAL = (None, "top-left", "bottom-right")
# the two conventions a bool could mean, said whenever causal=True or False is refused
_CAUSAL_BOOLS = ("FlashAttention's causal=True means 'bottom-right' (key j <= i + n_k - n_q), torch SDPA's "
                 "is_causal=True means 'top-left' (j <= i)")


def causal(x):
    """None, "top-left" or "bottom-right", exactly (README: `causal`).  A bool is refused (TypeError): True means
    bottom-right to a FlashAttention user and top-left to a torch SDPA user, so the message names both and asks
    for the string.  Another str is a ValueError, any other type a TypeError."""
    want = "causal: must be None, 'top-left' or 'bottom-right'"
    if x is None:
        return None
    if isinstance(x, (bool, np.bool_)):
        if x:
            raise TypeError("%s, not True: %s; write causal='bottom-right' or causal='top-left'"
                            % (want, _CAUSAL_BOOLS))
        raise TypeError("%s, not False: write causal=None for no causal mask (a bool is ambiguous: %s)"
                        % (want, _CAUSAL_BOOLS))
    if not isinstance(x, str):
        raise TypeError("%s, got %s (%s)" % (want, _shown(x), _type_name(x)))
    if x not in CAUSAL:
        raise ValueError("%s, got %s" % (want, _shown(x)))
    return str(x)


_WINDOW_FORM = ("window: must be (left, right), each side an integer >= -1 or None (-1 and None: unbounded), or a "
                "text 'LEFT,RIGHT'")


def window(x):
    """The window as the library's text "LEFT,RIGHT" (None: no window).  Takes a text as given (the library parses
    it), or a pair (tuple, list or 1-d NumPy array) whose sides are integers in [-1, 2^63 - 1] or None, None
    and -1 meaning unbounded (FlashAttention's window_size=(L, None)).  Anything but a pair is a TypeError, a
    pair of another length a ValueError; a side is checked as an integer (TypeError for a float, a bool or a
    str, ValueError below -1 or above 2^63 - 1), the message naming the side."""
    if x is None or isinstance(x, str):
        return x
    if isinstance(x, np.ndarray) and x.ndim == 1:
        sides = list(x)
    elif isinstance(x, (tuple, list)):
        sides = list(x)
    else:
        raise TypeError("%s; got %s (%s)" % (_WINDOW_FORM, _shown(x), _type_name(x)))
    if len(sides) != 2:
        raise ValueError("%s; got %d item%s: %s" % (_WINDOW_FORM, len(sides), "" if len(sides) == 1 else "s",
                                                    _shown(x)))
    out = []
    for side, v in zip(("left", "right"), sides):
        if v is None:
            out.append(-1)
            continue
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError("window: the %s side must be an integer >= -1 or None, got %s (%s)"
                            % (side, _shown(v), _type_name(v)))
        lo, hi = LIMITS["window"]
        if int(v) < lo:
            raise ValueError("window: the %s side must be an integer >= -1 or None, got %d (-1 or None: unbounded)"
                             % (side, int(v)))
        if int(v) > hi:
            raise ValueError("window: the %s side must be an integer <= 2^63 - 1, got %s" % (side, _shown(int(v))))
        out.append(int(v))
    return "%d,%d" % tuple(out)


def limited(x, key, name=None):
    """integer(x) within LIMITS[key] (name: the caller's spelling, default the key's last part)."""
    lo, hi = LIMITS[key]
    return integer(x, name or key.split(".")[-1], lo, hi)


def memory_with_swap():
    """RAM and swap together, in bytes (0 when unknown): a copy larger than this cannot be made."""
    try:
        with open("/proc/meminfo") as f:
            kib = {line.split(":")[0]: int(line.split()[1]) for line in f if line.split()[1:2]}
        return 1024 * (kib.get("MemTotal", 0) + kib.get("SwapTotal", 0))
    except (OSError, ValueError):
        return 0


def check_copy(nbytes, shape, name, what="copying"):
    """MemoryError, naming the parameter and the bytes asked for, when a copy of `nbytes` bytes (an array of
    `shape`) cannot fit in the machine's memory: checked before numpy or torch tries, since under overcommit
    their allocation would succeed and the process be killed while filling it."""
    have = memory_with_swap()
    if have and nbytes > have:
        raise MemoryError("%s: out of memory %s the array of shape %s: %d bytes asked for, more than this machine's "
                          "memory (%d bytes with swap)" % (name, what, tuple(shape), nbytes, have))
