#include "attncert/rank/numerical.hpp"

namespace attncert {

namespace {
bool sixteen_bit(const format_spec& f) {
  return f.type == format_spec::kind::binary16 || f.type == format_spec::kind::bfloat16;
}
}  // namespace

std::string svd_label(const format_spec& f) {
  if (sixteen_bit(f)) return "binary32";
  if (f.type == format_spec::kind::mpfi) return "mpfr" + std::to_string(f.requested_bits) + " (midpoints)";
  return f.name;
}

std::string svd_description(const format_spec& f) {
  if (sixteen_bit(f)) return "binary32 (as NumPy/PyTorch upcast 16-bit matrices)";
  if (f.type == format_spec::kind::mpfi) return "mpfr on interval midpoints";
  return f.name;
}

}  // namespace attncert
