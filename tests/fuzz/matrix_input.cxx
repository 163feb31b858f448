// tests/fuzz/matrix_input.cxx — libFuzzer harness: the exact JSON matrix reader
// (io::parse_exact_matrix_json: float literals as text, exact decimals and fractions, digit
// and exponent limits).  Finding: any crash, sanitizer report, or exception other than
// input_error.  Inputs are cut at 64 KiB by run.sh (-max_len) so each number stays cheap.
#include <cstddef>
#include <cstdint>
#include <string>

#include "attncert/error.hpp"
#include "attncert/io/matrix_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto m = attncert::io::parse_exact_matrix_json(text, "fuzz.json");
    (void)m;
  } catch (const attncert::input_error&) {
  }
  return 0;
}
