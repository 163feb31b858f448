#include "attncert/number/format.hpp"

#include <algorithm>
#include <cctype>

namespace attncert {

unsigned format_spec::precision_bits() const {
  switch (type) {
    case kind::binary16: return 11;
    case kind::bfloat16: return 8;
    case kind::binary32: return 24;
    case kind::binary64: return 53;
    default: return working_bits_for(requested_bits);
  }
}

long format_spec::min_normal_exponent() const {
  switch (type) {
    case kind::binary16: return -14;
    case kind::bfloat16: return -126;
    case kind::binary32: return -126;
    case kind::binary64: return -1022;
    default: return mpfr_get_emin() - 1;
  }
}

format_spec parse_format(const std::string& raw) {
  std::string s = raw;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  format_spec f;
  f.name = s;
  if (s == "binary16" || s == "fp16" || s == "half") {
    f.type = format_spec::kind::binary16; f.requested_bits = 11; f.name = "binary16";
  } else if (s == "bfloat16" || s == "bf16") {
    f.type = format_spec::kind::bfloat16; f.requested_bits = 8; f.name = "bfloat16";
  } else if (s == "binary32" || s == "fp32" || s == "float") {
    f.type = format_spec::kind::binary32; f.requested_bits = 24; f.name = "binary32";
  } else if (s == "binary64" || s == "fp64" || s == "double") {
    f.type = format_spec::kind::binary64; f.requested_bits = 53; f.name = "binary64";
  } else if ((s.rfind("mpfr", 0) == 0 || s.rfind("mpfi", 0) == 0) && s.size() > 4 &&
             std::all_of(s.begin() + 4, s.end(), [](unsigned char c) { return std::isdigit(c); })) {
    f.type = s[3] == 'r' ? format_spec::kind::mpfr : format_spec::kind::mpfi;
    if (s.size() > 12) throw input_error("precision too large in format '" + raw + "'");
    const unsigned long bits = std::stoul(s.substr(4));
    if (bits < min_precision_bits)
      throw input_error("precision too low in format '" + raw + "': at least " + std::to_string(min_precision_bits) + " bits");
    if (bits > max_precision_bits)
      throw input_error("precision too high in format '" + raw + "': at most " + std::to_string(max_precision_bits) + " bits");
    f.requested_bits = static_cast<unsigned>(bits);
    f.name = std::string(f.type == format_spec::kind::mpfr ? "mpfr" : "mpfi") + std::to_string(bits);
  } else {
    throw input_error("unknown format '" + raw + "' (expected binary16, bfloat16, binary32, binary64, mpfrN or mpfiN)");
  }
  return f;
}

std::vector<format_spec> parse_formats(const std::string& list) {
  std::vector<format_spec> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = list.find(',', start);
    const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw input_error("empty format name in list '" + list + "'");
    format_spec f = parse_format(item);
    for (const auto& g : out)
      if (g.name == f.name) throw input_error("format '" + f.name + "' listed twice");
    out.push_back(f);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace attncert

namespace attncert {

// One rounding with MPFR's IEEE emulation: the exponent range of the format set for this
// thread (MPFR's x = 0.1b… × 2^e convention: smallest subnormal 2^(emin − precision + 1) is
// 0.1 × 2^(emin − precision + 2), largest finite just below 2^(emax + 1)), then
// mpfr_check_range (overflow to ±inf) and mpfr_subnormalize (gradual underflow), both given the
// ternary value of the first rounding so that no value is rounded twice.
double nearest_in_format(mpq_srcptr q, int precision, long emin, long emax) {
  const mpfr_exp_t old_min = mpfr_get_emin(), old_max = mpfr_get_emax();
  mpfr_t y;
  mpfr_init2(y, precision);
  mpfr_set_emin(emin - precision + 2);
  mpfr_set_emax(emax + 1);
  int inex = mpfr_set_q(y, q, MPFR_RNDN);
  inex = mpfr_check_range(y, inex, MPFR_RNDN);
  mpfr_subnormalize(y, inex, MPFR_RNDN);
  mpfr_set_emin(old_min);
  mpfr_set_emax(old_max);
  const double r = mpfr_get_d(y, MPFR_RNDN);  // exact: y is a number of the format
  mpfr_clear(y);
  return r;
}

double nearest_binary64(mpq_srcptr q) { return nearest_in_format(q, 53, -1022, 1023); }

}  // namespace attncert
