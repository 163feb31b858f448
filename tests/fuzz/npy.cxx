// tests/fuzz/npy.cxx — libFuzzer harness: the .npy parser (io::parse_npy) on arbitrary bytes,
// with both NaN policies.  Finding: any crash, sanitizer report, or exception other than
// input_error (the CLI would turn it into "internal error", exit 70).  A parsed array is
// checked for consistency (element count = product of the shape) and re-serialized.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "attncert/error.hpp"
#include "attncert/io/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace attncert;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  for (const auto policy : {io::nonfinite::reject, io::nonfinite::allow}) {
    try {
      const io::npy_array a = io::parse_npy(bytes, "fuzz.npy", policy);
      std::size_t count = 1;
      for (const std::size_t d : a.shape) count *= d;
      if (count != a.values.size()) {
        std::fprintf(stderr, "finding: %zu values for a shape of %zu elements\n", a.values.size(), count);
        std::abort();
      }
      // What was read can be written back (a bool/int/float array holds only its own values).
      const io::npy_array b = io::parse_npy(io::serialize_npy(a), "fuzz.npy", policy);
      if (b.values.size() != a.values.size() || b.shape != a.shape) {
        std::fprintf(stderr, "finding: serialize/parse round trip changed the array\n");
        std::abort();
      }
    } catch (const input_error&) {
    }
  }
  return 0;
}
