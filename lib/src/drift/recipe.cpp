#include "attncert/drift/recipe.hpp"

#include <algorithm>
#include <cctype>

namespace attncert {

recipe parse_recipe(const std::string& raw) {
  std::string s = raw;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  recipe r;
  const format_spec b16 = parse_format("binary16"), bf = parse_format("bfloat16"), f32 = parse_format("binary32"),
                    f64 = parse_format("binary64");
  auto set = [&](recipe::kind k, const char* name, const format_spec& in, const format_spec& acc, const format_spec& out) {
    r.type = k;
    r.name = name;
    r.storage = in;
    r.scores = acc;
    r.softmax = acc;
    r.output = acc;
    r.result = out;
  };
  if (s == "fp64") set(recipe::kind::fp64, "fp64", f64, f64, f64);
  else if (s == "fp32") set(recipe::kind::fp32, "fp32", f32, f32, f32);
  else if (s == "bf16-fp32acc") set(recipe::kind::bf16_fp32acc, "bf16-fp32acc", bf, f32, bf);
  else if (s == "fp16-fp32acc") set(recipe::kind::fp16_fp32acc, "fp16-fp32acc", b16, f32, b16);
  else if (s == "fp16") set(recipe::kind::fp16, "fp16", b16, b16, b16);
  else if (s == "bf16") set(recipe::kind::bf16, "bf16", bf, bf, bf);
  else if (s.rfind("mpfr", 0) == 0 && s.size() > 4 &&
           std::all_of(s.begin() + 4, s.end(), [](unsigned char c) { return std::isdigit(c); })) {
    const format_spec m = parse_format(s);  // checks the precision range
    set(recipe::kind::mpfr, "", m, m, m);
    r.name = m.name;
  } else {
    throw input_error("unknown recipe '" + raw + "' (expected fp64, fp32, bf16-fp32acc, fp16-fp32acc, fp16, bf16 or mpfrN)");
  }
  return r;
}

std::vector<recipe> parse_recipes(const std::string& list) {
  std::vector<recipe> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = list.find(',', start);
    const std::string item = list.substr(start, at == std::string::npos ? std::string::npos : at - start);
    if (item.empty()) throw input_error("empty recipe in list '" + list + "'");
    recipe r = parse_recipe(item);
    for (const auto& q : out)
      if (q.name == r.name) throw input_error("recipe '" + r.name + "' listed twice");
    out.push_back(r);
    if (at == std::string::npos) break;
    start = at + 1;
  }
  return out;
}

}  // namespace attncert
