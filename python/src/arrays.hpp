// python/src/arrays.hpp — what the binding's files (core.cpp, commands.cpp, sampling.cpp) share: the one
// conversion of a NumPy array into the library's npy_array, and the error it raises when memory runs out.
#pragma once

#include <pybind11/pybind11.h>

#include <stdexcept>
#include <cctype>
#include <algorithm>
#include <string>

#include "attncert/error.hpp"
#include "attncert/field.hpp"
#include "attncert/io/npy.hpp"
#include "attncert/grading/grading.hpp"

namespace attncert::python {

/// An allocation failed while converting an argument: Python's MemoryError, with the argument's name, its
/// shape and the bytes asked for (core.cpp's exception translator).  Never a ValueError: the input is not
/// wrong, the machine is short of memory.
class conversion_memory_error : public std::runtime_error {
 public:
  explicit conversion_memory_error(const std::string& what) : std::runtime_error(what) {}
};

/// A NumPy array as the library's npy_array: its values copied to binary64, exactly (every supported
/// dtype embeds in binary64).  `what` names the argument in every error.
/// Errors: input_error (ValueError) for what is not an array of a supported real dtype (complex values
/// are refused, never cut to their real part), for more elements than the .npy limit (2^40, README
/// "Limits on input"), for int64 values beyond 2^53 and, unless allow_nonfinite, for NaN / Inf;
/// conversion_memory_error (MemoryError) when the copy needs more memory than the machine has (RAM and
/// swap: refused before allocating) or an allocation fails.
io::npy_array to_npy(const pybind11::handle& obj, const std::string& what, bool allow_nonfinite);

/// Python's spelling of a library field (field.hpp): its keyword and "=" ("softcap="), the keywords
/// whose names differ from the field's mapped (max_precision: max_bits=, from: start=, to: stop=).
inline std::string python_spelling(std::string_view name) {
  static const std::pair<std::string_view, std::string_view> renamed[] = {
      {"max_precision", "max_bits"}, {"from", "start"}, {"to", "stop"}, {"write_lse", "return_lse"},
      {"scores", "scores"}, {"grad_out", "do"}, {"grad_lse", "dlse"}};
  for (const auto& [field_name, keyword] : renamed)
    if (name == field_name) return std::string(keyword) + "=";
  return std::string(name) + "=";
}

/// A library text (an error message, a report) with its fields spelled as Python's keywords; a field
/// that heads a "FIELD: problem" message is its bare keyword ("q: shape ...", not "q=: shape ..."), and
/// a field followed by a number is the keyword given that number ("max_seconds=0.5", not "max_seconds= 0.5").
/// A field followed by a value word is the keyword given that value as Python writes it ("layout='thd'" for
/// "FIELD thd", "empty_rows='zeros' or 'nan'" for "FIELD zeros|nan", "q=Q" for a placeholder "FIELD Q"), and a
/// field followed by a verb is its bare keyword ("layout must be ...", not "layout= must be ...").
inline std::string spelled(const std::string& text) {
  return spell_fields_in_context(text, [](std::string_view name, std::string_view after) {
    const std::string k = python_spelling(name);
    const std::string bare = k.substr(0, k.size() - 1);
    if (!after.empty() && after[0] == ':') return field_spelled{bare, 0};
    if (after.size() > 1 && after[0] == ' ' && (std::isdigit(static_cast<unsigned char>(after[1])) || after[1] == '-'))
      return field_spelled{k, 1};
    if (after.size() < 2 || after[0] != ' ') return field_spelled{k, 0};
    std::size_t n = 1;  // the next word: letters, digits, '_', '|'
    while (n < after.size() && (std::isalnum(static_cast<unsigned char>(after[n])) || after[n] == '_' || after[n] == '|')) ++n;
    const std::string word(after.substr(1, n - 1));
    if (word.empty()) return field_spelled{k, 0};
    // a verb: the field is the subject ("layout must be ...", "d does not apply"); after a connector ("and",
    // "or", "to") the keyword keeps its "=" ("needs cu_seqlens_q= and cu_seqlens_k=")
    static const char* english[] = {"must", "is", "are", "needs", "need", "has", "does", "do", "applies", "describe",
                                    "was", "gives", "takes", "cannot", "can", "should"};
    for (const char* w : english)
      if (word == w) return field_spelled{bare, 0};
    static const char* connectors[] = {"and", "or", "to", "for", "with", "inside", "the", "not", "in", "of", "at", "on", "as", "by"};
    for (const char* w : connectors)
      if (word == w) return field_spelled{k, 0};
    bool placeholder = true;  // an upper-case word stands for a value the caller gives ("give q Q")
    for (char c : word) placeholder = placeholder && (std::isupper(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)));
    if (placeholder) return field_spelled{k + word, n};
    std::string values;  // "zeros|nan" -> 'zeros' or 'nan'
    for (std::size_t b = 0; b <= word.size();) {
      const std::size_t e = std::min(word.find('|', b), word.size());
      values += (values.empty() ? "'" : " or '") + word.substr(b, e - b) + "'";
      b = e + 1;
    }
    return field_spelled{k + values, n};
  });
}

/// f(), with an input_error it throws renamed for the Python parameter `name`: "name: " + the library's
/// message, unless the message already names it (in Python's spelling or the command line's, --name).
/// For the library's parsers whose messages name no option ("unknown format 'fp7'").
template <class F>
auto named(const std::string& name, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const input_error& e) {
    const std::string m = e.what();
    std::string cli = "--" + name;
    for (auto& c : cli)
      if (c == '_') c = '-';
    if (m.rfind(name + ":", 0) == 0 || m.find(cli) != std::string::npos || m.find(field(name)) != std::string::npos) throw;
    throw input_error(name + ": " + m);
  }
}

/// Throws the library's input_error when `text` is not an exact number (number_traits<mpq_rational>::
/// from_string: the parser of scales, softcaps and dropout probabilities).  commands.cpp.
void exact_number(const std::string& text);

/// The rule settings from the dict attncert.testing._rules builds.
grading::rule_settings make_rules(const pybind11::dict& r);

}  // namespace attncert::python
