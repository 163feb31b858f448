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
