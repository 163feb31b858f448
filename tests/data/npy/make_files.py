#!/usr/bin/python3
"""Regenerates the hard-case .npy files in this directory (run it from here with NumPy).

Each file is small; tests/io/npy.cpp holds the values it expects from them.
"""
import numpy as np
from numpy.lib import format as fmt


def save(name, arr, version):
    with open(name, "wb") as f:
        fmt.write_array(f, arr, version=version)


# float16 big-endian, Fortran order, version 3.0: subnormals, -0.0, the extremes.
save("f2_be_fortran_v3.npy",
     np.asfortranarray(np.array([[2.0**-24, -0.0, 65504.0],
                                 [-(2.0**-14), 1023 * 2.0**-24, 0.333251953125]], dtype=">f2")),
     (3, 0))
# int64 big-endian, version 2.0: the extremes that are exact in double.
save("i8_be_v2.npy", np.array([[-(2**63), 2**53], [-(2**53), 2**62]], dtype=">i8"), (2, 0))
# a bool scalar.
save("b1_scalar.npy", np.array(True), (1, 0))
# float32 with a zero-size dimension.
save("f4_empty_0x3.npy", np.zeros((0, 3), dtype="<f4"), (1, 0))
# float64 2x3x2 Fortran order, little-endian, version 1.0.
save("f8_fortran_2x3x2.npy",
     np.asfortranarray(np.arange(12, dtype="<f8").reshape(2, 3, 2) - 5.5), (1, 0))
# A Python 2 era header: 'L' suffixes, u'' strings, 16-byte alignment, NumPy reads it.
header = b"{'descr': u'<i4', 'fortran_order': False, 'shape': (2L, 3L), }"
pad = 16 - (10 + len(header) + 1) % 16
header += b" " * pad + b"\n"
with open("py2_header_i4.npy", "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header)
    f.write(np.arange(6, dtype="<i4").tobytes())
assert np.load("py2_header_i4.npy").tolist() == [[0, 1, 2], [3, 4, 5]]

# Files that must be rejected.
save("nan_at_1_2.npy", np.array([[0.0, 1.0, 2.0], [3.0, 4.0, np.nan]]), (1, 0))
save("i8_inexact.npy", np.array([1, 2**53 + 1], dtype="<i8"), (1, 0))
save("c16.npy", np.array([1 + 2j]), (1, 0))
with open("truncated_f8.npy", "wb") as f:
    f.write(open("nan_at_1_2.npy", "rb").read()[:-8])
