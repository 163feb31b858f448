// attncert/io/npy.hpp — reading and writing NumPy `.npy` files.
//
// The format is NumPy's NEP 1 ("A Simple File Format for NumPy Arrays"):
//
//   "\x93NUMPY" major minor  header-length  header  data
//
// header-length is a little-endian uint16 in version 1.0 and a uint32 in versions 2.0 and
// 3.0; the header is a Python dict literal (latin-1 in 1.0/2.0, UTF-8 in 3.0) with exactly
// the keys 'descr', 'fortran_order' and 'shape'; the data are the elements in C or Fortran
// order with the byte order named by 'descr'.
//
// Supported element types: float16/32/64, int32/64 and bool, in either byte order.  Every
// element is converted exactly to double; files holding NaN, ±Inf or int64 values that are
// not exactly representable as a double are rejected, as are structured, complex, string and
// object dtypes.  All failures are attncert::input_error with a one-line message that starts
// with the file name.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "attncert/tensor.hpp"

namespace attncert::io {

/// Element types of an npy_array: attncert::dtype (tensor.hpp): float16, float32, float64,
/// int32, int64, bool, uint8.
using dtype = attncert::dtype;

/// An n-dimensional array as stored in a `.npy` file: attncert::tensor (tensor.hpp), named here
/// for the codec's callers.
using npy_array = attncert::tensor;

/// What parse_npy/read_npy do with NaN and ±Inf elements of float arrays.
enum class nonfinite { reject, allow };

/// NumPy's little-endian descr of `t`: "<f2", "<f4", "<f8", "<i4", "<i8" or "|b1".
std::string dtype_descr(dtype t);

/// Largest element count accepted when reading or writing (2^40).
inline constexpr std::size_t max_npy_elements = std::size_t{1} << 40;

/// Reads the `.npy` file at `path`.
/// Returns the array with `values` in C order whatever the file's order and byte order.
/// Preconditions: none.
/// Errors: throws input_error (one line, starting with `path`) when the file cannot be
/// read, is larger than max_input_bytes() (bounded_input.hpp: the read stops there, so
/// /dev/zero or a FIFO cannot exhaust memory) or is not a valid, supported `.npy` file —
/// see parse_npy.
npy_array read_npy(const std::string& path, nonfinite policy = nonfinite::reject);

/// Parses the complete contents `bytes` of a `.npy` file.
/// Returns the array with `values` in C order.
/// Preconditions: none; `name_for_errors` only labels error messages.
/// Errors: throws input_error, with the one-line message "NAME: PROBLEM", on a bad magic
/// string, an unsupported version, a truncated header, a header that is not a dict literal
/// with exactly the keys 'descr', 'fortran_order' and 'shape' and valid values, an
/// unsupported dtype, a shape with more than max_npy_elements elements, truncated data,
/// trailing bytes after the data, NaN or ±Inf elements unless `policy` is allow ("contains
/// NaN at index (i, j)", C-order multi-index), bool bytes other than 0 and 1, and int64 elements that are not
/// exactly representable as a double.  Never reads out of bounds on any input.
npy_array parse_npy(const std::string& bytes, const std::string& name_for_errors,
                    nonfinite policy = nonfinite::reject);

/// Serializes `a` as a `.npy` file: version 1.0 (2.0 if the header exceeds 65535 bytes),
/// little-endian, C order, header laid out byte for byte as NumPy's np.save writes it.
/// Returns the file contents.
/// Preconditions: none (everything is checked).
/// Errors: throws input_error if `a.values.size()` is not the product of `a.shape`, the
/// shape has more than max_npy_elements elements, or a value is not exactly representable
/// in `a.type` (NaN and ±Inf only in float types and only when a.allow_nonfinite; float16/32 only hold values they represent exactly;
/// integers must be integral and in range; bool only holds 0 and 1).
std::string serialize_npy(const npy_array& a);

/// Writes serialize_npy(a) to `path` atomically with io::write_file_atomic (atomic_file.hpp:
/// a new temporary file in the same directory, flushed to disk, renamed over `path`).  To
/// write it as part of several outputs, stage serialize_npy(a) in an output_transaction.
/// Returns nothing.
/// Preconditions: none.
/// Errors: throws input_error (one line, starting with `path`) if `a` cannot be serialized
/// or the file cannot be written; `path` is then left as it was and no temporary file
/// remains.
void write_npy(const std::string& path, const npy_array& a);

}  // namespace attncert::io
