#!/usr/bin/env bash
# tests/io/npy_numpy.sh NPY_TOOL — cross-checks the .npy codec against Debian's NumPy.
#
# NPY_TOOL is the tests/io/npy_tool.cxx executable.  NumPy (np.lib.format.write_array with
# versions 1.0, 2.0 and 3.0) writes arrays of every supported dtype, both byte orders, C and
# Fortran order and shapes (), (0,), (3,), (2,3), (2,3,4), (1,2,3,4), (0,3), including float16
# subnormals and -0.0; `NPY_TOOL cat` must print the same values bit for bit.  `NPY_TOOL write`
# output must load in np.load with identical dtype, shape and values, and be byte-identical to
# np.save's.  Files NumPy writes that attncert rejects (NaN, Inf, inexact int64, complex,
# strings, objects, structured, truncated, trailing bytes) must fail with exit 2 and a
# one-line message.  Prints "N passed, M failed"; exits 77 when NumPy is not installed.
set -u
TOOL="${1:?usage: npy_numpy.sh NPY_TOOL}"
PY=/usr/bin/python3
if ! [ -x "$PY" ] || ! "$PY" -c 'import numpy' >/dev/null 2>&1; then
  echo "SKIPPED: numpy not installed"
  exit 77
fi
if ! [ -x "$TOOL" ]; then
  echo "FAIL: npy_tool not found or not executable: $TOOL"
  exit 1
fi

exec "$PY" - "$TOOL" <<'PYTHON'
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from numpy.lib import format as fmt

TOOL = sys.argv[1]
passed = 0
failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)


def run(*args):
    p = subprocess.run([TOOL, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def same_bits(a, b):
    """a, b: float64 arrays; equal bit for bit (so -0.0 != 0.0)."""
    a = np.ascontiguousarray(a, dtype=np.float64).reshape(-1)
    b = np.ascontiguousarray(b, dtype=np.float64).reshape(-1)
    return a.shape == b.shape and bool(np.array_equal(a.view(np.uint64), b.view(np.uint64)))


SHAPES = [(), (0,), (3,), (2, 3), (2, 3, 4), (1, 2, 3, 4), (0, 3)]
rng = np.random.default_rng(20240611)


def sample(code, n):
    """n finite values of dtype code (little-endian), with the hard cases first."""
    if code == "f2":
        bits = rng.integers(0, 1 << 16, size=4 * n + 8, dtype=np.uint64).astype(np.uint16)
        v = bits.view(np.float16)
        v = v[np.isfinite(v)]
        special = np.array([2.0**-24, -(2.0**-24), 1023 * 2.0**-24, -0.0, 65504, -65504, 2.0**-14, 0.1],
                           dtype=np.float16)
        v = np.concatenate([special, v])
    elif code == "f4":
        bits = rng.integers(0, 1 << 32, size=4 * n + 8, dtype=np.uint64).astype(np.uint32)
        v = bits.view(np.float32)
        v = v[np.isfinite(v)]
        special = np.array([2.0**-149, -0.0, np.finfo(np.float32).max, -np.finfo(np.float32).tiny, 0.1],
                           dtype=np.float32)
        v = np.concatenate([special, v])
    elif code == "f8":
        bits = rng.integers(0, 1 << 63, size=4 * n + 8, dtype=np.uint64) * np.uint64(2) \
            + rng.integers(0, 2, size=4 * n + 8, dtype=np.uint64)
        v = bits.view(np.float64)
        v = v[np.isfinite(v)]
        special = np.array([5e-324, -0.0, np.finfo(np.float64).max, -np.finfo(np.float64).tiny, 0.1])
        v = np.concatenate([special, v])
    elif code == "i4":
        special = np.array([-(2**31), 2**31 - 1, 0, -1], dtype=np.int32)
        v = np.concatenate([special, rng.integers(-(2**31), 2**31, size=n, dtype=np.int32)])
    elif code == "i8":
        special = np.array([-(2**63), 2**62, 2**53, -(2**53), 2**53 + 2], dtype=np.int64)
        v = np.concatenate([special, rng.integers(-(2**53), 2**53 + 1, size=n, dtype=np.int64)])
    elif code == "u1":
        v = np.concatenate([np.array([0, 255, 127, 128], dtype=np.uint8), rng.integers(0, 256, size=n, dtype=np.uint8)])
    else:
        v = np.concatenate([np.array([True, False]), rng.integers(0, 2, size=n).astype(bool)])
    return np.ascontiguousarray(v[:n])


def make(code, shape):
    n = int(np.prod(shape, dtype=np.int64))
    return sample(code, n).reshape(shape)


CODES = ["f2", "f4", "f8", "i4", "i8", "u1", "b1"]

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "a.npy")

    # ---- NumPy writes, npy_tool reads ----------------------------------------------------
    saw_fortran_header = False
    for code in CODES:
        for order_char in (["|"] if code in ("b1", "u1") else ["<", ">"]):
            for fortran in (False, True):
                for version in [(1, 0), (2, 0), (3, 0)]:
                    for shape in SHAPES:
                        arr = make(code, shape).astype(np.dtype(order_char + code))
                        if fortran:
                            arr = np.asfortranarray(arr)
                        what = f"numpy->tool {order_char}{code} {'F' if fortran else 'C'} v{version} {shape}"
                        with open(path, "wb") as f:
                            fmt.write_array(f, arr, version=version)
                        with open(path, "rb") as f:
                            saw_fortran_header |= b"'fortran_order': True" in f.read(256)
                        rc, out, err = run("cat", path)
                        if rc != 0:
                            check(False, f"{what}: exit {rc}: {err.strip()}")
                            continue
                        got = json.loads(out)
                        check(got["dtype"] == code, f"{what}: dtype {got['dtype']}")
                        check(tuple(got["shape"]) == arr.shape, f"{what}: shape {got['shape']}")
                        check(same_bits(np.array(got["values"], dtype=np.float64), arr.astype(np.float64)),
                              f"{what}: values differ")
    check(saw_fortran_header, "NumPy wrote fortran_order True for some array")

    # ---- npy_tool writes, NumPy reads ----------------------------------------------------
    for code in CODES:
        for shape in SHAPES:
            arr = make(code, shape)
            what = f"tool->numpy {code} {shape}"
            vals = [repr(float(x)) for x in arr.reshape(-1).astype(np.float64)]
            rc, out, err = run("write", code, path, *vals, "--shape", ",".join(map(str, shape)))
            if rc != 0:
                check(False, f"{what}: exit {rc}: {err.strip()}")
                continue
            back = np.load(path)
            check(back.dtype == np.dtype(("|" if code in ("b1", "u1") else "<") + code), f"{what}: dtype {back.dtype}")
            check(back.shape == shape, f"{what}: shape {back.shape}")
            check(same_bits(back.astype(np.float64), arr.astype(np.float64)), f"{what}: values differ")
            mine = open(path, "rb").read()
            with open(path, "wb") as f:
                np.save(f, arr)
            check(mine == open(path, "rb").read(), f"{what}: bytes differ from np.save")

    # A header too long for version 1.0 is written as 2.0 (NumPy reads the header).
    rc, out, err = run("write", "i4", path, "-7", "--shape", ",".join(["1"] * 30000))
    check(rc == 0, f"tool->numpy v2: exit {rc}: {err.strip()}")
    with open(path, "rb") as f:
        check(fmt.read_magic(f) == (2, 0), "tool->numpy v2: version")
        shape, fortran, dtype = fmt.read_array_header_2_0(f, max_header_size=10**6)
        check(shape == (1,) * 30000 and not fortran and dtype == np.dtype("<i4"), "tool->numpy v2: header")
        check(f.tell() % 64 == 0 and np.frombuffer(f.read(), dtype="<i4").tolist() == [-7], "tool->numpy v2: data")

    # ---- files NumPy writes that attncert rejects -------------------------------------------
    def rejected(arr_or_bytes, problem, what):
        if isinstance(arr_or_bytes, bytes):
            open(path, "wb").write(arr_or_bytes)
        else:
            with open(path, "wb") as f:
                fmt.write_array(f, arr_or_bytes, allow_pickle=True)
        rc, out, err = run("cat", path)
        check(rc == 2, f"reject {what}: exit {rc}")
        check(err.count("\n") == 1 and err.startswith(path + ": "), f"reject {what}: stderr not one line: {err!r}")
        check(problem in err, f"reject {what}: {err.strip()!r} lacks {problem!r}")
        check(out == "", f"reject {what}: wrote to stdout")

    a = np.arange(6.0).reshape(2, 3)
    a[1, 2] = np.nan
    rejected(a, "contains NaN at index (1, 2)", "NaN")
    b = np.asfortranarray(np.zeros((2, 3), dtype=">f4"))
    b[1, 0] = np.inf
    rejected(b, "contains +Inf at index (1, 0)", "Fortran +Inf")
    rejected(np.array([0, -np.inf], dtype="<f2"), "contains -Inf at index (1,)", "float16 -Inf")
    rejected(np.array(np.nan, dtype=">f2"), "contains NaN at index ()", "float16 NaN scalar")
    rejected(np.array([1, 2**53 + 1], dtype="<i8"), "int64 value 9007199254740993 at index (1,) is not exactly representable",
             "inexact int64")
    rejected(np.array([2**63 - 1], dtype=">i8"), "not exactly representable", "int64 max")
    rejected(np.array([1 + 2j]), "unsupported dtype '<c16'", "complex")
    rejected(np.array(["abc"]), "unsupported dtype '<U3'", "unicode")
    rejected(np.array([b"ab"]), "unsupported dtype '|S2'", "bytes")
    rejected(np.array([None, 1], dtype=object), "unsupported dtype '|O'", "object")
    rejected(np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]), "structured dtypes are not supported", "structured")
    rejected(np.zeros(2, dtype=np.int8), "unsupported dtype '|i1'", "int8")
    rejected(np.zeros(2, dtype=np.float128), "unsupported dtype '<f16'", "float128")
    with open(path, "wb") as f:
        np.save(f, np.arange(12.0).reshape(2, 3, 2))
    full = open(path, "rb").read()
    rejected(full[:-56], "truncated data: expected 96 bytes, found 40", "truncated data")
    rejected(full[:50], "truncated header", "truncated header")
    rejected(full + b"\0", "trailing garbage: 1 bytes", "trailing bytes")
    rejected(b"PK\x03\x04" + full, "bad magic", "not npy")
    rejected(b"\x93NUMPY\x04\x00" + full[8:], "unsupported .npy format version 4.0", "version 4.0")
    os.remove(path)
    rc, out, err = run("cat", path)
    check(rc == 2 and "cannot open" in err and err.count("\n") == 1, f"missing file: exit {rc} {err!r}")

    # ---- npy_tool write refuses what the dtype cannot hold, and leaves no file -------------
    for code, value, problem in [("f4", "0.1", "float32"), ("f2", "65505", "float16"), ("f2", "1e-8", "float16"),
                                 ("i4", "2147483648", "int32"), ("i8", "0.5", "int64"), ("b1", "2", "bool"), ("u1", "256", "uint8"), ("u1", "-1", "uint8"), ("u1", "0.5", "uint8"),
                                 ("f8", "nan", "float64"), ("f8", "-inf", "float64")]:
        rc, out, err = run("write", code, path, value)
        check(rc == 2 and "not exactly representable as " + problem in err and err.count("\n") == 1,
              f"write {code} {value}: exit {rc} {err!r}")
        check(not os.path.exists(path), f"write {code} {value}: left a file")
        check(os.listdir(tmp) == [], f"write {code} {value}: left {os.listdir(tmp)}")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PYTHON
