// attncert/tensor.hpp — an n-dimensional array of exact doubles with its element type: what a
// caller hands the library (a `.npy` file, a NumPy or torch buffer) and what it gets back.
//
// A base header (docs/architecture.md, "Layers as targets"): every layer may use it.  io/ reads
// and writes it as a `.npy` file (io/npy.hpp names it io::npy_array); the oracle takes its
// inputs and returns its reference in it without depending on io/.
#pragma once

#include <cstddef>
#include <vector>

namespace attncert {

/// Element types of a tensor, named as NumPy's descr: float16 (f2), float32 (f4), float64 (f8),
/// int32 (i4), int64 (i8), bool (b1) and uint8 (u1).
enum class dtype { f2, f4, f8, i4, i8, b1, u1 };

/// An n-dimensional array: its element type, shape and every element converted exactly to double.
struct tensor {
  dtype type = dtype::f8;           ///< element type (of the file or buffer it came from)
  std::vector<std::size_t> shape;   ///< C-order shape as NumPy reports it; {} is a scalar
  std::vector<double> values;       ///< all elements in C (row-major) order, exact
  /// When true, NaN and ±Inf float elements are accepted (read with io::parse_npy/read_npy's
  /// nonfinite::allow) and written (io::serialize_npy/write_npy); false rejects them.
  bool allow_nonfinite = false;
};

}  // namespace attncert
