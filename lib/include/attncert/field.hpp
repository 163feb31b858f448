// attncert/field.hpp — how library text names what a caller said.
//
// The library speaks of a caller's inputs by their field names: `softcap`, `max_seconds`,
// `cu_seqlens_q` (the names of the *_spec members).  Each front end spells them its own way:
// the command line as its options (`--softcap`), Python as its keywords (`softcap=`).  So a
// message or a report never holds a front end's spelling: it holds field(name), a marked name,
// and the front end replaces every marked name by its spelling (spell_fields) where the text
// leaves the program (an error message, a report).
//
// The marks are the control characters U+001E and U+001F.  Input echoed in a message goes
// through one_line (error.hpp), which escapes every control character, so a mark comes from
// field() and from nowhere else.  In JSON text a mark is escaped ("\u001e"); spell_fields
// replaces both forms.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <string_view>

namespace attncert {

/// The field `name` marked for a front end to spell.
inline std::string field(std::string_view name) {
  std::string s;
  s.reserve(name.size() + 2);
  s += '\x1e';
  s += name;
  s += '\x1f';
  return s;
}

/// A front end's spelling of a field name.
using field_spelling = std::function<std::string(std::string_view)>;

/// A spelling that reads the text after the field too: it returns the field's spelling and how many
/// characters of that text its spelling replaces (Python's: "max_seconds=0.5" for "FIELD 0.5").
struct field_spelled {
  std::string text;
  std::size_t consumed = 0;
};
using field_spelling_in_context = std::function<field_spelled(std::string_view name, std::string_view after)>;

/// `text` with every marked field replaced by its spelling, in raw text and in JSON text (where a
/// mark is written "\u001e" and "\u001f"; a caller's "\u001e" in a JSON string is written "\\u001e"
/// and stays text).  Text without marks is returned as it is.
inline std::string spell_fields_in_context(std::string_view text, const field_spelling_in_context& spell) {
  static constexpr std::string_view json_open = "\\u001e", json_close = "\\u001f";
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == '\\') {
      out += "\\\\";  // an escaped backslash (JSON): what follows it is text, never a mark
      i += 2;
      continue;
    }
    std::size_t body = std::string_view::npos, end = std::string_view::npos, next = 0;
    if (text[i] == '\x1e') {
      body = i + 1;
      end = text.find('\x1f', body);
      next = end + 1;
    } else if (text.compare(i, json_open.size(), json_open) == 0) {
      body = i + json_open.size();
      end = text.find(json_close, body);
      next = end + json_close.size();
    }
    if (body == std::string_view::npos || end == std::string_view::npos) {
      out += text[i++];
      continue;
    }
    const field_spelled f = spell(text.substr(body, end - body), text.substr(next));
    out += f.text;
    i = next + std::min(f.consumed, text.size() - next);
  }
  return out;
}

/// The same with a spelling of the name alone.
inline std::string spell_fields(std::string_view text, const field_spelling& spell) {
  return spell_fields_in_context(text, [&spell](std::string_view name, std::string_view) { return field_spelled{spell(name), 0}; });
}

/// The command line's spelling: "--" and the name with '_' as '-' (max_seconds: --max-seconds).
inline std::string cli_spelling(std::string_view name) {
  std::string s = "--";
  for (const char c : name) s += c == '_' ? '-' : c;
  return s;
}

}  // namespace attncert
